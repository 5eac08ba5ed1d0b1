public import TagFixCore

/// The registry of tag placements on PostgreSQL (`--registry postgresql://…` for serve and
/// verify, and `tagfix registry import/export/list/show/remove` on it): what a SQLite registry
/// holds (`SQLiteRegistry`), in one database that several servers read, so a tag imported once
/// is known to all of them at once.
///
/// Lookups are a primary-key (or unique-index) read on one connection; a broken connection is
/// made again on the next lookup, with backoff, and meanwhile a lookup throws (the tap is
/// `inconclusive(registry_unavailable)`). Ids are compared byte for byte (`COLLATE "C"`), as
/// SQLite and the in-memory index compare them. The schema is `tagfix_schema`'s `registry`,
/// migrated as the fleet store's is; a newer one is refused and left alone.
public final class PostgresRegistry: TagRegistry {
    private let link: ReconnectingConnection
    private let maximumRadius: Double

    /// The schema, one migration per version.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE registry_tag (
                id text COLLATE "C" PRIMARY KEY CHECK (length(id) > 0),
                uid text UNIQUE,
                name text,
                lat double precision NOT NULL CHECK (lat BETWEEN -90 AND 90),
                lon double precision NOT NULL CHECK (lon BETWEEN -180 AND 180),
                radius_m double precision NOT NULL CHECK (radius_m > 0),
                enrolled_at_ns bigint,
                enrolled_by text,
                accuracy_m double precision CHECK (accuracy_m >= 0),
                fixes integer CHECK (fixes >= 0),
                notes text,
                originality text CHECK (originality IN ('genuine', 'invalid', 'absent', 'unsupported')),
                sun text
            )
            """,
            """
            CREATE TABLE registry_placement_history (
                seq bigserial PRIMARY KEY,
                tag_id text COLLATE "C" NOT NULL,
                changed_at_ns bigint NOT NULL,
                from_lat double precision NOT NULL,
                from_lon double precision NOT NULL,
                from_accuracy_m double precision,
                to_lat double precision NOT NULL,
                to_lon double precision NOT NULL,
                to_accuracy_m double precision,
                visits integer NOT NULL CHECK (visits >= 0)
            )
            """,
            "CREATE INDEX registry_placement_history_by_tag ON registry_placement_history (tag_id, seq)",
        ]
    ]

    /// The schema version this build writes.
    public static var schemaVersion: Int { migrations.count }

    static let columns = "id, uid, name, lat, lon, radius_m, enrolled_at_ns, enrolled_by, accuracy_m, fixes, notes, originality, sun"

    public var address: PostgresAddress { link.address }

    /// Connects (blocking) and brings the schema to this build's.
    /// - Parameters:
    ///   - maximumRadius: the cap for radii this run accepts (the policy's).
    ///   - report: where a problem with the database, and its end, are said (one line each).
    /// - Throws: `PostgresError` (`.newerSchema` for a database a newer TagFix wrote).
    public init<C: Clock>(
        address: PostgresAddress, password: String?, maximumRadius: Double = CircularRegion.defaultMaximumRadius,
        backoff: ReconnectBackoff = ReconnectBackoff(), clock: C, report: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(PostgresError) where C.Duration == Duration {
        self.maximumRadius = maximumRadius
        link = try ReconnectingConnection(
            address: address, password: password, applicationName: "tagfix registry", what: "registry", backoff: backoff,
            clock: clock, report: report
        ) { connection throws(PostgresError) in
            // No NOTICE on standard error for each new connection (CREATE TABLE IF NOT EXISTS).
            try connection.execute("SET client_min_messages = warning")
            try connection.execute("SET statement_timeout = '5s'")
            try connection.migrate(schema: "registry", Self.migrations)
        }
    }

    /// On the continuous clock.
    public convenience init(
        address: PostgresAddress, password: String?, maximumRadius: Double = CircularRegion.defaultMaximumRadius,
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(PostgresError) {
        try self.init(address: address, password: password, maximumRadius: maximumRadius, clock: ContinuousClock(), report: report)
    }

    // MARK: - Lookups

    public func entry(forID id: String) throws(RegistryError) -> RegistryEntry? {
        try lookup("SELECT \(Self.columns) FROM registry_tag WHERE id = $1", id)
    }

    public func entry(forUID uid: TagUID) throws(RegistryError) -> RegistryEntry? {
        try lookup("SELECT \(Self.columns) FROM registry_tag WHERE uid = $1", uid.hex)
    }

    private func lookup(_ sql: String, _ key: String) throws(RegistryError) -> RegistryEntry? {
        do {
            return try read(sql, [key]).first
        } catch {
            if case .database(let failure) = error { throw RegistryError("registry \(address): \(failure.brief)") }
            throw RegistryError("registry \(address): \(error)")
        }
    }

    /// Every entry, by id (byte order, as a SQLite registry lists them).
    public func entries() throws(PostgresRegistryError) -> [RegistryEntry] {
        try read("SELECT \(Self.columns) FROM registry_tag ORDER BY id", [])
    }

    /// How many tags it holds.
    public func count() throws(PostgresRegistryError) -> Int {
        do {
            return try link.run(retry: true) { db throws(PostgresError) in
                Int((try db.execute("SELECT count(*) FROM registry_tag").rows.first?.first ?? nil) ?? "0") ?? 0
            }
        } catch {
            throw .database(error)
        }
    }

    /// The refinements applied to `id` (every tag's when nil), oldest first.
    public func placementHistory(forID id: String? = nil) throws(PostgresRegistryError) -> [PlacementChange] {
        let rows: [[String?]]
        do {
            rows = try link.run(retry: true) { db throws(PostgresError) in
                try db.execute(
                    """
                    SELECT tag_id, changed_at_ns, from_lat, from_lon, from_accuracy_m, to_lat, to_lon, to_accuracy_m, visits
                    FROM registry_placement_history
                    """ + (id == nil ? "" : " WHERE tag_id = $1") + " ORDER BY seq", id.map { [$0] } ?? []
                ).rows
            }
        } catch {
            throw .database(error)
        }
        return rows.map { row in
            PlacementChange(
                tagID: row[0] ?? "", at: Timestamp(nanosecondsSinceEpoch: row[1].flatMap { Int64($0) } ?? 0),
                from: Coordinate(validLatitude: Self.real(row[2]) ?? 0, longitude: Self.real(row[3]) ?? 0),
                fromAccuracy: Self.real(row[4]),
                to: Coordinate(validLatitude: Self.real(row[5]) ?? 0, longitude: Self.real(row[6]) ?? 0), toAccuracy: Self.real(row[7]),
                visits: row[8].flatMap { Int($0) } ?? 0)
        }
    }

    private func read(_ sql: String, _ parameters: [String?]) throws(PostgresRegistryError) -> [RegistryEntry] {
        let rows: [[String?]]
        do {
            rows = try link.run(retry: true) { db throws(PostgresError) in try db.execute(sql, parameters).rows }
        } catch {
            throw .database(error)
        }
        return try rows.map { row throws(PostgresRegistryError) in try entry(row) }
    }

    private static func real(_ text: String?) -> Double? { text.flatMap { Double($0) } }

    private func entry(_ row: [String?]) throws(PostgresRegistryError) -> RegistryEntry {
        let id = row[0] ?? ""
        do {
            let uid = try row[1].map { try TagUID(hex: $0) }
            let center = try Coordinate(latitude: Self.real(row[3]) ?? .nan, longitude: Self.real(row[4]) ?? .nan)
            let region = try CircularRegion(center: center, radius: Self.real(row[5]) ?? .nan, identifier: id, maximumRadius: maximumRadius)
            let enrolment = row[6].flatMap { Int64($0) }.map {
                Enrolment(
                    at: Timestamp(nanosecondsSinceEpoch: $0), by: row[7], accuracy: Self.real(row[8]), fixes: row[9].flatMap { Int($0) })
            }
            var originality: Originality.Status?
            if let text = row[11] {
                guard let status = Originality.Status(rawValue: text) else {
                    throw PostgresRegistryError.invalidEntry(id: id, reason: "originality \"\(text)\" is not a status")
                }
                originality = status
            }
            let sun = try row[12].map { try SUNSettings(spec: $0) }
            return RegistryEntry(
                id: id, uid: uid, region: region, name: row[2], enrolment: enrolment, notes: row[10], originality: originality, sun: sun)
        } catch let error as PostgresRegistryError {
            throw error
        } catch {
            throw .invalidEntry(id: id, reason: "\(error)")
        }
    }

    // MARK: - Changes

    /// Adds entries in one transaction: all of them, or none. With `replace`, an entry whose id
    /// is registered replaces it.
    /// - Throws: `.conflict` when an id exists (without `replace`) or a UID belongs to another tag.
    public func add(_ entries: some Sequence<RegistryEntry>, replace: Bool = false) throws(PostgresRegistryError) {
        let entries = Array(entries)
        let outcome: Result<Void, PostgresRegistryError>
        do throws(PostgresError) {
            outcome = try link.run(retry: false) { db throws(PostgresError) -> Result<Void, PostgresRegistryError> in
                try db.execute("BEGIN")
                do throws(PostgresError) {
                    for entry in entries {
                        if let conflict = try Self.conflict(entry, replace: replace, db) {
                            try db.execute("ROLLBACK")
                            return .failure(.conflict(conflict))
                        }
                        try Self.insert(entry, db)
                    }
                    try db.execute("COMMIT")
                    return .success(())
                } catch {
                    if db.isOpen { _ = try? db.execute("ROLLBACK") }
                    throw error
                }
            }
        } catch {
            throw .database(error)
        }
        try outcome.get()
    }

    /// What keeps `entry` out: its id registered (without `replace`), or its UID another tag's.
    private static func conflict(_ entry: RegistryEntry, replace: Bool, _ db: PostgresConnection) throws(PostgresError) -> RegistryConflict?
    {
        if let uid = entry.uid,
            let owner = try db.execute("SELECT id FROM registry_tag WHERE uid = $1", [uid.hex]).rows.first?.first ?? nil,
            owner != entry.id
        {
            return .duplicateUID(uid, owner)
        }
        if !replace, try !db.execute("SELECT 1 FROM registry_tag WHERE id = $1", [entry.id]).rows.isEmpty {
            return .alreadyRegistered(entry.id)
        }
        return nil
    }

    private static func insert(_ entry: RegistryEntry, _ db: PostgresConnection) throws(PostgresError) {
        let enrolment = entry.enrolment
        try db.execute(
            """
            INSERT INTO registry_tag (\(columns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
            ON CONFLICT (id) DO UPDATE SET uid = $2, name = $3, lat = $4, lon = $5, radius_m = $6, enrolled_at_ns = $7,
            enrolled_by = $8, accuracy_m = $9, fixes = $10, notes = $11, originality = $12, sun = $13
            """,
            [
                entry.id, entry.uid?.hex, entry.name, String(entry.region.center.latitude), String(entry.region.center.longitude),
                String(entry.region.radius), enrolment.map { String($0.at.nanosecondsSinceEpoch) }, enrolment?.by,
                enrolment?.accuracy.map { String($0) }, enrolment?.fixes.map { String($0) }, entry.notes, entry.originality?.rawValue,
                entry.sun?.description,
            ])
    }

    /// Removes the entry with this id. - Returns: whether there was one.
    @discardableResult
    public func remove(id: String) throws(PostgresRegistryError) -> Bool {
        do {
            return try link.run(retry: false) { db throws(PostgresError) in
                try db.execute("DELETE FROM registry_tag WHERE id = $1", [id]).affected > 0
            }
        } catch {
            throw .database(error)
        }
    }

    /// Closes the connection (the next call opens one again).
    public func close() { link.close() }
}

/// Why the PostgreSQL registry could not do what was asked, and what to do about it.
public enum PostgresRegistryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An id already registered, or a UID another tag's: nothing was written.
    case conflict(RegistryConflict)
    /// A stored row that no longer makes an entry (a radius above this run's cap…).
    case invalidEntry(id: String, reason: String)
    case database(PostgresError)

    public var description: String {
        switch self {
        case .conflict(let conflict): "\(conflict)"
        case .invalidEntry(let id, let reason): "tag \"\(id)\" is unusable (\(reason)): fix it with 'tagfix registry import --replace'"
        case .database(let error): "\(error)"
        }
    }
}
