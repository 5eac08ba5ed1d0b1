import Synchronization
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
public final class PostgresFleetStore: Sendable {
    public let address: PostgresAddress
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
    public init(address: PostgresAddress, password: String?) throws(PostgresError) {
        self.address = address
        let connection = try PostgresConnection(address, password: password, applicationName: "tagfix collect")
        try Self.migrate(connection)
        self.connection = Mutex(connection)
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

    /// Stores `messages` in one transaction; for each, whether it was new (`false`: a copy of one
    /// stored before, by this collector or another). Nothing is stored when it throws.
    public func store(_ messages: [FleetStore.Stored], receivedNanoseconds: Int64) throws(PostgresError) -> [Bool] {
        try connection.withLock { db throws(PostgresError) in
            try db.transaction { db throws(PostgresError) in
                var new: [Bool] = []
                new.reserveCapacity(messages.count)
                for message in messages {
                    let inserted = try db.execute(
                        """
                        INSERT INTO fleet_verdict (id, site, device, payload, received_ns) VALUES ($1, $2, $3, $4, $5)
                        ON CONFLICT (id) DO NOTHING
                        """, [message.id, message.site, message.device, message.payload, String(receivedNanoseconds)])
                    new.append(inserted.affected == 1)
                }
                return new
            }
        }
    }

    /// How many verdicts are stored.
    public func count() throws(PostgresError) -> Int {
        try connection.withLock { db throws(PostgresError) in
            try db.execute("SELECT count(*) FROM fleet_verdict").rows.first?.first??.integerValue ?? 0
        }
    }

    /// Every stored verdict, in the order they were stored.
    public func all() throws(PostgresError) -> [FleetStore.Stored] {
        try connection.withLock { db throws(PostgresError) in
            try db.execute("SELECT id, site, device, payload FROM fleet_verdict ORDER BY received_ns, id").rows.map {
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
