import TagFixDevices
import TagFixStore
import TagFixTestDaemons
import Testing

@testable import TagFixPostgres

/// One libpq call (a connection, a statement's round trip, a lock wait: each blocks) on a thread
/// of its own, awaited without holding a thread of the cooperative pool. Only the call goes there:
/// the test stays on its task, and its expectations with it.
func libpq<Value: Sendable, Failure: Error>(_ body: @escaping @Sendable () throws(Failure) -> Value) async throws(Failure) -> Value {
    try await offThePool("libpq", body)
}

extension PostgresConnection {
    /// `execute(sql, parameters)` through `libpq`.
    @discardableResult
    func sql(_ text: String, _ parameters: [String?] = []) async throws(PostgresError) -> PostgresRows {
        try await libpq { () throws(PostgresError) in try self.execute(text, parameters) }
    }
}

/// A private cluster for one test (`PrivatePostgres.with`), and what the tests open on it, each
/// connection made through `libpq`.
struct PostgresFixture: Sendable {
    let server: PrivatePostgres
    let address: PostgresAddress

    /// Runs `body` with a fresh cluster, stopped and removed however `body` ends.
    static func with<Value>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PostgresFixture) async throws -> Value
    ) async throws -> Value {
        try await PrivatePostgres.with { server in
            try await body(PostgresFixture(server: server, address: try PostgresAddress(server.address)))
        }
    }

    /// A session of the test's own beside the stores (to change the schema, hold a lock, add a
    /// trigger, read what was stored).
    func session() async throws(PostgresError) -> PostgresConnection {
        let (address, password) = (address, server.password)
        return try await libpq { () throws(PostgresError) in try PostgresConnection(address, password: password) }
    }

    /// SUN read counters on the continuous clock.
    func counters(report: @escaping @Sendable (String) -> Void = { _ in }) async throws(PostgresError) -> PostgresSUNCounters {
        let (address, password) = (address, server.password)
        return try await libpq { () throws(PostgresError) in
            try PostgresSUNCounters(address: address, password: password, report: report)
        }
    }

    /// SUN read counters whose reconnection backoff is timed on `clock`.
    func counters<C: Clock & Sendable>(clock: C, report: @escaping @Sendable (String) -> Void = { _ in }) async throws(PostgresError)
        -> PostgresSUNCounters where C.Duration == Duration
    {
        let (address, password) = (address, server.password)
        return try await libpq { () throws(PostgresError) in
            try PostgresSUNCounters(address: address, password: password, clock: clock, report: report)
        }
    }

    /// The registry.
    func registry() async throws(PostgresError) -> PostgresRegistry {
        let (address, password) = (address, server.password)
        return try await libpq { () throws(PostgresError) in try PostgresRegistry(address: address, password: password) }
    }

    /// A fleet store.
    func fleetStore() async throws(PostgresError) -> PostgresFleetStore {
        let (address, password) = (address, server.password)
        return try await libpq { () throws(PostgresError) in try PostgresFleetStore(address: address, password: password) }
    }

    /// The state tests' set-up: SUN read counters and a session of the test's own beside them,
    /// both closed however `body` ends.
    func withCounters<Value>(
        isolation: isolated (any Actor)? = #isolation, report: @escaping @Sendable (String) -> Void = { _ in },
        _ body: (PostgresSUNCounters, PostgresConnection) async throws -> Value
    ) async throws -> Value {
        let store = try await counters(report: report)
        let db: PostgresConnection
        do {
            db = try await session()
        } catch {
            await libpq { store.close() }
            throw error
        }
        do {
            let value = try await body(store, db)
            await libpq { closeAll(store, db) }
            return value
        } catch {
            await libpq { closeAll(store, db) }
            throw error
        }
    }
}

/// Closes the state tests' store and session (libpq's PQfinish: through `libpq`).
private func closeAll(_ store: PostgresSUNCounters, _ db: PostgresConnection) {
    store.close()
    db.close()
}
