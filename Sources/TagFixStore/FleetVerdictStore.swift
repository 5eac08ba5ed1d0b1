/// Where `tagfix collect` keeps what it receives and `tagfix report` reads a fleet: a SQLite file
/// (`FleetStore`, one collector) or PostgreSQL (`PostgresFleetStore`, several collectors and one
/// report). Each message is stored once by its `id`; a batch is one transaction, so what a
/// collector acknowledges is committed first. Its calls block: make them from a thread of its own.
public protocol FleetVerdictStore: Sendable {
    /// Where it is, for a person: a path, or an address without secrets.
    var location: String { get }
    /// Stores `messages` in one transaction; for each, whether it was new.
    func store(_ messages: [FleetStore.Stored], receivedNanoseconds: Int64) throws -> [Bool]
    /// Replaces the placements of `sites` with `placements`, in one transaction.
    func replacePlacements(sites: Set<String>, with placements: [FleetStore.Placement], loadedNanoseconds: Int64) throws
    /// The stored placements, by site and tag id.
    func placements() throws -> [FleetStore.Placement]
    /// Every stored message.
    func all() throws -> [FleetStore.Stored]
    /// How many messages are stored.
    func count() throws -> Int
}

extension FleetStore: FleetVerdictStore {
    public var location: String { path }
}
