import Foundation
import TagFixCore
import TagFixDevices
import TagFixGPSD
import TagFixReport

/// `tagfix fix`: live fixes from gpsd.
struct FixCommand: Subcommand {
    static let spec = CommandSpec(
        name: "fix",
        abstract: "Print live GPS fixes from gpsd.",
        discussion: """
            Connects to gpsd (default gpsd://localhost:2947), WATCHes and prints each fix as soon \
            as gpsd reports its time, with the receiver's time, mode, position and error \
            estimates, whatever its date: a recording from another year, or a system clock that \
            is wrong, changes nothing. When gpsd completes that epoch a moment later (2D becomes \
            3D, an altitude or vertical error is added), the fix is printed again, marked \
            "(refined)" (--json: "refined":true); it replaces the line before and does not count \
            towards --count. Reports that cannot be a fix (no time, an impossible position) are dropped \
            and said so on standard error; so is, once, a system clock off GPS time, and each jump \
            of the receiver's time (a new stream). If gpsd goes away, fix says so and reconnects. \
            --timeout runs on the monotonic clock. SIGINT (Ctrl-C) or SIGTERM ends it normally (exit 0).
            Exit codes: 0 done (or SIGINT / SIGTERM), 75 --timeout passed before --count fixes.
            """,
        options: [
            .init(name: "gps", valueName: "URL", help: "gpsd://HOST:PORT[/DEVICE]; default gpsd://localhost:2947."),
            .init(name: "json", valueName: nil, help: "One JSON object per fix (JSON Lines)."),
            .init(name: "count", valueName: "N", help: "Stop after N fixes."),
            .init(name: "timeout", valueName: "S", help: "Give up after S seconds (exit 75)."),
        ],
        examples: ["tagfix fix --count 5", "tagfix fix --gps gpsd://raspberrypi.local:2947 --json"])

    var endpoint: GPSDEndpoint
    var json: Bool
    var count: Int?
    var timeout: Duration?

    init(_ arguments: ParsedArguments) throws(CLIError) {
        do {
            endpoint =
                try arguments.value("gps").map { (text: String) throws(GPSDEndpointError) -> GPSDEndpoint in try GPSDEndpoint(text) }
                ?? GPSDEndpoint()
        } catch {
            throw .usage(error.description, command: "fix")
        }
        json = arguments.flag("json")
        count = try arguments.number("count", in: 1...1_000_000, command: "fix").map { Int($0) }
        timeout = try arguments.seconds("timeout", in: 0.1...86_400, command: "fix")
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        let (count, timeout, json) = (self.count, self.timeout, self.json)
        let clock = MonotonicClock()
        let source = GPSDFixSource(endpoint: endpoint, clock: clock)
        let printed = Counter()
        let stop = StopSignals()
        defer { stop.cancel() }
        let outcome = await race(
            deadline: timeout.map { clock.now.advanced(by: $0) }, clock: clock,
            first: [
                { @Sendable () async -> Void in
                    var watch = ClockWatch(systemClock: KernelClock())
                    for await event in source.events() {
                        switch event {
                        case .fix(let fix):
                            if let reference = watch.observe(fix, axisNow: clock.now) { io.err("! \(ClockFormat.offset(reference))") }
                            io.out(json ? Self.json(fix) : Self.line(fix))
                            if let count, printed.increment() >= count { return }
                        case .refined(let fix):
                            io.out(json ? Self.json(fix, refined: true) : Self.line(fix) + "  (refined)")
                        case .rejected(let why): io.err("! dropped \(why)")
                        case .restarted(let from, let to): io.err("· \(ClockFormat.restarted(from: from, to: to))")
                        case .unavailable(let why): io.err("! GPS unavailable: \(why)")
                        case .silent(let duration): io.err("! no fix data for \(Coordinate.format(duration.seconds, 0)) s")
                        case .resumed: io.err("· GPS data resumed")
                        case .connected(let what): io.err("gps: \(what)")
                        }
                    }
                },
                { @Sendable () async -> Void in _ = await stop.wait() },
            ])
        if case .timedOut = outcome, let count, printed.value < count {
            throw .timedOut("\(printed.value) of \(counted(count, "fix", "fixes")) within the timeout")
        }
    }

    static func line(_ fix: Fix) -> String { FixReport.line(fix) }

    static func json(_ fix: Fix, refined: Bool = false) -> String { FixReport.json(fix, refined: refined) }
}
