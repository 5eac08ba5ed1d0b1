import CSQLite
import Glibc
import Synchronization
import TagFixSystem

// MARK: - Every call into SQLite goes through this file.

/// A SQLite result code with its name (SQLITE_BUSY → `busy`), as `Errno` does for errno.
public struct SQLiteResultCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary code (extended codes carry it in their low byte).
    public var primary: SQLiteResultCode { SQLiteResultCode(rawValue: rawValue & 0xFF) }

    public static let ok = SQLiteResultCode(rawValue: SQLITE_OK)
    public static let error = SQLiteResultCode(rawValue: SQLITE_ERROR)
    public static let busy = SQLiteResultCode(rawValue: SQLITE_BUSY)
    public static let locked = SQLiteResultCode(rawValue: SQLITE_LOCKED)
    public static let readOnly = SQLiteResultCode(rawValue: SQLITE_READONLY)
    public static let ioError = SQLiteResultCode(rawValue: SQLITE_IOERR)
    public static let corrupt = SQLiteResultCode(rawValue: SQLITE_CORRUPT)
    public static let cannotOpen = SQLiteResultCode(rawValue: SQLITE_CANTOPEN)
    public static let constraint = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT)
    public static let notADatabase = SQLiteResultCode(rawValue: SQLITE_NOTADB)
    public static let full = SQLiteResultCode(rawValue: SQLITE_FULL)
    public static let permission = SQLiteResultCode(rawValue: SQLITE_PERM)

    /// sqlite3_errstr: SQLite's English name for the code.
    public var description: String { String(cString: sqlite3_errstr(rawValue)) }
}

/// A failed SQLite call: the code, what was being done and SQLite's message.
public struct SQLiteError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: SQLiteResultCode
    public var operation: String
    public var message: String

    public var description: String { "\(operation): \(message) (\(code))" }
}

/// One connection (sqlite3_open_v2 … sqlite3_close_v2). Not thread-safe by itself: its owner
/// serialises every use (SQLiteRegistry holds it in a Mutex).
final class SQLiteConnection {
    enum Mode {
        case readOnly, readWrite, create

        var flags: Int32 {
            switch self {
            case .readOnly: SQLITE_OPEN_READONLY
            case .readWrite: SQLITE_OPEN_READWRITE
            case .create: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
            }
        }
    }

    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(path: String, mode: Mode) throws(SQLiteError) {
        // A FIFO, a device or a socket is never a database, and opening one blocks (a FIFO with no
        // writer) or reads what is not ours: refused before SQLite opens it.
        if let kind = Self.notARegularFile(path) {
            throw SQLiteError(
                code: SQLiteResultCode(rawValue: SQLITE_CANTOPEN), operation: "open \(path)",
                message: "it is \(kind), not a database file: give the SQLite file itself")
        }
        var opened: OpaquePointer?
        // NOMUTEX: the owner serialises access; SQLite need not lock again.
        let result = sqlite3_open_v2(path, &opened, mode.flags | SQLITE_OPEN_NOMUTEX, nil)
        guard result == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let opened { sqlite3_close_v2(opened) }
            throw SQLiteError(code: SQLiteResultCode(rawValue: result), operation: "open \(path)", message: message)
        }
        handle = opened
        sqlite3_extended_result_codes(handle, 1)
    }

    /// What `path` is when it exists and is not a regular file (or a link to one): "a FIFO", "a
    /// directory"…; `nil` for a regular file or nothing there.
    static func notARegularFile(_ path: String) -> String? {
        guard let info = try? Stat(path) else { return nil }
        switch info.type {
        case .regular: return nil
        case .fifo: return "a FIFO"
        case .directory: return "a directory"
        case .characterSpecial: return "a character device"
        case .blockSpecial: return "a block device"
        case .socket: return "a socket"
        default: return "not a regular file"
        }
    }

    /// What every SQLite database file begins with.
    static let fileHeader = Array("SQLite format 3\u{0}".utf8)

    /// Whether `path` is a regular file that begins with SQLite's header ("SQLite format 3\0"). A
    /// FIFO, a device or a socket is never opened (a FIFO nobody writes would block, a pipe would
    /// lose what was read); the 16 bytes are read through TagFixSystem (an interrupted read tried
    /// again, a short one completed).
    static func isSQLiteFile(_ path: String) -> Bool {
        guard notARegularFile(path) == nil, let fd = try? FileDescriptor.open(path, .readOnly, options: [.closeOnExec]) else {
            return false
        }
        return fd.closeAfter {
            var header = [UInt8](repeating: 0, count: 16)
            var filled = 0
            while filled < header.count {
                let count = header[filled...].withUnsafeMutableBytes { buffer in
                    (try? fd.read(fromAbsoluteOffset: Int64(filled), into: buffer)) ?? 0
                }
                if count <= 0 { break }
                filled += count
            }
            return header[..<filled].elementsEqual(fileHeader)
        }
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    private func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(SQLiteError) {
        guard result == SQLITE_OK || result == SQLITE_DONE || result == SQLITE_ROW else {
            throw SQLiteError(
                code: SQLiteResultCode(rawValue: result), operation: operation(), message: String(cString: sqlite3_errmsg(handle)))
        }
    }

    /// sqlite3_busy_timeout: how long a writer waits for another writer's lock. SQLite does this
    /// waiting itself, inside the call; readers in WAL mode never wait.
    func setBusyTimeout(milliseconds: Int32) { sqlite3_busy_timeout(handle, milliseconds) }

    /// sqlite3_exec of statements without parameters or results (schema, pragmas, transactions).
    func execute(_ sql: String) throws(SQLiteError) {
        try check(sqlite3_exec(handle, sql, nil, nil, nil), sql)
    }

    /// Runs a prepared statement (cached by its SQL) with `parameters`, calling `row` for each
    /// result row.
    func query(_ sql: String, _ parameters: [SQLiteValue] = [], row: (SQLiteRow) throws(SQLiteError) -> Void = { _ in })
        throws(SQLiteError)
    {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, value) in parameters.enumerated() {
            let position = Int32(index + 1)
            let result: Int32
            switch value {
            case .null: result = sqlite3_bind_null(statement, position)
            case .integer(let number): result = sqlite3_bind_int64(statement, position, number)
            case .real(let number): result = sqlite3_bind_double(statement, position, number)
            case .text(var text):
                // The text's own UTF-8, with its length (SQLite copies it: SQLITE_TRANSIENT), where
                // a copy into a C string made one or two allocations a parameter.
                result = text.withUTF8 { bytes in
                    bytes.withMemoryRebound(to: CChar.self) { chars in
                        csqlite_bind_text(statement, position, chars.baseAddress ?? Self.emptyText, Int32(chars.count))
                    }
                }
            }
            try check(result, "bind parameter \(position) of \(sql)")
        }
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { return }
            try check(step, sql)
            try row(SQLiteRow(statement: statement))
        }
    }

    /// What an empty text is bound to (a buffer without an address has nothing to point at): a
    /// literal's bytes, there for as long as the program.
    private static var emptyText: UnsafePointer<CChar> {
        UnsafeRawPointer(("" as StaticString).utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// sqlite3_changes: rows the last statement changed.
    var changes: Int { Int(sqlite3_changes(handle)) }

    private func prepared(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil), "prepare \(sql)")
        guard let statement else { throw SQLiteError(code: .error, operation: "prepare \(sql)", message: "empty statement") }
        statements[sql] = statement
        return statement
    }
}

/// A value bound to a parameter or read from a column.
enum SQLiteValue: Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
}

/// The current row of a statement, valid only inside the row callback.
struct SQLiteRow {
    let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    func real(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }

    func text(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(statement, column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }
}

extension Mutex where Value == SQLiteConnection {
    /// Runs `body` with the connection under the lock, its error kept typed (`withLock` alone
    /// would take it as `any Error`).
    func withConnection<T: Sendable>(_ body: (SQLiteConnection) throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        let result = withLock { db -> Result<T, SQLiteError> in
            do throws(SQLiteError) {
                return .success(try body(db))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
