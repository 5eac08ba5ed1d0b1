public import TagFixCore

/// The SUN read counters on PostgreSQL (`serve --state postgresql://…`, `verify --state`): one
/// table that several servers share, so a SUN URL accepted by one is a replay at every other.
///
/// An accept is one statement, so one transaction, committed (with `synchronous_commit = on`)
/// before it returns: an upsert that raises the stored counter only when the new one is higher
/// (`… ON CONFLICT (uid) DO UPDATE … WHERE stored.counter < EXCLUDED.counter RETURNING …`), so of
/// two servers accepting the same counter at once, one gets the row and the other a replay. A
/// connection that is broken, a server that is down or a commit that fails throws: the tap is
/// `inconclusive`, never confirmed; the next tap connects again (with backoff, `ReconnectBackoff`)
/// and a line says what is wrong and when it works again.
///
/// The schema is `tagfix_schema`'s `state`, migrated as the fleet store's is; a newer one is
/// refused and left alone.
public final class PostgresSUNCounters: SUNCounterStore {
    private let link: ReconnectingConnection

    /// The schema, one migration per version.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE sun_counter (
                uid text PRIMARY KEY CHECK (uid ~ '^([0-9A-F]{2}){4,10}$'),
                counter integer NOT NULL CHECK (counter BETWEEN 0 AND 16777215),
                tag_id text,
                accepted_at timestamptz NOT NULL DEFAULT now()
            )
            """
        ]
    ]

    /// The schema version this build writes.
    public static var schemaVersion: Int { migrations.count }

    public var address: PostgresAddress { link.address }

    /// Connects (blocking: from a thread of its own where it can) and brings the schema to this
    /// build's.
    /// - Parameters:
    ///   - clock: what the reconnection backoff is timed on.
    ///   - report: where a problem with the database, and its end, are said (one line each).
    /// - Throws: `PostgresError` (`.newerSchema` for a database a newer TagFix wrote).
    public init<C: Clock>(
        address: PostgresAddress, password: String?, backoff: ReconnectBackoff = ReconnectBackoff(), clock: C,
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(PostgresError) where C.Duration == Duration {
        link = try ReconnectingConnection(
            address: address, password: password, applicationName: "tagfix state", what: "SUN read counters", backoff: backoff,
            clock: clock, report: report
        ) { connection throws(PostgresError) in
            // Durable before the verdict leaves, whatever the server's default; a server that
            // hangs ends the statement, not the tap's wait.
            // No NOTICE on standard error for each new connection (CREATE TABLE IF NOT EXISTS).
            try connection.execute("SET client_min_messages = warning")
            try connection.execute("SET synchronous_commit = on")
            try connection.execute("SET statement_timeout = '5s'")
            try connection.migrate(schema: "state", Self.migrations)
        }
    }

    /// On the continuous clock.
    public convenience init(address: PostgresAddress, password: String?, report: @escaping @Sendable (String) -> Void = { _ in })
        throws(PostgresError)
    {
        try self.init(address: address, password: password, clock: ContinuousClock(), report: report)
    }

    public func lastAccepted(uid: TagUID) throws(RegistryError) -> UInt32? {
        do {
            return try link.run(retry: true) { db throws(PostgresError) in
                let row = try db.execute("SELECT counter FROM sun_counter WHERE uid = $1", [uid.hex]).rows.first
                return (row?.first ?? nil).flatMap { UInt32($0) }
            }
        } catch {
            throw failure(error)
        }
    }

    public func accept(uid: TagUID, counter: UInt32, tagID: String) throws(RegistryError) -> Bool {
        do {
            return try link.run(retry: false) { db throws(PostgresError) in
                try db.execute(
                    """
                    INSERT INTO sun_counter AS stored (uid, counter, tag_id) VALUES ($1, $2, $3)
                    ON CONFLICT (uid) DO UPDATE SET counter = EXCLUDED.counter, tag_id = EXCLUDED.tag_id, accepted_at = now()
                    WHERE stored.counter < EXCLUDED.counter
                    RETURNING counter
                    """, [uid.hex, String(counter), tagID]
                ).rows.count == 1
            }
        } catch {
            throw failure(error)
        }
    }

    private func failure(_ error: PostgresError) -> RegistryError {
        RegistryError("the SUN read counters in \(link.address) cannot be read or committed (\(error.brief)); the tap is not accepted")
    }

    /// Closes the connection (the next call opens one again).
    public func close() { link.close() }
}
