import Foundation
import TagFixCLI
import TagFixCore
import TagFixDevices
import TagFixTesting
import Testing

private let dumps =
    TestData.files(in: "nfc/flipper", suffix: ".nfc") + TestData.files(in: "nfc/proxmark", suffix: ".json")
    + TestData.files(in: "nfc/tags", suffix: ".json")

/// The converted JSON (with the expected records) for a dump.
private func expectation(for path: String) throws -> JSONValue? {
    let name = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
    for candidate in TestData.files(in: "nfc/tags", suffix: ".json") {
        let json = try JSONValue.parse(try TextFile.read(candidate))
        let source = json["source"]?["path"]?.string.map { (($0 as NSString).lastPathComponent as NSString).deletingPathExtension }
        if candidate == path || source == name { return json }
    }
    return nil
}

@Suite("tagfix inspect")
struct InspectCommandTests {
    @Test(
        "every shared dump: uid, tag type, records and url", .enabled(if: !dumps.isEmpty, Comment(rawValue: TestData.skipReason)),
        arguments: dumps)
    func sharedDump(_ path: String) async throws {
        let result = await run(["inspect", path, "--json"])
        #expect(result.code == 0, "\(result.err)")
        let object = try JSONValue.parse(try #require(result.out.first))
        let expected = try #require(try expectation(for: path))
        #expect(object["uid"]?.string == expected["uid_hex"]?.string?.uppercased())
        let records = expected["expected_records"]?.array ?? []
        #expect(object["records"]?.array?.count == records.count)
        #expect(object["ndef"]?.bool == (expected["expected_ndef_message_hex"]?.string != nil))
        let uri = records.compactMap { $0["decoded"]?["uri"]?.string }.first
        #expect(object["url"]?.string == uri)
        for (found, want) in zip(object["records"]?.array ?? [], records) {
            #expect(found["payload"]?.string == want["payload_hex"]?.string?.uppercased())
            #expect(found["tnf"]?.double == want["tnf"]?.double)
        }
    }

    @Test(
        "a tag that is not NDEF formatted says so and exits 0", .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)))
    func notFormatted() async throws {
        let path = try #require(TestData.path("nfc/flipper/Dave_and_Busters.nfc"))
        let result = await run(["inspect", path, "--json"])
        #expect(result.code == 0)
        let object = try JSONValue.parse(try #require(result.out.first))
        #expect(object["ndef"]?.bool == false)
        #expect(object["records"]?.array?.isEmpty == true)
        #expect(object["url"]?.isNull == true)
        #expect(object["problem"]?.string?.contains("not NDEF formatted") == true)
        let text = await run(["inspect", path])
        #expect(text.out.contains { $0.contains("not NDEF formatted") })
    }

    @Test("a broken structure is shown and exits 65; a malformed file names its line; a missing one exits 66")
    func errors() async throws {
        let truncated = try temporaryFile(
            "t.nfc",
            "Filetype: Flipper NFC device\nVersion: 2\nDevice type: NTAG213\nUID: 04 11 22 33 44 55 66\nPage 0: 04 11 22 99\nPage 1: 33 44 55 66\nPage 2: 00 48 00 00\nPage 3: E1 10 12 00\nPage 4: 03 30 D1 01\n"
        )
        let broken = await run(["inspect", truncated])
        #expect(broken.code == 65)
        #expect(broken.out.contains { $0.hasPrefix("NDEF:") })
        let malformed = try temporaryFile(
            "m.nfc", "Filetype: Flipper NFC device\nVersion: 2\nDevice type: NTAG213\nUID: 04 11 22 33 44 55 66\nPage 0: 04 11 XX 99\n")
        let bad = await run(["inspect", malformed])
        #expect(bad.code == 65)
        #expect(bad.err.joined().contains("\(malformed):5:"))
        #expect(await run(["inspect", "/nonexistent.nfc"]).code == 66)
        #expect(await run(["inspect"]).code == 64)
    }
}

@Suite("Documentation examples")
struct DocumentationExampleTests {
    @Test("the TagFix tag JSON example in docs/tag-json.md reads as documented")
    func tagJSON() async throws {
        let text = try String(contentsOfFile: packageRoot + "/docs/tag-json.md", encoding: .utf8)
        let start = try #require(text.range(of: "```json\n"))
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        let path = try temporaryFile("example.json", String(text[start.upperBound..<end.lowerBound]))
        let result = await run(["inspect", path, "--json"])
        #expect(result.code == 0)
        let object = try JSONValue.parse(try #require(result.out.first))
        #expect(object["url"]?.string == "https://example.org/t/A1")
        #expect(object["tag_type"]?.string == "ntag213")
    }
}
