import Foundation
import TagFixCore
import TagFixReport
import Testing

@Suite("The untrusted verdict in JSON, the log, the verdict line and the report")
struct UntrustedVerdictTests {
    @Test("--require-genuine on the example walk: scenario taps carry no originality check, so each is untrusted(signature_missing)")
    func requireGenuine() async throws {
        let log = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/untrusted.jsonl"
        let verify = await run(["verify", "--scenario", example, "--json", "--log", log, "--require-genuine"])
        #expect(verify.code == 0, "\(verify.err)")
        let objects = try verify.out.map { try JSONValue.parse($0) }
        let physical = objects.filter { $0["reason"]?.string != "not_physical_tag" && $0["verdict"]?.string != "disallowed" }
        #expect(!physical.isEmpty)
        for object in physical {
            #expect(object["verdict"]?.string == "untrusted")
            #expect(object["reason"]?.string == "signature_missing")
            #expect(object["message"]?.string?.contains("genuine tags are required") == true)
        }
        // The log reads back, and the report gives untrusted its own row and colour.
        let html = (log as NSString).deletingLastPathComponent + "/untrusted.html"
        let report = await run(["report", log, "--format", "html", "--output", html])
        #expect(report.code == 0, "\(report.err)")
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.contains("<tr class=\"untrusted\"><td>untrusted</td><td>\(physical.count)</td></tr>"))
        #expect(page.contains(".untrusted{color:\(SiteReport.colour("untrusted"))"))
        #expect(SiteReport.colour("untrusted") != SiteReport.colour("outside"))
        #expect(Set(SessionRecord.verdicts.map(SiteReport.colour)).count == SessionRecord.verdicts.count, "a colour of its own")
    }

    @Test("the verdict line shows ⚠ and the summary counts untrusted scans")
    func line() async throws {
        let verify = await run(["verify", "--scenario", example, "--require-genuine"])
        #expect(verify.code == 0, "\(verify.err)")
        #expect(verify.out.contains { $0.contains("⚠ untrusted") })
        #expect((verify.out + verify.err).contains { $0.contains(" untrusted") && $0.contains("scans:") })
    }

    @Test("--allow-unsigned-tags alone is a usage error (exit 64)")
    func allowAlone() async {
        #expect(await run(["verify", "--scenario", example, "--allow-unsigned-tags"]).code == 64)
    }
}
