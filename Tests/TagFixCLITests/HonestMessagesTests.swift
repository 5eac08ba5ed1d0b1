import Foundation
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixNDEF
import TagFixTesting
import Testing

@testable import TagFixCLI
@testable import TagFixDoctor

/// An address where no gpsd answers.
private let deadGPSD = "gpsd://127.0.0.1:1"

/// A Type 4 tag (NFC Forum mapping 3.0: CCLEN 17, the extended NDEF File Control TLV) holding `url`.
private func mapping3Tag(url: String, uid: [UInt8] = [0x04, 0xC0, 0xFF, 0xEE, 0x12, 0x34, 0x81], version: UInt8 = 0x30) -> EmulatedType4Tag
{
    let message = NDEFMessage(records: [NDEFRecord.uri(url)]).encoded()
    let size = 256
    let cc: [UInt8] = [0x00, 0x11, version, 0x00, 0xFF, 0x00, 0xFF, 0x06, 0x08, 0xE1, 0x04, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00]
    var file = [0, 0, UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
    file += [UInt8](repeating: 0, count: size - file.count)
    return EmulatedType4Tag(uid: uid, ccFile: cc, ndefFile: file)
}

/// A scenario file whose GPS stands at `spot` with good fixes for a minute from now: a mock GPS
/// for `verify --reader … --gps FILE`.
func standingScenario(at spot: Coordinate) throws -> String {
    let fixes = (0...240).map { #"{"t":\#(Double($0) * 0.25),"lat":\#(spot.latitude),"lon":\#(spot.longitude),"accuracy_m":3}"# }
    return try temporaryFile(
        "standing.json", #"{"name":"standing","start":"2026-05-14T08:00:00Z","gps":{"fixes":[\#(fixes.joined(separator: ","))]}}"#)
}

@Suite("Messages that say what is true (issue 18)", .timeLimit(.minutes(3)))
struct HonestMessagesTests {
    // MARK: 7. gpsd unreachable

    @Test("verify with gpsd unreachable: exit 69 saying gpsd at HOST:PORT does not answer, not 'move to open sky'")
    func verifyWithoutGPSD() async throws {
        let reader = try PN532Emulator(tags: [ntag(url: "https://tags.example.org/t/A1?lat=53.5&lon=9.9&r=30")])
        defer { reader.stop() }
        let result = await run([
            "verify", "--reader", "pn532_uart:\(reader.path)", "--gps", deadGPSD, "--count", "1", "--timeout", "20", "--fix-timeout", "1",
        ])
        #expect(result.code == 69, "\(result)")
        let text = result.err.joined(separator: "\n")
        #expect(text.contains("gpsd at 127.0.0.1:1 does not answer"), "\(text)")
        #expect(text.contains("hardware.md#gpsd"))
        #expect(!(result.out + result.err).joined().contains("open sky"))
    }

    @Test("enroll with gpsd unreachable: exit 69 at once, saying so, and no registry file left behind")
    func enrollWithoutGPSD() async throws {
        let registry = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/new.sqlite"
        let result = await run([
            "enroll", "--id", "T1", "--reader", "pn532_uart:/nonexistent", "--gps", deadGPSD, "--registry", registry, "--average", "20",
        ])
        #expect(result.code == 69, "\(result)")
        let text = result.err.joined(separator: "\n")
        #expect(text.contains("gpsd at 127.0.0.1:1 does not answer"), "\(text)")
        #expect(text.contains("hardware.md#gpsd"))
        #expect(!text.contains("open sky"))
        #expect(!FileManager.default.fileExists(atPath: registry), "a failed enrolment creates no registry")

        // A refused average leaves none behind either.
        let fixes = (0...40).map { #"{"t":\#(Double($0) * 0.25),"lat":53.545,"lon":9.966,"accuracy_m":45}"# }.joined(separator: ",")
        let poor = try temporaryFile("poor.json", #"{"name":"poor","start":"2026-05-14T08:00:00Z","gps":{"fixes":[\#(fixes)]}}"#)
        let refused = await run([
            "enroll", "--id", "T1", "--reader", "pn532_uart:/nonexistent", "--gps", poor, "--registry", registry, "--average", "2",
        ])
        #expect(refused.code == 75)
        #expect(!FileManager.default.fileExists(atPath: registry))
    }

    @Test("doctor with nothing at the address: it does not claim that gpsd is running there")
    func doctorWithoutGPSD() throws {
        let system = try FakeSystem()
        try system.write("proc/4242/comm", "gpsd\n")  // a gpsd on another port
        let facts = try system.facts()
        #expect(facts.processes.contains("gpsd"))
        let findings = Doctor.check(
            facts, libnfc: "1.8.0", reader: nil, gps: .unreachable(endpoint: deadGPSD, why: "cannot connect: nothing listens there"))
        let finding = try #require(findings.first { $0.code.hasPrefix("gpsd-") })
        #expect(finding.severity == .blocking)
        #expect(!finding.message.contains("is running"), "\(finding.message)")
        #expect(finding.message.contains("gpsd at \(deadGPSD) does not answer"), "\(finding.message)")
        #expect(finding.fix?.contains("hardware.md#gpsd") == true)
    }

    @Test("tagfix devices: gpsd's device list says the same when nothing answers")
    func devicesWithoutGPSD() async throws {
        let result = await GPSDEndpoint(host: "127.0.0.1", port: 1).devices(wait: .seconds(1))
        guard case .failure(let error) = result else {
            Issue.record("nothing listens at 127.0.0.1:1")
            return
        }
        #expect(error.description.hasPrefix("gpsd at 127.0.0.1:1 does not answer ("), "\(error)")
        #expect(error.description.contains("hardware.md#gpsd"))
    }

    @Test("hardware.md has the #gpsd section the messages point to")
    func gpsdAnchor() throws {
        let text = try String(contentsOfFile: packageRoot + "/hardware.md", encoding: .utf8)
        #expect(text.contains("\n### gpsd\n"), "no '### gpsd' heading in hardware.md")
    }

    // MARK: 8. verify --reader without --gps

    @Test("verify --reader without --gps reads gpsd at localhost:2947, as the other commands do")
    func verifyDefaultsToGPSD() throws {
        let command = try VerifyCommand(try VerifyCommand.spec.parse(["--reader", "pn532_uart:/dev/ttyUSB0"]))
        #expect(command.gpsd == GPSDEndpoint(host: "localhost", port: 2947))
    }

    // MARK: 9. The emulated receiver passes the README's enroll

    @Test(
        "tagfix emulate nmea's default fix passes enroll at the default 10 m limit",
        .enabled(
            if: gpsdInstalled && FileManager.default.isExecutableFile(atPath: EmulatorCommandTests.binary),
            "needs gpsd and the built tagfix"))
    func emulatorPassesEnroll() async throws {
        let (process, line) = try await EmulatorCommandTests.start(
            ["emulate", "nmea", "--at", "53.5461,9.9702", "--gpsd"], until: "gpsd://")
        defer { process.terminate(grace: .seconds(10)) }
        let gps = try #require(line.split(separator: " ").last.map(String.init))
        let reader = try PN532Emulator(tags: [ntag(url: "https://tags.example.org/t/T01")])
        defer { reader.stop() }
        let registry = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/site.sqlite"
        // The README's step, with a shorter average: no --max-accuracy. Enroll wants 5 fixes and the
        // emulator sends one a second: 8 s holds at least 5. Enroll runs as its own process, as a
        // tech runs it: in this test process, the many tests of a parallel run that block the
        // cooperative pool's two threads (process waits, emulator start-ups) delayed its fixes
        // until 12 s held only one of them (CI, twice).
        // Both outputs read as they come (neither pipe can fill and stall enroll), off the pool.
        let enroll = try await TestProgram.run(
            EmulatorCommandTests.binary,
            [
                "enroll", "--id", "T01", "--name", "Main gate", "--radius", "25", "--reader", "pn532_uart:\(reader.path)", "--gps", gps,
                "--registry", registry, "--average", "8", "--json",
            ])
        let result = (code: enroll.status, out: enroll.out, err: enroll.err.split(separator: "\n").map(String.init))
        #expect(result.code == 0, "\(result.err)")
        let report = try JSONValue.parse(try #require(result.out.first))
        #expect((report["accuracy_m"]?.double ?? 99) < 5, "\(report)")
    }

    // MARK: 10. A mapping 3.0 Type 4 tag, and a read that fails

    @Test("scan reads a Type 4 tag with mapping version 3.0 (CCLEN 17) on the wire, as inspect decodes it")
    func mapping3OnTheWire() async throws {
        let reader = try PN532Emulator(tags: [mapping3Tag(url: "https://tags.example.org/t/V3")])
        defer { reader.stop() }
        let result = await run(["scan", "--reader", "pn532_uart:\(reader.path)", "--json", "--count", "1", "--timeout", "20"])
        #expect(result.code == 0, "\(result)")
        let scan = try JSONValue.parse(try #require(result.out.first))
        #expect(scan["url"]?.string == "https://tags.example.org/t/V3", "\(scan)")
        #expect(scan["problem"]?.string == nil)
    }

    @Test("verify: a tag whose NDEF cannot be read is inconclusive (read_failed) with what to do, never 'not registered'")
    func readFailedVerdict() async throws {
        // Mapping 2.0 with the 3.0 TLV: a CC no reader may use.
        let broken = mapping3Tag(url: "https://tags.example.org/t/V2", version: 0x20)
        let reader = try PN532Emulator(tags: [broken])
        defer { reader.stop() }
        let gps = try standingScenario(at: Coordinate(validLatitude: 53.5, longitude: 9.9))
        let result = await run([
            "verify", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--json", "--count", "1", "--timeout", "20",
        ])
        #expect(result.code == 0, "\(result)")
        let verdict = try JSONValue.parse(try #require(result.out.first))
        #expect(verdict["verdict"]?.string == "inconclusive", "\(verdict)")
        #expect(verdict["reason"]?.string == "read_failed")
        #expect(verdict["message"]?.string?.contains("tap again") == true)
    }

    // MARK: 11. Smaller ones

    @Test("scan names the reader once ('reader: X', not 'reader: X at X')")
    func readerNamedOnce() async throws {
        let reader = try PN532Emulator(tags: [ntag(url: "https://a.example/1")])
        defer { reader.stop() }
        let result = await run(["scan", "--reader", "pn532_uart:\(reader.path)", "--count", "1", "--timeout", "20"])
        #expect(result.code == 0)
        #expect(result.err.contains("reader: pn532_uart:\(reader.path)"), "\(result.err)")
    }

    @Test("one tag is '1 tag': registry migrate")
    func singular() async throws {
        let registry = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/one.sqlite"
        let csv = try temporaryFile("one.csv", "id,uid,lat,lon,radius_m,name\nT1,,53.5,9.9,20,Gate\n")
        #expect(await run(["registry", "import", csv, "--registry", registry]).code == 0)
        let result = await run(["registry", "migrate", "--registry", registry])
        #expect(result.code == 0, "\(result)")
        let line = result.out.joined(separator: "\n")
        #expect(line.contains("1 tag") && !line.contains("1 tags"), "\(line)")
    }

    @Test("a not-registered verdict is logged with the fix where the tag was found")
    func notRegisteredLogsItsFix() async throws {
        let result = await run(["verify", "--scenario", example, "--json"])
        #expect(result.code == 0)
        let verdicts = try result.out.map { try JSONValue.parse($0) }
        let unknown = try #require(verdicts.first { $0["verdict"]?.string == "notRegistered" })
        #expect(unknown["fix"]?["lat"]?.double != nil, "\(unknown)")
    }

    @Test("verify --scenario on a terminal rings no bell: nothing is live")
    func noBellForReplays() async throws {
        let terminal = FakeTerminal()
        let code = await TagFixCommandLine.run(["verify", "--scenario", example], output: terminal)
        #expect(code == 0)
        #expect(terminal.lines.count > 5)
        #expect(!terminal.lines.joined().contains("\u{7}"))
    }

    @Test(
        "two --tag options and no script: each tagfix scan (a new reader session) reads the next tag",
        .enabled(if: FileManager.default.isExecutableFile(atPath: EmulatorCommandTests.binary), "needs the built tagfix"))
    func tagsTakeTurns() async throws {
        let a = try ntag(url: "https://a.example/1"), b = try ntag(url: "https://b.example/2", uid: [0x04, 1, 2, 3, 4, 5, 6])
        let reader = try PN532Emulator(tags: [a, b])
        defer { reader.stop() }
        var urls: [String] = []
        for _ in 0..<3 {
            // The real binary, one process a session, as a lab runs it: each ends before the next opens.
            let process = try await TestProgram.run(
                EmulatorCommandTests.binary,
                ["scan", "--reader", "pn532_uart:\(reader.path)", "--json", "--count", "1", "--timeout", "20"],
                standardError: .discard)
            #expect(process.status == 0)
            let line = try #require(process.output.split(separator: "\n").first)
            urls.append(try JSONValue.parse(String(line))["url"]?.string ?? "?")
        }
        #expect(urls == ["https://a.example/1", "https://b.example/2", "https://a.example/1"])
    }
}

private func ntag(url: String, uid: [UInt8] = [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66]) throws -> EmulatedType2Tag {
    try EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded(), uid: uid)
}
