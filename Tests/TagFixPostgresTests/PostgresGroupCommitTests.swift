import Foundation
import TagFixCore
import TagFixStore
import TagFixTestDaemons
import Testing

@testable import TagFixPostgres

/// Tags A to F, as the groups below name them.
private let tags: [Character: TagUID] = Dictionary(
    uniqueKeysWithValues: zip("ABCDEF", (0..<6).map { try! TagUID(bytes: [0x04, 0x6A, 0x10, 0x00, 0x00, 0x3D, 0x80 + UInt8($0)]) }))

/// "A5" → tag A, counter 5, tag ID "TA".
private func tap(_ text: String) -> SUNCounterAcceptance {
    let name = text.first!
    return SUNCounterAcceptance(uid: tags[name]!, counter: UInt32(text.dropFirst())!, tagID: "T\(name)")
}

/// Counters stored before the groups, then groups committed one after another.
struct GroupScenario: Sendable, CustomTestStringConvertible {
    var name: String
    var stored: [String]
    var groups: [[String]]
    var testDescription: String { name }

    static let all = [
        GroupScenario(name: "duplicates in one group", stored: [], groups: [["A1", "A1", "B2", "A1", "B2", "B1", "C7", "C7"]]),
        GroupScenario(
            name: "replays, and a tag at its stored counter", stored: ["A5", "B3"], groups: [["A5", "A4", "B4", "A6", "B3", "A6"]]),
        GroupScenario(name: "new and old tags mixed", stored: ["A10", "D4"], groups: [["C1", "A11", "D2", "A9", "C1", "B1", "D5", "E0"]]),
        GroupScenario(
            name: "a tag raised three times in one group, lower counters between", stored: ["A2"],
            groups: [["A1", "A3", "A2", "A5", "B1", "A5", "A4", "B2", "A9"], ["A9", "A10", "B2", "B3"]]),
        GroupScenario(
            name: "groups one after another", stored: [],
            groups: [["A1", "B1"], ["A1", "B2"], ["B2", "A3", "A3"], ["C0"], ["C0", "A2", "F16777215"]]),
    ]
}

@Suite("a group's SUN counters in one statement: what is decided before the database is asked")
struct SUNCounterRoundsTests {
    @Test("a counter not above one earlier in the group for its tag is a replay; each further raise of a tag is a round of its own")
    func rounds() {
        let plan = SUNCounterRounds(["B7", "A1", "A1", "A3", "B7", "A2", "A4", "C0"].map(tap))
        #expect(plan.roundOfEach == [0, 0, nil, 1, nil, nil, 2, 0])
        // Each round in the UIDs' order, so two servers' groups take their rows' locks in one order.
        #expect(plan.rounds.map { $0.map(\.counter) } == [[1, 7, 0], [3], [4]], "each round in the UIDs' order")
        let raised: [Set<String>] = [[tags["A"]!.hex, tags["C"]!.hex], [], [tags["A"]!.hex]]
        #expect(plan.accepted(raised: raised) == [false, true, false, false, false, false, true, true])
    }

    @Test("a group of one tag each is one round")
    func oneRound() {
        #expect(SUNCounterRounds(["A1", "B1", "C9"].map(tap)).rounds.count == 1)
    }

    @Test("array literals: quotes and backslashes escaped, commas and braces kept inside quotes, an element cut at a NUL")
    func arrayLiterals() {
        #expect(PostgresArray.text(["a\"b", "c\\d", "e,f", "{}", "NULL", "", "x\0y"]) == #"{"a\"b","c\\d","e,f","{}","NULL","","x"}"#)
        #expect(PostgresArray.integers([0, 16_777_215]) == "{0,16777215}")
        #expect(PostgresArray.text([]) == "{}")
    }
}

@Suite("a group's SUN counters on PostgreSQL", .enabled(if: PrivatePostgres.available, "needs PostgreSQL (apt-get install postgresql)"))
struct PostgresGroupCommitTests {
    static func temporaryPath() -> String { NSTemporaryDirectory() + "pg-group-\(UUID().uuidString).sqlite" }

    @Test("the same verdicts as one by one, and as the SQLite store's group", arguments: GroupScenario.all)
    func sameAsOneByOne(_ scenario: GroupScenario) async throws {
        try await PostgresFixture.with { pg in
            try await pg.withCounters { store, db in
                let path = Self.temporaryPath()
                defer { try? FileManager.default.removeItem(atPath: path) }
                let sqlite = try SQLiteSUNCounters(path: path, create: true)
                let oneByOne = InMemorySUNCounters()
                for item in scenario.stored.map(tap) {
                    #expect(try await libpq { try store.accept(uid: item.uid, counter: item.counter, tagID: item.tagID) })
                    #expect(try sqlite.accept(uid: item.uid, counter: item.counter, tagID: item.tagID))
                    #expect(oneByOne.accept(uid: item.uid, counter: item.counter, tagID: item.tagID))
                }
                for group in scenario.groups {
                    let items = group.map(tap)
                    let expected = items.map { oneByOne.accept(uid: $0.uid, counter: $0.counter, tagID: $0.tagID) }
                    #expect(try await libpq { try store.acceptAll(items) } == expected, "\(group)")
                    #expect(try sqlite.acceptAll(items) == expected, "\(group)")
                }
                let rows = try await db.sql("SELECT uid, counter FROM sun_counter ORDER BY uid").rows
                let kept = tags.values.sorted { $0.hex < $1.hex }.compactMap { uid in
                    oneByOne.lastAccepted(uid: uid).map { [uid.hex, "\($0)"] }
                }
                #expect(rows == kept)
            }
        }
    }

    @Test("200 seeded random groups over 6 tags: the same verdicts as one by one, and the same stored counters and tag IDs")
    func randomGroups() async throws {
        try await PostgresFixture.with { pg in
            try await pg.withCounters { store, db in
                var random = SeededGenerator(seed: 35)
                let oneByOne = InMemorySUNCounters()
                var names: [TagUID: String] = [:]
                for round in 0..<200 {
                    let items = (0..<Int(random.next() % 12 + 1)).map { _ in
                        let name = Array("ABCDEF")[Int(random.next() % 6)]
                        return SUNCounterAcceptance(
                            uid: tags[name]!, counter: UInt32(random.next() % 8) + UInt32(round / 4), tagID: "T\(name)\(random.next() % 3)")
                    }
                    let expected = items.map { item in
                        let accepted = oneByOne.accept(uid: item.uid, counter: item.counter, tagID: item.tagID)
                        if accepted { names[item.uid] = item.tagID }
                        return accepted
                    }
                    #expect(try await libpq { try store.acceptAll(items) } == expected, "group \(round): \(items.map(\.counter))")
                }
                let rows = try await db.sql("SELECT uid, counter, tag_id FROM sun_counter ORDER BY uid").rows
                let kept = tags.values.sorted { $0.hex < $1.hex }.compactMap { uid in
                    oneByOne.lastAccepted(uid: uid).map { [uid.hex, "\($0)", names[uid]] }
                }
                #expect(rows == kept)
            }
        }
    }

    @Test("a group is one statement, one transaction, whatever its size, when no tag is raised twice in it; else one statement a raise")
    func oneStatement() async throws {
        try await PostgresFixture.with { pg in
            try await pg.withCounters { store, db in
                // A statement-level trigger counts the statements that insert into the table.
                try await db.sql("CREATE TABLE statements (at timestamptz DEFAULT clock_timestamp())")
                try await db.sql(
                    "CREATE FUNCTION count_statement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO statements DEFAULT VALUES; RETURN NULL; END $$"
                )
                try await db.sql(
                    "CREATE TRIGGER count_statement AFTER INSERT ON sun_counter FOR EACH STATEMENT EXECUTE FUNCTION count_statement()")
                let items = (0..<200).map { index in
                    SUNCounterAcceptance(
                        uid: try! TagUID(bytes: [0x04, 0x11, UInt8(index >> 8), UInt8(index & 0xFF), 0, 0, 1]), counter: 1,
                        tagID: "T\(index)")
                }
                let accepted = try await libpq { try store.acceptAll(items + items) }
                #expect(accepted == Array(repeating: true, count: 200) + Array(repeating: false, count: 200))
                #expect(try await db.sql("SELECT count(*) FROM statements").rows == [["1"]])
                #expect(try await db.sql("SELECT count(*), count(DISTINCT xmin::text) FROM sun_counter").rows == [["200", "1"]])
                let raisedTwice =
                    items.map { SUNCounterAcceptance(uid: $0.uid, counter: 2, tagID: $0.tagID) } + [
                        SUNCounterAcceptance(uid: items[0].uid, counter: 3, tagID: "T0")
                    ]
                #expect(try await libpq { try store.acceptAll(raisedTwice) } == Array(repeating: true, count: 201))
                #expect(try await db.sql("SELECT count(*) FROM statements").rows == [["3"]], "a statement for each of the two rounds")
                #expect(try await db.sql("SELECT count(DISTINCT xmin::text) FROM sun_counter").rows == [["1"]], "one transaction")
            }
        }
    }

    @Test("the last counters of many tags in one statement: what each tag's own read gives, a tag never accepted absent")
    func lastAcceptedOfMany() async throws {
        try await PostgresFixture.with { pg in
            try await pg.withCounters { store, _ in
                #expect(try await libpq { try store.acceptAll(["A3", "B1", "C7", "A5"].map(tap)) } == [true, true, true, true])
                let uids = Array(tags.values)
                let many = try await libpq { try store.lastAccepted(uids: uids + uids) }
                var one: [TagUID: UInt32] = [:]
                for uid in uids { one[uid] = try await libpq { try store.lastAccepted(uid: uid) } }
                #expect(many == one && many == [tags["A"]!: 5, tags["B"]!: 1, tags["C"]!: 7])
                #expect(try await libpq { try store.lastAccepted(uids: []) }.isEmpty)
            }
        }
    }

    @Test(
        "a group the server refuses part-way (a trigger raising 53100 on one row) accepts nothing and stores nothing, in one round or in several"
    )
    func refusedGroup() async throws {
        try await PostgresFixture.with { pg in
            try await pg.withCounters { store, db in
                #expect(try await libpq { try store.accept(uid: tags["A"]!, counter: 1, tagID: "TA") })
                try await db.sql(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.counter = 99 THEN RAISE EXCEPTION 'could not extend file' USING ERRCODE = '53100'; END IF; RETURN NEW; END $$"
                )
                try await db.sql("CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON sun_counter FOR EACH ROW EXECUTE FUNCTION refuse()")
                for group in [["B1", "A2", "C99"], ["A2", "B1", "A99"]] {
                    let items = group.map(tap)
                    await #expect {
                        try await libpq { try store.acceptAll(items) }
                    } throws: { error in
                        (error as? RegistryError)?.message.contains("53100") == true
                    }
                }
                #expect(
                    try await db.sql("SELECT uid, counter FROM sun_counter").rows == [[tags["A"]!.hex, "1"]], "nothing of either group")
                try await db.sql("DROP TRIGGER refuse ON sun_counter")
                #expect(try await libpq { try store.acceptAll(["B1", "A2", "A99"].map(tap)) } == [true, true, true])
            }
        }
    }

    @Test("tag IDs with quotes, backslashes, commas, braces, NULL, nothing, a NUL: stored as one by one stores them")
    func hostileTagIDs() async throws {
        try await PostgresFixture.with { pg in
            try await pg.withCounters { store, db in
                let names = ["a\"b", "c\\d", "e,f", "{g}", "NULL", "", "x\0y", "ü 🏷", "'; DROP TABLE sun_counter; --"]
                let uids = names.indices.map { try! TagUID(bytes: [0x04, 0x22, 0, 0, 0, 0, UInt8($0)]) }
                let moreUIDs = names.indices.map { try! TagUID(bytes: [0x04, 0x33, 0, 0, 0, 0, UInt8($0)]) }
                for (uid, name) in zip(uids, names) {
                    #expect(try await libpq { try store.accept(uid: uid, counter: 1, tagID: name) })
                }
                let group = zip(moreUIDs, names).map { SUNCounterAcceptance(uid: $0, counter: 1, tagID: $1) }
                #expect(try await libpq { try store.acceptAll(group) } == Array(repeating: true, count: names.count))
                let one = try await db.sql("SELECT tag_id FROM sun_counter WHERE uid LIKE '0422%' ORDER BY uid").rows
                let all = try await db.sql("SELECT tag_id FROM sun_counter WHERE uid LIKE '0433%' ORDER BY uid").rows
                #expect(one == all && one.count == names.count)
                #expect(all.last == ["'; DROP TABLE sun_counter; --"])
            }
        }
    }

    @Test(
        "two servers commit the same groups at once, tags in other orders: each counter is accepted by exactly one, and both commit"
    )
    func twoServersAtOnce() async throws {
        try await PostgresFixture.with { pg in
            let one = try await pg.counters()
            let two = try await pg.counters()
            var random = SeededGenerator(seed: 7)
            for round in 0..<30 {
                // The same taps at both servers, each in an order of its own; some tags twice.
                var items = (0..<6).map {
                    SUNCounterAcceptance(uid: tags[Array("ABCDEF")[$0]]!, counter: UInt32(2 * round + 1), tagID: "T")
                }
                items += [items[0], items[2]].map { SUNCounterAcceptance(uid: $0.uid, counter: $0.counter + 1, tagID: "T") }
                let first = items.shuffled(using: &random).sortedKeepingRaises()
                let second = items.shuffled(using: &random).sortedKeepingRaises()
                async let a = libpq { try one.acceptAll(first) }
                async let b = libpq { try two.acceptAll(second) }
                let (byOne, byTwo) = try await (a, b)
                var accepted: [SUNCounterAcceptance: Int] = [:]
                for (item, yes) in zip(first, byOne) where yes { accepted[item, default: 0] += 1 }
                for (item, yes) in zip(second, byTwo) where yes { accepted[item, default: 0] += 1 }
                #expect(accepted.count == items.count && accepted.values.allSatisfy { $0 == 1 }, "round \(round): \(accepted)")
            }
            await libpq {
                one.close()
                two.close()
            }
        }
    }
}

extension [SUNCounterAcceptance] {
    /// The taps with each tag's counters in rising order (as a tag's taps arrive), the tags mixed.
    fileprivate func sortedKeepingRaises() -> [SUNCounterAcceptance] {
        var byTag: [TagUID: [UInt32]] = [:]
        for item in self { byTag[item.uid, default: []].append(item.counter) }
        for key in byTag.keys { byTag[key]!.sort() }
        var next: [TagUID: Int] = [:]
        return map { item in
            let index = next[item.uid, default: 0]
            next[item.uid] = index + 1
            return SUNCounterAcceptance(uid: item.uid, counter: byTag[item.uid]![index], tagID: item.tagID)
        }
    }
}
