import Foundation
import TagFixCore
import TagFixDevices
import TagFixStore
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixPostgres

@Suite("the registry on PostgreSQL", .enabled(if: PrivatePostgres.available, "needs PostgreSQL (apt-get install postgresql)"))
struct PostgresRegistryTests {
    static func entry(_ id: String, uid: String? = nil, lat: Double = 53.545, name: String? = nil) throws -> RegistryEntry {
        RegistryEntry(
            id: id, uid: try uid.map { try TagUID(hex: $0) },
            region: try CircularRegion(center: Coordinate(latitude: lat, longitude: 9.966), radius: 25, identifier: id), name: name)
    }

    @Test("entries come back by id and by UID with every field, in the SQLite registry's order; conflicts leave it as it was")
    func roundTrip() async throws {
        try await PostgresFixture.with { pg in
            let registry = try await pg.registry()
            var full = try Self.entry("T01", uid: "04A224B2C56480", lat: 53.5450123, name: "Main gate, north")
            full.enrolment = Enrolment(at: Timestamp(iso8601: "2026-05-14T08:00:01.25Z")!, by: "ana", accuracy: 2.4, fixes: 28)
            full.notes = "behind the \"blue\" door"
            full.originality = .genuine
            full.sun = SUNSettings(keyName: "site", names: SUNParameterNames(piccData: "e", cmac: "c"))
            let plain = try Self.entry("T02")
            let lower = try Self.entry("a1")
            let (first, t03, t04, moved) = (
                full, try Self.entry("T03"), try Self.entry("T04", uid: "04A224B2C56480"), try Self.entry("T02", name: "moved")
            )
            try await libpq { try registry.add([lower, first, plain]) }
            #expect(try await libpq { try registry.entry(forID: "T01") } == full)
            #expect(try await libpq { try registry.entry(forUID: TagUID(hex: "04A224B2C56480")) } == full)
            #expect(try await libpq { try registry.entry(forID: "t01") } == nil)
            #expect(try await libpq { try registry.entries() }.map(\.id) == ["T01", "T02", "a1"], "byte order, as SQLite sorts")
            await #expect(throws: PostgresRegistryError.conflict(.alreadyRegistered("T02"))) {
                try await libpq { try registry.add([t03, plain]) }
            }
            await #expect(throws: PostgresRegistryError.conflict(.duplicateUID(try TagUID(hex: "04A224B2C56480"), "T01"))) {
                try await libpq { try registry.add([t04]) }
            }
            #expect(try await libpq { try registry.count() } == 3, "T03 must not stay behind when T02 failed")
            try await libpq { try registry.add([moved], replace: true) }
            #expect(try await libpq { try registry.entry(forID: "T02") }?.name == "moved")
            #expect(try await libpq { try registry.remove(id: "T02") })
            #expect(try await libpq { try !registry.remove(id: "T02") })
            #expect(try await libpq { try registry.placementHistory() }.isEmpty)
            await libpq { registry.close() }
        }
    }

    /// The spellings `RegistryIdentityTests` holds the SQLite and in-memory registries to.
    @Test(
        "canonically equivalent spellings are two ids, each found by its own bytes only, as in SQLite and in memory",
        arguments: [
            ("Caf\u{E9}-1", "Cafe\u{301}-1", "Caf\u{E9}\u{300}-1"), ("\u{212A}7", "K7", "k7"), ("T\u{37E}1", "T;1", "T:1"),
            ("\u{212B}-3", "\u{C5}-3", "A\u{30A}-3"),
        ])
    func spellings(first: String, second: String, absent: String) async throws {
        let entries = [try Self.entry(first, lat: 53.5, name: "first"), try Self.entry(second, lat: 53.6, name: "second")]
        try await PostgresFixture.with { pg in
            let registry = try await pg.registry()
            try await libpq { try registry.add(entries) }
            let memory = try InMemoryRegistry(entries)
            let uid = try TagUID(hex: "04000000000001")
            for expected in entries {
                let found = try #require(try await libpq { try registry.entry(forID: expected.id) })
                #expect(Array(found.id.utf8) == Array(expected.id.utf8))
                #expect(
                    try await libpq { try registry.placement(forTagID: expected.id, uid: uid) }
                        == memory.placement(forTagID: expected.id, uid: uid))
            }
            #expect(try await libpq { try registry.entry(forID: absent) } == nil)
            await libpq { registry.close() }
        }
    }

    @Test("a registry a newer TagFix wrote is refused and left as it is")
    func newerSchema() async throws {
        try await PostgresFixture.with { pg in
            let first = try await pg.registry()
            await libpq { first.close() }
            let db = try await pg.session()
            try await db.sql("UPDATE tagfix_schema SET version = 9 WHERE name = 'registry'")
            await #expect(throws: PostgresError.newerSchema(found: 9, known: PostgresRegistry.schemaVersion)) {
                try await pg.registry()
            }
            await libpq { db.close() }
        }
    }
}
