import Foundation
import TagFixCore
import Testing

@testable import TagFixStore

/// Schema 2: the originality a tag was enrolled with, its SUN settings, and the SUN counters.
@Suite struct TrustColumnsTests {
    static func entry(_ id: String, originality: Originality.Status?, sun: SUNSettings?) throws -> RegistryEntry {
        let region = try CircularRegion(center: try Coordinate(latitude: 53.5, longitude: 9.9), radius: 20, identifier: id)
        return RegistryEntry(id: id, uid: nil, region: region, name: nil, originality: originality, sun: sun)
    }

    static let entries: [RegistryEntry] = [
        try! entry("A", originality: .genuine, sun: nil),
        try! entry("B", originality: nil, sun: SUNSettings()),
        try! entry(
            "C", originality: .unsupported,
            sun: SUNSettings(
                keyName: "north-2", names: SUNParameterNames(piccData: "e", cmac: "c", encryptedFileData: "enc", macInputFrom: "enc"))),
        try! entry("D", originality: nil, sun: nil),
    ]

    @Test func sqliteKeepsThem() throws {
        let path = NSTemporaryDirectory() + "trust-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try SQLiteRegistry.withRegistry(path: path, mode: .create) { store throws(RegistryStoreError) in try store.add(Self.entries) }
        #expect(try SQLiteRegistry(path: path, mode: .readOnly).entries() == Self.entries)
    }

    @Test(arguments: [RegistryFile.Format.csv, .json])
    func filesKeepThem(format: RegistryFile.Format) throws {
        let text = RegistryFile.write(Self.entries, format: format)
        #expect(try RegistryFile.parse(text, format: format).entries == Self.entries)
        // A registry without trust columns is written as before.
        let plain = RegistryFile.write([Self.entries[3]], format: .csv)
        #expect(!plain.contains("originality") && !plain.contains("sun"))
    }

    /// A version-1 file is migrated forward with its rows intact and no trust columns set.
    @Test func version1IsMigrated() throws {
        let path = NSTemporaryDirectory() + "v1-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try SQLiteConnection(path: path, mode: .create)
        try SQLiteRegistry.prepare(db, path: path, mode: .create, migrations: [SQLiteRegistry.migrations[0]])
        try db.execute("INSERT INTO tag (id, lat, lon, radius_m) VALUES ('T1', 53.5, 9.9, 20)")
        let store = try SQLiteRegistry(path: path, mode: .readWrite)
        let entries = try store.entries()
        #expect(entries.map(\.id) == ["T1"] && entries[0].originality == nil && entries[0].sun == nil)
        let counters = try SQLiteSUNCounters(path: path, create: false)
        #expect(try counters.accept(uid: TagUID(hex: "04DE5F1EACC040"), counter: 1, tagID: "T1"))
    }

    @Test func countersOnlyRiseAndOutliveTheConnection() throws {
        let path = NSTemporaryDirectory() + "ctr-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let uid = try TagUID(hex: "04DE5F1EACC040")
        let other = try TagUID(hex: "04A1B2C3D4E5F6")
        do {
            let counters = try SQLiteSUNCounters(path: path, create: true)
            #expect(try counters.lastAccepted(uid: uid) == nil)
            #expect(try counters.accept(uid: uid, counter: 10, tagID: "T1"))
            #expect(try !counters.accept(uid: uid, counter: 10, tagID: "T1"))
            #expect(try !counters.accept(uid: uid, counter: 9, tagID: "T1"))
            #expect(try counters.accept(uid: other, counter: 2, tagID: "T2"))
            #expect(try counters.accept(uid: uid, counter: 0xFF_FFFF, tagID: "T1"))
        }
        let reopened = try SQLiteSUNCounters(path: path, create: false)
        #expect(try reopened.lastAccepted(uid: uid) == 0xFF_FFFF)
        #expect(try reopened.lastAccepted(uid: other) == 2)
    }

    @Test(arguments: [
        ("", "does not start"), ("site;picc", "is not one of"), ("site;foo=x", "is not one of"), ("site;picc=a;picc=b", "twice"),
        ("site;cmac=a&b", "parameter name"), ("s p", "does not start"),
    ])
    func badSUNSettingsSayWhy(spec: String, message: String) {
        #expect(throws: SUNSettingsError.self) { try SUNSettings(spec: spec) }
        do {
            _ = try SUNSettings(spec: spec)
        } catch {
            #expect(error.description.contains(message), "\(error)")
        }
    }
}
