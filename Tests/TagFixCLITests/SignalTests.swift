import Foundation
import Synchronization
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixTesting
import Testing

/// The built `tagfix`, run as a user runs it, with both its outputs collected as they come.
final class RunningTagFix: Sendable {
    static let binary = TestBinaries.tagfix
    static var isBuilt: Bool { FileManager.default.isExecutableFile(atPath: binary) }

    let program: RunningProgram
    var process: ChildProcess { program.child }

    init(_ arguments: [String]) throws {
        program = try RunningProgram(Self.binary, arguments)
    }

    var pid: pid_t { program.pid }
    var stdout: String { program.stdout }
    var stderr: String { program.stderr }
    var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }
    /// The port of the private gpsd `emulate nmea --gpsd` printed ("gpsd: gpsd://127.0.0.1:PORT").
    var gpsdPort: Int? { stdoutLines.first { $0.hasPrefix("gpsd: ") }?.split(separator: ":").last.flatMap { Int($0) } }

    /// Waits (polling, up to `limit`) until `condition` holds; returns whether it did.
    static func poll(upTo limit: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
        let start = ContinuousClock.now
        while !condition() {
            if ContinuousClock.now - start > limit { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return true
    }

    /// Waits until standard output (or error) holds `text`.
    func waitFor(_ text: String, onStandardError: Bool = false) async -> Bool {
        await Self.poll { (onStandardError ? stderr : stdout).contains(text) }
    }

    /// Sends `signal` and waits (up to 30 s) for the process to exit and its outputs to close.
    /// Returns whether it exited; if it did not, it is killed, so nothing is left behind.
    func stop(with signal: Int32) async -> Bool {
        process.signal(signal)
        let exited = await Self.poll(upTo: .seconds(30)) { !process.isRunning }
        if !exited {
            process.signal(SIGKILL)
            _ = await Self.poll(upTo: .seconds(30)) { !process.isRunning }
        }
        _ = await Self.poll(upTo: .seconds(10)) { program.outputClosed }
        return exited
    }

    /// Exited by itself (not by a signal) with status 0.
    var exitedCleanly: Bool { process.termination == .exited(0) }

    /// How it ended, for failure messages.
    var ending: String {
        let how =
            switch process.termination {
            case .exited(let code): "exit \(code)"
            case .signalled(let signal): "signal \(signal)"
            case nil: "running"
            }
        return "\(how); stdout: \(stdout); stderr: \(stderr)"
    }

    deinit {
        process.signal(SIGKILL)
    }
}

private let signalNames: [Int32: String] = [SIGINT: "SIGINT", SIGTERM: "SIGTERM", SIGQUIT: "SIGQUIT"]

/// A fresh path for a link or a log.
private func temporaryPath(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-signal-\(UUID().uuidString)-\(name)").path
}

private func linkExists(_ path: String) -> Bool {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) != nil
}

/// A PN532 emulator presenting one NTAG215 with a URL.
private func emulatedReader() throws -> PN532Emulator {
    let url = "https://tags.example.org/t/S1?lat=53.545&lon=9.966&r=30"
    return try PN532Emulator(tags: [try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded())])
}

@Suite("SIGINT, SIGTERM and SIGQUIT end a command normally", .timeLimit(.minutes(3)))
struct SignalTests {
    static let tagDump =
        #"{"chip":"NTAG213","uid_hex":"04A224B2C56480","get_version_hex":"0004040201000F03","memory_hex":"04A2240AB2C5648093480000E11012000315D1011155046578616D706C652E6F72672F742F4131FE"}"#

    @Test(
        "tagfix emulate pn532 --script … stops on the signal after its script ran, and removes its link",
        .enabled(if: RunningTagFix.isBuilt, "needs the built tagfix"), arguments: [SIGINT, SIGTERM, SIGQUIT])
    func pn532AfterScript(signal: Int32) async throws {
        let dump = try temporaryFile("tag.json", Self.tagDump)
        let script = try temporaryFile("faults.txt", "0.1 remove 0\n0.2 present 0\n")
        let link = temporaryPath("pn532")
        let tagfix = try RunningTagFix(["emulate", "pn532", "--tag", dump, "--script", script, "--link", link])
        #expect(await tagfix.waitFor("script line 2", onStandardError: true), "the script never ran: \(tagfix.stderr)")
        #expect(linkExists(link))
        let exited = await tagfix.stop(with: signal)
        #expect(exited, "\(signalNames[signal] ?? "") left tagfix emulate pn532 running: only kill -9 stopped it")
        #expect(tagfix.exitedCleanly, "\(tagfix.ending)")
        #expect(!linkExists(link), "the --link \(link) was left behind")
        try? FileManager.default.removeItem(atPath: link)
    }

    @Test(
        "tagfix emulate nmea --script … --gpsd stops on the signal after its script ran, with its gpsd and link",
        .enabled(if: RunningTagFix.isBuilt && PrivateGPSD.installedPath != nil, "needs the built tagfix and gpsd"),
        arguments: [SIGINT, SIGTERM, SIGQUIT])
    func nmeaAfterScript(signal: Int32) async throws {
        let script = try temporaryFile("faults.txt", "0.1 no-fix\n0.2 fix\n")
        let link = temporaryPath("nmea")
        let tagfix = try RunningTagFix(["emulate", "nmea", "--at", "53.545,9.966", "--script", script, "--link", link, "--gpsd"])
        #expect(await tagfix.waitFor("script line 2", onStandardError: true), "the script never ran: \(tagfix.stderr)")
        #expect(await tagfix.waitFor("gpsd://"))
        let port = tagfix.gpsdPort
        let gpsd = port.flatMap { EmulatorCommandTests.gpsd(servingPort: $0) }
        #expect(gpsd != nil, "no gpsd serves the port tagfix printed: \(tagfix.stdout)")
        let exited = await tagfix.stop(with: signal)
        #expect(exited, "\(signalNames[signal] ?? "") left tagfix emulate nmea running: only kill -9 stopped it")
        #expect(tagfix.exitedCleanly, "\(tagfix.ending)")
        #expect(!linkExists(link), "the --link \(link) was left behind")
        if let gpsd {
            let gone = await RunningTagFix.poll(upTo: .seconds(10)) { !EmulatorCommandTests.isRunning(gpsd) }
            if !gone { kill(gpsd, SIGKILL) }
            #expect(gone, "the private gpsd (pid \(gpsd)) outlived tagfix")
        }
        try? FileManager.default.removeItem(atPath: link)
    }

    @Test(
        "tagfix emulate nmea --gpsd killed in the middle of its stop (SIGTERM, then SIGKILL once its watchdog is dismissed) leaves no gpsd",
        .enabled(if: RunningTagFix.isBuilt && PrivateGPSD.installedPath != nil, "needs the built tagfix and gpsd"))
    func killedMidStop() async throws {
        let tagfix = try RunningTagFix(["emulate", "nmea", "--at", "53.545,9.966", "--gpsd"])
        #expect(await tagfix.waitFor("gpsd://"))
        let port = tagfix.gpsdPort
        let gpsd = try #require(port.flatMap { EmulatorCommandTests.gpsd(servingPort: $0) }, "\(tagfix.stdout)")
        let watchdog = try #require(Self.pids { $0.contains("tagfix-gpsd-watchdog") && $0.contains(" \(gpsd) ") }.first)
        // A harness that signals, then kills as soon as the stop is under way: here, the moment
        // the watchdog has been told to go (before, that came first, while gpsd still had
        // SIGTERM blocked and pending).
        kill(tagfix.pid, SIGTERM)
        #expect(await RunningTagFix.poll(upTo: .seconds(30)) { !EmulatorCommandTests.isRunning(watchdog) }, "the stop never began")
        _ = await tagfix.stop(with: SIGKILL)
        let gone = await RunningTagFix.poll(upTo: .seconds(10)) { !EmulatorCommandTests.isRunning(gpsd) }
        if !gone { kill(gpsd, SIGKILL) }
        #expect(gone, "gpsd (pid \(gpsd)) outlived the tagfix killed in the middle of stopping it")
    }

    @Test(
        "tagfix emulate nmea --rate 0.1 stops on SIGTERM without first sleeping out its 10-second epoch",
        .enabled(if: RunningTagFix.isBuilt, "needs the built tagfix"))
    func slowRateStops() async throws {
        let tagfix = try RunningTagFix(["emulate", "nmea", "--at", "53.545,9.966", "--rate", "0.1"])
        #expect(await tagfix.waitFor("NMEA emulator on"))
        // The emulator writes its first epoch at once and then waits 10 s for the next. The bound
        // is five times the promised second; the old emulator slept out the 10 s.
        kill(tagfix.pid, SIGTERM)
        let exited = await RunningTagFix.poll(upTo: .seconds(5)) { !tagfix.process.isRunning }
        #expect(exited, "tagfix emulate nmea --rate 0.1 was still running 5 s after SIGTERM")
        _ = await tagfix.stop(with: SIGKILL)
    }

    @Test(
        "tagfix verify --demo stopped by SIGINT: exit 0, the summary, a complete log, its gpsd gone",
        .enabled(if: RunningTagFix.isBuilt, "needs the built tagfix"))
    func demoInterrupted() async throws {
        let log = temporaryPath("demo.jsonl")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let tagfix = try RunningTagFix(["verify", "--demo", "--log", log])
        #expect(await tagfix.waitFor("confirmed"), "no verdict: \(tagfix.stdout) \(tagfix.stderr)")
        // The demo's gpsd (when gpsd is installed), named on standard error. Standard error is read
        // on its own thread and may trail the verdict on standard output: look again for a while.
        var port: Int?
        var gpsd: pid_t?
        _ = await RunningTagFix.poll(upTo: .seconds(10)) {
            port = tagfix.stderr.components(separatedBy: "gpsd://127.0.0.1:").dropFirst().first.flatMap { Int($0.prefix { $0.isNumber }) }
            gpsd = port.flatMap { EmulatorCommandTests.gpsd(servingPort: $0) }
            return gpsd != nil || PrivateGPSD.installedPath == nil
        }
        // The demo names its gpsd's port; the process is looked up by it (under a loaded parallel
        // run the /proc scan has missed it, so the port itself is checked too, below).
        #expect((PrivateGPSD.installedPath == nil) == (port == nil), "\(tagfix.stderr)")
        let exited = await tagfix.stop(with: SIGINT)
        #expect(exited)
        #expect(tagfix.exitedCleanly, "\(tagfix.ending)")
        try Self.expectSummaryAndLog(tagfix, log: log)
        if let gpsd {
            let gone = await RunningTagFix.poll(upTo: .seconds(10)) { !EmulatorCommandTests.isRunning(gpsd) }
            if !gone { kill(gpsd, SIGKILL) }
            #expect(gone, "the demo's gpsd (pid \(gpsd), port \(port ?? 0)) outlived tagfix")
        }
        if let port {
            // Nothing serves the demo's gpsd port any more: its gpsd is gone, whoever it was.
            let closed = await RunningTagFix.poll(upTo: .seconds(10)) {
                EmulatorCommandTests.gpsd(servingPort: port) == nil && !Self.accepts(port: port)
            }
            #expect(closed, "something still serves the demo's gpsd port \(port) after tagfix ended")
        }
    }

    /// Whether a TCP connection to 127.0.0.1:`port` is accepted now.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    @Test(
        "tagfix verify --scenario … --realtime stopped by SIGTERM: the pending scan gets its verdict, the summary, exit 0",
        .enabled(if: RunningTagFix.isBuilt, "needs the built tagfix"))
    func realtimeTerminated() async throws {
        // One fix at the start and the next an hour later; the tap at 0.2 s waits for a fresh fix
        // (--max-fix-age 0) for up to an hour. The reader error at 0.4 s shows the tap was made.
        let scenario = try temporaryFile(
            "pending.json",
            #"""
            {"name":"pending","start":"2026-05-14T08:00:00Z",
             "gps":{"fixes":[{"t":0,"lat":53.545,"lon":9.966,"accuracy_m":3},{"t":3600,"lat":53.545,"lon":9.966,"accuracy_m":3}]},
             "taps":[{"t":0.2,"uid":"04A224B2C56480","url":"https://tags.example.org/t/P1?lat=53.545&lon=9.966&r=30"}],
             "reader_errors":[{"t":0.4,"message":"marker after the tap"}]}
            """#)
        let log = temporaryPath("pending.jsonl")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let tagfix = try RunningTagFix([
            "verify", "--scenario", scenario, "--realtime", "--max-fix-age", "0", "--fix-timeout", "3600", "--log", log,
        ])
        #expect(await tagfix.waitFor("marker after the tap"), "\(tagfix.stdout) \(tagfix.stderr)")
        let exited = await tagfix.stop(with: SIGTERM)
        #expect(exited)
        #expect(tagfix.exitedCleanly, "\(tagfix.ending)")
        #expect(tagfix.stdoutLines.last == "1 scan: 1 inconclusive", "\(tagfix.stdout)")
        try Self.expectSummaryAndLog(tagfix, log: log)
    }

    @Test(
        "tagfix verify --reader (PN532 emulator) stopped by SIGTERM or SIGINT: the summary, a complete log, exit 0",
        .enabled(if: RunningTagFix.isBuilt, "needs the built tagfix"), arguments: [SIGTERM, SIGINT])
    func liveTerminated(signal: Int32) async throws {
        let reader = try emulatedReader()
        defer { reader.stop() }
        let gps = try temporaryFile(
            "gps.json",
            #"{"name":"gps","start":"2026-05-14T08:00:00Z","gps":{"route":[{"t":0,"lat":53.545,"lon":9.966},{"t":3600,"lat":53.545,"lon":9.966}]}}"#
        )
        let log = temporaryPath("live.jsonl")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let tagfix = try RunningTagFix(["verify", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--log", log])
        #expect(await tagfix.waitFor("confirmed"), "\(tagfix.stdout) \(tagfix.stderr)")
        let exited = await tagfix.stop(with: signal)
        #expect(exited)
        #expect(tagfix.exitedCleanly, "\(tagfix.ending)")
        try Self.expectSummaryAndLog(tagfix, log: log)
    }

    @Test(
        "tagfix scan stopped by SIGTERM or SIGINT: exit 0",
        .enabled(if: RunningTagFix.isBuilt, "needs the built tagfix"), arguments: [SIGTERM, SIGINT])
    func scanTerminated(signal: Int32) async throws {
        let reader = try emulatedReader()
        defer { reader.stop() }
        let tagfix = try RunningTagFix(["scan", "--reader", "pn532_uart:\(reader.path)"])
        #expect(await tagfix.waitFor("tags.example.org/t/S1"), "\(tagfix.stdout) \(tagfix.stderr)")
        let exited = await tagfix.stop(with: signal)
        #expect(exited)
        #expect(tagfix.exitedCleanly, "\(tagfix.ending)")
    }

    @Test(
        "tagfix fix stopped by SIGTERM or SIGINT: exit 0",
        .enabled(if: RunningTagFix.isBuilt && PrivateGPSD.installedPath != nil, "needs the built tagfix and gpsd"),
        arguments: [SIGTERM, SIGINT])
    func fixTerminated(signal: Int32) async throws {
        let receiver = try NMEAEmulator(source: .at(Coordinate(validLatitude: 53.545, longitude: 9.966), noise: 0.5, seed: 4), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            let tagfix = try RunningTagFix(["fix", "--gps", "gpsd://127.0.0.1:\(gpsd.port)", "--json"])
            #expect(await tagfix.waitFor("\"lat\""), "\(tagfix.stdout) \(tagfix.stderr)")
            let exited = await tagfix.stop(with: signal)
            #expect(exited)
            #expect(tagfix.exitedCleanly, "\(tagfix.ending)")
        }
    }

    @Test(
        "the private gpsd and its watchdog start with no signal blocked or ignored, even from a thread that blocks them all",
        .enabled(if: PrivateGPSD.installedPath != nil, "needs gpsd"))
    func gpsdSignalMask() async throws {
        let receiver = try NMEAEmulator(source: .at(Coordinate(validLatitude: 53.545, longitude: 9.966), noise: 0.5, seed: 5), rate: 5)
        defer { receiver.stop() }
        // Started from a thread that blocks every signal, as dispatch's worker threads do.
        try await withTaskExecutorPreference(SignalBlockingExecutor()) {
            try await PrivateGPSD.with(device: receiver.path) { gpsd in
                #expect(gpsd.isRunning)
                let pid = try #require(EmulatorCommandTests.gpsd(servingPort: gpsd.port))
                // Looked for until it shows: posix_spawn returns once the child is in execve, and for a
                // moment after that its /proc/PID/cmdline is empty (the kernel sets the new program's
                // arguments after it lets the parent go), so a look at once missed it 1 time in 5.
                var watchdog: pid_t?
                _ = await RunningProgram.poll(upTo: .seconds(10)) {
                    watchdog = Self.pids { $0.contains("tagfix-gpsd-watchdog") && $0.contains(String(pid)) }.first
                    return watchdog != nil
                }
                #expect(watchdog != nil, "no watchdog guards gpsd \(pid)")
                for child in [pid] + (watchdog.map { [$0] } ?? []) {
                    let status = try String(contentsOfFile: "/proc/\(child)/status", encoding: .utf8)
                    let blocked = try #require(Self.mask("SigBlk", in: status))
                    let ignored = try #require(Self.mask("SigIgn", in: status))
                    #expect(blocked == 0, "pid \(child) blocks signals: SigBlk \(String(blocked, radix: 16))")
                    for signal in [SIGINT, SIGTERM, SIGQUIT, SIGHUP] {
                        #expect(
                            ignored & (1 << UInt64(signal - 1)) == 0,
                            "pid \(child) ignores signal \(signal): SigIgn \(String(ignored, radix: 16))")
                    }
                }
            }
        }
    }

    /// A mask line of /proc/PID/status ("SigBlk:\t0000000000000000").
    static func mask(_ name: String, in status: String) -> UInt64? {
        status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
            .flatMap { UInt64($0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces), radix: 16) }
    }

    /// Processes whose command line (arguments joined by spaces) satisfies `matches`.
    static func pids(where matches: (String) -> Bool) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry in
            guard let pid = pid_t(entry), let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            let line = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
            return matches(line) ? pid : nil
        }
    }

    /// The summary is the last line of standard output; the log holds one parsed record per
    /// verdict line printed, and nothing torn.
    static func expectSummaryAndLog(_ tagfix: RunningTagFix, log: String) throws {
        let lines = tagfix.stdoutLines
        let summary = try #require(lines.last, "no output")
        let total = try #require(Int(summary.prefix { $0.isNumber }), "no summary: \(tagfix.stdout)")
        #expect(summary.contains(total == 1 ? " scan: " : " scans: "), "\(summary)")
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.isEmpty || text.hasSuffix("\n"), "the log ends in a torn line")
        let records = try text.split(separator: "\n").map { try JSONValue.parse(String($0)) }
        #expect(records.count == total, "\(records.count) records in the log, \(total) in the summary")
        #expect(records.allSatisfy { $0["verdict"]?.string != nil })
        #expect(try SessionLog.read(path: log).records.count == total)
    }
}

/// Runs each job of a task on a new thread that blocks every signal, as dispatch's worker threads
/// do: whatever the task spawns, it spawns from such a thread.
final class SignalBlockingExecutor: TaskExecutor, Sendable {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        DeviceThread.detach(name: "signal-blocking job") {
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
