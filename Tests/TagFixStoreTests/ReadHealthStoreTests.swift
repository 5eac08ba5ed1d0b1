import Foundation
import TagFixCore
import Testing

@testable import TagFixStore

@Suite("The SQLite registry: enrolment read health")
struct ReadHealthStoreTests {
    static let weak = EnrolledReadHealth(
        health: ReadHealth(
            reads: 10, completed: 9, attempts: 14, rfErrors: 7, fewestRFErrors: 0, medianReadTime: .microseconds(812),
            slowestReadTime: .milliseconds(25)),
        weak: true, at: Timestamp(nanosecondsSinceEpoch: 1_778_000_000_123_456_789))

    @Test("a tag's read health is kept with its entry, replaced with it, and gone when an enrolment has none")
    func roundTrip() throws {
        let path = try scratchPath("health.sqlite")
        let registry = try SQLiteRegistry(path: path, mode: .create)
        try registry.add(try entry("A", uid: "04112233445566"), readHealth: Self.weak)
        try registry.add(try entry("B"), readHealth: nil)
        #expect(try registry.readHealth() == ["A": Self.weak])
        #expect(try SQLiteRegistry(path: path, mode: .readOnly).readHealth()["A"] == Self.weak)
        var healthy = Self.weak
        healthy.weak = false
        try registry.add(try entry("A", uid: "04112233445566"), replace: true, readHealth: healthy)
        #expect(try registry.readHealth() == ["A": healthy])
        try registry.add(try entry("A", uid: "04112233445566"), replace: true, readHealth: nil)
        #expect(try registry.readHealth().isEmpty, "a later enrolment without read health does not keep the old one")
        // A removed tag's read health is not reported.
        try registry.add(try entry("C"), readHealth: Self.weak)
        #expect(try registry.remove(id: "C"))
        #expect(try registry.readHealth().isEmpty)
    }

    @Test("a registry from before read health is migrated, its entries kept, none with read health")
    func migrated() throws {
        let path = try scratchPath("older.sqlite")
        let index = try #require(SQLiteRegistry.migrations.firstIndex { $0.contains("CREATE TABLE read_health") })
        let db = try SQLiteConnection(path: path, mode: .create)
        try SQLiteRegistry.prepare(db, path: path, mode: .create, migrations: Array(SQLiteRegistry.migrations[..<index]))
        try db.query("INSERT INTO tag (id, lat, lon, radius_m) VALUES ('OLD', 53.5, 9.9, 25)")
        let registry = try SQLiteRegistry(path: path, mode: .readWrite)
        var version: Int64 = 0
        try db.query("PRAGMA user_version") { version = $0.integer(0) }
        #expect(version == Int64(SQLiteRegistry.schemaVersion))
        #expect(try registry.entries().map(\.id) == ["OLD"])
        #expect(try registry.readHealth().isEmpty)
    }
}
