import Foundation
import TagFixCore
import Testing

@Suite("tagfix report on a real session log")
struct ReportCommandTests {
    static func sessionLog() async throws -> String {
        let log = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/walk.jsonl"
        let verify = await run(["verify", "--scenario", example, "--json", "--log", log])
        #expect(verify.code == 0, "\(verify.err)")
        return log
    }

    @Test("every format renders from the example walk's log", arguments: ["geojson", "gpx", "csv", "svg", "html"])
    func formats(_ format: String) async throws {
        let log = try await Self.sessionLog()
        let output = (log as NSString).deletingLastPathComponent + "/report.\(format)"
        let result = await run([
            "report", log, "--registry", packageRoot + "/Examples/site/registry.csv", "--format", format, "--output", output,
        ])
        #expect(result.code == 0, "\(result.err)")
        let text = try String(contentsOfFile: output, encoding: .utf8)
        switch format {
        case "geojson":
            let features = try JSONValue.parse(text)["features"]?.array ?? []
            // Ten registered tags and the one whose URL carries its location.
            #expect(features.filter { $0["properties"]?["kind"]?.string == "expected_region" }.count == 11)
        case "csv": #expect(text.split(separator: "\n").count == 13, "a header and 12 scans")
        case "html":
            #expect(text.contains("<h2>Tags moved</h2>"))
            // The Leaflet map (libjs-leaflet installed), else the plain SVG one.
            let leaflet = FileManager.default.fileExists(atPath: "/usr/share/javascript/leaflet/leaflet.js")
            #expect(leaflet ? text.contains(#"<div id="map""#) : text.contains("<svg"), "no map")
        default: #expect(text.contains("<"))
        }
    }

    @Test("a log cut off mid-line still reports, with a note; a log that is not one is refused with its line")
    func damagedLogs() async throws {
        let log = try await Self.sessionLog()
        let handle = try #require(FileHandle(forWritingAtPath: log))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"time":"2026-05-14T08:20:00Z","verd"#.utf8))
        try handle.close()
        let torn = await run(["report", log, "--format", "csv"])
        #expect(torn.code == 0)
        #expect(torn.out.count == 13)
        #expect(torn.err.first?.contains("torn last line") == true)

        let wrong = try temporaryFile("wrong.jsonl", "{\"a\":1}\n")
        let refused = await run(["report", wrong])
        #expect(refused.code == 65)
        #expect(refused.err.joined().contains("wrong.jsonl:1"))
        #expect(await run(["report", "/nonexistent.jsonl"]).code == 66)
        #expect(await run(["report", log, "--format", "pdf"]).code == 64)
    }
}
