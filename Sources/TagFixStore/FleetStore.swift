import Foundation
import Synchronization
import TagFixCore

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

    static let schema = """
        CREATE TABLE IF NOT EXISTS fleet_verdict (
            id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
            site TEXT NOT NULL,
            device TEXT NOT NULL,
            payload TEXT NOT NULL,
            received_ns INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX IF NOT EXISTS fleet_verdict_site ON fleet_verdict (site, device);
        """

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
            if create {
                // The id first, while the header is still written to the file itself: in WAL mode
                // it would sit in the WAL until a checkpoint.
                if application != Self.applicationID { try opened.execute("PRAGMA application_id = \(Self.applicationID)") }
                try opened.execute("PRAGMA journal_mode = WAL")
                try opened.execute("PRAGMA synchronous = NORMAL")
                try opened.execute(Self.schema)
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

    /// Whether the file at `path` is a fleet store: a SQLite file whose application id (read by
    /// SQLite, so a header still in the WAL counts) is the fleet store's.
    public static func isFleetStore(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 16), Array(head) == Array("SQLite format 3\0".utf8) else { return false }
        return (try? FleetStore(path: path, create: false)) != nil
    }

    /// Stores one message unless its id is stored already.
    /// - Returns: `true` when stored, `false` when it was a copy of one stored before.
    public func store(id: String, site: String, device: String, payload: String, receivedNanoseconds: Int64) throws(SQLiteError) -> Bool {
        let result = connection.withLock { db -> Result<Bool, SQLiteError> in
            do throws(SQLiteError) {
                try db.query(
                    "INSERT OR IGNORE INTO fleet_verdict (id, site, device, payload, received_ns) VALUES (?1, ?2, ?3, ?4, ?5)",
                    [.text(id), .text(site), .text(device), .text(payload), .integer(receivedNanoseconds)])
                return .success(db.changes == 1)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Stores each message unless its id is stored already, all in one transaction.
    /// - Returns: for each message, `true` when stored, `false` when it was a copy.
    public func store(_ messages: [Stored], receivedNanoseconds: Int64) throws(SQLiteError) -> [Bool] {
        guard !messages.isEmpty else { return [] }
        let result = connection.withLock { db -> Result<[Bool], SQLiteError> in
            do throws(SQLiteError) {
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
                return .success(stored)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// How many messages are stored.
    public func count() throws(SQLiteError) -> Int {
        let result = connection.withLock { db -> Result<Int, SQLiteError> in
            do throws(SQLiteError) {
                var count = 0
                try db.query("SELECT count(*) FROM fleet_verdict") { count = Int($0.integer(0)) }
                return .success(count)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Every stored message, by site, device and arrival.
    public func all() throws(SQLiteError) -> [Stored] {
        let result = connection.withLock { db -> Result<[Stored], SQLiteError> in
            do throws(SQLiteError) {
                var rows: [Stored] = []
                try db.query("SELECT id, site, device, payload FROM fleet_verdict ORDER BY site, device, rowid") { row in
                    rows.append(
                        Stored(id: row.text(0) ?? "", site: row.text(1) ?? "", device: row.text(2) ?? "", payload: row.text(3) ?? ""))
                }
                return .success(rows)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

/// A fleet store that cannot be used.
public enum FleetStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    case missing(String)
    case notAFleetStore(String)
    case sqlite(String, SQLiteError)

    /// A file given in the wrong place (not a fleet store), as opposed to one that failed.
    public var isWrongFile: Bool {
        if case .notAFleetStore = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .missing(let path): "fleet store \(path) does not exist: tagfix collect --db \(path) creates it"
        case .notAFleetStore(let path):
            "\(path) is not a TagFix fleet store (tagfix collect --db makes one); it was left as it was"
        case .sqlite(let path, let error): "fleet store \(path): \(error): check the disk and the file's permissions"
        }
    }
}
