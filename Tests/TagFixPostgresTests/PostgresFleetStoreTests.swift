import Foundation
import TagFixCore
import TagFixDevices
import TagFixStore
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixPostgres

@Suite("PostgreSQL addresses")
struct PostgresAddressTests {
    @Test(
        "an address is read, and said back without secrets",
        arguments: [
            ("postgresql://tagfix@127.0.0.1:5433/fleet", "postgresql://tagfix@127.0.0.1:5433/fleet"),
            ("postgres://db.example.org/fleet", "postgresql://db.example.org:5432/fleet"),
            (
                "postgresql://office@db.example.org/fleet?sslmode=verify-full&sslrootcert=/etc/ca.pem",
                "postgresql://office@db.example.org:5432/fleet?sslmode=verify-full&sslrootcert=/etc/ca.pem"
            ),
        ])
    func parsed(text: String, said: String) throws {
        #expect(try PostgresAddress(text).description == said)
    }

    @Test(
        "an address TagFix cannot use is refused with what to write instead",
        arguments: [
            ("postgresql://u:hunter2@h/db", "--db-password-file"), ("postgresql://h/", "names no database"),
            ("postgresql://h/a/b", "names no database"), ("mysql://h/db", "not a PostgreSQL address"),
            ("postgresql://h/db?host=/tmp", "not one TagFix passes on"), ("postgresql:///db", "not a PostgreSQL address"),
        ])
    func refused(text: String, says: String) {
        #expect {
            try PostgresAddress(text)
        } throws: { error in
            let description = (error as? PostgresError)?.description ?? ""
            return description.contains(says) && !description.contains("hunter2")
        }
    }

    @Test(
        "SQLSTATEs worth a retry: a restart, a lost connection, a full disk, a statement timeout; not a wrong password or a bad statement")
    func transient() {
        for state in [
            SQLState.adminShutdown, .cannotConnectNow, .diskFull, .queryCanceled, .serializationFailure, SQLState(rawValue: "08006"),
        ] {
            #expect(state.isTransient, "\(state)")
        }
        for state in [SQLState.invalidPassword, .uniqueViolation, .undefinedTable, SQLState(rawValue: "42601")] {
            #expect(!state.isTransient, "\(state)")
        }
    }
}

/// The fleet store against a real PostgreSQL: a private cluster (initdb, postgres on a free
/// loopback port, as `nobody` when the tests run as root) per test, stopped however it ends.
@Suite("the fleet store on PostgreSQL", .enabled(if: PrivatePostgres.available, "needs PostgreSQL (apt-get install postgresql)"))
struct PostgresFleetStoreTests {
    static func messages(_ range: ClosedRange<Int>, device: String = "van-1") -> [FleetStore.Stored] {
        range.map {
            FleetStore.Stored(
                id: "\(device):s:\($0)", site: "harbour", device: device,
                payload: #"{"time":"2026-05-14T08:00:00.000Z","verdict":"confirmed","tag_id":"T\#($0)"}"#)
        }
    }

    @Test("each verdict once: a batch in one transaction, a message sent again is no new row, two stores on one database agree")
    func storedOnce() async throws {
        try await PostgresFixture.with { pg in
            let store = try await pg.fleetStore()
            #expect(
                try await libpq { try store.store(Self.messages(1...5), receivedNanoseconds: 1) } == Array(repeating: true, count: 5))
            // The broker sends 4 and 5 again (QoS 1), with 6 and 7: only 6 and 7 are new.
            #expect(try await libpq { try store.store(Self.messages(4...7), receivedNanoseconds: 2) } == [false, false, true, true])
            // A second collector on the same database sees the same rows and stores none twice.
            let other = try await pg.fleetStore()
            #expect(try await libpq { try other.store(Self.messages(6...8), receivedNanoseconds: 3) } == [false, false, true])
            #expect(try await libpq { try store.count() } == 8)
            let all = try await libpq { try other.all() }
            #expect(all.map(\.id) == Self.messages(1...8).map(\.id))
            #expect(all.first?.payload == Self.messages(1...1).first?.payload, "the payload's bytes kept")
            // The sites' placements, replaced site by site, read back as the SQLite store reads them.
            let region = try CircularRegion(center: Coordinate(latitude: 53.545, longitude: 9.966), radius: 25, identifier: "T1")
            let placements = [
                FleetStore.Placement(
                    site: "harbour", entry: RegistryEntry(id: "T1", uid: nil, region: region, name: "Gate"), registry: "r.csv")
            ]
            try await libpq { try store.replacePlacements(sites: ["harbour"], with: placements, loadedNanoseconds: 1) }
            #expect(try await libpq { try other.placements() } == placements)
            try await libpq { try store.replacePlacements(sites: ["harbour"], with: [], loadedNanoseconds: 2) }
            #expect(try await libpq { try other.placements() }.isEmpty, "a site's registry read again is its whole truth")
            await libpq {
                store.close()
                other.close()
            }
        }
    }

    @Test("a database a newer TagFix wrote is refused and left as it is; a wrong password is one line without the password")
    func refusals() async throws {
        try await PostgresFixture.with { pg in
            let address = pg.address
            let store = try await pg.fleetStore()
            #expect(try await libpq { try store.store(Self.messages(1...2), receivedNanoseconds: 1) }.count == 2)
            let db = try await pg.session()
            try await db.sql("UPDATE tagfix_schema SET version = 99 WHERE name = 'fleet'")
            await #expect(throws: PostgresError.newerSchema(found: 99, known: PostgresFleetStore.schemaVersion)) {
                try await pg.fleetStore()
            }
            #expect(try await db.sql("SELECT version FROM tagfix_schema").rows == [["99"]], "left as it was")
            #expect(try await db.sql("SELECT count(*) FROM fleet_verdict").rows == [["2"]])
            do throws(PostgresError) {
                let wrong = try await libpq { () throws(PostgresError) in try PostgresConnection(address, password: "wrong-password-42") }
                await libpq { wrong.close() }
                Issue.record("a wrong password connected")
            } catch {
                #expect(error.description.contains("password authentication failed"), "\(error)")
                #expect(!error.description.contains("wrong-password-42"))
                #expect(error.description.split(separator: "\n").count == 1, "one line")
            }
            await libpq {
                db.close()
                store.close()
            }
        }
    }

    @Test(
        "the server killed mid-stream: the batch in flight is not stored and says it is worth a retry; after the restart nothing was lost or doubled"
    )
    func serverKilled() async throws {
        try await PostgresFixture.with { pg in
            let server = pg.server
            let store = try await pg.fleetStore()
            #expect(try await libpq { try store.store(Self.messages(1...10), receivedNanoseconds: 1) }.allSatisfy { $0 })
            await server.kill()
            let failed = await libpq { () -> PostgresError? in
                do throws(PostgresError) {
                    _ = try store.store(Self.messages(11...20), receivedNanoseconds: 2)
                    return nil
                } catch {
                    return error
                }
            }
            let error = try #require(failed, "a store into a killed server succeeded")
            #expect(error.isTransient, "\(error)")
            try await server.start()
            let again = try await pg.fleetStore()
            #expect(try await libpq { try again.count() } == 10, "what was committed survived the kill")
            #expect(try await libpq { try again.store(Self.messages(5...20), receivedNanoseconds: 3) }.filter { $0 }.count == 10)
            #expect(try await libpq { try again.count() } == 20)
            await libpq {
                again.close()
                store.close()
            }
        }
    }
}
