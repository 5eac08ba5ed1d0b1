import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixStore
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixPostgres

@Suite("the reconnection backoff")
struct ReconnectBackoffTests {
    @Test("at once until an attempt fails; then 0.5 s, doubling after each further failure up to 10 s; a connection starts it over")
    func schedule() {
        var backoff = ReconnectBackoff()
        #expect(backoff.mayTry(at: .zero))
        backoff.attemptFailed(at: .seconds(1))
        #expect(!backoff.mayTry(at: .milliseconds(1499)) && backoff.mayTry(at: .milliseconds(1500)))
        var waits: [Duration] = []
        for failure in 2...8 {
            let now = Duration.seconds(100 * failure)
            backoff.attemptFailed(at: now)
            waits.append((backoff.retryAt ?? now) - now)
        }
        #expect(waits == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10), .seconds(10)])
        backoff.connected()
        #expect(backoff.mayTry(at: .zero) && backoff.failures == 0)
    }
}

/// Lines a store said, in order.
final class Said: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func add(_ line: String) { lines.withLock { $0.append(line) } }
}

/// The SUN read counters and the registry on a real PostgreSQL (a private cluster per test).
@Suite("shared state on PostgreSQL", .enabled(if: PrivatePostgres.available, "needs PostgreSQL (apt-get install postgresql)"))
struct PostgresStateTests {
    static let uid = try! TagUID(hex: "04DE5F1EACC040")

    @Test("a counter is accepted only when it rises, by whichever of two stores on one database; each is durable at once")
    func countersRiseOnce() async throws {
        try await PostgresFixture.with { pg in
            try await pg.withCounters { one, db in
                let two = try await pg.counters()
                #expect(try await libpq { try one.lastAccepted(uid: Self.uid) } == nil)
                #expect(try await libpq { try one.accept(uid: Self.uid, counter: 3, tagID: "T01") })
                #expect(
                    try await libpq { try !two.accept(uid: Self.uid, counter: 3, tagID: "T01") },
                    "the same URL at the other server: a replay")
                #expect(try await libpq { try !two.accept(uid: Self.uid, counter: 2, tagID: "T01") }, "a lower counter: a replay")
                #expect(try await libpq { try two.lastAccepted(uid: Self.uid) } == 3)
                #expect(try await libpq { try two.accept(uid: Self.uid, counter: 4, tagID: "T01") })
                #expect(try await libpq { try one.lastAccepted(uid: Self.uid) } == 4)
                #expect(try await db.sql("SELECT uid, counter, tag_id FROM sun_counter").rows == [["04DE5F1EACC040", "4", "T01"]])
                #expect(try await db.sql("SELECT version FROM tagfix_schema WHERE name = 'state'").rows == [["1"]])
                await libpq { two.close() }
            }
        }
    }

    @Test("the same counter accepted by 8 stores at once: exactly one accepts it")
    func raceAcceptsOnce() async throws {
        try await PostgresFixture.with { pg in
            var stores: [PostgresSUNCounters] = []
            for _ in 0..<8 { stores.append(try await pg.counters()) }
            for counter in UInt32(1)...5 {
                let accepted = await withTaskGroup(of: Bool.self) { group in
                    for store in stores {
                        group.addTask { await libpq { (try? store.accept(uid: Self.uid, counter: counter, tagID: "T01")) ?? false } }
                    }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(accepted == 1, "counter \(counter)")
            }
            let all = stores
            await libpq { for store in all { store.close() } }
        }
    }

    @Test(
        "the database killed: a tap's counter is neither read nor accepted (an error, never a yes), one line says why; started again, the next tap is accepted on a new connection"
    )
    func databaseKilled() async throws {
        try await PostgresFixture.with { pg in
            let server = pg.server
            let said = Said()
            let clock = ManualClock()
            let store = try await pg.counters(clock: clock, report: { said.add($0) })
            #expect(try await libpq { try store.accept(uid: Self.uid, counter: 1, tagID: "T01") })
            await server.kill()
            let failed = await libpq { () -> RegistryError? in
                do throws(RegistryError) {
                    _ = try store.lastAccepted(uid: Self.uid)
                    _ = try store.accept(uid: Self.uid, counter: 2, tagID: "T01")
                    return nil
                } catch {
                    return error
                }
            }
            let error = try #require(failed, "a store whose database is gone answered")
            #expect(error.message.contains("cannot be read or committed") && error.message.contains(server.address))
            #expect(said.all.count == 1, "\(said.all)")
            #expect(said.all.first?.contains("the SUN read counters in postgresql://tagfix@127.0.0.1") == true, "\(said.all)")
            #expect(!said.all.joined().contains(server.password))
            // Within the backoff: no attempt, no new line, an error at once.
            #expect(await libpq { (try? store.accept(uid: Self.uid, counter: 3, tagID: "T01")) == nil })
            #expect(said.all.count == 1, "\(said.all)")
            try await server.start()
            clock.advance(by: .seconds(1))
            #expect(try await libpq { try store.accept(uid: Self.uid, counter: 4, tagID: "T01") })
            #expect(said.all.last?.contains("answer again") == true, "\(said.all)")
            #expect(try await libpq { try store.lastAccepted(uid: Self.uid) } == 4, "counters 2 and 3 were never accepted")
            await libpq { store.close() }
        }
    }

    @Test(
        "a commit the server refuses (a trigger raising 53100, as a full disk would) is an error and one line, never an accept; once it commits again, so do taps"
    )
    func commitRefused() async throws {
        let said = Said()
        try await PostgresFixture.with { pg in
            try await pg.withCounters(report: { said.add($0) }) { store, db in
                #expect(try await libpq { try store.accept(uid: Self.uid, counter: 1, tagID: "T01") })
                try await db.sql(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = '53100'; END $$"
                )
                try await db.sql("CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON sun_counter FOR EACH ROW EXECUTE FUNCTION refuse()")
                await #expect {
                    try await libpq { try store.accept(uid: Self.uid, counter: 2, tagID: "T01") }
                } throws: { error in
                    (error as? RegistryError)?.message.contains("53100") == true
                }
                #expect(said.all.count == 1 && said.all.first?.contains("could not extend file") == true, "\(said.all)")
                #expect(try await libpq { try store.lastAccepted(uid: Self.uid) } == 1, "counter 2 was not accepted")
                try await db.sql("DROP TRIGGER refuse ON sun_counter")
                #expect(try await libpq { try store.accept(uid: Self.uid, counter: 3, tagID: "T01") })
                #expect(said.all.last?.contains("answer again") == true, "\(said.all)")
            }
        }
    }

    @Test(
        "a connection the server dropped (pg_terminate_backend, as a restart or a proxy does) is made again at once: the next tap is read and accepted"
    )
    func connectionDropped() async throws {
        let said = Said()
        try await PostgresFixture.with { pg in
            try await pg.withCounters(report: { said.add($0) }) { store, db in
                #expect(try await libpq { try store.accept(uid: Self.uid, counter: 1, tagID: "T01") })
                let ended = try await db.sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tagfix state'")
                #expect(ended.rows == [["t"]])
                #expect(try await libpq { try store.lastAccepted(uid: Self.uid) } == 1, "read again on a new connection")
                #expect(try await libpq { try store.accept(uid: Self.uid, counter: 2, tagID: "T01") })
                #expect(said.all.isEmpty, "nothing to say: the tap never failed: \(said.all)")
            }
        }
    }

    @Test("a statement the server ends (statement_timeout: the row locked by another session) is an error, never an accept")
    func statementTimeout() async throws {
        try await PostgresFixture.with { pg in
            try await pg.withCounters { store, db in
                #expect(try await libpq { try store.accept(uid: Self.uid, counter: 1, tagID: "T01") })
                try await db.sql("BEGIN")
                try await db.sql("SELECT counter FROM sun_counter WHERE uid = $1 FOR UPDATE", [Self.uid.hex])
                await #expect {
                    try await libpq { try store.accept(uid: Self.uid, counter: 2, tagID: "T01") }
                } throws: { error in
                    (error as? RegistryError)?.message.contains("57014") == true
                }
                try await db.sql("ROLLBACK")
                #expect(try await libpq { try store.accept(uid: Self.uid, counter: 3, tagID: "T01") })
            }
        }
    }

    @Test("a state a newer TagFix wrote is refused and left as it is")
    func newerSchema() async throws {
        try await PostgresFixture.with { pg in
            let first = try await pg.counters()
            await libpq { first.close() }
            let db = try await pg.session()
            try await db.sql("UPDATE tagfix_schema SET version = 7 WHERE name = 'state'")
            await #expect(throws: PostgresError.newerSchema(found: 7, known: PostgresSUNCounters.schemaVersion)) {
                try await pg.counters()
            }
            #expect(try await db.sql("SELECT version FROM tagfix_schema WHERE name = 'state'").rows == [["7"]])
            await libpq { db.close() }
        }
    }
}
