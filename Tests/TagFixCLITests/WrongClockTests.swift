import Foundation
import Synchronization
import TagFixCLI
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixSystem
import TagFixTesting
import Testing

private let tagfixPath = TestBinaries.tagfix
private let faketimePath = "/usr/bin/faketime"
private let gpsfakePath = "/usr/bin/gpsfake"
private let canFake =
    FileManager.default.isExecutableFile(atPath: faketimePath) && PrivateGPSD.installedPath != nil
    && FileManager.default.isExecutableFile(atPath: tagfixPath)

/// Runs the built `tagfix` (under `faketime` when `clock` is given, with the monotonic clock left
/// alone, as on a machine whose wall clock is wrong) and returns its status and output.
func runTagfix(_ arguments: [String], clock: [String]? = nil) async throws -> (status: Int32, out: [String], err: String) {
    // Both outputs read as they come, so neither pipe can fill and stall the child.
    let result =
        if let clock {
            try await TestProgram.run(faketimePath, clock + [tagfixPath] + arguments, environment: ["DONT_FAKE_MONOTONIC": "1"])
        } else {
            try await TestProgram.run(tagfixPath, arguments)
        }
    return (result.status, result.out, result.err)
}

/// The wrong clocks of issue 17: a Pi whose fake-hwclock is ten days behind, one three years
/// ahead, and a clock that thinks it is 2000 (a board with a flat RTC battery).
let wrongClocks: [[String]] = [["-f", "-10d"], ["-f", "+3y"], ["2000-01-01 00:00:00"]]

@Suite("A wrong wall clock: tagfix under faketime against emulators on the real clock", .timeLimit(.minutes(3)))
struct WrongClockTests {
    static let here = Coordinate(validLatitude: 53.545, longitude: 9.966)

    /// The NMEA emulator (on the real clock) read by a private gpsd for the length of `body`, which
    /// runs once gpsd has started; both are stopped when it ends.
    static func withRealReceiver<Value>(
        isolation: isolated (any Actor)? = #isolation, _ body: (NMEAEmulator, PrivateGPSD) async throws -> Value
    ) async throws -> Value {
        let receiver = try NMEAEmulator(source: .at(here, noise: 0.5, seed: 11), rate: 5)
        defer { receiver.stop() }
        return try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            return try await body(receiver, gpsd)
        }
    }

    static func verdict(url: String, gps: String, clock: [String]?, log: String) async throws -> (JSONValue, String) {
        let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded())
        let reader = try PN532Emulator(tags: [tag])
        defer { reader.stop() }
        let result = try await runTagfix(
            [
                "verify", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--json", "--count", "1", "--timeout", "60",
                "--fix-timeout", "30", "--log", log,
            ], clock: clock)
        #expect(result.status == 0, "\(result.err)")
        return (try JSONValue.parse(try #require(result.out.first)), result.err)
    }

    @Test("verify gives the same verdicts as with the right clock, says the offset once, stamps GPS time", arguments: wrongClocks)
    func verify(_ clock: [String]) async throws {
        try #require(canFake, "needs faketime, gpsd and the built tagfix")
        try await Self.withRealReceiver { receiver, gpsd in
            let gps = "gpsd://127.0.0.1:\(gpsd.port)"
            let inside = "https://tags.example.org/t/H1?lat=53.545&lon=9.966&r=30"
            let moved = "https://tags.example.org/t/H2?lat=53.5476949&lon=9.966&r=30"  // 300 m north
            let log = FileManager.default.temporaryDirectory.appendingPathComponent("wrong-clock-\(UUID().uuidString).jsonl").path
            defer { try? FileManager.default.removeItem(atPath: log) }
            let realNow = Date().timeIntervalSince1970
            for (url, kind) in [(inside, "confirmed"), (moved, "outside")] {
                let (right, _) = try await Self.verdict(url: url, gps: gps, clock: nil, log: log)
                let (wrong, err) = try await Self.verdict(url: url, gps: gps, clock: clock, log: log)
                #expect(right["verdict"]?.string == kind, "\(right)")
                #expect(wrong["verdict"]?.string == kind, "\(wrong)")
                #expect(abs((wrong["distance_m"]?.double ?? -1) - (right["distance_m"]?.double ?? 1)) < 5)
                #expect(wrong["time_source"]?.string == "gps")
                // Stamped with GPS time: the emulator's receiver runs on the real clock.
                let stamped = try #require(wrong["time"]?.string.flatMap(Timestamp.init(iso8601:)))
                #expect(abs(stamped.secondsSinceEpoch - realNow) < 600, "\(stamped) is GPS time, not the wrong clock's")
                let offset = try #require(wrong["clock_offset_s"]?.double)
                #expect(abs(offset) > 86_000, "the wrong clock's offset is in the verdict: \(offset)")
                let notes = err.components(separatedBy: "the system clock is").count - 1
                #expect(notes == 1, "the offset is said once: \(err)")
                #expect(err.contains("hardware.md#time"))
                #expect(!err.contains("dropped"), "no fix is dropped for its date: \(err)")
            }
            let logged = try TextFile.read(log).split(separator: "\n").map { try JSONValue.parse(String($0)) }
            #expect(logged.count == 4)
            #expect(logged.filter { $0["time_source"]?.string == "gps" }.count >= 2, "the log says which clock stamped each verdict")
        }
    }

    @Test("fix prints every fix with the receiver's time, and --timeout keeps its promise", arguments: wrongClocks)
    func fix(_ clock: [String]) async throws {
        try #require(canFake, "needs faketime, gpsd and the built tagfix")
        try await Self.withRealReceiver { receiver, gpsd in
            let realNow = Date().timeIntervalSince1970
            // More fixes than 2 s can bring: the timeout, on the monotonic clock, ends it (exit 75).
            let result = try await runTagfix(
                ["fix", "--gps", "gpsd://127.0.0.1:\(gpsd.port)", "--json", "--count", "100000", "--timeout", "2"], clock: clock)
            #expect(result.status == 75, "\(result.err)")
            #expect(result.out.count >= 2, "fixes are printed, not dropped: \(result.err)")
            for line in result.out {
                let time = try #require(try JSONValue.parse(line)["time"]?.string.flatMap(Timestamp.init(iso8601:)))
                #expect(abs(time.secondsSinceEpoch - realNow) < 600, "the receiver's time, as gpsd reports it")
            }
            #expect(result.err.components(separatedBy: "the system clock is").count - 1 == 1, "\(result.err)")
            #expect(!result.err.contains("dropped"), "\(result.err)")
        }
    }

    @Test("verify --demo under a wrong clock: one verdict a tap, all six kinds", arguments: wrongClocks)
    func demo(_ clock: [String]) async throws {
        try #require(canFake, "needs faketime, gpsd and the built tagfix")
        let result = try await runTagfix(["verify", "--demo", "--json"], clock: clock)
        #expect(result.status == 0, "\(result.err)")
        let kinds = try result.out.map { try JSONValue.parse($0)["verdict"]?.string ?? "" }
        #expect(kinds.count == 9)
        #expect(Set(kinds) == ["confirmed", "outside", "inconclusive", "notRegistered", "disallowed", "untrusted"])
    }
}

/// The logs in the shared data whose .chk has positioned fixes, for the gpsfake run.
private let gpsfakeLogs = TestData.files(in: "nmea/gpsd", suffix: ".log").filter { $0.hasSuffix("foretrex-201.log") }

@Suite("Replaying a recording through gpsd's own gpsfake", .timeLimit(.minutes(2)))
struct GPSFakeTests {
    /// Whether gpsd on `port` comes to list a device (`?DEVICES;`) within 10 s.
    static func listsDevice(port: Int) async -> Bool {
        guard await RunningProgram.poll(upTo: .seconds(30), { PrivateDaemon.listening(port: port) }),
            let client = try? SocketLineClient(port: port)
        else { return false }
        defer { client.close() }
        for _ in 0..<20 {
            client.send("?DEVICES;\n")
            if await RunningProgram.poll(
                upTo: .milliseconds(500), { client.lines(ofClass: "DEVICES").contains { $0.contains(#""devices":[{"#) } })
            {
                return true
            }
        }
        return false
    }

    @Test(
        "tagfix fix --json against gpsfake -1 gives gpsd's .chk fixes, dated 2030, with no option",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: gpsfakePath) && !gpsfakeLogs.isEmpty, "needs gpsfake and TAGFIX_TESTDATA"),
        arguments: gpsfakeLogs)
    func gpsfake(_ path: String) async throws {
        let expected = try TestData.gpsdCheckTPVs(forLog: path)
        // gpsfake tells its gpsd of the pty through gpsd's control socket as soon as the socket's
        // file exists (gps/fake.py: wait_ready, add_device). On a loaded machine that is before gpsd
        // listens on it: the connect is refused and gpsfake plays the log to a pty gpsd never
        // reads, silently (beside two CPU hogs, 0 of 6 fixes in 60 s, 1 whole run in 4). So it is
        // started again until its gpsd lists the pty, at most three times.
        for _ in 0..<3 {
            let port = PrivateGPSD.freePort()
            let played = try await TestProgram.withRunning(
                gpsfakePath, ["-q", "-1", "-c", "0.2", "-P", String(port), path], standardOutput: .discard, standardError: .discard,
                grace: .seconds(5)
            ) { _ in
                defer {
                    // gpsfake ends by itself once the log is played (-1); if it has not, its gpsd
                    // goes first (gpsfake then ends). The segment gpsfake's gpsd exports into (key
                    // 0x4770PPPP, gps/fake.py) is left by gpsd: removed.
                    if let gpsd = EmulatorCommandTests.gpsd(servingPort: port) { kill(gpsd, SIGKILL) }
                    _ = try? SharedMemory.removeSegment(key: Int32(0x4770_0000 + port))
                }
                guard await Self.listsDevice(port: port) else { return false }
                try await Self.fixesMatch(port: port, expected: expected)
                return true
            }
            if played { return }
        }
        Issue.record("gpsfake's gpsd never had the log's pty (3 tries)")
    }

    /// `tagfix fix --json` on gpsd at `port` gives the `.chk`'s fixes.
    static func fixesMatch(port: Int, expected: [Timestamp: JSONValue]) async throws {
        let result = try await runTagfix(
            ["fix", "--gps", "gpsd://127.0.0.1:\(port)", "--json", "--count", String(expected.count), "--timeout", "60"])
        #expect(result.status == 0, "\(result.err)")
        // Each epoch's first report; its refinements ("refined":true) replace it and do not count.
        let firsts = result.out.filter { !$0.contains(#""refined":true"#) }
        #expect(firsts.count == expected.count)
        for line in firsts {
            let fix = try JSONValue.parse(line)
            let time = try #require(fix["time"]?.string.flatMap(Timestamp.init(iso8601:)))
            let tpv = try #require(expected[time], "no .chk TPV at \(time)")
            #expect(Int(fix["mode"]?.double ?? 0) == Int(tpv["mode"]?.double ?? -1))
            #expect(abs((fix["lat"]?.double ?? 0) - (tpv["lat"]?.double ?? 1)) <= 1e-6)
            #expect(abs((fix["lon"]?.double ?? 0) - (tpv["lon"]?.double ?? 1)) <= 1e-6)
        }
        #expect(!result.err.contains("dropped fix time"), "\(result.err)")
    }
}

/// Every NMEA log in the shared data (and the SiRF one), replayed by the NMEA emulator into a
/// private gpsd.
private let recordings = TestData.files(in: "nmea/gpsd", suffix: ".log")

@Suite("Recordings of any date through tagfix fix", .timeLimit(.minutes(2)))
struct RecordingFixCommandTests {
    @Test(
        "tagfix fix --json with no option gives gpsd's .chk fixes (mode, time, lat, lon) for every shared log",
        .enabled(if: PrivateGPSD.installedPath != nil && !recordings.isEmpty, "needs gpsd and TAGFIX_TESTDATA"), arguments: recordings)
    func recording(_ path: String) async throws {
        let expected = try TestData.gpsdCheckTPVs(forLog: path)
        guard !expected.isEmpty else { return }  // ublox-lea-5q's .chk has no timed TPV: nothing to compare
        let data = try #require(FileManager.default.contents(atPath: path))
        let receiver = try NMEAEmulator(source: NMEAEmulator.recording(Array(data)), rate: 20)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            // The recording plays once: start it when fix is watching, so it sees every epoch.
            let output = CapturedOutput()
            let command = Task {
                await TagFixCommandLine.run(
                    ["fix", "--gps", "gpsd://127.0.0.1:\(gpsd.port)", "--json", "--count", String(expected.count), "--timeout", "60"],
                    output: output)
            }
            for _ in 0..<1500 where !output.stderr.contains(where: { $0.hasPrefix("gps: gpsd at") }) {
                try await Task.sleep(for: .milliseconds(20))
            }
            receiver.start()
            let result = (code: await command.value, out: output.stdout, err: output.stderr)
            #expect(result.code == 0, "\(result.err)")
            // Each epoch's first report; its refinements ("refined":true) replace it and do not count.
            let firsts = result.out.filter { !$0.contains(#""refined":true"#) }
            #expect(firsts.count == expected.count)
            let truth = GPSDEpochTruth.epochs(try TestData.gpsdCheckReports(forLog: path))
            for line in firsts {
                let fix = try JSONValue.parse(line)
                let time = try #require(fix["time"]?.string.flatMap(Timestamp.init(iso8601:)))
                let tpv = try #require(expected[time], "no .chk TPV at \(time)")
                let mode = Int(tpv["mode"]?.double ?? -1)
                // The first report of the epoch, or (the first fix of a connection, held for its SKY)
                // that report with its refinements merged: up to the highest mode gpsd gave for it.
                let highest = truth[time]?.mode ?? mode
                #expect((max(mode, 1)...max(highest, mode, 1)).contains(Int(fix["mode"]?.double ?? 0)), "\(line)")
                if mode >= 2 {
                    #expect(abs((fix["lat"]?.double ?? 0) - (tpv["lat"]?.double ?? 1)) <= 1e-6)
                    #expect(abs((fix["lon"]?.double ?? 0) - (tpv["lon"]?.double ?? 1)) <= 1e-6)
                }
            }
            #expect(!result.err.joined().contains("dropped fix time"), "nothing dropped for its date")
        }
    }

    @Test(
        "tagfix emulate nmea --log OLD.log --gpsd (played over and over), then tagfix fix against it: the 2030 recording's fixes, none dropped",
        .enabled(
            if: PrivateGPSD.installedPath != nil && FileManager.default.isExecutableFile(atPath: tagfixPath) && !gpsfakeLogs.isEmpty,
            "needs gpsd, the built tagfix and TAGFIX_TESTDATA"), arguments: gpsfakeLogs)
    func emulateLog(_ path: String) async throws {
        let checked = try TestData.gpsdCheckTPVs(forLog: path)
        // Played over and over, gpsd also closes the recording's last epoch (20:00:16), when the
        // next play begins: gpsfake -1's .chk, which ends with the log, never has it. The epochs
        // are the .chk's times and, on their day, every timed RMC of the log.
        let days = Set(checked.keys.map { $0.iso8601.prefix(11) })
        let text = String(decoding: try #require(FileManager.default.contents(atPath: path)), as: UTF8.self)
        let times = text.split(whereSeparator: \.isNewline).compactMap { line -> String? in
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count > 2, fields[0].hasSuffix("RMC"), fields[1].count >= 6 else { return nil }
            let hms = Array(fields[1].prefix(6))
            return "\(String(hms[0..<2])):\(String(hms[2..<4])):\(String(hms[4..<6])).000Z"
        }
        let epochs = Set(checked.keys.map(\.iso8601)).union(days.flatMap { day in times.map { day + $0 } })
        let (process, line) = try await EmulatorCommandTests.start(
            ["emulate", "nmea", "--log", path, "--rate", "5", "--gpsd"], until: "gpsd://")
        defer { process.terminate(grace: .seconds(10)) }
        let url = try #require(line.split(separator: " ").last.map(String.init))
        let result = await run(["fix", "--gps", url, "--json", "--count", "3", "--timeout", "60"])
        #expect(result.code == 0, "\(result.err)")
        for line in result.out {
            let time = try #require(try JSONValue.parse(line)["time"]?.string.flatMap(Timestamp.init(iso8601:)))
            #expect(epochs.contains(time.iso8601), "\(time) is one of the recording's epochs")
        }
        #expect(!result.err.joined().contains("dropped fix time"))
    }
}
