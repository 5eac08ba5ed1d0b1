import Foundation
import TagFixCore
import Testing

@testable import TagFixStore

/// `SQLiteSUNCounters.acceptAll`: the counters of phone taps that arrived together, in one transaction.
@Suite struct SUNCounterGroupTests {
    static let uid = try! TagUID(hex: "04DE5F1EACC040")
    static let other = try! TagUID(hex: "04A1B2C3D4E5F6")

    static func temporaryPath() -> String { NSTemporaryDirectory() + "ctr-group-\(UUID().uuidString).sqlite" }

    @Test("each counter as accept would take it, in order, and all of them kept")
    func inOrder() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let counters = try SQLiteSUNCounters(path: path, create: true)
        #expect(try counters.accept(uid: Self.uid, counter: 3, tagID: "T1"))
        let accepted = try counters.acceptAll([
            SUNCounterAcceptance(uid: Self.uid, counter: 5, tagID: "T1"), SUNCounterAcceptance(uid: Self.uid, counter: 6, tagID: "T1"),
            SUNCounterAcceptance(uid: Self.uid, counter: 6, tagID: "T1"), SUNCounterAcceptance(uid: Self.other, counter: 1, tagID: "T2"),
            SUNCounterAcceptance(uid: Self.uid, counter: 2, tagID: "T1"),
        ])
        #expect(accepted == [true, true, false, true, false])
        let reopened = try SQLiteSUNCounters(path: path, create: false)
        #expect(try reopened.lastAccepted(uid: Self.uid) == 6)
        #expect(try reopened.lastAccepted(uid: Self.other) == 1)
    }

    @Test(
        "two stores on one file: a counter the other took passes this one's check (kept in memory, never above the file's) and is refused by the upsert, a replay; the file's counter is read again"
    )
    func anotherWriter() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let counters = try SQLiteSUNCounters(path: path, create: true)
        let other = try SQLiteSUNCounters(path: path, create: false)
        #expect(try counters.accept(uid: Self.uid, counter: 5, tagID: "T1"))
        #expect(try other.accept(uid: Self.uid, counter: 7, tagID: "T1"))
        #expect(try counters.lastAccepted(uid: Self.uid) == 5, "what this store took, kept: the file is not read for it")
        #expect(try !counters.accept(uid: Self.uid, counter: 6, tagID: "T1"), "6 is a replay: the other store took 7")
        #expect(try counters.lastAccepted(uid: Self.uid) == 7, "read again after the refusal")
        #expect(
            try counters.acceptAll([
                SUNCounterAcceptance(uid: Self.uid, counter: 7, tagID: "T1"), SUNCounterAcceptance(uid: Self.uid, counter: 8, tagID: "T1"),
            ]) == [false, true])
        #expect(try SQLiteSUNCounters(path: path, create: false).lastAccepted(uid: Self.uid) == 8)
        #expect(try !other.accept(uid: Self.uid, counter: 8, tagID: "T1"), "the other store's kept 7 does not let 8 in twice")
    }

    @Test("a group that fails part way (the disk refuses a row) is rolled back whole: none of its counters kept, and the store goes on")
    func failureRollsBack() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let counters = try SQLiteSUNCounters(path: path, create: true)
        // The second row is refused, as a full disk would refuse it, after the first was written.
        let db = try SQLiteConnection(path: path, mode: .readWrite)
        try db.execute(
            """
            CREATE TRIGGER refuse BEFORE INSERT ON sun_counter WHEN NEW.uid = '\(Self.other.hex)'
            BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END
            """)
        #expect {
            _ = try counters.acceptAll([
                SUNCounterAcceptance(uid: Self.uid, counter: 5, tagID: "T1"),
                SUNCounterAcceptance(uid: Self.other, counter: 1, tagID: "T2"),
            ])
        } throws: { error in
            "\(error)".contains("disk is full")
        }
        #expect(try counters.lastAccepted(uid: Self.uid) == nil, "the first row was rolled back with the group")
        try db.execute("DROP TRIGGER refuse")
        #expect(
            try counters.acceptAll([
                SUNCounterAcceptance(uid: Self.uid, counter: 5, tagID: "T1"),
                SUNCounterAcceptance(uid: Self.other, counter: 1, tagID: "T2"),
            ]) == [true, true])
    }
}
