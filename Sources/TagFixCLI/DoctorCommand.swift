import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixGPSD
import TagFixNFC

/// `tagfix doctor`: checks the reader, the GPS and the system around them, and says how to fix
/// what is wrong.
struct DoctorCommand: Subcommand {
    static let spec = CommandSpec(
        name: "doctor",
        abstract: "Check readers, GPS and the system around them; explain each problem and its fix.",
        discussion: """
            Looks at the USB readers, USB-serial bridges and GPS receivers present; whether a \
            kernel NFC module (pn533_usb, pn533, nfc, port100) or pcscd holds a reader; whether \
            you may open each device (udev rules, the plugdev and dialout groups); the Raspberry \
            Pi's serial console; libnfc; and gpsd (running, reachable, a receiver, a fix). With \
            --reader it also opens that reader. Exits 69 when something blocks, 0 otherwise \
            (warnings included).
            """,
        options: [
            .init(name: "reader", valueName: "CONNSTRING", help: "Also open this reader (libnfc connstring)."),
            .init(name: "gps", valueName: "SOURCE", help: "gpsd to ask, gpsd://HOST:PORT; default gpsd://localhost:2947; 'none' to skip."),
            .init(name: "gps-wait", valueName: "S", help: "How long to wait for gpsd's reports, seconds; default 3."),
            .init(name: "root", valueName: "DIR", help: "Read /sys, /proc, /dev and /etc below DIR (for tests and support bundles)."),
            .init(name: "json", valueName: nil, help: "One JSON object per finding."),
        ],
        examples: [
            "tagfix doctor",
            "tagfix doctor --reader pn532_uart:/dev/ttyUSB0 --gps gpsd://localhost:2947",
            "tagfix doctor --gps none --json",
        ])

    var reader: String?
    var gps: GPSDEndpoint?
    var gpsWait: Duration
    var root: String
    var json: Bool

    init(_ arguments: ParsedArguments) throws(CLIError) {
        reader = try arguments.value("reader").map { text throws(CLIError) in
            // Checked as every command checks --reader; doctor probes libnfc readers only.
            guard let connstring = try ReaderOption.address(text, command: Self.spec.name).connstring else {
                throw .usage("doctor opens libnfc readers only: \"\(text)\" is not a libnfc connstring", command: Self.spec.name)
            }
            return connstring
        }
        gps = try GPSOption.endpoint(arguments, command: Self.spec.name)
        gpsWait = try arguments.seconds("gps-wait", in: 0.1...120, command: Self.spec.name) ?? .seconds(3)
        root = arguments.value("root") ?? "/"
        json = arguments.flag("json")
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        let facts = SystemFacts.read(root: root)
        var probe: ReaderProbe?
        if let reader {
            switch await LibNFC.probe(reader) {
            case .success(let name): probe = ReaderProbe(connstring: reader, opened: name)
            case .failure(let error): probe = ReaderProbe(connstring: reader, failure: error.description)
            }
        }
        var gpsResult = GPSProbe.notAsked
        if let gps { gpsResult = await Self.probe(gps, wait: gpsWait) }
        var clockFacts = facts
        clockFacts.clockSynchronised = KernelClock().read().synchronised
        var systemMinusGPS: Duration?
        if case .fix(_, let fix) = gpsResult {
            var watch = ClockWatch(systemClock: KernelClock())
            _ = watch.observe(fix, axisNow: MonotonicClock().now)
            systemMinusGPS = watch.reference.systemMinusGPS
        }
        let findings = Doctor.check(clockFacts, libnfc: LibNFC.version, reader: probe, gps: gpsResult, systemMinusGPS: systemMinusGPS)
        for finding in findings {
            if json {
                var object = JSONObjectWriter()
                object.add("severity", "\(finding.severity)")
                object.add("code", finding.code)
                object.add("message", finding.message)
                object.add("fix", finding.fix)
                io.out(object.text)
            } else {
                io.out("\(finding.severity.symbol) \(finding.message)")
                if let fix = finding.fix { io.out("    fix: \(fix)") }
            }
        }
        let blocking = findings.filter { $0.severity == .blocking }.count
        if !json {
            let warnings = findings.filter { $0.severity == .warning }.count
            io.out(
                blocking == 0
                    ? "no blocking problems\(warnings > 0 ? " (\(warnings) warning\(warnings == 1 ? "" : "s"))" : "")"
                    : "\(blocking) blocking problem\(blocking == 1 ? "" : "s")")
        }
        if blocking > 0 { throw .unavailable("\(blocking) blocking problem\(blocking == 1 ? "" : "s") found (see above)") }
    }

    /// Asks gpsd for reports for up to `wait`.
    static func probe(_ endpoint: GPSDEndpoint, wait: Duration) async -> GPSProbe {
        let clock = MonotonicClock()
        let source = GPSDFixSource(endpoint: endpoint, clock: clock)
        let name = endpoint.description
        let seen = ProbeState()
        let decided: GPSProbe? = await withTaskGroup(of: GPSProbe?.self) { group in
            group.addTask {
                for await event in source.events() {
                    switch event {
                    case .connected: seen.state.withLock { $0.connected = true }
                    case .unavailable(let why):
                        if !seen.state.withLock({ $0.connected }) {
                            return .unreachable(endpoint: name, why: GPSDEndpoint.reason(inNotAnswering: why))
                        }
                    case .fix(let fix):
                        if fix.hasPosition { return .fix(endpoint: name, fix) }
                        seen.state.withLock { $0.noFix = fix }
                    default: break
                    }
                }
                return nil
            }
            group.addTask {
                try? await clock.sleep(for: wait)
                return nil
            }
            // A fix or an unreachable gpsd decides at once; otherwise the wait ends it.
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if let decided { return decided }
        let state = seen.state.withLock { $0 }
        if let noFix = state.noFix { return .noFix(endpoint: name, device: noFix.device) }
        return state.connected ? .silent(endpoint: name) : .unreachable(endpoint: name, why: "no answer within the wait")
    }
}

/// What the gpsd probe has seen so far.
private final class ProbeState: Sendable {
    let state = Mutex<(connected: Bool, noFix: Fix?)>((false, nil))
}
