import Foundation
import TagFixCore
import Testing

@testable import TagFixStore

/// The registry's evidence of where its tags are: confirmed taps (counted once however often a
/// log is imported) and the refinements applied, each with what it replaced.
@Suite struct PlacementEvidenceStoreTests {
    static let centre = Coordinate(validLatitude: 53.545, longitude: 9.966)
    static let day0 = Timestamp(iso8601: "2026-05-14T08:00:00Z")!

    static func enrolled(_ id: String, accuracy: Double = 4) throws -> RegistryEntry {
        RegistryEntry(
            id: id, uid: nil, region: try CircularRegion(center: centre, radius: 25, identifier: id), name: nil,
            enrolment: Enrolment(at: day0, by: "tech", accuracy: accuracy, fixes: 30))
    }

    static func tap(_ id: String, day: Int, east: Double = 2) -> PlacementTap {
        let time = day0.advanced(by: .seconds(day * 86_400))
        return PlacementTap(
            tagID: id, time: time, coordinate: Coordinate(validLatitude: centre.latitude, longitude: centre.longitude + east / 66_200),
            accuracy: 3, confirmedAgainst: centre, key: "\(time.nanosecondsSinceEpoch)/04A1")
    }

    /// The migration that adds the evidence tables (its place in the list is the lead's to order).
    static var evidenceMigration: Int { SQLiteRegistry.migrations.firstIndex { $0.contains("CREATE TABLE tap") }! }

    @Test("a registry of the schema before is migrated forward: its tags kept, its evidence empty, taps recordable")
    func migration() throws {
        let path = try scratchPath("before.sqlite")
        let db = try SQLiteConnection(path: path, mode: .create)
        try SQLiteRegistry.prepare(
            db, path: path, mode: .create, migrations: Array(SQLiteRegistry.migrations.prefix(Self.evidenceMigration)))
        try db.query("INSERT INTO tag (id, lat, lon, radius_m, enrolled_at_ns, accuracy_m) VALUES ('A', 53.545, 9.966, 25, 1, 4)")
        #expect(throws: RegistryStoreError.olderSchema(path, found: Self.evidenceMigration, supported: SQLiteRegistry.schemaVersion)) {
            try SQLiteRegistry(path: path, mode: .readOnly)
        }
        let store = try SQLiteRegistry(path: path, mode: .readWrite)
        var version: Int64 = 0
        try db.query("PRAGMA user_version") { version = $0.integer(0) }
        #expect(version == Int64(SQLiteRegistry.schemaVersion))
        #expect(try store.count() == 1)
        #expect(try store.taps().isEmpty)
        #expect(try store.placementHistory().isEmpty)
        #expect(try store.recordTaps([Self.tap("A", day: 1)]).added == 1)
        #expect(try store.placementEvidence().first?.taps.count == 1)
    }

    @Test("recording the same taps twice counts each once; taps of tags not in the registry are counted apart, not stored")
    func idempotent() throws {
        let path = try scratchPath("taps.sqlite")
        let store = try SQLiteRegistry(path: path, mode: .create)
        try store.add(try Self.enrolled("A"))
        let taps = (1...3).map { Self.tap("A", day: $0) } + [Self.tap("ghost", day: 1)]
        #expect(try store.recordTaps(taps) == SQLiteRegistry.TapImport(added: 3, known: 0, unknownTag: 1))
        #expect(try store.recordTaps(taps) == SQLiteRegistry.TapImport(added: 0, known: 3, unknownTag: 1))
        let stored = try store.taps(forID: "A")
        #expect(stored == Array(taps.prefix(3)))
        #expect(try store.taps(forID: "ghost").isEmpty)
    }

    @Test(
        "applying a refinement moves the placement, keeps the previous one in the history, and the evidence still starts at the enrolment")
    func history() throws {
        let path = try scratchPath("history.sqlite")
        let store = try SQLiteRegistry(path: path, mode: .create)
        try store.add(try Self.enrolled("A", accuracy: 4))
        let refined = Coordinate(validLatitude: 53.545, longitude: 9.96603)
        let change = try store.applyRefinement(
            id: "A", to: refined, accuracy: 1.5, visits: 5, at: Self.day0.advanced(by: .seconds(864_000)))
        #expect(change.from == Self.centre)
        #expect(change.fromAccuracy == 4)
        let after = try #require(try store.storedEntry(withID: "A"))
        #expect(after.region.center == refined)
        #expect(after.enrolment?.accuracy == 1.5)
        #expect(after.enrolment?.at == Self.day0, "the enrolment's time and author stay")
        #expect(after.enrolment?.by == "tech")
        #expect(try store.placementHistory(forID: "A") == [change])
        let evidence = try #require(try store.placementEvidence().first)
        #expect(evidence.enrolled == Self.centre)
        #expect(evidence.enrolledAccuracy == 4)
        #expect(evidence.currentAccuracy == 1.5)
        // Read-only, as `registry refine` without --log or --apply opens it.
        #expect(try SQLiteRegistry(path: path, mode: .readOnly).placementEvidence() == [evidence])
    }

    @Test("a refinement of a tag that is gone is refused and records nothing")
    func gone() throws {
        let path = try scratchPath("gone.sqlite")
        let store = try SQLiteRegistry(path: path, mode: .create)
        try store.add(try Self.enrolled("A"))
        #expect(throws: RegistryStoreError.self) {
            try store.applyRefinement(id: "B", to: Self.centre, accuracy: 1, visits: 3, at: Self.day0)
        }
        #expect(try store.placementHistory().isEmpty)
    }
}
