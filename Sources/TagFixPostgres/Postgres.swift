internal import CPostgres
import Foundation

// Every libpq call TagFix makes is in this file (as every SQLite call is in TagFixStore's
// SQLite.swift): the connection, parameterised statements in text format, results, and the
// errors with their SQLSTATE.

/// A PostgreSQL server as TagFix is told it: `postgresql://[USER@]HOST[:PORT]/DATABASE[?PARAMS]`
/// (`postgres://` too). The parameters libpq takes for TLS and timeouts pass through (`sslmode`,
/// `sslrootcert`, `sslcert`, `sslkey`, `connect_timeout`, `application_name`,
/// `target_session_attrs`); a password in the address is refused: it belongs in a file of mode
/// 0600 (`--db-password-file`) or libpq's own `PGPASSFILE` / `~/.pgpass`, never on a command line.
public struct PostgresAddress: Sendable, Hashable, CustomStringConvertible {
    public var user: String?
    public var host: String
    public var port: Int
    public var database: String
    /// libpq's connection parameters from the query, by name.
    public var parameters: [String: String]

    /// The parameters that may come in the address.
    public static let allowedParameters: Set<String> = [
        "sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "connect_timeout", "application_name", "target_session_attrs",
    ]

    /// Whether `text` names a PostgreSQL server rather than a file.
    public static func isAddress(_ text: String) -> Bool {
        text.hasPrefix("postgresql://") || text.hasPrefix("postgres://")
    }

    /// - Throws: `PostgresError.address` saying what to write instead.
    public init(_ text: String) throws(PostgresError) {
        guard Self.isAddress(text), let url = URLComponents(string: text), let host = url.host, !host.isEmpty else {
            throw .address("\(text.debugDescription) is not a PostgreSQL address: write postgresql://[USER@]HOST[:PORT]/DATABASE")
        }
        if url.password != nil {
            throw .address(
                "a password in the database address would show in ps and the shell's history: put it in a file of mode 0600 and give --db-password-file FILE (or use PGPASSFILE)"
            )
        }
        let database = String(url.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else {
            throw .address("\(text.debugDescription) names no database: write postgresql://[USER@]HOST[:PORT]/DATABASE")
        }
        var parameters: [String: String] = [:]
        for item in url.queryItems ?? [] {
            guard Self.allowedParameters.contains(item.name), let value = item.value else {
                throw .address(
                    "the database address's parameter \(item.name.debugDescription) is not one TagFix passes on (\(Self.allowedParameters.sorted().joined(separator: ", ")))"
                )
            }
            parameters[item.name] = value
        }
        user = url.user.flatMap { $0.isEmpty ? nil : $0 }
        self.host = host
        port = url.port ?? 5432
        self.database = database
        self.parameters = parameters
    }

    /// The address without any secret, as it is logged.
    public var description: String {
        let query =
            parameters.isEmpty ? "" : "?" + parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
        return "postgresql://\(user.map { "\($0)@" } ?? "")\(host):\(port)/\(database)\(query)"
    }

    /// libpq's keywords and values for this address (`PQconnectdbParams`).
    func keywords(password: String?, applicationName: String) -> [(String, String)] {
        var pairs = [("host", host), ("port", String(port)), ("dbname", database), ("connect_timeout", "10")]
        if let user { pairs.append(("user", user)) }
        if let password { pairs.append(("password", password)) }
        pairs.append(("application_name", applicationName))
        for (key, value) in parameters.sorted(by: { $0.key < $1.key }) {
            pairs.removeAll { $0.0 == key }
            pairs.append((key, value))
        }
        return pairs
    }
}

/// A PostgreSQL error: what failed, the server's SQLSTATE when it gave one, and what to do.
public enum PostgresError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The address cannot be used (exit 64 where the CLI meets it).
    case address(String)
    /// No connection: the server is down, refused us, or the password is wrong.
    case connection(address: String, message: String)
    /// A statement failed: its SQLSTATE (`SQLState`) and the server's message.
    case statement(state: SQLState?, message: String)
    /// The connection broke during a statement (the server restarted, the network went).
    case connectionLost(String)
    /// The database holds a schema this build does not know (a newer TagFix wrote it).
    case newerSchema(found: Int, known: Int)

    public var description: String {
        switch self {
        case .address(let why): why
        case .connection(let address, let message) where isAuthentication:
            "PostgreSQL at \(address) refused the login: \(message) — put the user's password in --db-password-file (mode 0600) or PGPASSFILE"
        case .connection(let address, let message):
            "cannot connect to \(address): \(message) — is the server running and reachable, and the user's password in --db-password-file or PGPASSFILE?"
        case .statement(let state, let message): "PostgreSQL refused a statement\(state.map { " (\($0.rawValue))" } ?? ""): \(message)"
        case .connectionLost(let message): "the connection to PostgreSQL broke: \(message)"
        case .newerSchema(let found, let known):
            "the database holds TagFix schema version \(found), newer than this tagfix knows (\(known)): upgrade tagfix; the database is left as it is"
        }
    }

    /// Whether the server refused the user or the password (libpq says so only in its message):
    /// trying again will not help until someone changes the password or the server's rules.
    public var isAuthentication: Bool {
        guard case .connection(_, let message) = self else { return false }
        return ["password authentication failed", "no password supplied", "no pg_hba.conf entry", "authentication failed"].contains {
            message.contains($0)
        }
    }

    /// Whether trying again on a new connection may succeed (the server restarting, a lost
    /// connection, a full disk being freed); a wrong password or a bad statement will not.
    public var isTransient: Bool {
        switch self {
        case .connection: !isAuthentication
        case .connectionLost: true
        case .statement(let state, _): state?.isTransient ?? false
        case .address, .newerSchema: false
        }
    }
}

/// A SQLSTATE, with the names of those TagFix acts on (PostgreSQL's Appendix A).
public struct SQLState: RawRepresentable, Sendable, Hashable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let uniqueViolation = SQLState(rawValue: "23505")
    public static let invalidPassword = SQLState(rawValue: "28P01")
    public static let invalidAuthorization = SQLState(rawValue: "28000")
    public static let serializationFailure = SQLState(rawValue: "40001")
    public static let deadlockDetected = SQLState(rawValue: "40P01")
    public static let undefinedTable = SQLState(rawValue: "42P01")
    public static let diskFull = SQLState(rawValue: "53100")
    public static let outOfMemory = SQLState(rawValue: "53200")
    public static let tooManyConnections = SQLState(rawValue: "53300")
    public static let queryCanceled = SQLState(rawValue: "57014")
    public static let adminShutdown = SQLState(rawValue: "57P01")
    public static let crashShutdown = SQLState(rawValue: "57P02")
    public static let cannotConnectNow = SQLState(rawValue: "57P03")
    public static let readOnlyTransaction = SQLState(rawValue: "25006")

    /// Class 08 (connection exceptions), 40 (transaction rollback), 53 (insufficient resources),
    /// 57 (operator intervention: a restart, a statement timeout): worth a retry.
    public var isTransient: Bool {
        ["08", "40", "53", "57"].contains(String(rawValue.prefix(2))) || self == .readOnlyTransaction
    }
}

/// The rows a statement returned, as text (libpq's text format), `nil` for SQL NULL.
public struct PostgresRows: Sendable, Hashable {
    public var columns: [String]
    public var rows: [[String?]]
    /// The rows a command touched (`PQcmdTuples`), for INSERT, UPDATE and DELETE.
    public var affected: Int
}

/// One connection to PostgreSQL. Not thread-safe, as libpq's connections are not: its owner keeps
/// it in a `Mutex` and uses it from one thread at a time.
/// @unchecked Sendable: it holds libpq's `PGconn` (an OpaquePointer), used only under its owner's lock.
public final class PostgresConnection: @unchecked Sendable {
    private var connection: OpaquePointer?
    public let address: PostgresAddress

    /// Connects (blocking: call it from a thread of its own, never the cooperative pool).
    /// - Parameter password: the password from `--db-password-file`; `nil` leaves it to libpq
    ///   (`PGPASSFILE`, `~/.pgpass`, or a server that asks none).
    /// - Throws: `PostgresError.connection` with libpq's reason.
    public init(_ address: PostgresAddress, password: String?, applicationName: String = "tagfix") throws(PostgresError) {
        self.address = address
        let pairs = address.keywords(password: password, applicationName: applicationName)
        let keys: [UnsafeMutablePointer<CChar>?] = pairs.map { strdup($0.0) } + [nil]
        let values: [UnsafeMutablePointer<CChar>?] = pairs.map { strdup($0.1) } + [nil]
        defer { for pointer in keys + values { free(pointer) } }
        let made = keys.map { UnsafePointer($0) }.withUnsafeBufferPointer { keyBuffer in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { valueBuffer in
                PQconnectdbParams(keyBuffer.baseAddress, valueBuffer.baseAddress, 0)
            }
        }
        guard let made, PQstatus(made) == CONNECTION_OK else {
            let message = made.map { Self.message(PQerrorMessage($0)) } ?? "out of memory"
            PQfinish(made)
            throw .connection(address: address.description, message: message)
        }
        // The server's notices ("relation … already exists, skipping") are not for the person
        // reading collect's output; libpq would print each on standard error.
        PQsetNoticeProcessor(made, { _, _ in }, nil)
        connection = made
    }

    deinit { PQfinish(connection) }

    /// Closes the connection (and any statement in flight).
    public func close() {
        PQfinish(connection)
        connection = nil
    }

    /// Whether the connection is usable (a restarted server leaves it broken).
    public var isOpen: Bool { connection.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// The server's version, as `server_version_num` (150005 for 15.5).
    public var serverVersion: Int { connection.map { Int(PQserverVersion($0)) } ?? 0 }

    /// Runs `sql` with `parameters` ($1, $2, … as text; `nil` is NULL), blocking.
    /// - Throws: `PostgresError.statement` with the SQLSTATE, or `.connectionLost`.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        guard let connection else { throw .connectionLost("the connection was closed") }
        let copies: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { for pointer in copies { free(pointer) } }
        let result = copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
            PQexecParams(connection, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
        }
        defer { PQclear(result) }
        guard let result else {
            throw .connectionLost(Self.message(PQerrorMessage(connection)))
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            break
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { SQLState(rawValue: String(cString: $0)) }
            let message = Self.message(PQresultErrorMessage(result))
            if PQstatus(connection) != CONNECTION_OK { throw .connectionLost(message) }
            throw .statement(state: state, message: message)
        }
        let columnCount = Int(PQnfields(result))
        let columns = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        var rows: [[String?]] = []
        for row in 0..<Int(PQntuples(result)) {
            rows.append(
                (0..<columnCount).map { column in
                    PQgetisnull(result, Int32(row), Int32(column)) != 0
                        ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
                })
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return PostgresRows(columns: columns, rows: rows, affected: affected)
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    public func transaction<Value>(_ body: (PostgresConnection) throws(PostgresError) -> Value) throws(PostgresError) -> Value {
        try execute("BEGIN")
        do {
            let value = try body(self)
            try execute("COMMIT")
            return value
        } catch {
            if isOpen { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// libpq's message, one line (it ends its messages with a newline, some with two lines).
    static func message(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "no message" }
        return String(cString: text).split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
    }
}
