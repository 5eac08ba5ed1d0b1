import Foundation
import TagFixCore
import TagFixDevices
import TagFixStore
import TagFixTestDaemons
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
        try await PrivatePostgres.with { server in
            let address = try PostgresAddress(server.address)
            try await offThePool {
                let registry = try PostgresRegistry(address: address, password: server.password)
                var full = try Self.entry("T01", uid: "04A224B2C56480", lat: 53.5450123, name: "Main gate, north")
                full.enrolment = Enrolment(at: Timestamp(iso8601: "2026-05-14T08:00:01.25Z")!, by: "ana", accuracy: 2.4, fixes: 28)
                full.notes = "behind the \"blue\" door"
                full.originality = .genuine
                full.sun = SUNSettings(keyName: "site", names: SUNParameterNames(piccData: "e", cmac: "c"))
                let plain = try Self.entry("T02")
                let lower = try Self.entry("a1")
                try registry.add([lower, full, plain])
                #expect(try registry.entry(forID: "T01") == full)
                #expect(try registry.entry(forUID: TagUID(hex: "04A224B2C56480")) == full)
                #expect(try registry.entry(forID: "t01") == nil)
                #expect(try registry.entries().map(\.id) == ["T01", "T02", "a1"], "byte order, as SQLite sorts")
                #expect(throws: PostgresRegistryError.conflict(.alreadyRegistered("T02"))) {
                    try registry.add([try Self.entry("T03"), plain])
                }
                #expect(throws: PostgresRegistryError.conflict(.duplicateUID(try TagUID(hex: "04A224B2C56480"), "T01"))) {
                    try registry.add([try Self.entry("T04", uid: "04A224B2C56480")])
                }
                #expect(try registry.count() == 3, "T03 must not stay behind when T02 failed")
                try registry.add([try Self.entry("T02", name: "moved")], replace: true)
                #expect(try registry.entry(forID: "T02")?.name == "moved")
                #expect(try registry.remove(id: "T02"))
                #expect(try !registry.remove(id: "T02"))
                #expect(try registry.placementHistory().isEmpty)
                registry.close()
            }
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
        try await PrivatePostgres.with { server in
            let address = try PostgresAddress(server.address)
            try await offThePool {
                let registry = try PostgresRegistry(address: address, password: server.password)
                try registry.add(entries)
                let memory = try InMemoryRegistry(entries)
                let uid = try TagUID(hex: "04000000000001")
                for expected in entries {
                    let found = try #require(try registry.entry(forID: expected.id))
                    #expect(Array(found.id.utf8) == Array(expected.id.utf8))
                    #expect(try registry.placement(forTagID: expected.id, uid: uid) == memory.placement(forTagID: expected.id, uid: uid))
                }
                #expect(try registry.entry(forID: absent) == nil)
                registry.close()
            }
        }
    }

    @Test("a registry a newer TagFix wrote is refused and left as it is")
    func newerSchema() async throws {
        try await PrivatePostgres.with { server in
            let address = try PostgresAddress(server.address)
            try await offThePool {
                try PostgresRegistry(address: address, password: server.password).close()
                let db = try PostgresConnection(address, password: server.password)
                try db.execute("UPDATE tagfix_schema SET version = 9 WHERE name = 'registry'")
                #expect(throws: PostgresError.newerSchema(found: 9, known: PostgresRegistry.schemaVersion)) {
                    try PostgresRegistry(address: address, password: server.password)
                }
                db.close()
            }
        }
    }
}
