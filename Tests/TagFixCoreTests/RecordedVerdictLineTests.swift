import TagFixCore
import Testing

@Suite("A verdict's record encoded once")
struct RecordedVerdictLineTests {
    @Test("its line is the record's encoding", arguments: VerdictSamples.all.map(\.name))
    func line(_ name: String) throws {
        let verdict = try #require(VerdictSamples.all.first { $0.name == name }?.verdict)
        let recorded = RecordedVerdict(verdict)
        #expect(recorded.record == SessionRecord(verdict))
        #expect(recorded.line == SessionRecord(verdict).encoded())
    }
}
