import Foundation
import Synchronization

// A connection for the stores a live run asks on every tap (the SUN counters of `--state`, the
// registry of `--registry postgresql://…`): broken, it is made again on the next call, with
// backoff, and each problem is said once, in one line. No thread of its own: a call that finds
// no connection connects, so nothing runs between taps.

/// When a broken PostgreSQL connection is tried again: a connection that was working and broke
/// (the server restarted, the network went) at once, on the next call; after a connection
/// attempt that failed, not before `first`, then twice as long after each further failure, up
/// to `limit`. Calls in between fail at once, without waiting for a server that is not there.
/// Pure: time is the caller's (a duration since any fixed start).
public struct ReconnectBackoff: Sendable, Hashable {
    public var first: Duration
    public var limit: Duration
    /// Connection attempts that failed since the last success.
    public private(set) var failures = 0
    /// When the next attempt may be made; `nil`: at once.
    public private(set) var retryAt: Duration?

    public init(first: Duration = .milliseconds(500), limit: Duration = .seconds(10)) {
        self.first = first
        self.limit = limit
    }

    /// Whether a connection attempt may be made at `now`.
    public func mayTry(at now: Duration) -> Bool { retryAt.map { now >= $0 } ?? true }

    /// A connection attempt failed at `now`.
    public mutating func attemptFailed(at now: Duration) {
        failures += 1
        var wait = first
        for _ in 1..<failures where wait < limit { wait *= 2 }
        retryAt = now + min(wait, limit)
    }

    /// A connection was made: the next failure starts again from `first`.
    public mutating func connected() {
        failures = 0
        retryAt = nil
    }
}

/// One connection to PostgreSQL, made again when it broke (see `ReconnectBackoff`), for a store
/// that is asked from any thread: the connection sits in a `Mutex` and is used by one caller at
/// a time. `prepare` runs on every new connection (session settings, the schema).
final class ReconnectingConnection: Sendable {
    /// The address as the user gave it (said in messages, without secrets).
    let address: PostgresAddress
    /// What the store keeps, for messages: "SUN read counters", "registry".
    let what: String
    private let connecting: PostgresAddress
    private let password: String?
    private let applicationName: String
    private let prepare: @Sendable (PostgresConnection) throws(PostgresError) -> Void
    private let elapsed: @Sendable () -> Duration
    private let report: @Sendable (String) -> Void

    private struct State {
        var connection: PostgresConnection?
        var backoff: ReconnectBackoff
        /// The problem last said, until the store works again.
        var problem: String?
    }

    private let state: Mutex<State>

    /// Connects at once (blocking), so that a wrong address, password or schema stops a run
    /// before it starts.
    /// - Parameters:
    ///   - connectTimeout: seconds libpq waits for a server, unless the address says
    ///     `connect_timeout` (a tap waits at most this long for a server that does not answer).
    ///   - report: where a problem and the recovery are said, one line each.
    init<C: Clock>(
        address: PostgresAddress, password: String?, applicationName: String, what: String, connectTimeout: Int = 5,
        backoff: ReconnectBackoff = ReconnectBackoff(), clock: C, report: @escaping @Sendable (String) -> Void,
        prepare: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> Void
    ) throws(PostgresError) where C.Duration == Duration {
        self.address = address
        self.what = what
        var connecting = address
        if connecting.parameters["connect_timeout"] == nil { connecting.parameters["connect_timeout"] = String(connectTimeout) }
        self.connecting = connecting
        self.password = password
        self.applicationName = applicationName
        self.prepare = prepare
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
        self.report = report
        let connection = try Self.connect(connecting, said: address, password: password, applicationName: applicationName)
        try prepare(connection)
        state = Mutex(State(connection: connection, backoff: backoff))
    }

    /// Runs `body` on an open connection: the current one, or a new one when it broke and the
    /// backoff allows. A read (`retry`) that finds the connection broken is run once more on a
    /// new one; a write never is (it may have been committed before the connection broke).
    /// - Throws: `PostgresError`; `.connection` at once while the backoff waits.
    func run<Value>(retry: Bool, _ body: (PostgresConnection) throws(PostgresError) -> Value) throws(PostgresError) -> Value {
        try state.withLock { state throws(PostgresError) -> Value in
            var attempts = retry ? 2 : 1
            while true {
                attempts -= 1
                let connection = try open(&state)
                do throws(PostgresError) {
                    let value = try body(connection)
                    if let problem = state.problem {
                        state.problem = nil
                        report("the \(what) in \(address) answer again (after: \(problem))")
                    }
                    return value
                } catch {
                    if !connection.isOpen || error.isConnectionLost {
                        connection.close()
                        state.connection = nil
                        if attempts > 0 { continue }
                    }
                    say(error, &state)
                    throw error
                }
            }
        }
    }

    /// The open connection, made when there is none (if the backoff allows).
    private func open(_ state: inout State) throws(PostgresError) -> PostgresConnection {
        if let connection = state.connection, connection.isOpen { return connection }
        state.connection?.close()
        state.connection = nil
        let now = elapsed()
        guard state.backoff.mayTry(at: now) else {
            let wait = (state.backoff.retryAt ?? now) - now
            throw .connection(
                address: address.description,
                message: "\(state.problem ?? "it did not answer") (not tried again for another \(Self.seconds(wait)) s)")
        }
        do {
            let connection = try Self.connect(connecting, said: address, password: password, applicationName: applicationName)
            try prepare(connection)
            state.backoff.connected()
            state.connection = connection
            return connection
        } catch {
            state.backoff.attemptFailed(at: now)
            say(error, &state, next: state.backoff.retryAt.map { $0 - now })
            throw error
        }
    }

    /// A new connection to `address` (with this store's `connect_timeout`), its errors naming the
    /// address as the user gave it (`said`).
    private static func connect(_ address: PostgresAddress, said: PostgresAddress, password: String?, applicationName: String)
        throws(PostgresError) -> PostgresConnection
    {
        do {
            return try PostgresConnection(address, password: password, applicationName: applicationName)
        } catch {
            if case .connection(_, let message) = error { throw .connection(address: said.description, message: message) }
            throw error
        }
    }

    /// Says a problem once: a new one, or the same again after a connection attempt.
    private func say(_ error: PostgresError, _ state: inout State, next: Duration? = nil) {
        let text = error.withoutAddress
        guard state.problem != text || next != nil else { return }
        state.problem = text
        var line = "the \(what) in \(address) cannot be used: \(error.brief)"
        if let next { line += "; trying again on a tap after \(Self.seconds(next)) s" }
        report(line)
    }

    /// Closes the connection.
    func close() {
        state.withLock {
            $0.connection?.close()
            $0.connection = nil
        }
    }

    private static func seconds(_ duration: Duration) -> String {
        let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return String(format: "%.1f", max(0, value))
    }
}

extension PostgresError {
    /// What went wrong, said beside the address (which a connection error's description repeats).
    var brief: String {
        if case .connection(_, let message) = self { return "cannot connect: \(message)" }
        return description
    }

    /// A connection error's message alone; any other error's description.
    var withoutAddress: String {
        if case .connection(_, let message) = self { return message }
        return description
    }

    /// Whether the connection itself failed (rather than a statement on a working one).
    var isConnectionLost: Bool {
        switch self {
        case .connectionLost, .connection: true
        case .statement(let state, _): state.map { $0.rawValue.hasPrefix("08") || $0 == .adminShutdown || $0 == .crashShutdown } ?? false
        case .address, .newerSchema: false
        }
    }
}

extension PostgresConnection {
    /// Brings the schema `name` (its row in `tagfix_schema`, which the fleet store shares) to
    /// `migrations.count`, in one transaction under the advisory lock every TagFix store takes,
    /// so two servers starting at once migrate once. Migration N takes version N-1 to N.
    /// - Throws: `.newerSchema` for a database a newer TagFix wrote, left as it is.
    func migrate(schema name: String, _ migrations: [[String]]) throws(PostgresError) {
        try transaction { db throws(PostgresError) in
            try db.execute("SELECT pg_advisory_xact_lock(\(PostgresFleetStore.migrationLock))")
            try db.execute("CREATE TABLE IF NOT EXISTS tagfix_schema (name text PRIMARY KEY, version integer NOT NULL)")
            let row = try db.execute("SELECT version FROM tagfix_schema WHERE name = $1", [name]).rows.first
            let found = (row?.first ?? nil).flatMap { Int($0) } ?? 0
            guard found <= migrations.count else { throw .newerSchema(found: found, known: migrations.count) }
            guard found < migrations.count else { return }
            for migration in migrations[found...] {
                for statement in migration { try db.execute(statement) }
            }
            try db.execute(
                "INSERT INTO tagfix_schema (name, version) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET version = excluded.version",
                [name, String(migrations.count)])
        }
    }
}
