import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import Testing

/// A trivial in-memory sink, added through the public seam alone: it keeps what it receives and,
/// for each verdict, how many records the session log held at that moment.
private final class RecordingSink: VerdictSink {
    struct Seen: Sendable, Hashable {
        var uid: String
        var logged: [String]
    }

    let logPath: String?
    private let seen = Mutex<[Seen]>([])
    private let events = Mutex<[String]>([])
    private let finished = Mutex(false)

    init(logPath: String?) { self.logPath = logPath }

    var received: [Seen] { seen.withLock { $0 } }
    var observed: [String] { events.withLock { $0 } }
    var isFinished: Bool { finished.withLock { $0 } }

    func receive(_ verdict: Verdict, now: Timestamp?) {
        let logged = logPath.flatMap { try? SessionLog.read(path: $0) }?.records.compactMap { $0.value["uid"]?.string } ?? []
        seen.withLock { $0.append(Seen(uid: verdict.scan.uid.hex, logged: logged)) }
    }

    func observe(_ event: VerifierEvent, now: Timestamp?) {
        events.withLock { $0.append("\(event)") }
    }

    func finish() { finished.withLock { $0 = true } }
}

/// A sink that fails every verdict.
private struct FailingSink: VerdictSink {
    var isDurable: Bool
    func receive(_ verdict: Verdict, now: Timestamp?) throws(VerdictSinkError) {
        throw VerdictSinkError(sink: isDurable ? "a durable test sink" : "a test sink", message: "the test says no")
    }
}

@Suite("The sink seam: verdicts go to the log first, then to every sink, in order")
struct VerdictSinkTests {
    static func verdicts(_ count: Int) throws -> [Verdict] {
        let start = Timestamp(iso8601: "2026-05-14T08:00:00Z")!
        return try (0..<count).map { index in
            let uid = try TagUID(bytes: [0x04, 0xA2, 0x24, 0xB2, 0xC5, 0x64, UInt8(index)])
            let scan = TagScan(readerID: "r", uid: uid, tagType: .ntag213, url: nil, time: start.advanced(by: .seconds(index)))
            guard case .decided(let verdict) = Verifier(registry: InMemoryRegistry()).expectation(for: scan) else {
                throw VerdictSinkError(sink: "test", message: "a scan without a URL or an entry is decided at once")
            }
            return verdict
        }
    }

    static func temporaryLog() -> String {
        NSTemporaryDirectory() + "tagfix-sink-\(UUID().uuidString).jsonl"
    }

    @Test("an in-memory sink added through the public seam gets every verdict, in order, each after the log has it")
    func afterTheLog() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = try SessionLog(path: path)
        let recording = RecordingSink(logPath: path)
        // Given before the log: the fan-out still hands the log each verdict first.
        let fanOut = VerdictFanOut([recording, SessionLogSink(log)])
        let verdicts = try Self.verdicts(5)
        for verdict in verdicts { fanOut.send(.verdict(verdict)) }
        fanOut.send(.gps(.resumed))
        fanOut.finish()
        let uids = verdicts.map(\.scan.uid.hex)
        #expect(recording.received.map(\.uid) == uids, "every verdict, in order")
        for (index, seen) in recording.received.enumerated() {
            #expect(seen.logged == Array(uids.prefix(index + 1)), "verdict \(index) was on the disk before the sink saw it")
        }
        #expect(recording.observed.count == 1)
        #expect(recording.isFinished)
        #expect(try SessionLog.read(path: path).records.count == 5)
        #expect(fanOut.stopped == nil)
    }

    @Test("the log written through the fan-out decodes to the verdicts that went in")
    func logDecodes() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = try SessionLog(path: path)
        let fanOut = VerdictFanOut([SessionLogSink(log)])
        let verdicts = try Self.verdicts(3)
        for verdict in verdicts { fanOut.send(.verdict(verdict)) }
        let records = try SessionLog.read(path: path).records.map { try SessionRecord($0.value, line: $0.line) }
        #expect(records.map(\.uid) == verdicts.map(\.scan.uid.hex))
        #expect(records.allSatisfy { $0.verdict == "notRegistered" })
    }

    @Test("a durable sink that fails stops the fan-out: the failing verdict and every later one reach no other sink")
    func durableFailure() throws {
        let recording = RecordingSink(logPath: nil)
        let failures = Mutex<[VerdictSinkFailure]>([])
        let fanOut = VerdictFanOut([recording, FailingSink(isDurable: true)]) { failure in failures.withLock { $0.append(failure) } }
        for verdict in try Self.verdicts(3) { fanOut.send(.verdict(verdict)) }
        #expect(recording.received.isEmpty)
        #expect(fanOut.stopped?.sink == "a durable test sink")
        #expect(failures.withLock { $0.count } == 1, "said once")
        fanOut.send(.gps(.resumed))
        #expect(recording.observed.count == 1, "device events still reach the sinks")
    }

    @Test("a sink that is not durable and fails is dropped; the log and the other sinks go on")
    func laterFailure() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recording = RecordingSink(logPath: nil)
        let failures = Mutex<[VerdictSinkFailure]>([])
        let fanOut = VerdictFanOut([SessionLogSink(try SessionLog(path: path)), FailingSink(isDurable: false), recording]) { failure in
            failures.withLock { $0.append(failure) }
        }
        for verdict in try Self.verdicts(3) { fanOut.send(.verdict(verdict)) }
        #expect(recording.received.count == 3)
        #expect(try SessionLog.read(path: path).records.count == 3)
        #expect(fanOut.stopped == nil)
        let said = failures.withLock { $0 }
        #expect(said.count == 1)
        guard case .dropped(let error)? = said.first else {
            Issue.record("expected the failing sink to be dropped, got \(said)")
            return
        }
        #expect(error.sink == "a test sink")
    }

    @Test("the tally counts the verdicts the log took")
    func tally() throws {
        let tally = TallySink()
        let fanOut = VerdictFanOut([tally])
        for verdict in try Self.verdicts(2) { fanOut.send(.verdict(verdict)) }
        #expect(tally.counts.summary == "2 scans: 2 not registered")
    }
}
