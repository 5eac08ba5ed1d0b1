import Foundation
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixNDEF
import TagFixStore
import Testing

@testable import TagFixCLI

private func store() throws -> String {
    (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/site.sqlite"
}

@Suite("tagfix enroll, end to end: PN532 emulator + libnfc, NMEA emulator + gpsd, SQLite", .timeLimit(.minutes(3)))
struct EnrollEndToEndTests {
    static let template = "https://tags.example.org/t/{id}?lat={lat}&lon={lon}&r={r}"

    @Test(
        "enrol with --write-url: the tag is written and read back, the placement recorded, and verify confirms it",
        .enabled(if: gpsdInstalled, "gpsd is not installed"))
    func enrolWriteVerify() async throws {
        let spot = Coordinate(validLatitude: 53.5461, longitude: 9.9702)
        try await withReceiver(at: spot) { _, _, gps in
            let tag = try EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [.uri("https://old.example/x")]).encoded())
            let reader = try PN532Emulator(tags: [tag])
            defer { reader.stop() }
            let registry = try store()

            let result = await run([
                "enroll", "--id", "W5", "--name", "Warehouse door", "--radius", "20", "--reader", "pn532_uart:\(reader.path)", "--gps", gps,
                "--registry", registry, "--average", "30", "--max-accuracy", "15", "--write-url", Self.template, "--by", "ci", "--json",
            ])
            #expect(result.code == 0, "\(result.err)")
            let report = try JSONValue.parse(try #require(result.out.first))
            #expect(report["written"]?.bool == true)
            // Open sky: the fixes agree at once, and enroll stops after 2 s of them (5 Hz), not --average.
            let fixes = try #require(report["fixes"]?.double)
            #expect(fixes >= 10 && fixes <= 16, "\(report)")
            #expect((report["elapsed_s"]?.double ?? 99) <= 3, "\(report)")
            #expect((report["span_s"]?.double ?? 99) >= 2)

            // The tag holds the URL with the averaged position.
            let contents = try Type2Memory.read(tag.pages)
            let bytes = try #require(contents.ndefMessage)
            let url = try #require(try NDEFMessage(bytes: bytes).firstURL)
            #expect(url.hasPrefix("https://tags.example.org/t/W5?lat=53.546"))
            #expect(report["url"]?.string == url)

            // The registry holds the placement, near the receiver, with its enrolment.
            let entry = try #require(try SQLiteRegistry(path: registry, mode: .readOnly).entry(forID: "W5"))
            #expect(entry.uid?.hex == "04112233445566")
            #expect(entry.name == "Warehouse door")
            #expect(entry.region.radius == 20)
            #expect(Geodesic.distance(from: entry.region.center, to: spot) < 3)
            #expect(entry.enrolment?.by == "ci")
            // The originality the tag showed at enrolment is kept: a tag enrolled genuine must stay so.
            #expect(entry.originality != nil)
            #expect(entry.originality?.rawValue == report["originality"]?.string)
            // The receiver states σ √(0.8² + 0.2²) m per axis (GST, and HDOP: gpsd's eph is 4.75 × HDOP
            // for a DGPS fix, ±2.0 m here); the recorded accuracy is that, widened (× 1.2 and the
            // scatter), not shrunk by the number of fixes.
            let stated = try #require(report["stated_m"]?.double)
            #expect(abs(stated - GNSSErrorModel.radius95PerSigma * (0.8 * 0.8 + 0.2 * 0.2).squareRoot()) < 0.1, "\(stated)")
            let accuracy = try #require(entry.enrolment?.accuracy)
            #expect(accuracy >= 1.2 * stated && accuracy <= 1.5 * stated, "\(accuracy)")
            #expect(entry.enrolment?.fixes == Int(fixes))
            #expect(Geodesic.distance(from: entry.region.center, to: spot) <= accuracy)
            // Stored as shown, to the millimetre: an export prints 2.4, not 2.3999999999999999.
            #expect((accuracy * 1000).rounded() / 1000 == accuracy, "\(accuracy)")
            let exported = await run(["registry", "export", "--registry", registry])
            let accuracyCell = exported.out.last?.split(separator: ",", omittingEmptySubsequences: false)[8] ?? ""
            #expect(accuracyCell.count <= 8, "\(exported.out)")

            // And the tag verifies against it.
            let verified = await run([
                "verify", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--registry", registry, "--json", "--count", "1",
                "--timeout", "60", "--fix-timeout", "30",
            ])
            #expect(verified.code == 0, "\(verified.err)")
            let verdict = try JSONValue.parse(try #require(verified.out.first))
            #expect(verdict["verdict"]?.string == "confirmed", "\(verdict)")
            #expect(verdict["region"]?["source"]?.string == "registry")
            #expect(verdict["tag_id"]?.string == "W5")

            // Enrolling the same id again needs --replace.
            let again = await run([
                "enroll", "--id", "W5", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--registry", registry, "--average", "1",
                "--max-accuracy", "15",
            ])
            #expect(again.code == 64)
            #expect(again.err.joined().contains("--replace"))
        }
    }

    @Test(
        "open sky, read only: the tag is read while the fixes come in, and enroll finishes in seconds with the stated accuracy",
        .enabled(if: gpsdInstalled, "gpsd is not installed"))
    func openSkyReadOnly() async throws {
        let spot = Coordinate(validLatitude: 47.3769, longitude: 8.5417)
        try await withReceiver(at: spot, seed: 12) { _, _, gps in
            let tag = try EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [.uri("https://tags.example.org/t/Z1")]).encoded())
            let reader = try PN532Emulator(tags: [tag])
            defer { reader.stop() }
            let registry = try store()
            let result = await run([
                "enroll", "--id", "Z1", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--registry", registry, "--average", "60",
                "--json",
            ])
            #expect(result.code == 0, "\(result.err)")
            #expect(result.err.joined().contains("and tap the tag"), "\(result.err)")
            let report = try JSONValue.parse(try #require(result.out.first))
            #expect((report["elapsed_s"]?.double ?? 99) <= 3, "\(report)")
            let entry = try #require(try SQLiteRegistry(path: registry, mode: .readOnly).entry(forID: "Z1"))
            let fixes = try #require(entry.enrolment?.fixes)
            #expect(fixes >= 10 && fixes <= 16, "2 s at 5 Hz, not 60 s: \(fixes)")
            let accuracy = try #require(entry.enrolment?.accuracy)
            #expect(accuracy == EnrollCommand.millimetres(try #require(report["accuracy_m"]?.double)))
            #expect(accuracy >= 1.2 * (report["stated_m"]?.double ?? 99))
            #expect(Geodesic.distance(from: entry.region.center, to: spot) <= accuracy)
        }
    }

    @Test(
        "multipath: a position that keeps jumping is refused with the reason and exit code 75, and nothing is recorded",
        .enabled(if: gpsdInstalled, "gpsd is not installed"))
    func multipathRefused() async throws {
        let sky = GNSSErrorModel.Sky(multipath: .init(magnitude: 12, meanOn: 0.6, meanOff: 0.6, startsOn: true))
        try await withReceiver(at: Coordinate(validLatitude: 51.5, longitude: -0.12), sky: sky, seed: 21) { _, _, gps in
            let tag = try EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [.uri("https://tags.example.org/t/M1")]).encoded())
            let reader = try PN532Emulator(tags: [tag])
            defer { reader.stop() }
            let registry = try store()
            let result = await run([
                "enroll", "--id", "M1", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--registry", registry, "--average", "30",
            ])
            #expect(result.code == 75, "\(result.err)")
            let text = result.err.joined()
            #expect(text.contains("enrolment refused: multipath: the position jumped"), "\(text)")
            #expect(text.contains("more than the receiver's ±"), "\(text)")
            #expect(!FileManager.default.fileExists(atPath: registry), "nothing recorded")
        }
    }

    @Test("a read-only tag is refused, and nothing is recorded", .enabled(if: gpsdInstalled, "gpsd is not installed"))
    func readOnlyTag() async throws {
        try await withReceiver(at: Coordinate(validLatitude: 48.1, longitude: 11.5)) { _, _, gps in
            let base = try EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [.uri("https://old.example/x")]).encoded())
            var pages = base.pages
            pages[15] = 0x0F  // CC: no write access
            let tag = EmulatedType2Tag(
                uid: base.uid, pages: pages, getVersion: [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x0F, 0x03], signature: nil)
            let reader = try PN532Emulator(tags: [tag])
            defer { reader.stop() }
            let registry = try store()
            let result = await run([
                "enroll", "--id", "RO1", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--registry", registry, "--average", "2",
                "--max-accuracy", "15", "--write-url", Self.template,
            ])
            #expect(result.code == 69)
            #expect(result.err.joined().contains("read-only"), "\(result.err)")
            #expect(tag.pages == pages, "the tag is untouched")
            #expect(!FileManager.default.fileExists(atPath: registry), "nothing recorded: the new registry is not even created")
        }
    }

    @Test("poor GPS is refused with the reason, before the tag is touched")
    func poorGPS() async throws {
        let fixes = (0...40).map { #"{"t":\#(Double($0) * 0.25),"lat":53.545,"lon":9.966,"accuracy_m":45}"# }.joined(separator: ",")
        let scenario = try temporaryFile("poor.json", #"{"name":"poor","start":"2026-05-14T08:00:00Z","gps":{"fixes":[\#(fixes)]}}"#)
        let result = await run([
            "enroll", "--id", "P1", "--reader", "pn532_uart:/nonexistent", "--gps", scenario, "--registry", try store(), "--average", "2",
        ])
        #expect(result.code == 75)
        #expect(result.err.joined().contains("enrolment refused"), "\(result.err)")
        #expect(result.err.joined().contains("--max-accuracy"))
    }

    @Test(
        "URL templates are checked before anything waits",
        arguments: [
            ("https://t.example/t/{id}?lat={lat}&lon={lon}&r={r}", nil),
            ("https://t.example/t/{id}", nil),
            ("https://t.example/{tag}", "unknown placeholder"),
            ("not a url {id}", "not a URL"),
            ("https://t.example/{id}/info", "tag id"),
            ("https://t.example/t/{id}?lat={lon}&lon={lat}&r={r}", "another place"),
        ] as [(String, String?)])
    func templates(_ template: String, _ problem: String?) throws {
        let spot = Coordinate(validLatitude: 53.5, longitude: 9.9)
        do {
            let url = try EnrollCommand.render(template, id: "T7", at: spot, radius: 20, command: "enroll")
            #expect(problem == nil, "\(url) was accepted")
            #expect(url.contains("T7"))
        } catch {
            #expect(problem.map { error.message.contains($0) } == true, "\(error.message)")
        }
    }
}
