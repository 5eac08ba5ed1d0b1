import TagFixCore
import TagFixReport
import Testing

@Suite("Report: tags that read badly")
struct ReadHealthReportTests {
    func tap(_ tag: String, _ second: Int, attempts: Int = 1, rf: Int = 0) throws -> SessionRecord {
        let read = #","read":{"attempts":\#(attempts),"rf_errors":\#(rf),"time_ms":12.5}"#
        let line =
            #"{"time":"2026-05-14T08:00:\#(10 + second).000Z","verdict":"confirmed","message":"m","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"\#(tag)","interpolated":false"#
            + read + "}"
        return try SessionRecord(try JSONValue.parse(line), line: second + 1)
    }

    func enrolled(weak: Bool, fewest: Int = 0) -> EnrolledReadHealth {
        EnrolledReadHealth(
            health: ReadHealth(reads: 10, completed: 10, attempts: 10, rfErrors: fewest * 10, fewestRFErrors: fewest),
            weak: weak, at: Timestamp(nanosecondsSinceEpoch: 0))
    }

    @Test("taps with retries or RF errors beyond the tag's best read are listed, clean taps are not")
    func fromTaps() throws {
        let records = [
            try tap("GOOD", 0), try tap("GOOD", 1), try tap("BAD", 2, attempts: 2, rf: 1), try tap("BAD", 3, rf: 2), try tap("BAD", 4),
        ]
        let report = SiteReport(records: records)
        #expect(report.weakReaders.map(\.key) == ["BAD"])
        let bad = try #require(report.weakReaders.first)
        #expect(bad.taps?.retries == 1 && bad.taps?.rfErrors == 3)
        #expect(bad.tapProblems.contains(.retries(1, reads: 3)))
        let html = report.html()
        #expect(html.contains("<table id=\"reads-badly\">"))
        #expect(html.contains("on-metal tag"))
    }

    @Test("one tap is weighed against the enrolment's reads: an Ultralight's one error a read is not held against it")
    func againstEnrolment() throws {
        var report = SiteReport(records: [try tap("UL", 0, rf: 1), try tap("NT", 1, rf: 1)])
        report.enrolledReadHealth = ["UL": enrolled(weak: false, fewest: 1), "NT": enrolled(weak: false)]
        #expect(report.weakReaders.map(\.key) == ["NT"], "NT read clean at enrolment: its tap's RF error is new")
    }

    @Test("a tag enrolled weak is listed even without taps; none listed says None")
    func enrolledWeak() throws {
        var report = SiteReport(records: [try tap("A", 0)])
        #expect(report.weakReaders.isEmpty)
        #expect(report.html().contains("<h2>Tags that read badly</h2>\n<p>None.</p>"))
        report.enrolledReadHealth = ["A": enrolled(weak: true)]
        #expect(report.weakReaders.map(\.key) == ["A"])
        #expect(report.weakReaders.first?.enrolment?.weak == true)
    }
}
