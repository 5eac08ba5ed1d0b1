import Foundation
import Synchronization
public import TagFixCore

/// The fleet's verdicts in one SQLite file (`tagfix collect --db`): each message stored once,
/// whatever the broker re-delivers, because its `id` (device, session, sequence: docs/fleet.md) is
/// the primary key and a second copy is ignored. WAL, `synchronous = NORMAL`: a commit is one
/// write to the WAL, synced at checkpoints; collectors sharing the file wait for each other's
/// writes (busy timeout 5 s), never for a reader.
public final class FleetStore: Sendable {
    public let path: String
    private let connection: Mutex<SQLiteConnection>

    /// `PRAGMA application_id`: marks the file as a TagFix fleet store ("TFFL").
    static let applicationID: Int64 = 0x5446_464C

    /// The schema, one migration per version (`PRAGMA user_version`): migration N takes a store
    /// from version N-1 to N, in one transaction, when `collect` opens it. A store written before
    /// the versions were counted is version 0 with `fleet_verdict` already there, hence `IF NOT
    /// EXISTS`. A reader (`report`) never migrates: it reads what the version has.
    static let migrations: [String] = [
        """
        CREATE TABLE IF NOT EXISTS fleet_verdict (
            id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
            site TEXT NOT NULL,
            device TEXT NOT NULL,
            payload TEXT NOT NULL,
            received_ns INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX IF NOT EXISTS fleet_verdict_site ON fleet_verdict (site, device);
        """,
        // 2: where each site's tags should be (`collect --registry`), so the report can draw the
        // tags never tapped. Only what the report draws: no SUN settings, no counters, no notes.
        """
        CREATE TABLE fleet_placement (
            site TEXT NOT NULL,
            tag_id TEXT NOT NULL CHECK (length(tag_id) > 0),
            uid TEXT,
            name TEXT,
            lat REAL NOT NULL CHECK (lat BETWEEN -90 AND 90),
            lon REAL NOT NULL CHECK (lon BETWEEN -180 AND 180),
            radius_m REAL NOT NULL CHECK (radius_m > 0),
            registry TEXT NOT NULL,
            loaded_ns INTEGER NOT NULL,
            PRIMARY KEY (site, tag_id)
        ) STRICT;
        """,
    ]

    /// The schema version this build writes.
    public static var schemaVersion: Int { migrations.count }

    /// A stored message.
    public struct Stored: Sendable, Hashable {
        public init(id: String, site: String, device: String, payload: String) {
            self.id = id
            self.site = site
            self.device = device
            self.payload = payload
        }

        public var id: String
        public var site: String
        public var device: String
        /// The message as received (a session-log record with `id` and `device`).
        public var payload: String
    }

    /// Opens the store at `path`, creating it when `create` (and it is missing).
    /// - Throws: `FleetStoreError`: missing, not a fleet store (a registry given by mistake…),
    ///   unreadable.
    public init(path: String, create: Bool) throws(FleetStoreError) {
        self.path = path
        if !create, !FileManager.default.fileExists(atPath: path) { throw .missing(path) }
        let opened: SQLiteConnection
        do {
            opened = try SQLiteConnection(path: path, mode: create ? .create : .readOnly)
            opened.setBusyTimeout(milliseconds: 5000)
            var application: Int64 = 0
            var tables = 0
            try opened.query("PRAGMA application_id") { application = $0.integer(0) }
            try opened.query("SELECT count(*) FROM sqlite_master") { tables = Int($0.integer(0)) }
            if application != Self.applicationID && (tables > 0 || !create) {
                throw FleetStoreError.notAFleetStore(path)
            }
            var version: Int64 = 0
            try opened.query("PRAGMA user_version") { version = $0.integer(0) }
            if version > Self.migrations.count {
                throw FleetStoreError.newerSchema(path, found: Int(version), supported: Self.migrations.count)
            }
            if create {
                // The id first, while the header is still written to the file itself: in WAL mode
                // it would sit in the WAL until a checkpoint.
                if application != Self.applicationID { try opened.execute("PRAGMA application_id = \(Self.applicationID)") }
                try opened.execute("PRAGMA journal_mode = WAL")
                try opened.execute("PRAGMA synchronous = NORMAL")
                try Self.migrate(opened)
            }
        } catch let error as FleetStoreError {
            throw error
        } catch let error as SQLiteError {
            throw error.code.primary == .notADatabase ? .notAFleetStore(path) : .sqlite(path, error)
        } catch {
            throw .notAFleetStore(path)
        }
        connection = Mutex(opened)
    }

    /// Brings the schema to `migrations.count` in one transaction (all or nothing). Collectors
    /// sharing the file may race here: the version is read again under the write lock.
    private static func migrate(_ db: SQLiteConnection) throws(SQLiteError) {
        try db.execute("BEGIN IMMEDIATE")
        do throws(SQLiteError) {
            var version: Int64 = 0
            try db.query("PRAGMA user_version") { version = $0.integer(0) }
            if version < migrations.count {
                for index in Int(version)..<migrations.count { try db.execute(migrations[index]) }
                try db.execute("PRAGMA user_version = \(migrations.count)")
            }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
    }

    /// Whether the file at `path` is a fleet store: a SQLite file whose application id (read by
    /// SQLite, so a header still in the WAL counts) is the fleet store's — of any schema version,
    /// so that one from a newer tagfix is opened as a fleet store and refused as such.
    public static func isFleetStore(_ path: String) -> Bool {
        guard SQLiteConnection.isSQLiteFile(path), let db = try? SQLiteConnection(path: path, mode: .readOnly) else { return false }
        var application: Int64 = 0
        guard (try? db.query("PRAGMA application_id", row: { application = $0.integer(0) })) != nil else { return false }
        return application == applicationID
    }

    /// Stores one message unless its id is stored already.
    /// - Returns: `true` when stored, `false` when it was a copy of one stored before.
    public func store(id: String, site: String, device: String, payload: String, receivedNanoseconds: Int64) throws(SQLiteError) -> Bool {
        return try connection.withConnection { db throws(SQLiteError) -> Bool in
            try db.query(
                "INSERT OR IGNORE INTO fleet_verdict (id, site, device, payload, received_ns) VALUES (?1, ?2, ?3, ?4, ?5)",
                [.text(id), .text(site), .text(device), .text(payload), .integer(receivedNanoseconds)])
            return db.changes == 1
        }
    }

    /// Stores each message unless its id is stored already, all in one transaction.
    /// - Returns: for each message, `true` when stored, `false` when it was a copy.
    public func store(_ messages: [Stored], receivedNanoseconds: Int64) throws(SQLiteError) -> [Bool] {
        guard !messages.isEmpty else { return [] }
        return try connection.withConnection { db throws(SQLiteError) -> [Bool] in
            try db.execute("BEGIN IMMEDIATE")
            var stored: [Bool] = []
            do throws(SQLiteError) {
                for message in messages {
                    try db.query(
                        "INSERT OR IGNORE INTO fleet_verdict (id, site, device, payload, received_ns) VALUES (?1, ?2, ?3, ?4, ?5)",
                        [
                            .text(message.id), .text(message.site), .text(message.device), .text(message.payload),
                            .integer(receivedNanoseconds),
                        ])
                    stored.append(db.changes == 1)
                }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
            return stored
        }
    }

    /// Lets the file hold at most `pages` pages (SQLite's `max_page_count`; `nil`: SQLite's
    /// limit again), so a write that needs another fails with SQLITE_FULL at once: what a full
    /// disk looks like to the collector. For tests.
    func limitPages(_ pages: Int?) throws(SQLiteError) {
        try connection.withConnection { db throws(SQLiteError) in
            try db.execute("PRAGMA max_page_count = \(pages ?? 4_294_967_294)")
        }
    }

    /// How many pages the file has now.
    func pageCount() throws(SQLiteError) -> Int {
        return try connection.withConnection { db throws(SQLiteError) -> Int in
            var count = 0
            try db.query("PRAGMA page_count") { count = Int($0.integer(0)) }
            return count
        }
    }

    /// How many messages are stored.
    public func count() throws(SQLiteError) -> Int {
        return try connection.withConnection { db throws(SQLiteError) -> Int in
            var count = 0
            try db.query("SELECT count(*) FROM fleet_verdict") { count = Int($0.integer(0)) }
            return count
        }
    }

    /// Where a tag of a site should be, as `collect --registry` stored it.
    public struct Placement: Sendable, Hashable {
        public var site: String
        /// The id, UID, name and region only: what the report draws. Never SUN settings.
        public var entry: RegistryEntry
        /// The registry file it was read from.
        public var registry: String

        public init(site: String, entry: RegistryEntry, registry: String) {
            self.site = site
            self.entry = entry
            self.registry = registry
        }

        /// A placement as a store's row holds it; `nil` for a row that no longer makes a region
        /// (edited by hand). A UID that is not hex is left out.
        public init?(
            site: String, tagID: String, uid: String?, name: String?, latitude: Double, longitude: Double, radius: Double, registry: String
        ) {
            guard let center = try? Coordinate(latitude: latitude, longitude: longitude),
                let region = try? CircularRegion(center: center, radius: radius, identifier: tagID, maximumRadius: .infinity)
            else { return nil }
            self.init(
                site: site, entry: RegistryEntry(id: tagID, uid: uid.flatMap { try? TagUID(hex: $0) }, region: region, name: name),
                registry: registry)
        }
    }

    /// Replaces the stored placements of each site in `sites` with `placements` (whose sites must
    /// be among them), in one transaction: a site's registry read again is the site's whole truth,
    /// and a site not named keeps what it had. A tag id twice in one site: the later one stays.
    /// Only the id, UID, name, centre and radius are copied (a registry's SUN settings, read
    /// counters, enrolment and notes stay in the registry).
    public func replacePlacements(sites: Set<String>, with placements: [Placement], loadedNanoseconds: Int64) throws(SQLiteError) {
        try connection.withConnection { db throws(SQLiteError) in
            try db.execute("BEGIN IMMEDIATE")
            do throws(SQLiteError) {
                for site in sites.sorted() { try db.query("DELETE FROM fleet_placement WHERE site = ?1", [.text(site)]) }
                for placement in placements where sites.contains(placement.site) {
                    let entry = placement.entry
                    try db.query(
                        """
                        INSERT OR REPLACE INTO fleet_placement (site, tag_id, uid, name, lat, lon, radius_m, registry, loaded_ns)
                        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                        """,
                        [
                            .text(placement.site), .text(entry.id), entry.uid.map { .text($0.hex) } ?? .null,
                            entry.name.map { .text($0) } ?? .null, .real(entry.region.center.latitude),
                            .real(entry.region.center.longitude), .real(entry.region.radius), .text(placement.registry),
                            .integer(loadedNanoseconds),
                        ])
                }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// The stored placements, by site and tag id; none from a store written before version 2
    /// (`report` reads such a store as it is, without migrating it). A row that no longer makes a
    /// region (edited by hand) is left out.
    public func placements() throws(SQLiteError) -> [Placement] {
        return try connection.withConnection { db throws(SQLiteError) -> [Placement] in
            var exists = false
            try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fleet_placement'") { _ in exists = true }
            guard exists else { return [] }
            var placements: [Placement] = []
            try db.query(
                "SELECT site, tag_id, uid, name, lat, lon, radius_m, registry FROM fleet_placement ORDER BY site, tag_id"
            ) { row in
                guard let site = row.text(0), let id = row.text(1),
                    let placement = Placement(
                        site: site, tagID: id, uid: row.text(2), name: row.text(3), latitude: row.real(4), longitude: row.real(5),
                        radius: row.real(6), registry: row.text(7) ?? "")
                else { return }
                placements.append(placement)
            }
            return placements
        }
    }

    /// Every stored message, by site, device and arrival.
    public func all() throws(SQLiteError) -> [Stored] {
        return try connection.withConnection { db throws(SQLiteError) -> [Stored] in
            var rows: [Stored] = []
            try db.query("SELECT id, site, device, payload FROM fleet_verdict ORDER BY site, device, rowid") { row in
                rows.append(
                    Stored(id: row.text(0) ?? "", site: row.text(1) ?? "", device: row.text(2) ?? "", payload: row.text(3) ?? ""))
            }
            return rows
        }
    }
}

/// A fleet store that cannot be used.
public enum FleetStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    case missing(String)
    case notAFleetStore(String)
    /// Written by a newer tagfix (a schema version this build does not know).
    case newerSchema(String, found: Int, supported: Int)
    case sqlite(String, SQLiteError)

    /// A file given in the wrong place (not a fleet store), as opposed to one that failed.
    public var isWrongFile: Bool {
        switch self {
        case .notAFleetStore, .newerSchema: true
        case .missing, .sqlite: false
        }
    }

    public var description: String {
        switch self {
        case .missing(let path): "fleet store \(path) does not exist: tagfix collect --db \(path) creates it"
        case .notAFleetStore(let path):
            "\(path) is not a TagFix fleet store (tagfix collect --db makes one); it was left as it was"
        case .newerSchema(let path, let found, let supported):
            "fleet store \(path) has schema version \(found), newer than this tagfix's \(supported): use a newer tagfix; it was left as it was"
        case .sqlite(let path, let error): "fleet store \(path): \(error): check the disk and the file's permissions"
        }
    }
}
