import Foundation
import Synchronization
public import TagFixCore

/// The registry of tag placements in a SQLite file: the authoritative "where should this tag be"
/// store. WAL journal, so `tagfix verify` keeps reading while `tagfix enroll` or `tagfix registry
/// import` writes; every write is one transaction; the schema is versioned (`PRAGMA user_version`)
/// and migrated forward when the file is opened for writing.
///
/// Lookups are a primary-key (or unique-index) read from SQLite's page cache, a few microseconds,
/// and never wait for a lock: in WAL mode readers do not block on writers, and a reader's busy
/// timeout is zero, so a lookup is safe to make from the verifier's task.
public final class SQLiteRegistry: TagRegistry, Sendable {
    public enum Mode: Sendable {
        /// Lookups and listing only; the file must exist and be current.
        case readOnly
        /// Lookups and changes; the file must exist; an older schema is migrated.
        case readWrite
        /// As `readWrite`, creating the file when it is missing.
        case create
    }

    /// `PRAGMA application_id`: marks the file as a TagFix registry ("TAGF").
    static let applicationID: Int64 = 0x5441_4746

    /// The schema, one migration per version: migration N takes a file from version N-1 to N.
    static let migrations: [String] = [
        """
        CREATE TABLE tag (
            id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
            uid TEXT UNIQUE,
            name TEXT,
            lat REAL NOT NULL CHECK (lat BETWEEN -90 AND 90),
            lon REAL NOT NULL CHECK (lon BETWEEN -180 AND 180),
            radius_m REAL NOT NULL CHECK (radius_m > 0),
            enrolled_at_ns INTEGER,
            enrolled_by TEXT,
            accuracy_m REAL CHECK (accuracy_m >= 0),
            fixes INTEGER CHECK (fixes >= 0),
            notes TEXT
        ) STRICT;
        """,
        // 2: trust. The originality status a tag was enrolled with, an NTAG 424 DNA's SUN settings
        // (`SUNSettings`, never a key), and the last SUN read counter accepted per UID.
        """
        ALTER TABLE tag ADD COLUMN originality TEXT CHECK (originality IN ('genuine', 'invalid', 'absent', 'unsupported'));
        ALTER TABLE tag ADD COLUMN sun TEXT;
        CREATE TABLE sun_counter (
            uid TEXT PRIMARY KEY NOT NULL,
            counter INTEGER NOT NULL CHECK (counter BETWEEN 0 AND 16777215),
            tag_id TEXT
        ) STRICT;
        """,
        // Placements that learn (`tagfix registry refine`): each confirmed tap of a session log,
        // keyed by the verdict's time and UID so a log imported twice counts once, with the centre
        // it was confirmed against; and the refinements applied, before and after.
        """
        CREATE TABLE tap (
            tag_id TEXT NOT NULL,
            key TEXT NOT NULL,
            at_ns INTEGER NOT NULL,
            lat REAL NOT NULL CHECK (lat BETWEEN -90 AND 90),
            lon REAL NOT NULL CHECK (lon BETWEEN -180 AND 180),
            accuracy_m REAL NOT NULL CHECK (accuracy_m >= 0),
            region_lat REAL NOT NULL CHECK (region_lat BETWEEN -90 AND 90),
            region_lon REAL NOT NULL CHECK (region_lon BETWEEN -180 AND 180),
            PRIMARY KEY (tag_id, key)
        ) STRICT, WITHOUT ROWID;
        CREATE TABLE placement_history (
            seq INTEGER PRIMARY KEY,
            tag_id TEXT NOT NULL,
            changed_at_ns INTEGER NOT NULL,
            from_lat REAL NOT NULL,
            from_lon REAL NOT NULL,
            from_accuracy_m REAL,
            to_lat REAL NOT NULL,
            to_lon REAL NOT NULL,
            to_accuracy_m REAL,
            visits INTEGER NOT NULL CHECK (visits >= 0)
        ) STRICT;
        CREATE INDEX placement_history_by_tag ON placement_history (tag_id, seq);
        """,
        // Read health: how the tag read at enrolment (`ReadHealth`), one row per tag id, and
        // whether it was accepted weak (--accept-weak-read). A table of its own, so entries
        // without one (enrolled before, or through a reader that does not tell) are unchanged.
        """
        CREATE TABLE read_health (
            tag_id TEXT PRIMARY KEY NOT NULL,
            measured_at_ns INTEGER NOT NULL,
            reads INTEGER NOT NULL CHECK (reads >= 0),
            completed INTEGER NOT NULL CHECK (completed BETWEEN 0 AND reads),
            attempts INTEGER NOT NULL CHECK (attempts >= reads),
            rf_errors INTEGER NOT NULL CHECK (rf_errors >= 0),
            fewest_rf_errors INTEGER NOT NULL CHECK (fewest_rf_errors >= 0),
            median_read_ns INTEGER CHECK (median_read_ns >= 0),
            slowest_read_ns INTEGER CHECK (slowest_read_ns >= 0),
            weak INTEGER NOT NULL CHECK (weak IN (0, 1))
        ) STRICT;
        """,
    ]

    /// The schema version this build writes.
    public static var schemaVersion: Int { migrations.count }

    public let path: String
    private let maximumRadius: Double
    private let connection: Mutex<SQLiteConnection>

    private static let columns =
        "id, uid, name, lat, lon, radius_m, enrolled_at_ns, enrolled_by, accuracy_m, fixes, notes, originality, sun"

    /// Opens (or creates) the registry at `path`.
    /// - Parameter maximumRadius: the cap for radii this run accepts (the policy's).
    /// - Throws: `RegistryStoreError`: missing file, not a registry, damaged, newer schema.
    public init(path: String, mode: Mode, maximumRadius: Double = CircularRegion.defaultMaximumRadius) throws(RegistryStoreError) {
        self.path = path
        self.maximumRadius = maximumRadius
        if mode != .create, !FileManager.default.fileExists(atPath: path) { throw .missing(path) }
        let opened: SQLiteConnection
        do {
            opened = try SQLiteConnection(path: path, mode: mode == .readOnly ? .readOnly : mode == .readWrite ? .readWrite : .create)
        } catch {
            throw RegistryStoreError(error, path: path)
        }
        try Self.prepare(opened, path: path, mode: mode, migrations: Self.migrations)
        connection = Mutex(opened)
    }

    /// Opens the registry, runs `body` with it and closes it.
    public static func withRegistry<R>(
        path: String, mode: Mode, maximumRadius: Double = CircularRegion.defaultMaximumRadius,
        _ body: (SQLiteRegistry) throws(RegistryStoreError) -> R
    ) throws(RegistryStoreError) -> R {
        try body(try SQLiteRegistry(path: path, mode: mode, maximumRadius: maximumRadius))
    }

    /// What `path` is when it exists and is not a regular file (or a link to one): "a FIFO", "a
    /// directory", "a character device"…; `nil` for a regular file or nothing there.
    public static func notARegularFile(_ path: String) -> String? { SQLiteConnection.notARegularFile(path) }

    /// Whether `path` is a regular file that begins with SQLite's header (`SQLiteConnection.isSQLiteFile`).
    public static func isSQLiteFile(_ path: String) -> Bool { SQLiteConnection.isSQLiteFile(path) }

    /// Whether `bytes` (a file's start) are a SQLite database's header.
    public static func isSQLite(header bytes: some Collection<UInt8>) -> Bool {
        bytes.starts(with: SQLiteConnection.fileHeader)
    }

    /// Checks the file is a TagFix registry, sets WAL, and brings the schema to `migrations.count`.
    static func prepare(_ db: SQLiteConnection, path: String, mode: Mode, migrations: [String]) throws(RegistryStoreError) {
        do {
            db.setBusyTimeout(milliseconds: mode == .readOnly ? 0 : 5000)
            var application: Int64 = 0
            var version: Int64 = 0
            var tables: Int64 = 0
            try db.query("PRAGMA application_id") { row throws(SQLiteError) in application = row.integer(0) }
            try db.query("PRAGMA user_version") { row throws(SQLiteError) in version = row.integer(0) }
            try db.query("SELECT count(*) FROM sqlite_schema") { row throws(SQLiteError) in tables = row.integer(0) }
            let empty = application == 0 && version == 0 && tables == 0
            if !empty, application != applicationID {
                throw RegistryStoreError.notARegistry(path, "a SQLite database of another application (application_id \(application))")
            }
            if version > migrations.count { throw RegistryStoreError.newerSchema(path, found: Int(version), supported: migrations.count) }
            if mode == .readOnly {
                if empty { throw RegistryStoreError.notARegistry(path, "an empty SQLite database") }
                if version < migrations.count {
                    throw RegistryStoreError.olderSchema(path, found: Int(version), supported: migrations.count)
                }
                return
            }
            try db.execute("PRAGMA journal_mode = WAL")
            try db.execute("PRAGMA synchronous = NORMAL")
            guard version < migrations.count else { return }
            try db.execute("BEGIN IMMEDIATE")
            do {
                for index in Int(version)..<migrations.count { try db.execute(migrations[index]) }
                try db.execute("PRAGMA application_id = \(applicationID)")
                try db.execute("PRAGMA user_version = \(migrations.count)")
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        } catch let error as RegistryStoreError {
            throw error
        } catch let error as SQLiteError {
            throw RegistryStoreError(error, path: path)
        } catch {
            throw RegistryStoreError.sqlite(path, SQLiteError(code: .error, operation: "open", message: "\(error)"))
        }
    }

    // MARK: - Lookups

    public func entry(forID id: String) throws(RegistryError) -> RegistryEntry? {
        try lookup("SELECT \(Self.columns) FROM tag WHERE id = ?1", .text(id))
    }

    /// The entry with this id, with the store's own error (a locked registry is `.busy`), where
    /// `entry(forID:)` answers as any `TagRegistry` does.
    public func storedEntry(withID id: String) throws(RegistryStoreError) -> RegistryEntry? {
        try read("SELECT \(Self.columns) FROM tag WHERE id = ?1", [.text(id)]).first
    }

    public func entry(forUID uid: TagUID) throws(RegistryError) -> RegistryEntry? {
        try lookup("SELECT \(Self.columns) FROM tag WHERE uid = ?1", .text(uid.hex))
    }

    private func lookup(_ sql: String, _ key: SQLiteValue) throws(RegistryError) -> RegistryEntry? {
        do {
            return try read(sql, [key]).first
        } catch {
            throw RegistryError(error.description)
        }
    }

    /// Every entry, by id.
    public func entries() throws(RegistryStoreError) -> [RegistryEntry] {
        try read("SELECT \(Self.columns) FROM tag ORDER BY id", [])
    }

    public func count() throws(RegistryStoreError) -> Int {
        var count = 0
        try run { db throws(SQLiteError) in try db.query("SELECT count(*) FROM tag") { count = Int($0.integer(0)) } }
        return count
    }

    /// Every entry as an in-memory registry (for a verifier that should not touch the disk).
    public func snapshot() throws(RegistryStoreError) -> InMemoryRegistry {
        do {
            return try InMemoryRegistry(try entries())
        } catch let error as RegistryConflict {
            throw .conflict(error)
        } catch let error as RegistryStoreError {
            throw error
        } catch {
            throw .conflict(.duplicateID("\(error)"))
        }
    }

    private func read(_ sql: String, _ parameters: [SQLiteValue]) throws(RegistryStoreError) -> [RegistryEntry] {
        var rows: [Result<RegistryEntry, RegistryStoreError>] = []
        try run { db throws(SQLiteError) in
            try db.query(sql, parameters) { row throws(SQLiteError) in rows.append(self.entry(row)) }
        }
        return try rows.map { result throws(RegistryStoreError) in try result.get() }
    }

    private func entry(_ row: SQLiteRow) -> Result<RegistryEntry, RegistryStoreError> {
        let id = row.text(0) ?? ""
        do {
            let uid = try row.text(1).map { try TagUID(hex: $0) }
            let center = try Coordinate(latitude: row.real(3), longitude: row.real(4))
            let region = try CircularRegion(center: center, radius: row.real(5), identifier: id, maximumRadius: maximumRadius)
            let enrolment =
                row.isNull(6)
                ? nil
                : Enrolment(
                    at: Timestamp(nanosecondsSinceEpoch: row.integer(6)), by: row.text(7), accuracy: row.isNull(8) ? nil : row.real(8),
                    fixes: row.isNull(9) ? nil : Int(row.integer(9)))
            var originality: Originality.Status?
            if let text = row.text(11) {
                guard let status = Originality.Status(rawValue: text) else {
                    return .failure(.invalidEntry(path, id: id, reason: "originality \"\(text)\" is not a status"))
                }
                originality = status
            }
            let sun = try row.text(12).map { try SUNSettings(spec: $0) }
            return .success(
                RegistryEntry(
                    id: id, uid: uid, region: region, name: row.text(2), enrolment: enrolment, notes: row.text(10),
                    originality: originality,
                    sun: sun))
        } catch {
            return .failure(.invalidEntry(path, id: id, reason: "\(error)"))
        }
    }

    // MARK: - Changes

    /// Adds an entry, or with `replace` updates the entry of the same id.
    /// - Throws: `.conflict` when the id exists (without `replace`) or the UID belongs to another tag.
    public func add(_ entry: RegistryEntry, replace: Bool = false) throws(RegistryStoreError) {
        try add([entry], replace: replace)
    }

    /// Adds entries in one transaction: all of them, or none.
    public func add(_ entries: some Sequence<RegistryEntry>, replace: Bool = false) throws(RegistryStoreError) {
        try transaction { db throws(RegistryStoreError) in
            for entry in entries { try self.insert(entry, replace: replace, db) }
        }
    }

    /// Removes the entry with this id. - Returns: whether there was one.
    @discardableResult
    public func remove(id: String) throws(RegistryStoreError) -> Bool {
        var removed = false
        try transaction { db throws(RegistryStoreError) in
            do throws(SQLiteError) {
                try db.query("DELETE FROM tag WHERE id = ?1", [.text(id)])
                removed = db.changes > 0
            } catch {
                throw RegistryStoreError(error, path: self.path)
            }
        }
        return removed
    }

    private func insert(_ entry: RegistryEntry, replace: Bool, _ db: SQLiteConnection) throws(RegistryStoreError) {
        do {
            if let uid = entry.uid {
                var owner: String?
                try db.query("SELECT id FROM tag WHERE uid = ?1", [.text(uid.hex)]) { owner = $0.text(0) }
                if let owner, owner != entry.id { throw RegistryStoreError.conflict(.duplicateUID(uid, owner)) }
            }
            if !replace {
                var exists = false
                try db.query("SELECT 1 FROM tag WHERE id = ?1", [.text(entry.id)]) { _ in exists = true }
                if exists { throw RegistryStoreError.conflict(.alreadyRegistered(entry.id)) }
            }
            let enrolment = entry.enrolment
            let values: [SQLiteValue] = [
                .text(entry.id), entry.uid.map { .text($0.hex) } ?? .null, entry.name.map { .text($0) } ?? .null,
                .real(entry.region.center.latitude), .real(entry.region.center.longitude), .real(entry.region.radius),
                enrolment.map { .integer($0.at.nanosecondsSinceEpoch) } ?? .null, enrolment?.by.map { .text($0) } ?? .null,
                enrolment?.accuracy.map { .real($0) } ?? .null, enrolment?.fixes.map { .integer(Int64($0)) } ?? .null,
                entry.notes.map { .text($0) } ?? .null, entry.originality.map { .text($0.rawValue) } ?? .null,
                entry.sun.map { .text($0.description) } ?? .null,
            ]
            try db.query(
                """
                INSERT INTO tag (\(Self.columns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                ON CONFLICT(id) DO UPDATE SET uid = ?2, name = ?3, lat = ?4, lon = ?5, radius_m = ?6, enrolled_at_ns = ?7,
                enrolled_by = ?8, accuracy_m = ?9, fixes = ?10, notes = ?11, originality = ?12, sun = ?13
                """, values)
        } catch let error as RegistryStoreError {
            throw error
        } catch let error as SQLiteError {
            throw RegistryStoreError(error, path: path)
        } catch {
            throw .sqlite(path, SQLiteError(code: .error, operation: "insert \(entry.id)", message: "\(error)"))
        }
    }

    // MARK: - Read health

    /// Adds (or replaces) `entry` and sets its enrolment's read health in one transaction: `nil`
    /// removes a read health an earlier enrolment of the id left.
    public func add(_ entry: RegistryEntry, replace: Bool = false, readHealth: EnrolledReadHealth?) throws(RegistryStoreError) {
        try transaction { db throws(RegistryStoreError) in
            try self.insert(entry, replace: replace, db)
            do throws(SQLiteError) {
                try db.query("DELETE FROM read_health WHERE tag_id = ?1", [.text(entry.id)])
                guard let record = readHealth else { return }
                let health = record.health
                try db.query(
                    """
                    INSERT INTO read_health (tag_id, measured_at_ns, reads, completed, attempts, rf_errors, fewest_rf_errors,
                    median_read_ns, slowest_read_ns, weak) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                    """,
                    [
                        .text(entry.id), .integer(record.at.nanosecondsSinceEpoch), .integer(Int64(health.reads)),
                        .integer(Int64(health.completed)), .integer(Int64(health.attempts)), .integer(Int64(health.rfErrors)),
                        .integer(Int64(health.fewestRFErrors)), health.medianReadTime.map { .integer(Self.nanoseconds($0)) } ?? .null,
                        health.slowestReadTime.map { .integer(Self.nanoseconds($0)) } ?? .null, .integer(record.weak ? 1 : 0),
                    ])
            } catch {
                throw RegistryStoreError(error, path: self.path)
            }
        }
    }

    /// Every enrolled tag's read health, by tag id (tags enrolled without one are absent).
    public func readHealth() throws(RegistryStoreError) -> [String: EnrolledReadHealth] {
        var found: [String: EnrolledReadHealth] = [:]
        try run { db throws(SQLiteError) in
            try db.query(
                """
                SELECT h.tag_id, h.measured_at_ns, h.reads, h.completed, h.attempts, h.rf_errors, h.fewest_rf_errors, h.median_read_ns,
                h.slowest_read_ns, h.weak FROM read_health h JOIN tag t ON t.id = h.tag_id
                """, []
            ) { row throws(SQLiteError) in
                let health = ReadHealth(
                    reads: Int(row.integer(2)), completed: Int(row.integer(3)), attempts: Int(row.integer(4)),
                    rfErrors: Int(row.integer(5)), fewestRFErrors: Int(row.integer(6)),
                    medianReadTime: row.isNull(7) ? nil : .nanoseconds(row.integer(7)),
                    slowestReadTime: row.isNull(8) ? nil : .nanoseconds(row.integer(8)))
                found[row.text(0) ?? ""] = EnrolledReadHealth(
                    health: health, weak: row.integer(9) != 0, at: Timestamp(nanosecondsSinceEpoch: row.integer(1)))
            }
        }
        return found
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
    }

    // MARK: - Plumbing

    func run(_ body: (SQLiteConnection) throws(SQLiteError) -> Void) throws(RegistryStoreError) {
        do {
            try connection.withConnection(body)
        } catch {
            throw RegistryStoreError(error, path: path)
        }
    }

    /// BEGIN IMMEDIATE … COMMIT, rolled back when `body` throws.
    func transaction(_ body: (SQLiteConnection) throws(RegistryStoreError) -> Void) throws(RegistryStoreError) {
        let result = connection.withLock { db -> Result<Void, RegistryStoreError> in
            do throws(SQLiteError) {
                try db.execute("BEGIN IMMEDIATE")
            } catch {
                return .failure(RegistryStoreError(error, path: path))
            }
            do throws(RegistryStoreError) {
                try body(db)
            } catch {
                try? db.execute("ROLLBACK")
                return .failure(error)
            }
            do throws(SQLiteError) {
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                return .failure(RegistryStoreError(error, path: path))
            }
            return .success(())
        }
        try result.get()
    }
}

/// Why the registry file could not be used, and what to do about it.
public enum RegistryStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    case missing(String)
    case notARegistry(String, String)
    case damaged(String, SQLiteError)
    case newerSchema(String, found: Int, supported: Int)
    case olderSchema(String, found: Int, supported: Int)
    case readOnly(String, SQLiteError)
    case busy(String, SQLiteError)
    case conflict(RegistryConflict)
    case invalidEntry(String, id: String, reason: String)
    case sqlite(String, SQLiteError)

    init(_ error: SQLiteError, path: String) {
        if let kind = SQLiteConnection.notARegularFile(path) {
            self = .notARegistry(path, "it is \(kind), not a file")
            return
        }
        switch error.code.primary {
        case .notADatabase: self = .notARegistry(path, "not a SQLite database")
        case .corrupt: self = .damaged(path, error)
        case .readOnly, .permission: self = .readOnly(path, error)
        case .busy, .locked: self = .busy(path, error)
        case .cannotOpen: self = .missing(path)
        default: self = .sqlite(path, error)
        }
    }

    public var description: String {
        switch self {
        case .missing(let path):
            "registry \(path) does not exist: create it with 'tagfix registry import FILE --registry \(path)' or 'tagfix enroll --registry \(path)'"
        case .notARegistry(let path, let what):
            "\(path) is not a TagFix registry (\(what)): give a registry made by tagfix, or a CSV/JSON file"
        case .damaged(let path, let error):
            "registry \(path) is damaged (\(error.message)): restore it from a backup, or rebuild it with 'tagfix registry import'"
        case .newerSchema(let path, let found, let supported):
            "registry \(path) has schema version \(found), newer than this tagfix's \(supported): upgrade tagfix"
        case .olderSchema(let path, let found, let supported):
            "registry \(path) has schema version \(found), older than this tagfix's \(supported): run 'tagfix registry migrate --registry \(path)'"
        case .readOnly(let path, let error):
            "registry \(path) cannot be written (\(error.message)): check the file's and its folder's permissions"
        case .busy(let path, _):
            "registry \(path) is locked by another writer: try again when it finishes"
        case .conflict(let conflict):
            "\(conflict)"
        case .invalidEntry(let path, let id, let reason):
            "registry \(path): tag \"\(id)\" is unusable (\(reason)): fix it with 'tagfix registry import --replace'"
        case .sqlite(let path, let error):
            "registry \(path): \(error)"
        }
    }
}
