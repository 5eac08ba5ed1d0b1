import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import Testing

/// A sink that keeps, for each verdict it receives, the UIDs the session log held at that moment.
private final class LogWatchingSink: VerdictSink {
    let logPath: String
    private let seen = Mutex<[(uid: String, logged: [String])]>([])

    init(logPath: String) { self.logPath = logPath }

    var received: [(uid: String, logged: [String])] { seen.withLock { $0 } }

    func receive(_ verdict: Verdict, now: Timestamp?) {
        let logged = (try? SessionLog.read(path: logPath))?.records.compactMap { $0.value["uid"]?.string } ?? []
        seen.withLock { $0.append((verdict.scan.uid.hex, logged)) }
    }
}

/// A sink, not durable, that fails every verdict.
private struct GroupFailingSink: VerdictSink {
    func receive(_ verdict: Verdict, now: Timestamp?) throws(VerdictSinkError) {
        throw VerdictSinkError(sink: "a test sink", message: "the test says no")
    }
}

@Suite("Verdicts decided together: the log keeps them with one write and one fsync, before any other sink sees one")
struct GroupedLogTests {
    static func temporaryLog() -> String { NSTemporaryDirectory() + "tagfix-group-\(UUID().uuidString).jsonl" }

    @Test("the group's records are all on the disk, in order, before the first goes to another sink; the sender is told in between")
    func allLoggedFirst() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = try SessionLog(path: path)
        let watching = LogWatchingSink(logPath: path)
        let fanOut = VerdictFanOut([watching, SessionLogSink(log)])
        let verdicts = try VerdictSinkTests.verdicts(4)
        fanOut.send(.verdict(verdicts[0]))
        // Told once the log has the group, before the other sink has taken any of it.
        var told: [(kept: Bool, shown: Int, logged: Int)] = []
        #expect(
            fanOut.send(verdicts: Array(verdicts.dropFirst())) { kept in
                told.append((kept, watching.received.count, (try? SessionLog.read(path: path).records.count) ?? -1))
            })
        #expect(told.count == 1)
        #expect(told.first.map { $0.kept && $0.shown == 1 && $0.logged == 4 } == true, "\(told)")
        let uids = verdicts.map(\.scan.uid.hex)
        #expect(watching.received.map(\.uid) == uids)
        #expect(watching.received[0].logged == [uids[0]])
        for seen in watching.received.dropFirst() {
            #expect(seen.logged == uids, "the whole group was logged before \(seen.uid) was shown")
        }
        #expect(try SessionLog.read(path: path).records.count == 4)
    }

    @Test("lines appended together read back as the records appended one by one")
    func sameBytes() throws {
        let (one, together) = (Self.temporaryLog(), Self.temporaryLog())
        defer { for path in [one, together] { try? FileManager.default.removeItem(atPath: path) } }
        let lines = try VerdictSinkTests.verdicts(3).map { SessionRecord($0).encoded() }
        let single = try SessionLog(path: one)
        for line in lines { try single.append(line) }
        try SessionLog(path: together).append(contentsOf: lines)
        #expect(try Data(contentsOf: URL(fileURLWithPath: one)) == Data(contentsOf: URL(fileURLWithPath: together)))
    }

    @Test("a sink that is not durable and fails on a group is dropped; the log keeps the group, the other sinks get every verdict")
    func failingSinkDropped() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let watching = LogWatchingSink(logPath: path)
        let told = Mutex<[VerdictSinkFailure]>([])
        let fanOut = VerdictFanOut(
            [SessionLogSink(try SessionLog(path: path)), GroupFailingSink(), watching],
            onFailure: { failure in told.withLock { $0.append(failure) } })
        #expect(fanOut.send(verdicts: try VerdictSinkTests.verdicts(3)))
        #expect(fanOut.send(verdicts: try VerdictSinkTests.verdicts(2)))
        #expect(watching.received.count == 5)
        #expect(try SessionLog.read(path: path).records.count == 5)
        #expect(told.withLock { $0.count } == 1, "dropped once, told once")
        #expect(fanOut.stopped == nil)
    }

    @Test("a log on a full disk: the group is refused whole, no other sink sees any of it, the session stops")
    func fullDisk() throws {
        let log = try SessionLog(path: "/dev/full")
        defer { log.close() }
        #expect {
            try log.append(contentsOf: ["{}", "{}"])
        } throws: { error in
            (error as? SessionLogError)?.errno == ENOSPC && "\(error)".contains("free some space")
        }
        let watching = LogWatchingSink(logPath: "/dev/null")
        let told = Mutex<[VerdictSinkFailure]>([])
        let fanOut = VerdictFanOut([SessionLogSink(log), watching], onFailure: { failure in told.withLock { $0.append(failure) } })
        var kept: [Bool] = []
        #expect(!fanOut.send(verdicts: try VerdictSinkTests.verdicts(3)) { kept.append($0) })
        #expect(kept == [false])
        #expect(watching.received.isEmpty)
        #expect(fanOut.stopped != nil)
        #expect(told.withLock { $0.count } == 1)
        // Stopped: a later group is refused too, and still reaches nobody.
        #expect(!fanOut.send(verdicts: try VerdictSinkTests.verdicts(1)) { kept.append($0) })
        #expect(kept == [false, false])
        #expect(watching.received.isEmpty)
    }
}
