import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixPostgres
import TagFixStore
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixMQTT

/// What a collector said, line by line.
final class Notes: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
    func clear() { lines.withLock { $0 = [] } }
}

/// A store that counts its tries: how a test sees the collector wait between them.
final class CountingStore: FleetVerdictStore {
    let inner: PostgresFleetStore
    let tries = Atomic<Int>(0)
    init(_ inner: PostgresFleetStore) { self.inner = inner }
    var location: String { inner.location }
    func store(_ messages: [FleetStore.Stored], receivedNanoseconds: Int64) throws -> [Bool] {
        tries.add(1, ordering: .relaxed)
        return try inner.store(messages, receivedNanoseconds: receivedNanoseconds)
    }
    func replacePlacements(sites: Set<String>, with placements: [FleetStore.Placement], loadedNanoseconds: Int64) throws {
        try inner.replacePlacements(sites: sites, with: placements, loadedNanoseconds: loadedNanoseconds)
    }
    func placements() throws -> [FleetStore.Placement] { try inner.placements() }
    func all() throws -> [FleetStore.Stored] { try inner.all() }
    func count() throws -> Int { try inner.count() }
}

/// The collector against a PostgreSQL that fails in each way a real one does: a private cluster
/// and a private mosquitto per test. Each fault: nothing is acknowledged before it is committed
/// (the broker keeps it), the batch is tried again with growing waits on the collector's clock
/// (never in a tight loop), the failure is said in one line, and every verdict ends up stored once.
@Suite(
    "the collector and a PostgreSQL that fails",
    .enabled(if: haveBroker && PrivatePostgres.available, "needs mosquitto, mosquitto-clients and PostgreSQL"))
struct CollectorPostgresFaultTests {
    /// Publishes verdicts `ids` (QoS 1) with mosquitto_pub, each its own message.
    static func publish(_ broker: PrivateMosquitto, _ ids: ClosedRange<Int>) async throws {
        let verdicts = try exampleVerdicts()
        for index in ids {
            let payload = FleetMessage.payload(
                line: Array(SessionRecord(verdicts[index % verdicts.count]).encoded().utf8), id: "pi:0123456789abcdef:\(index)",
                device: "pi")
            let sent = try await TestProgram.run(
                "/usr/bin/mosquitto_pub",
                [
                    "-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", "tagfix/harbour/verdict/T\(index)", "-m",
                    String(decoding: payload, as: UTF8.self),
                ])
            #expect(sent.status == 0, "\(sent.err)")
        }
    }

    static func ids(_ range: ClosedRange<Int>) -> [String] { range.map { "pi:0123456789abcdef:\($0)" }.sorted() }

    /// The stored ids, as another session reads them (nil while it cannot); libpq blocks, so on a
    /// thread of its own.
    static func stored(_ admin: PostgresConnection) async -> [String]? {
        await offThePool { (try? admin.execute("SELECT id FROM fleet_verdict ORDER BY id"))?.rows.map { $0[0] ?? "" } }
    }

    /// `admin.execute(sql)` on a thread of its own (libpq blocks).
    static func sql(_ admin: PostgresConnection, _ text: String) async throws(PostgresError) {
        _ = try await offThePool { () throws(PostgresError) in try admin.execute(text) }
    }

    /// A collector with client id `id` on `broker`, storing into `store`, on `clock`.
    static func collector<C: Clock>(
        _ broker: PrivateMosquitto, store: any FleetVerdictStore, id: String, clock: C, notes: Notes, subscribed: Bool = true
    ) async throws -> FleetCollector where C.Instant == Timestamp {
        let settings = try MQTTSettings.parse(
            address: "mqtt://127.0.0.1:\(broker.port)/tagfix", passwordFile: nil, caFile: nil, version: nil, clientID: id)
        let collector = try FleetCollector(
            settings: settings, group: nil, store: store, clock: clock, note: { notes.append($0) })
        collector.start()
        if subscribed { #expect(await eventually { collector.counts.subscriptions >= 1 }, "the collector never subscribed") }
        return collector
    }

    /// What the collector said beyond connecting and subscribing.
    static func said(_ notes: Notes) -> [String] { notes.all.filter { !$0.hasPrefix("subscribed to") } }

    @Test(
        "a statement timeout (the collector's INSERT waits on a lock another session holds): the batch is tried again, stored once, and said in one line"
    )
    func statementTimeout() async throws {
        try await PrivatePostgres.with { server in
            try await PrivateMosquitto.with { broker in
                let address = try PostgresAddress(server.address)
                let admin = try await offThePool { try PostgresConnection(address, password: server.password) }
                _ = try await offThePool { try PostgresFleetStore(address: address, password: server.password) }
                // The collector's sessions (new ones; this one keeps no limit) give up on a
                // statement after 300 ms.
                try await CollectorPostgresFaultTests.sql(admin, "ALTER ROLE tagfix SET statement_timeout = '300ms'")
                let store = try await offThePool { try PostgresFleetStore(address: address, password: server.password) }
                let notes = Notes()
                let office = try await Self.collector(broker, store: store, id: "office-timeout", clock: MonotonicClock(), notes: notes)
                try await Self.publish(broker, 1...1)
                #expect(await eventually { await Self.stored(admin) == Self.ids(1...1) })

                try await CollectorPostgresFaultTests.sql(admin, "BEGIN")
                try await CollectorPostgresFaultTests.sql(admin, "LOCK TABLE fleet_verdict IN EXCLUSIVE MODE")
                try await Self.publish(broker, 2...3)
                #expect(
                    await eventually { office.counts.storeFailures >= 2 }, "never tried again while locked: \(notes.all)")
                try await CollectorPostgresFaultTests.sql(admin, "COMMIT")

                #expect(await eventually { await Self.stored(admin) == Self.ids(1...3) }, "\(notes.all)")
                let said = Self.said(notes)
                #expect(said.count == 1, "one line, not one a try: \(said)")
                #expect(said.first?.contains("57014") == true, "says the statement timed out: \(said)")
                #expect(await eventually { office.counts.stored == 3 }, "\(office.counts)")
                await office.stop()
            }
        }
    }

    /// A full disk on the database side: as root, a real one (the verdicts' table and indexes
    /// moved to a tablespace on a 1 MB tmpfs, filled until PostgreSQL fails to extend a file,
    /// SQLSTATE 53100; room made by growing the tmpfs); otherwise (or where mounting is not
    /// allowed) a trigger raising 53100 with PostgreSQL's own message, dropped to make room.
    final class FullDisk: Sendable {
        /// The tmpfs, when the disk is real.
        let mountPoint: String?

        init(mountPoint: String?) { self.mountPoint = mountPoint }

        static func make() async throws -> FullDisk {
            let point = try temporaryFolder() + "/tablespace"
            try FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: true)
            var mounted = false
            if geteuid() == 0 {
                let mount = try? await TestProgram.run(
                    "/usr/bin/mount", ["-t", "tmpfs", "-o", "size=1m,mode=0700,uid=65534,gid=65534", "tmpfs", point])
                mounted = mount?.status == 0
            }
            return FullDisk(mountPoint: mounted ? point : nil)
        }

        /// Moves the verdicts to the small disk (before the collector stores any).
        func prepare(_ admin: PostgresConnection) async throws {
            guard let mountPoint else { return }
            try await CollectorPostgresFaultTests.sql(admin, "CREATE TABLESPACE small LOCATION '\(mountPoint)'")
            try await CollectorPostgresFaultTests.sql(admin, "ALTER TABLE fleet_verdict SET TABLESPACE small")
            try await CollectorPostgresFaultTests.sql(admin, "ALTER INDEX fleet_verdict_pkey SET TABLESPACE small")
            try await CollectorPostgresFaultTests.sql(admin, "ALTER INDEX fleet_verdict_site SET TABLESPACE small")
            // The aborted filler keeps its pages: no vacuum may hand them back meanwhile.
            try await CollectorPostgresFaultTests.sql(admin, "ALTER TABLE fleet_verdict SET (autovacuum_enabled = off)")
        }

        func fill(_ admin: PostgresConnection) async throws {
            guard mountPoint != nil else {
                try await CollectorPostgresFaultTests.sql(
                    admin,
                    """
                    CREATE FUNCTION tagfix_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                        RAISE EXCEPTION 'could not extend file "base/16384/16390": No space left on device'
                            USING ERRCODE = 'disk_full', HINT = 'Check free disk space.';
                    END $$
                    """)
                try await CollectorPostgresFaultTests.sql(
                    admin,
                    "CREATE TRIGGER full_disk BEFORE INSERT ON fleet_verdict FOR EACH STATEMENT EXECUTE FUNCTION tagfix_test_disk_full()")
                return
            }
            do throws(PostgresError) {
                try await CollectorPostgresFaultTests.sql(
                    admin,
                    """
                    INSERT INTO fleet_verdict (id, site, device, payload, received_ns)
                    SELECT 'filler-' || g, 'x', 'x', repeat('x', 1500), 0 FROM generate_series(1, 100000) g
                    """)
                Issue.record("100 000 rows of 1.5 KB fitted in 1 MB")
            } catch {
                #expect("\(error)".contains("53100"), "PostgreSQL could not extend a file: \(error)")
            }
        }

        func makeRoom(_ admin: PostgresConnection) async throws {
            guard let mountPoint else {
                try await CollectorPostgresFaultTests.sql(admin, "DROP TRIGGER full_disk ON fleet_verdict")
                return
            }
            let grown = try await TestProgram.run("/usr/bin/mount", ["-o", "remount,size=64m", mountPoint])
            #expect(grown.status == 0, "\(grown.err)")
        }

        /// After the server has stopped.
        func remove() async {
            guard let mountPoint else { return }
            _ = try? await TestProgram.run("/usr/bin/umount", ["-l", mountPoint])
            try? FileManager.default.removeItem(atPath: (mountPoint as NSString).deletingLastPathComponent)
        }
    }

    @Test(
        "a full disk on the database side (a real one as root): nothing is acknowledged (a collector started again is sent the same verdicts), nothing is lost, each is stored once when there is room"
    )
    func diskFull() async throws {
        let disk = try await FullDisk.make()
        do {
            try await diskFull(disk)
        } catch {
            await disk.remove()
            throw error
        }
        await disk.remove()
    }

    func diskFull(_ disk: FullDisk) async throws {
        try await PrivatePostgres.with { server in
            try await PrivateMosquitto.with { broker in
                let address = try PostgresAddress(server.address)
                let admin = try await offThePool { try PostgresConnection(address, password: server.password) }
                let store = try await offThePool { try PostgresFleetStore(address: address, password: server.password) }
                try await disk.prepare(admin)
                let notes = Notes()
                var office = try await Self.collector(broker, store: store, id: "office-full", clock: MonotonicClock(), notes: notes)
                try await Self.publish(broker, 1...2)
                #expect(await eventually { await Self.stored(admin) == Self.ids(1...2) })

                try await disk.fill(admin)
                try await Self.publish(broker, 3...6)
                #expect(await eventually { office.counts.storeFailures >= 2 }, "\(notes.all)")
                #expect(Self.said(notes).count == 1, "one line: \(Self.said(notes))")
                #expect(Self.said(notes).first?.contains("53100") == true, "\(Self.said(notes))")
                if disk.mountPoint != nil {
                    #expect(
                        Self.said(notes).first?.contains("pg_tblspc") == true, "the real disk, not the trigger: \(Self.said(notes))")
                }
                // Stopped while the disk is full: what it could not store, it never acknowledged.
                await office.stop()
                #expect(await Self.stored(admin) == Self.ids(1...2))

                notes.clear()
                // What the broker kept comes before the subscription is granted, and waits on the store.
                office = try await Self.collector(
                    broker, store: store, id: "office-full", clock: MonotonicClock(), notes: notes, subscribed: false)
                #expect(await eventually { office.counts.storeFailures >= 1 }, "the broker kept nothing for the session")
                try await disk.makeRoom(admin)
                #expect(await eventually { await Self.stored(admin) == Self.ids(1...6) }, "\(notes.all)")
                #expect(Self.said(notes).count == 1, "\(Self.said(notes))")
                await office.stop()
            }
        }
    }

    @Test(
        "a password the database no longer takes: one line saying so and what to do, tries again only as the collector's clock moves (250 ms, then 500 ms, …), stores once the password is right again"
    )
    func wrongPassword() async throws {
        try await PrivatePostgres.with { server in
            try await PrivateMosquitto.with { broker in
                let address = try PostgresAddress(server.address)
                let admin = try await offThePool { try PostgresConnection(address, password: server.password) }
                let store = CountingStore(try await offThePool { try PostgresFleetStore(address: address, password: server.password) })
                let clock = ManualClock()
                let notes = Notes()
                let office = try await Self.collector(broker, store: store, id: "office-password", clock: clock, notes: notes)
                try await Self.publish(broker, 1...1)
                #expect(await eventually { await Self.stored(admin) == Self.ids(1...1) })
                let before = store.tries.load(ordering: .relaxed)

                // The password changes, and the collector's connection goes (a restart would do).
                try await CollectorPostgresFaultTests.sql(admin, "ALTER ROLE tagfix PASSWORD 'changed-elsewhere'")
                try await CollectorPostgresFaultTests.sql(
                    admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tagfix collect'")
                try await Self.publish(broker, 2...3)
                #expect(await eventually { clock.sleeperCount == 1 }, "never waited on its clock: \(notes.all)")
                let tries = store.tries.load(ordering: .relaxed)
                #expect(tries > before)
                // Time stands still: no try until it moves.
                #expect(store.tries.load(ordering: .relaxed) == tries, "tried again without waiting")
                clock.advance(by: .milliseconds(250))
                #expect(await eventually { store.tries.load(ordering: .relaxed) == tries + 1 && clock.sleeperCount == 1 })
                clock.advance(by: .milliseconds(250))
                #expect(store.tries.load(ordering: .relaxed) == tries + 1, "the second wait is longer: 500 ms")
                let said = Self.said(notes)
                #expect(said.count == 1, "one line: \(said)")
                #expect(
                    said.first?.contains("refused the login") == true && said.first?.contains("--db-password-file") == true, "\(said)")
                #expect(!(said.first ?? "").contains(server.password))

                try await CollectorPostgresFaultTests.sql(admin, "ALTER ROLE tagfix PASSWORD '\(server.password)'")
                clock.advance(by: .milliseconds(250))
                #expect(await eventually { await Self.stored(admin) == Self.ids(1...3) }, "\(notes.all)")
                #expect(Self.said(notes).count == 1)
                admin.close()
                await office.stop()
            }
        }
    }

    @Test(
        "a database that refuses writes (default_transaction_read_only): the collector acknowledges nothing and loses nothing, and says so once"
    )
    func readOnly() async throws {
        try await PrivatePostgres.with { server in
            try await PrivateMosquitto.with { broker in
                let address = try PostgresAddress(server.address)
                let admin = try await offThePool { try PostgresConnection(address, password: server.password) }
                let store = try await offThePool { try PostgresFleetStore(address: address, password: server.password) }
                let notes = Notes()
                var office = try await Self.collector(broker, store: store, id: "office-readonly", clock: MonotonicClock(), notes: notes)
                try await Self.publish(broker, 1...3)
                #expect(await eventually { await Self.stored(admin) == Self.ids(1...3) })

                let dropCollector = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tagfix collect'"
                try await CollectorPostgresFaultTests.sql(admin, "ALTER DATABASE tagfix SET default_transaction_read_only = on")
                try await CollectorPostgresFaultTests.sql(admin, dropCollector)
                try await Self.publish(broker, 4...6)
                #expect(await eventually { office.counts.storeFailures >= 2 }, "\(notes.all)")
                let said = Self.said(notes)
                #expect(said.count == 1, "one line: \(said)")
                #expect(said.first?.contains("read-only") == true, "\(said)")
                await office.stop()
                #expect(await Self.stored(admin) == Self.ids(1...3))

                // Writable again: a collector with the same session is sent what was never acknowledged.
                try await CollectorPostgresFaultTests.sql(admin, "ALTER DATABASE tagfix RESET default_transaction_read_only")
                try await CollectorPostgresFaultTests.sql(admin, dropCollector)
                office = try await Self.collector(broker, store: store, id: "office-readonly", clock: MonotonicClock(), notes: notes)
                #expect(await eventually { await Self.stored(admin) == Self.ids(1...6) }, "\(notes.all)")
                #expect(await eventually { office.counts.stored == 3 }, "\(office.counts)")
                await office.stop()
            }
        }
    }
}

@Suite("when a collector tries a refused batch again, and what it says")
struct StoreRetryTests {
    @Test("waits of 250 ms doubling to 15 s; one outage said once whatever its tries meet; a new kind said; a success starts over")
    func schedule() {
        var retry = StoreRetry()
        let start = Timestamp(nanosecondsSinceEpoch: 1_000_000_000_000)
        let down = "cannot connect to postgresql://tagfix@db:5432/fleet: connection refused"
        let starting = "cannot connect to postgresql://tagfix@db:5432/fleet: FATAL: the database system is starting up"
        let password = "PostgreSQL at postgresql://tagfix@db:5432/fleet refused the login: password authentication failed"
        let saidDown = retry.failed(down, at: start)
        #expect(saidDown)
        #expect(retry.due == start.advanced(by: .milliseconds(250)))
        let saidStarting = retry.failed(starting, at: start)
        #expect(!saidStarting, "the same outage")
        #expect(retry.due == start.advanced(by: .milliseconds(500)))
        let saidPassword = retry.failed(password, at: start)
        #expect(saidPassword, "a new kind of failure is said")
        for _ in 0..<10 { _ = retry.failed(password, at: start) }
        #expect(retry.due == start.advanced(by: .seconds(15)), "at most 15 s apart")
        retry.succeeded()
        #expect(retry.due == nil)
        let saidAgain = retry.failed(password, at: start)
        #expect(saidAgain, "said again after a success")
        #expect(retry.due == start.advanced(by: .milliseconds(250)))
    }
}
