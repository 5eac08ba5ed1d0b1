public import TagFixCore

/// The SUN read counters on PostgreSQL (`serve --state postgresql://…`, `verify --state`): one
/// table that several servers share, so a SUN URL accepted by one is a replay at every other.
///
/// An accept is one statement, so one transaction, committed (with `synchronous_commit = on`)
/// before it returns: an upsert that raises the stored counter only when the new one is higher
/// (`… ON CONFLICT (uid) DO UPDATE … WHERE stored.counter < EXCLUDED.counter RETURNING …`), so of
/// two servers accepting the same counter at once, one gets the row and the other a replay. The
/// counters of a group of phone taps (`acceptAll`) are one such upsert over arrays, one round trip
/// for the whole group, with the same verdicts as one by one. A
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

    /// One round trip for a group's tags, where `lastAccepted(uid:)` makes one a tag.
    public var readsManyAtOnce: Bool { true }

    /// The highest counter accepted for each of `uids`, in one statement (one round trip where
    /// `lastAccepted(uid:)` makes one a tag); a tag none was accepted for is absent.
    public func lastAccepted(uids: [TagUID]) throws(RegistryError) -> [TagUID: UInt32] {
        var byHex: [String: TagUID] = [:]
        for uid in uids { byHex[uid.hex] = uid }
        guard !byHex.isEmpty else { return [:] }
        let hexes = byHex.keys.sorted()
        do {
            let rows = try link.run(retry: true) { db throws(PostgresError) in
                try db.execute("SELECT uid, counter FROM sun_counter WHERE uid = ANY($1::text[])", [PostgresArray.text(hexes)]).rows
            }
            var last: [TagUID: UInt32] = [:]
            for row in rows {
                if let hex = row.first ?? nil, let uid = byHex[hex], let counter = (row.count > 1 ? row[1] : nil).flatMap({ UInt32($0) }) {
                    last[uid] = counter
                }
            }
            return last
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

    /// The counters of taps that arrived together, as `accept` would take them one after another,
    /// committed together before it returns: in one statement, one round trip, for a group whose
    /// tags each raise their counter at most once in it (`SUNCounterRounds`: a tag's counter not
    /// above one the group gave it before is a replay, decided here), an upsert over arrays that
    /// returns the tags whose counter it raised. A group that raises a tag's counter twice (5,
    /// then 7) needs the stored counter between the two: one such statement per raise, in one
    /// transaction. A failure commits none of them: the error says so, and none is accepted.
    public func acceptAll(_ counters: [SUNCounterAcceptance]) throws(RegistryError) -> [Bool] {
        guard counters.count > 1 else {
            return try counters.map { item throws(RegistryError) in try accept(uid: item.uid, counter: item.counter, tagID: item.tagID) }
        }
        let plan = SUNCounterRounds(counters)
        do {
            let raised = try link.run(retry: false) { db throws(PostgresError) -> [Set<String>] in
                guard plan.rounds.count > 1 else { return [try Self.raise(plan.rounds[0], db)] }
                return try db.transaction { db throws(PostgresError) in
                    try plan.rounds.map { round throws(PostgresError) in try Self.raise(round, db) }
                }
            }
            return plan.accepted(raised: raised)
        } catch {
            throw failure(error)
        }
    }

    /// Raises each counter of `round` (one per tag) where it is above the stored one, in one
    /// statement: the tags it raised (their UIDs' hex).
    private static func raise(_ round: [SUNCounterAcceptance], _ db: PostgresConnection) throws(PostgresError) -> Set<String> {
        let rows = try db.execute(
            """
            INSERT INTO sun_counter AS stored (uid, counter, tag_id)
            SELECT * FROM unnest($1::text[], $2::integer[], $3::text[])
            ON CONFLICT (uid) DO UPDATE SET counter = EXCLUDED.counter, tag_id = EXCLUDED.tag_id, accepted_at = now()
            WHERE stored.counter < EXCLUDED.counter
            RETURNING uid
            """,
            [
                PostgresArray.text(round.map(\.uid.hex)), PostgresArray.integers(round.map(\.counter)),
                PostgresArray.text(round.map(\.tagID)),
            ]
        ).rows
        return Set(rows.compactMap { $0.first ?? nil })
    }

    private func failure(_ error: PostgresError) -> RegistryError {
        RegistryError("the SUN read counters in \(link.address) cannot be read or committed (\(error.brief)); the tap is not accepted")
    }

    /// Closes the connection (the next call opens one again).
    public func close() { link.close() }
}

/// A group's counters as `PostgresSUNCounters.acceptAll` commits them: what can be decided
/// before the database is asked, and the statements (rounds) for the rest. Taken one after
/// another, a counter not above one earlier in the group for its tag is a replay whatever the
/// store holds (the stored counter is at least that one by then); a counter above every earlier
/// one of its tag's raises the stored counter exactly when it is above the counter stored before
/// the group. A tag's first raise goes in the first round, its second in the second, and so on:
/// one statement cannot touch a row twice, and each round, run after the ones before it, sees the
/// counter they left, as the taps one by one would have. Each round is in the UIDs' order, so two
/// servers' groups lock their rows in one order and never wait on each other in a circle (a tag
/// in a later round is one the first round already locked). Pure: no I/O.
struct SUNCounterRounds: Sendable {
    /// The statements' counters, at most one per tag in each, in the UIDs' order.
    private(set) var rounds: [[SUNCounterAcceptance]] = []
    /// For each counter of the group, in order: its round and its UID's hex, or `nil` for a
    /// replay decided here.
    private var placed: [(round: Int, uid: String)?] = []

    init(_ counters: [SUNCounterAcceptance]) {
        var highest: [TagUID: (counter: UInt32, raises: Int)] = [:]
        placed.reserveCapacity(counters.count)
        for item in counters {
            if let seen = highest[item.uid], item.counter <= seen.counter {
                placed.append(nil)
                continue
            }
            let round = highest[item.uid]?.raises ?? 0
            highest[item.uid] = (item.counter, round + 1)
            if round == rounds.count { rounds.append([]) }
            rounds[round].append(item)
            placed.append((round, item.uid.hex))
        }
        for index in rounds.indices { rounds[index].sort { $0.uid.hex < $1.uid.hex } }
    }

    /// Whether each counter of the group was accepted, given the tags (their UIDs' hex) each
    /// round raised.
    func accepted(raised: [Set<String>]) -> [Bool] {
        placed.map { place in
            guard let place, place.round < raised.count else { return false }
            return raised[place.round].contains(place.uid)
        }
    }

    /// Each counter's round, `nil` for a replay decided before the database is asked.
    var roundOfEach: [Int?] { placed.map { $0?.round } }
}

/// PostgreSQL's array literals (`{"a","b"}`), for statements that take a whole group in one
/// parameter (`unnest($1::text[])`).
enum PostgresArray {
    /// Each element quoted, `"` and `\` escaped. An element is cut at a NUL, as a text parameter
    /// of its own is (libpq takes C strings).
    static func text(_ elements: [String]) -> String {
        var literal = "{"
        for (index, element) in elements.enumerated() {
            if index > 0 { literal += "," }
            literal += "\""
            for character in element.unicodeScalars {
                if character == "\0" { break }
                if character == "\"" || character == "\\" { literal += "\\" }
                literal.unicodeScalars.append(character)
            }
            literal += "\""
        }
        return literal + "}"
    }

    static func integers(_ elements: [UInt32]) -> String {
        "{" + elements.map(String.init).joined(separator: ",") + "}"
    }
}
