import Foundation
import TagFixCore
import TagFixTesting
import Testing

@testable import TagFixStore

private let exampleRegistry =
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    + "/Examples/site/registry.csv"

/// The example site's placements (Examples/site/registry.csv).
private func examplePlacements() throws -> [RegistryEntry] {
    try RegistryFile.parse(try String(contentsOfFile: exampleRegistry, encoding: .utf8)).entries
}

/// A fleet store as collect wrote it before the schema was versioned: `fleet_verdict` only,
/// `user_version` 0, WAL, holding `verdicts` rows.
private func oldStore(_ path: String, verdicts: Int) throws {
    let db = try SQLiteConnection(path: path, mode: .create)
    try db.execute("PRAGMA application_id = \(FleetStore.applicationID)")
    try db.execute("PRAGMA journal_mode = WAL")
    try db.execute(OldFleetStore.unversionedSchema)
    for index in 0..<verdicts {
        try db.query(
            "INSERT INTO fleet_verdict VALUES (?1, 'harbour', 'van-1', '{}', 1)", [.text("van-1:abc:\(index + 1)")])
    }
    try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
}

private func userVersion(_ path: String) throws -> Int64 {
    let db = try SQLiteConnection(path: path, mode: .readOnly)
    var version: Int64 = -1
    try db.query("PRAGMA user_version") { version = $0.integer(0) }
    return version
}

@Suite("The fleet store's schema and placements")
struct FleetStoreTests {
    @Test("a store written before placements were kept is read as it is, and collect migrates it without losing a verdict")
    func oldStoreReadsAndMigrates() throws {
        let path = try scratchPath("fleet.sqlite")
        try oldStore(path, verdicts: 3)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let reader = try FleetStore(path: path, create: false)
        #expect(try reader.count() == 3)
        #expect(try reader.placements().isEmpty, "no placement table: none, not an error")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "report never migrates")
        #expect(try userVersion(path) == 0)

        let writer = try FleetStore(path: path, create: true)
        #expect(try userVersion(path) == Int64(FleetStore.schemaVersion))
        #expect(try writer.count() == 3, "the verdicts stay")
        let entries = try examplePlacements()
        try writer.replacePlacements(
            sites: ["harbour"], with: entries.map { .init(site: "harbour", entry: $0, registry: exampleRegistry) }, loadedNanoseconds: 7)
        #expect(try FleetStore(path: path, create: false).placements().map(\.entry) == entries)
        #expect(try FleetStore(path: path, create: true).count() == 3, "a second migration is a no-op")
    }

    @Test("a store from a newer tagfix is refused for writing and reading, and left as it was")
    func newerSchema() throws {
        let path = try scratchPath("fleet.sqlite")
        try oldStore(path, verdicts: 1)
        do {
            let db = try SQLiteConnection(path: path, mode: .readWrite)
            try db.execute("PRAGMA user_version = \(FleetStore.schemaVersion + 1)")
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        for create in [true, false] {
            #expect(throws: FleetStoreError.newerSchema(path, found: FleetStore.schemaVersion + 1, supported: FleetStore.schemaVersion)) {
                try FleetStore(path: path, create: create)
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(FleetStore.isFleetStore(path), "a fleet store still, so report says why it cannot read it")
    }

    @Test("a site's registry read again replaces that site's placements only")
    func replaceOneSite() throws {
        let store = try FleetStore(path: try scratchPath("fleet.sqlite"), create: true)
        let entries = try examplePlacements()
        try store.replacePlacements(
            sites: ["harbour", "depot"],
            with: entries.map { .init(site: "harbour", entry: $0, registry: "h.csv") }
                + entries.prefix(2).map { .init(site: "depot", entry: $0, registry: "d.csv") }, loadedNanoseconds: 1)
        #expect(try store.placements().count == entries.count + 2, "T01 of depot and T01 of harbour are two placements")
        try store.replacePlacements(
            sites: ["harbour"], with: entries.suffix(3).map { .init(site: "harbour", entry: $0, registry: "h.csv") }, loadedNanoseconds: 2)
        let stored = try store.placements()
        #expect(stored.filter { $0.site == "harbour" }.map(\.entry.id) == entries.suffix(3).map(\.id))
        #expect(stored.filter { $0.site == "depot" }.map(\.entry.id) == ["T01", "T02"])
    }

    @Test("only a tag's id, UID, name and region reach the fleet store: never its SUN settings, notes or enrolment")
    func noSecretsCopied() throws {
        let path = try scratchPath("fleet.sqlite")
        let store = try FleetStore(path: path, create: true)
        var entry = try #require(try examplePlacements().first)
        entry.sun = SUNSettings(keyName: "vaultkeyset")
        entry.notes = "spare key under the mat"
        entry.enrolment = Enrolment(at: Timestamp(nanosecondsSinceEpoch: 0), by: "enroller-ana")
        entry.originality = .genuine
        try store.replacePlacements(
            sites: ["harbour"], with: [.init(site: "harbour", entry: entry, registry: "h.csv")], loadedNanoseconds: 1)
        let back = try #require(try store.placements().first)
        #expect(back.entry == RegistryEntry(id: entry.id, uid: entry.uid, region: entry.region, name: entry.name))
        var columns: [String] = []
        try SQLiteConnection(path: path, mode: .readOnly).query("PRAGMA table_info(fleet_placement)") { columns.append($0.text(1) ?? "") }
        #expect(columns == ["site", "tag_id", "uid", "name", "lat", "lon", "radius_m", "registry", "loaded_ns"])
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes += (try? Data(contentsOf: URL(fileURLWithPath: path + "-wal"))) ?? Data()
        for secret in ["vaultkeyset", "spare key", "enroller-ana", "genuine"] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) reached the fleet store")
        }
    }
}
