import Foundation
import TagFixCore
import TagFixTesting
import Testing

/// `tagfix serve` keeps each tap's read health as `verify` does: the read's attempts, RF errors
/// and time in the log and in every VERDICT a client gets, so the report made from serve's log
/// lists the tags that read badly. Through the real libnfc on the PN532 emulator (a weak tag: RF
/// status bytes at a seeded rate) and a private gpsd on the NMEA emulator.
@Suite("tagfix serve keeps each tap's read health", .timeLimit(.minutes(4)))
struct ServeReadHealthTests {
    @Test(
        "a weak tag tapped under serve: its read's retries and RF errors in the log and the VERDICT lines, a healthy one's clean, and the report of serve's log lists the weak one",
        .enabled(if: ServeEndToEndTests.runnable, "needs the built tagfix and gpsd"))
    func weakTagUnderServe() async throws {
        let rig = try await ServeRig()
        let client = try SocketLineClient(path: rig.socket)
        client.send(#"?WATCH={"enable":true};"# + "\n")
        #expect(await RunningTagFix.poll { client.lines(ofClass: "WATCH").count == 1 })

        rig.weaken(tag: 0, rfErrorRate: 0.5)
        #expect(await rig.tap(expecting: 1), "the weak tag gave no verdict: \(rig.serve.stderr)")
        // Healed at once: a weak tag held on the reader may still be taken for lifted and read
        // again (a second record of E1), which the assertions below allow.
        rig.weaken(tag: 0, rfErrorRate: 0)
        _ = await rig.tap(expecting: rig.logLines.count + 1)
        #expect(await RunningTagFix.poll { rig.logLines.contains { $0.contains(#""tag_id":"E2""#) } }, "\(rig.serve.stderr)")
        let logged = rig.logLines
        #expect(await RunningTagFix.poll { client.lines(ofClass: "VERDICT").count >= logged.count })
        let verdictLines = client.lines(ofClass: "VERDICT")
        #expect(await rig.stop(), "SIGTERM left tagfix serve running")

        let records = try logged.enumerated().map { try SessionRecord(try JSONValue.parse($0.element), line: $0.offset + 1) }
        let weak = try #require(records.first)
        #expect(weak.tagID == "E1")
        let read = try #require(weak.read, "serve logged no read for the weak tag: \(logged[0])")
        #expect(read.rfErrors > 0 && read.attempts > 1, "the weak tag's read met no fault: \(read)")
        let healthy = try #require(records.first { $0.tagID == "E2" })
        #expect(healthy.read?.attempts == 1 && healthy.read?.rfErrors == 0, "\(String(describing: healthy.read))")
        // Every VERDICT a client got carries the same read as the log.
        for (line, logLine) in zip(verdictLines, logged) {
            let sent = try JSONValue.parse(line)["read"]
            let kept = try JSONValue.parse(logLine)["read"]
            #expect(sent != nil && sent == kept, "\(line)")
        }

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-serve-read-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try (logged.joined(separator: "\n") + "\n").write(toFile: folder + "/serve.jsonl", atomically: true, encoding: .utf8)
        let reported = await run(["report", folder + "/serve.jsonl", "--output", folder + "/report.html"])
        #expect(reported.code == 0, "\(reported.err)")
        #expect(reported.err.joined(separator: "\n").contains("1 tag reads badly: E1"), "\(reported.err)")
        let html = try String(contentsOfFile: folder + "/report.html", encoding: .utf8)
        #expect(html.contains("id=\"reads-badly\""))
        let table = html.components(separatedBy: "id=\"reads-badly\"").last ?? ""
        #expect(!(table.components(separatedBy: "</table>").first ?? "").contains("<td>E2</td>"), "the healthy tag is not listed")
    }
}
