import Foundation
import TagFixCLI
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixNDEF
import TagFixSystem
import TagFixTesting
import Testing

@Suite("The field path: PN532 emulator + real libnfc, NMEA emulator + real gpsd, tagfix verify", .timeLimit(.minutes(2)))
struct FieldEndToEndTests {
    @Test(
        "a tag with its location in its URL, one placed 300 m away, one during a fix dropout",
        .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
    func verdicts() async throws {
        let here = Coordinate(validLatitude: 53.545, longitude: 9.966)
        let receiver = try NMEAEmulator(source: .at(here, noise: 0.5, seed: 11), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            let gps = "gpsd://127.0.0.1:\(gpsd.port)"

            // Wait until gpsd delivers positioned fixes.
            var probe = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock()).events().makeAsyncIterator()
            while let event = await probe.next() {
                if case .fix(let fix) = event, fix.hasPosition { break }
            }

            func verdict(url: String) async throws -> JSONValue {
                let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded())
                let reader = try PN532Emulator(tags: [tag])
                defer { reader.stop() }
                let result = await run([
                    "verify", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--json", "--count", "1", "--timeout", "60",
                    "--fix-timeout", "30",
                ])
                #expect(result.code == 0, "\(result.err)")
                return try JSONValue.parse(try #require(result.out.first))
            }

            let confirmed = try await verdict(url: "https://tags.example.org/t/H1?lat=53.545&lon=9.966&r=30")
            #expect(confirmed["verdict"]?.string == "confirmed", "\(confirmed)")
            #expect(confirmed["fix"]?["mode"]?.string == "3d")

            // 300 m north: 53.545 + 300 / 111 320 degrees.
            let moved = try await verdict(url: "https://tags.example.org/t/H2?lat=53.5476949&lon=9.966&r=30")
            #expect(moved["verdict"]?.string == "outside", "\(moved)")
            #expect(abs((moved["distance_m"]?.double ?? 0) - 300) < 10)

            receiver.setFixLost(true)
            while let event = await probe.next() {
                if case .fix(let fix) = event, fix.mode == .noFix { break }
            }
            let dropout = try await verdict(url: "https://tags.example.org/t/H3?lat=53.545&lon=9.966&r=30")
            #expect(dropout["verdict"]?.string == "inconclusive", "\(dropout)")
            #expect(dropout["reason"]?.string == "no_fix")
        }
    }

    @Test("tagfix fix --json prints gpsd's fixes", .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
    func fixCommand() async throws {
        let receiver = try NMEAEmulator(source: .at(Coordinate(validLatitude: 1.5, longitude: 103.8), noise: 0.5, seed: 2), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            let result = await run(["fix", "--gps", "gpsd://127.0.0.1:\(gpsd.port)", "--json", "--count", "3", "--timeout", "60"])
            #expect(result.code == 0, "\(result.err)")
            let fixes = try result.out.map { try JSONValue.parse($0) }
            #expect(fixes.count == 3)
            for fix in fixes {
                for key in ["time", "mode", "lat", "lon", "alt_hae", "eph", "epx", "epy", "status", "satellites_used"] {
                    #expect(fix[key] != nil, "\(key) missing")
                }
            }
            #expect(fixes.compactMap { $0["lat"]?.double }.allSatisfy { abs($0 - 1.5) < 0.001 })
            let bad = await run(["fix", "--gps", "http://nowhere"])
            #expect(bad.code == 64)
        }
    }
}

@Suite("The emulators as a user runs them", .timeLimit(.minutes(2)))
struct EmulatorCommandTests {
    static let binary = TestBinaries.tagfix

    /// Starts `tagfix ARGUMENTS` and returns it with the first stdout line containing `marker`.
    /// The start-up (tagfix, then gpsd or the emulator) takes seconds: its output is read on a
    /// thread of its own and polled here, never waited for on the cooperative pool that in-process
    /// verifiers of a parallel run share.
    static func start(_ arguments: [String], until marker: String) async throws -> (RunningProgram, String) {
        let process = try RunningProgram(binary, arguments, standardError: .discard)
        let line = { () -> String? in
            let text = process.stdout
            let complete = text.hasSuffix("\n") ? text[...] : text[..<(text.lastIndex(of: "\n") ?? text.startIndex)]
            return complete.split(separator: "\n").first { $0.contains(marker) }.map(String.init)
        }
        _ = await RunningProgram.poll(upTo: .seconds(120)) { line() != nil || process.outputClosed }
        return (process, line() ?? process.stdout.split(separator: "\n").first { $0.contains(marker) }.map(String.init) ?? "")
    }

    @Test(
        "tagfix emulate nmea --route … --gpsd, then tagfix fix against it",
        .enabled(
            if: PrivateGPSD.installedPath != nil && FileManager.default.isExecutableFile(atPath: binary), "needs gpsd and the built tagfix")
    )
    func nmeaWithGPSD() async throws {
        let route = try temporaryFile("walk.geojson", #"{"type":"LineString","coordinates":[[9.966,53.545],[9.976,53.545]]}"#)
        let (process, line) = try await Self.start(
            ["emulate", "nmea", "--route", route, "--speed", "20", "--rate", "5", "--gpsd"], until: "gpsd://")
        defer { process.terminate(grace: .seconds(10)) }
        let url = try #require(line.split(separator: " ").last.map(String.init))
        #expect(url.hasPrefix("gpsd://127.0.0.1:"))
        let result = await run(["fix", "--gps", url, "--json", "--count", "5", "--timeout", "60"])
        #expect(result.code == 0, "\(result.err)")
        let longitudes = try result.out.map { try JSONValue.parse($0)["lon"]?.double ?? 0 }
        #expect(longitudes.count == 5)
        #expect((longitudes.last ?? 0) > (longitudes.first ?? 0), "walking east along the route")
        #expect(longitudes.allSatisfy { $0 > 9.9659 && $0 < 9.9761 })
    }

    @Test(
        "the gpsd that tagfix emulate nmea --gpsd starts does not outlive tagfix when tagfix is killed",
        .enabled(
            if: PrivateGPSD.installedPath != nil && FileManager.default.isExecutableFile(atPath: binary), "needs gpsd and the built tagfix")
    )
    func gpsdStopsWithItsOwner() async throws {
        let (process, line) = try await Self.start(["emulate", "nmea", "--at", "53.545,9.966", "--rate", "5", "--gpsd"], until: "gpsd://")
        let port = try #require(line.split(separator: ":").last.flatMap { Int($0) }, "\(line)")
        let gpsd = try #require(Self.gpsd(servingPort: port), "no gpsd process serves port \(port)")
        #expect(Self.isRunning(gpsd))
        // SIGKILL: no deinit, no defer, no signal handler runs in tagfix.
        await process.kill()
        // The watchdog stops gpsd as soon as it sees the pipe close; wait for it, up to 10 s.
        var running = true
        for _ in 0..<100 {
            running = Self.isRunning(gpsd)
            if !running { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        if running { kill(gpsd, SIGKILL) }  // leave nothing behind, even when the check fails
        #expect(!running, "gpsd (pid \(gpsd)) on port \(port) outlived the tagfix that started it")
    }

    /// The pid of the gpsd whose command line has `-S PORT`, from /proc.
    static func gpsd(servingPort port: Int) -> pid_t? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = pid_t(entry), let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard arguments.first?.hasSuffix("gpsd") == true, let s = arguments.firstIndex(of: "-S"), s + 1 < arguments.count,
                arguments[s + 1] == String(port)
            else { continue }
            return pid
        }
        return nil
    }

    /// Whether `pid` is a live process (a zombie is not: it has exited, and only waits to be reaped).
    static func isRunning(_ pid: pid_t) -> Bool { Processes.isRunning(pid) }

    @Test(
        "tagfix emulate pn532 --link, then tagfix scan through the link",
        .enabled(if: FileManager.default.isExecutableFile(atPath: binary), "needs the built tagfix"))
    func pn532WithLink() async throws {
        let dump = try temporaryFile(
            "tag.json",
            #"{"chip":"NTAG213","uid_hex":"04A224B2C56480","get_version_hex":"0004040201000F03","memory_hex":"04A2240AB2C5648093480000E11012000315D1011155046578616D706C652E6F72672F742F4131FE"}"#
        )
        let link = FileManager.default.temporaryDirectory.appendingPathComponent("pn532-\(UUID().uuidString)").path
        let (process, line) = try await Self.start(["emulate", "pn532", "--tag", dump, "--link", link], until: "connstring:")
        defer { process.terminate(grace: .seconds(10)) }
        #expect(line == "connstring: pn532_uart:\(link)")
        let result = await run(["scan", "--reader", "pn532_uart:\(link)", "--json", "--count", "1", "--timeout", "30"])
        #expect(result.code == 0, "\(result.err)")
        #expect(try JSONValue.parse(try #require(result.out.first))["url"]?.string == "https://example.org/t/A1")
    }
}
