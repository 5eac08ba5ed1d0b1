import TagFixCore
import Testing

@Suite("Read health")
struct ReadHealthTests {
    func reads(_ count: Int, attempts: Int = 1, rf: Int = 0, ms: Double = 20, completed: Bool = true) -> [ReadEffort] {
        (0..<count).map { _ in ReadEffort(attempts: attempts, rfErrors: rf, duration: .milliseconds(ms), completed: completed) }
    }

    @Test("ten clean reads: healthy, with its success rate, retries, RF errors and read times")
    func healthy() {
        let health = ReadHealth(reads(9) + [ReadEffort(attempts: 1, rfErrors: 0, duration: .milliseconds(31))])
        #expect(health.reads == 10 && health.completed == 10)
        #expect(health.successRate == 1 && health.retries == 0 && health.rfErrors == 0)
        #expect(health.medianReadTime == .milliseconds(20))
        #expect(health.slowestReadTime == .milliseconds(31))
        #expect(health.problems().isEmpty)
        #expect(!health.isWeak())
        #expect(health.summary == "10 of 10 reads, 0 retries, 0 RF errors, 20 ms a read")
    }

    @Test("one failed read in ten is weak at enrolment")
    func failedRead() {
        let health = ReadHealth(reads(9) + reads(1, attempts: 3, rf: 3, completed: false))
        #expect(health.successRate == 0.9)
        #expect(health.problems().contains(.failedReads(failed: 1, of: 10)))
        #expect(health.isWeak())
        // A session log holds no failed taps: its limits do not ask for every read.
        #expect(!ReadHealth(reads(9)).isWeak(.taps))
    }

    @Test("one retry in ten reads is a hand that moved; two are a weak tag")
    func retries() {
        #expect(!ReadHealth(reads(9) + reads(1, attempts: 2, rf: 1)).isWeak())
        let two = ReadHealth(reads(8) + reads(2, attempts: 2, rf: 1))
        #expect(two.problems().contains(.retries(2, reads: 10)))
    }

    @Test("the RF error every read of a chip has (an Ultralight's refused probe) is not held against it; errors beyond it are")
    func excessRFErrors() {
        let ultralight = ReadHealth(reads(10, rf: 1))
        #expect(ultralight.rfErrors == 10 && ultralight.fewestRFErrors == 1 && ultralight.excessRFErrors == 0)
        #expect(!ultralight.isWeak())
        let weak = ReadHealth(reads(7) + reads(3, rf: 1))
        #expect(weak.excessRFErrors == 3)
        #expect(weak.problems() == [.rfErrors(excess: 3, reads: 10)])
        #expect(!ReadHealth(reads(9) + reads(1, rf: 1)).isWeak(), "one glitch in ten")
    }

    @Test("a slow read: median above half a second")
    func slow() {
        #expect(ReadHealth(reads(10, ms: 700)).problems() == [.slow(median: .milliseconds(700))])
        #expect(!ReadHealth(reads(10, ms: 400)).isWeak())
    }

    @Test("no reads: nothing to hold against the tag")
    func empty() {
        let health = ReadHealth([ReadEffort]())
        #expect(health.reads == 0 && health.successRate == 1 && !health.isWeak())
    }
}

@Suite("Session records: the read's health")
struct SessionRecordReadTests {
    static let old =
        #"{"time":"2026-05-14T08:00:00.000Z","verdict":"confirmed","message":"ok","uid":"04112233445566","tag_type":"ntag213","interpolated":false}"#

    @Test("an old record (no read) decodes, and encodes to the same bytes")
    func oldRecord() throws {
        let record = try SessionRecord(try JSONValue.parse(Self.old), line: 1)
        #expect(record.read == nil)
        #expect(!record.encoded().contains("\"read\""))
        #expect(try SessionRecord(try JSONValue.parse(record.encoded()), line: 1) == record)
    }

    @Test("a record with its read round-trips; the read comes last")
    func roundTrip() throws {
        var record = try SessionRecord(try JSONValue.parse(Self.old), line: 1)
        record.read = ReadEffort(attempts: 2, rfErrors: 3, duration: .milliseconds(41.5))
        let line = record.encoded()
        #expect(line.hasSuffix(#","read":{"attempts":2,"rf_errors":3,"time_ms":41.5}}"#), "\(line)")
        let back = try SessionRecord(try JSONValue.parse(line), line: 1)
        #expect(back.read == record.read)
    }

    @Test(
        "a broken read is an error naming the line, never a crash",
        arguments: [#"{"attempts":0}"#, #"{"attempts":1,"rf_errors":-1}"#, #"{"attempts":"x"}"#, #"{"attempts":1,"time_ms":-5}"#])
    func broken(_ read: String) throws {
        let text = String(Self.old.dropLast()) + #","read":"# + read + "}"
        #expect(throws: DataFileError.self) { try SessionRecord(try JSONValue.parse(text), line: 7) }
    }
}
