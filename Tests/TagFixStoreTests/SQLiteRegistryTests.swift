import Foundation
import TagFixCore
import Testing

@testable import TagFixStore

/// A path in a fresh temporary folder (the file itself does not exist yet).
func scratchPath(_ name: String) throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-store-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder.appendingPathComponent(name).path
}

func entry(_ id: String, uid: String? = nil, lat: Double = 53.545, lon: Double = 9.966, radius: Double = 25, name: String? = nil)
    throws -> RegistryEntry
{
    RegistryEntry(
        id: id, uid: try uid.map { try TagUID(hex: $0) },
        region: try CircularRegion(center: Coordinate(latitude: lat, longitude: lon), radius: radius, identifier: id), name: name)
}

@Suite("The SQLite registry")
struct SQLiteRegistryTests {
    @Test("entries written come back by id and by UID, with every field")
    func roundTrip() throws {
        let path = try scratchPath("site.sqlite")
        var enrolled = try entry("T01", uid: "04A224B2C56480", lat: 53.5450123, lon: 9.9660456, radius: 12.5, name: "Main gate, north")
        enrolled.enrolment = Enrolment(at: Timestamp(iso8601: "2026-05-14T08:00:01.25Z")!, by: "ana", accuracy: 2.4, fixes: 28)
        enrolled.notes = "behind the \"blue\" door"
        let plain = try entry("T02", lat: -33.8688, lon: 151.2093)
        let registry = try SQLiteRegistry(path: path, mode: .create)
        try registry.add([enrolled, plain])

        let reopened = try SQLiteRegistry(path: path, mode: .readOnly)
        #expect(try reopened.entry(forID: "T01") == enrolled)
        #expect(try reopened.entry(forUID: TagUID(hex: "04A224B2C56480")) == enrolled)
        #expect(try reopened.entry(forID: "T02") == plain)
        #expect(try reopened.entry(forID: "T03") == nil)
        #expect(try reopened.entries().map(\.id) == ["T01", "T02"])
        #expect(try reopened.count() == 2)
    }

    @Test("the file is a WAL-mode database marked as a TagFix registry at the current schema")
    func fileFormat() throws {
        let path = try scratchPath("site.sqlite")
        _ = try SQLiteRegistry(path: path, mode: .create)
        let header = try #require(FileManager.default.contents(atPath: path))
        #expect(SQLiteRegistry.isSQLite(header: header))
        let db = try SQLiteConnection(path: path, mode: .readOnly)
        var mode = "", version: Int64 = -1, application: Int64 = -1
        try db.query("PRAGMA journal_mode") { mode = $0.text(0) ?? "" }
        try db.query("PRAGMA user_version") { version = $0.integer(0) }
        try db.query("PRAGMA application_id") { application = $0.integer(0) }
        #expect(mode == "wal")
        #expect(version == Int64(SQLiteRegistry.schemaVersion))
        #expect(application == SQLiteRegistry.applicationID)
    }

    @Test("conflicts are refused and leave the registry as it was (one transaction)")
    func conflicts() throws {
        let registry = try SQLiteRegistry(path: try scratchPath("r.sqlite"), mode: .create)
        try registry.add(try entry("A", uid: "04010203040506"))
        #expect(throws: RegistryStoreError.conflict(.alreadyRegistered("A"))) { try registry.add(try entry("A")) }
        #expect(throws: RegistryStoreError.conflict(.duplicateUID(try TagUID(hex: "04010203040506"), "A"))) {
            try registry.add([try entry("B"), try entry("C", uid: "04010203040506")])
        }
        #expect(try registry.entries().map(\.id) == ["A"], "B must not stay behind when C failed")
        try registry.add(try entry("A", uid: "04010203040506", radius: 40), replace: true)
        #expect(try registry.entry(forID: "A")?.region.radius == 40)
        #expect(try registry.remove(id: "A"))
        #expect(try !registry.remove(id: "A"))
        #expect(try registry.count() == 0)
    }

    @Test("a missing file, a file that is no database, another application's database and a newer schema each get one clear error")
    func badFiles() throws {
        let missing = try scratchPath("nothing.sqlite")
        #expect(throws: RegistryStoreError.missing(missing)) { try SQLiteRegistry(path: missing, mode: .readOnly) }
        #expect(throws: RegistryStoreError.missing(missing)) { try SQLiteRegistry(path: missing, mode: .readWrite) }
        #expect(!FileManager.default.fileExists(atPath: missing), "opening for reading must not create the file")

        let text = try scratchPath("registry.sqlite")
        try "id,lat,lon,radius_m\nA,1,2,3\n".write(toFile: text, atomically: true, encoding: .utf8)
        #expect(throws: RegistryStoreError.notARegistry(text, "not a SQLite database")) { try SQLiteRegistry(path: text, mode: .readOnly) }

        let other = try scratchPath("other.sqlite")
        try SQLiteConnection(path: other, mode: .create).execute("CREATE TABLE t(x)")
        #expect(
            performing: { try SQLiteRegistry(path: other, mode: .readWrite) },
            throws: { error in
                guard case .notARegistry(_, let why)? = error as? RegistryStoreError else { return false }
                return why.contains("another application")
            })

        let newer = try scratchPath("newer.sqlite")
        _ = try SQLiteRegistry(path: newer, mode: .create)
        try SQLiteConnection(path: newer, mode: .readWrite).execute("PRAGMA user_version = 99")
        #expect(throws: RegistryStoreError.newerSchema(newer, found: 99, supported: SQLiteRegistry.schemaVersion)) {
            try SQLiteRegistry(path: newer, mode: .readWrite)
        }
        for error in [RegistryStoreError.missing(missing), .notARegistry(text, "x"), .newerSchema(newer, found: 99, supported: 1)] {
            #expect(error.description.contains(":"), "every message says what to do after the colon")
        }
    }

    @Test("a damaged file is reported, not read as an empty registry")
    func damaged() throws {
        let path = try scratchPath("damaged.sqlite")
        let registry = try SQLiteRegistry(path: path, mode: .create)
        try registry.add((0..<2000).map { try entry("T\($0)", lat: Double($0 % 80), radius: 10) })
        try SQLiteConnection(path: path, mode: .readWrite).execute("PRAGMA wal_checkpoint(TRUNCATE)")
        var bytes = try #require(FileManager.default.contents(atPath: path))
        for index in stride(from: 4096, to: bytes.count, by: 7) { bytes[index] = 0xA5 }
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect(
            performing: { try SQLiteRegistry(path: path, mode: .readOnly).entries() },
            throws: { error in
                guard let error = error as? RegistryStoreError else { return false }
                switch error {
                case .damaged, .notARegistry, .invalidEntry: return true
                default: return false
                }
            })
    }

    @Test("an older file is migrated forward when opened for writing, and refused read-only until then")
    func migration() throws {
        let path = try scratchPath("old.sqlite")
        let v1 = [SQLiteRegistry.migrations[0]]
        let two = v1 + ["ALTER TABLE tag ADD COLUMN placed_by TEXT;"]
        let db = try SQLiteConnection(path: path, mode: .create)
        try SQLiteRegistry.prepare(db, path: path, mode: .create, migrations: v1)
        try db.query("INSERT INTO tag (id, lat, lon, radius_m) VALUES ('A', 1, 2, 3)")
        #expect(throws: RegistryStoreError.olderSchema(path, found: 1, supported: 2)) {
            try SQLiteRegistry.prepare(SQLiteConnection(path: path, mode: .readOnly), path: path, mode: .readOnly, migrations: two)
        }
        try SQLiteRegistry.prepare(db, path: path, mode: .readWrite, migrations: two)
        var version: Int64 = 0, rows: Int64 = 0
        try db.query("PRAGMA user_version") { version = $0.integer(0) }
        try db.query("SELECT count(*) FROM tag WHERE placed_by IS NULL") { rows = $0.integer(0) }
        #expect(version == 2)
        #expect(rows == 1, "the migration keeps the rows")
    }

    @Test("readers keep answering while a writer holds a transaction open (WAL)")
    func concurrentReaders() throws {
        let path = try scratchPath("busy.sqlite")
        let writer = try SQLiteRegistry(path: path, mode: .create)
        try writer.add(try entry("A"))
        let reader = try SQLiteRegistry(path: path, mode: .readOnly)
        let raw = try SQLiteConnection(path: path, mode: .readWrite)
        try raw.execute("BEGIN IMMEDIATE")
        try raw.query("INSERT INTO tag (id, lat, lon, radius_m) VALUES ('B', 1, 2, 3)")
        #expect(try reader.entry(forID: "A")?.id == "A")
        #expect(try reader.entry(forID: "B") == nil, "uncommitted rows are not seen")
        try raw.execute("COMMIT")
        #expect(try reader.entry(forID: "B")?.id == "B")
    }

    @Test("a stored radius above this run's cap is an unusable entry, not a silent clamp")
    func radiusCap() throws {
        let path = try scratchPath("cap.sqlite")
        try SQLiteRegistry(path: path, mode: .create).add(try entry("WIDE", radius: 400))
        let strict = try SQLiteRegistry(path: path, mode: .readOnly, maximumRadius: 100)
        #expect(throws: RegistryError.self) { try strict.entry(forID: "WIDE") }
    }
}
