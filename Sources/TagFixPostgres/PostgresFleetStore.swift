import Synchronization
import TagFixCore
public import TagFixStore

/// The fleet store on PostgreSQL: what `FleetStore` keeps in a SQLite file, in one database that
/// several collectors (a shared subscription) write into and one report reads. Each verdict is
/// stored once, by its message `id` (`ON CONFLICT DO NOTHING`), a batch in one transaction, so a
/// collector acknowledges a batch only once it is committed, and a message the broker sends again
/// is a no-op.
///
/// The schema is versioned in `tagfix_schema` and migrated in one transaction under an advisory
/// lock (two collectors starting at once migrate once); a newer version than this build knows is
/// refused and left alone.
public final class PostgresFleetStore: FleetVerdictStore {
    public let address: PostgresAddress
    /// The password for each new connection (`nil`: libpq's own PGPASSFILE, ~/.pgpass), asked
    /// again at every reconnection: a password file changed while the collector runs is read.
    private let password: @Sendable () throws(PostgresError) -> String?
    /// The connection; a broken one (the server restarted, the network went) is replaced by a new
    /// one at the next call, so the batch the broker sends again lands once the server is back.
    private let connection: Mutex<PostgresConnection>

    /// The schema, one migration per version: migration N takes a database from N-1 to N.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE fleet_verdict (
                id text PRIMARY KEY CHECK (length(id) > 0),
                site text NOT NULL,
                device text NOT NULL,
                payload text NOT NULL,
                received_ns bigint NOT NULL,
                stored_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            "CREATE INDEX fleet_verdict_site ON fleet_verdict (site, device)",
            """
            CREATE TABLE fleet_placement (
                site text NOT NULL,
                tag_id text NOT NULL CHECK (length(tag_id) > 0),
                uid text,
                name text,
                lat double precision NOT NULL CHECK (lat BETWEEN -90 AND 90),
                lon double precision NOT NULL CHECK (lon BETWEEN -180 AND 180),
                radius_m double precision NOT NULL CHECK (radius_m > 0),
                registry text NOT NULL,
                loaded_ns bigint NOT NULL,
                PRIMARY KEY (site, tag_id)
            )
            """,
        ]
    ]

    /// The schema version this build writes.
    public static var schemaVersion: Int { migrations.count }

    /// The advisory lock that serialises migrations ("TFFL").
    static let migrationLock = "1413891660"

    /// Connects and brings the schema to this build's version (blocking: from a thread of its own).
    /// - Throws: `PostgresError` (`.newerSchema` for a database a newer TagFix wrote).
    public convenience init(address: PostgresAddress, password: String?) throws(PostgresError) {
        try self.init(address: address, passwordFrom: { password })
    }

    /// Connects and brings the schema to this build's version (blocking: from a thread of its own),
    /// asking `passwordFrom` for the password now and again at each reconnection (a password file
    /// read again: rotated while the collector runs, it is taken at the next connection).
    /// - Throws: `PostgresError` (`.newerSchema` for a database a newer TagFix wrote), or what
    ///   `passwordFrom` throws.
    public init(address: PostgresAddress, passwordFrom: @escaping @Sendable () throws(PostgresError) -> String?) throws(PostgresError) {
        self.address = address
        self.password = passwordFrom
        let connection = try PostgresConnection(address, password: try passwordFrom(), applicationName: "tagfix collect")
        try Self.migrate(connection)
        self.connection = Mutex(connection)
    }

    public var location: String { address.description }

    /// Runs `body` on an open connection: the current one, or a new one when it broke. A connection
    /// found broken during `body` (the server restarted, a proxy closed an idle connection) is
    /// replaced at once and `body` runs once more on the new one, so the error a caller sees is the
    /// one that matters (the server down, a password refused), not the routine loss. `body` is
    /// a transaction that either committed or did not; run again, a commit whose answer was lost
    /// stores nothing twice (the rows conflict by id).
    private func withConnection<Value>(_ body: (PostgresConnection) throws(PostgresError) -> Value) throws(PostgresError) -> Value {
        try connection.withLock { current throws(PostgresError) in
            if !current.isOpen { try reconnect(&current) }
            do throws(PostgresError) {
                return try body(current)
            } catch {
                guard case .connectionLost = error else { throw error }
                try reconnect(&current)
                return try body(current)
            }
        }
    }

    /// Replaces `current` with a new connection, its schema checked.
    private func reconnect(_ current: inout PostgresConnection) throws(PostgresError) {
        let fresh = try PostgresConnection(address, password: try password(), applicationName: "tagfix collect")
        try Self.migrate(fresh)
        current.close()
        current = fresh
    }

    /// The version the database holds, migrating it to this build's when it is older.
    static func migrate(_ connection: PostgresConnection) throws(PostgresError) {
        try connection.transaction { db throws(PostgresError) in
            try db.execute("SELECT pg_advisory_xact_lock(\(migrationLock))")
            try db.execute("CREATE TABLE IF NOT EXISTS tagfix_schema (name text PRIMARY KEY, version integer NOT NULL)")
            let found = try db.execute("SELECT version FROM tagfix_schema WHERE name = 'fleet'").rows.first?.first??.integerValue ?? 0
            guard found <= schemaVersion else { throw .newerSchema(found: found, known: schemaVersion) }
            guard found < schemaVersion else { return }
            for migration in migrations[found...] {
                for statement in migration { try db.execute(statement) }
            }
            try db.execute(
                "INSERT INTO tagfix_schema (name, version) VALUES ('fleet', $1) ON CONFLICT (name) DO UPDATE SET version = excluded.version",
                [String(schemaVersion)])
        }
    }

    /// The most rows one INSERT carries (4 parameters each, far below libpq's 65 535).
    static let rowsPerStatement = 1000

    /// Stores `messages` in one transaction; for each, whether it was new (`false`: a copy of one
    /// stored before, by this collector or another, or earlier in the same batch). Nothing is
    /// stored when it throws. One multi-row `INSERT … ON CONFLICT (id) DO NOTHING RETURNING id`
    /// per 1000 messages (as fast as COPY into a temporary table and `INSERT … SELECT` for a
    /// collector's batches, measured on PostgreSQL 15, and one statement instead of three). A
    /// batch of one statement is sent alone, without `BEGIN` and `COMMIT`: a statement outside a
    /// transaction block is a transaction of its own, committed before its answer comes, so the
    /// batch costs one round trip instead of three.
    public func store(_ messages: [FleetStore.Stored], receivedNanoseconds: Int64) throws(PostgresError) -> [Bool] {
        guard !messages.isEmpty else { return [] }
        return try withConnection { db throws(PostgresError) in
            if messages.count <= Self.rowsPerStatement {
                return try Self.insert(messages, receivedNanoseconds: receivedNanoseconds, db)
            }
            return try db.transaction { db throws(PostgresError) in
                try Self.insert(messages, receivedNanoseconds: receivedNanoseconds, db)
            }
        }
    }

    /// The INSERTs of `store`, on `db` as it is (in a transaction, or one statement alone).
    private static func insert(_ messages: [FleetStore.Stored], receivedNanoseconds: Int64, _ db: PostgresConnection)
        throws(PostgresError) -> [Bool]
    {
        var inserted = Set<String>()
        for start in stride(from: 0, to: messages.count, by: rowsPerStatement) {
            let chunk = messages[start..<min(start + rowsPerStatement, messages.count)]
            var parameters: [String?] = [String(receivedNanoseconds)]
            parameters.reserveCapacity(1 + 4 * chunk.count)
            var sql = "INSERT INTO fleet_verdict (id, site, device, payload, received_ns) VALUES "
            sql.reserveCapacity(sql.utf8.count + 40 * chunk.count + 60)
            for (index, message) in chunk.enumerated() {
                let first = parameters.count + 1
                if index > 0 { sql += ", " }
                sql += "($\(first), $\(first + 1), $\(first + 2), $\(first + 3), $1::bigint)"
                parameters.append(message.id)
                parameters.append(message.site)
                parameters.append(message.device)
                parameters.append(message.payload)
            }
            sql += " ON CONFLICT (id) DO NOTHING RETURNING id"
            let returned = try db.execute(sql, parameters)
            for row in returned.rows { if let id = row.first ?? nil { inserted.insert(id) } }
        }
        // New: inserted now, and the first of its id in the batch.
        return messages.map { inserted.remove($0.id) != nil }
    }

    /// How many verdicts are stored.
    public func count() throws(PostgresError) -> Int {
        try withConnection { db throws(PostgresError) in
            try db.execute("SELECT count(*) FROM fleet_verdict").rows.first?.first??.integerValue ?? 0
        }
    }

    /// Replaces the placements of `sites` with `placements`, in one transaction (as `FleetStore`
    /// does: a site's registry read again is its whole truth; a site not named keeps its own).
    public func replacePlacements(sites: Set<String>, with placements: [FleetStore.Placement], loadedNanoseconds: Int64)
        throws(PostgresError)
    {
        try withConnection { db throws(PostgresError) in
            try db.transaction { db throws(PostgresError) in
                for site in sites.sorted() { try db.execute("DELETE FROM fleet_placement WHERE site = $1", [site]) }
                for placement in placements where sites.contains(placement.site) {
                    let entry = placement.entry
                    try db.execute(
                        """
                        INSERT INTO fleet_placement (site, tag_id, uid, name, lat, lon, radius_m, registry, loaded_ns)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                        ON CONFLICT (site, tag_id) DO UPDATE SET uid = excluded.uid, name = excluded.name, lat = excluded.lat,
                            lon = excluded.lon, radius_m = excluded.radius_m, registry = excluded.registry, loaded_ns = excluded.loaded_ns
                        """,
                        [
                            placement.site, entry.id, entry.uid?.hex, entry.name, String(entry.region.center.latitude),
                            String(entry.region.center.longitude), String(entry.region.radius), placement.registry,
                            String(loadedNanoseconds),
                        ])
                }
            }
        }
    }

    /// The stored placements, by site and tag id; a row that no longer makes a region is left out.
    public func placements() throws(PostgresError) -> [FleetStore.Placement] {
        try withConnection { db throws(PostgresError) in
            try db.execute("SELECT site, tag_id, uid, name, lat, lon, radius_m, registry FROM fleet_placement ORDER BY site, tag_id").rows
                .compactMap { row in
                    guard let site = row[0], let id = row[1], let lat = row[4].flatMap(Double.init),
                        let lon = row[5].flatMap(Double.init), let radius = row[6].flatMap(Double.init)
                    else { return nil }
                    return FleetStore.Placement(
                        site: site, tagID: id, uid: row[2], name: row[3], latitude: lat, longitude: lon, radius: radius,
                        registry: row[7] ?? "")
                }
        }
    }

    /// Every stored verdict, by site, device and arrival.
    public func all() throws(PostgresError) -> [FleetStore.Stored] {
        try withConnection { db throws(PostgresError) in
            try db.execute("SELECT id, site, device, payload FROM fleet_verdict ORDER BY site, device, received_ns, id").rows.map {
                FleetStore.Stored(id: $0[0] ?? "", site: $0[1] ?? "", device: $0[2] ?? "", payload: $0[3] ?? "")
            }
        }
    }

    /// Closes the connection.
    public func close() { connection.withLock { $0.close() } }
}

extension String {
    fileprivate var integerValue: Int? { Int(self) }
}
