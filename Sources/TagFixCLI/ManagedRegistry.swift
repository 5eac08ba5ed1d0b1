import TagFixCore
import TagFixPostgres
import TagFixStore

/// What `tagfix registry import/export/list/show/remove/migrate` asks of a registry, a SQLite
/// file or PostgreSQL: one switch (`RegistryCommand.perform`) serves both, each kind's errors
/// as the CLI has always said them (a SQLite registry's as `RegistryStoreError`, a PostgreSQL
/// one's mapped by `RegistrySource.postgres`).
protocol ManagedRegistry {
    /// The file's path or the database's address (without secrets), as messages name it.
    var place: String { get }
    /// The schema version this build writes.
    var schemaVersion: Int { get }
    func count() throws -> Int
    func add(_ entries: [RegistryEntry], replace: Bool) throws
    func entries() throws -> [RegistryEntry]
    /// The entry as stored (nil: no such tag).
    func storedEntry(withID id: String) throws -> RegistryEntry?
    func placementHistory(forID id: String) throws -> [PlacementChange]
    /// Whether there was such a tag to remove.
    func remove(id: String) throws -> Bool
}

/// A SQLite registry file, opened in the mode its action needs.
struct SQLiteManagedRegistry: ManagedRegistry {
    let store: SQLiteRegistry
    let place: String

    var schemaVersion: Int { SQLiteRegistry.schemaVersion }
    func count() throws -> Int { try store.count() }
    func add(_ entries: [RegistryEntry], replace: Bool) throws { try store.add(entries, replace: replace) }
    func entries() throws -> [RegistryEntry] { try store.entries() }
    func storedEntry(withID id: String) throws -> RegistryEntry? { try store.storedEntry(withID: id) }
    func placementHistory(forID id: String) throws -> [PlacementChange] { try store.placementHistory(forID: id) }
    func remove(id: String) throws -> Bool { try store.remove(id: id) }
}

/// A registry on PostgreSQL, connected to before the action; its errors as the CLI's.
struct PostgresManagedRegistry: ManagedRegistry {
    let store: PostgresRegistry

    var place: String { store.address.description }
    var schemaVersion: Int { PostgresRegistry.schemaVersion }

    func count() throws -> Int {
        try RegistrySource.postgres(store) { () throws(PostgresRegistryError) in try store.count() }
    }

    func add(_ entries: [RegistryEntry], replace: Bool) throws {
        try RegistrySource.postgres(store) { () throws(PostgresRegistryError) in try store.add(entries, replace: replace) }
    }

    func entries() throws -> [RegistryEntry] {
        try RegistrySource.postgres(store) { () throws(PostgresRegistryError) in try store.entries() }
    }

    func storedEntry(withID id: String) throws -> RegistryEntry? {
        do {
            return try store.entry(forID: id)
        } catch {
            throw CLIError.unavailable(error.message)
        }
    }

    func placementHistory(forID id: String) throws -> [PlacementChange] {
        try RegistrySource.postgres(store) { () throws(PostgresRegistryError) in try store.placementHistory(forID: id) }
    }

    func remove(id: String) throws -> Bool {
        try RegistrySource.postgres(store) { () throws(PostgresRegistryError) in try store.remove(id: id) }
    }
}
