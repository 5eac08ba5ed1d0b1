import Foundation
import Synchronization
public import TagFixCore

/// The last SUN read counter accepted per tag UID, in a registry file's `sun_counter` table (the
/// registry the run verifies against, or, for a CSV or JSON registry, a registry file of its own:
/// `verify --sun-counters FILE`).
///
/// Each accept is one SQLite statement, so one transaction (`acceptAll`: the counters of taps that
/// arrived together in one): an upsert that raises the counter only
/// when the new one is higher, committed with `synchronous = FULL` before it returns. The verifier
/// accepts a counter before the verdict is logged or shown, so a crash or a power cut at any
/// point either keeps the counter (the URL is never accepted again; the tech's next tap carries a
/// higher counter) or loses the tap unshown (nothing was acknowledged).
///
/// The counters read or accepted are kept in memory too, and a tap's check reads them there (a
/// read of the file took a lock of its own, a tenth of `serve`'s work on a phone tap). That is
/// safe with another process on the same file: what is kept is never above the file's counter
/// (only what the file said or took is kept), and the upsert is what decides; a counter kept
/// too low only lets a replay pass the check, and its upsert then refuses it (`false`: a
/// replay), and the file's counter is read again.
public final class SQLiteSUNCounters: SUNCounterStore {
    public let path: String
    private let connection: Mutex<SQLiteConnection>
    /// The last counter per UID as this store last read or wrote it (`.some(nil)`: none accepted).
    private let known = Mutex<[TagUID: UInt32?]>([:])

    /// Opens the counters in the registry file at `path`, creating the file (an empty registry)
    /// when `create` and it is missing; an older registry schema is migrated.
    public init(path: String, create: Bool) throws(RegistryStoreError) {
        self.path = path
        let mode: SQLiteRegistry.Mode = create ? .create : .readWrite
        if !create, !FileManager.default.fileExists(atPath: path) { throw .missing(path) }
        let opened: SQLiteConnection
        do {
            opened = try SQLiteConnection(path: path, mode: create ? .create : .readWrite)
        } catch {
            throw RegistryStoreError(error, path: path)
        }
        try SQLiteRegistry.prepare(opened, path: path, mode: mode, migrations: SQLiteRegistry.migrations)
        do {
            try opened.execute("PRAGMA synchronous = FULL")
        } catch {
            throw RegistryStoreError(error, path: path)
        }
        connection = Mutex(opened)
    }

    public func lastAccepted(uid: TagUID) throws(RegistryError) -> UInt32? {
        if let last = known.withLock({ $0[uid] }) { return last }
        return try read(uid)
    }

    /// The file's counter for `uid`, kept.
    private func read(_ uid: TagUID) throws(RegistryError) -> UInt32? {
        do {
            return try connection.withConnection { db throws(SQLiteError) -> UInt32? in
                var counter: UInt32?
                try db.query("SELECT counter FROM sun_counter WHERE uid = ?1", [.text(uid.hex)]) {
                    counter = UInt32(clamping: $0.integer(0))
                }
                known.withLock { $0[uid] = .some(counter) }
                return counter
            }
        } catch {
            throw RegistryError(RegistryStoreError(error, path: path).description)
        }
    }

    /// What an upsert said: a counter taken is kept; one refused means the file holds one at
    /// least as high, which is read again.
    private func note(_ uid: TagUID, counter: UInt32, accepted: Bool) {
        if accepted {
            known.withLock { $0[uid] = .some(counter) }
        } else {
            known.withLock { $0[uid] = nil }
            _ = try? read(uid)
        }
    }

    public func accept(uid: TagUID, counter: UInt32, tagID: String) throws(RegistryError) -> Bool {
        do {
            let accepted = try connection.withConnection { db throws(SQLiteError) -> Bool in
                try Self.upsert(db, uid: uid, counter: counter, tagID: tagID)
            }
            note(uid, counter: counter, accepted: accepted)
            return accepted
        } catch {
            throw RegistryError(RegistryStoreError(error, path: path).description)
        }
    }

    /// The counters of taps that arrived together, in one transaction (one commit, one sync to the
    /// disk, where `accept` makes one each): all of them stored, or, when it fails (a full disk, a
    /// read-only file), none, rolled back.
    public func acceptAll(_ counters: [SUNCounterAcceptance]) throws(RegistryError) -> [Bool] {
        guard counters.count > 1 else {
            return try counters.map { item throws(RegistryError) in try accept(uid: item.uid, counter: item.counter, tagID: item.tagID) }
        }
        do {
            let accepted = try connection.withConnection { db throws(SQLiteError) -> [Bool] in
                try db.execute("BEGIN IMMEDIATE")
                do throws(SQLiteError) {
                    let accepted = try counters.map { item throws(SQLiteError) in
                        try Self.upsert(db, uid: item.uid, counter: item.counter, tagID: item.tagID)
                    }
                    try db.execute("COMMIT")
                    return accepted
                } catch {
                    try? db.execute("ROLLBACK")
                    throw error
                }
            }
            for (item, taken) in zip(counters, accepted) { note(item.uid, counter: item.counter, accepted: taken) }
            return accepted
        } catch {
            throw RegistryError(RegistryStoreError(error, path: path).description)
        }
    }

    /// Raises `uid`'s counter to `counter` if it is higher: whether it was.
    private static func upsert(_ db: SQLiteConnection, uid: TagUID, counter: UInt32, tagID: String) throws(SQLiteError) -> Bool {
        try db.query(
            """
            INSERT INTO sun_counter (uid, counter, tag_id) VALUES (?1, ?2, ?3)
            ON CONFLICT(uid) DO UPDATE SET counter = excluded.counter, tag_id = excluded.tag_id
            WHERE excluded.counter > sun_counter.counter
            """, [.text(uid.hex), .integer(Int64(counter)), .text(tagID)])
        return db.changes > 0
    }
}
