import Foundation
import Synchronization
public import TagFixCore
public import TagFixSystem

/// The durable session log: JSON Lines, one verdict per line, appended and flushed to the disk
/// (`fsync`) before the caller shows the verdict. A `kill -9`, a power cut or a pulled USB stick at
/// any moment loses no verdict that was shown: the most it leaves is a torn last line, of a
/// verdict that was never shown, which `read` skips and the next `open` cuts off.
public final class SessionLog: Sendable {
    public let path: String
    private let descriptor: Mutex<FileDescriptor?>
    /// What `open` found and repaired: a torn last line it cut off, as a message for the user.
    public let repaired: String?

    /// The longest line a record can be: a longer "line" is not a torn record.
    static let maximumRecordBytes = 65_536

    /// Opens (creating it if needed) the log at `path` for appending. An existing file is appended
    /// to only when it is a session log (its first line is a verdict record: a JSON object with a
    /// `time` and a `verdict`), or a FIFO or character device (written in place); anything else (a
    /// registry given by mistake, any other file, a symlink to one) is refused and left as it was.
    /// A symlink is followed. A torn last line is cut off only in a session log, and only that line.
    /// - Throws: `SessionLogError` saying why the file cannot be written, or why it is not a log
    ///   (`refusal` set).
    public init(path: String) throws(SessionLogError) {
        self.path = path
        // Read and write: the first line is read to recognise a log before anything is written.
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(
                path, .readWrite, options: [.append, .create, .closeOnExec], permissions: FilePermissions(rawValue: 0o644))
        } catch {
            throw SessionLogError(path: path, operation: "open", code: error)
        }
        let status: Stat
        do {
            status = try fd.stat()
        } catch {
            _ = try? fd.close()
            throw SessionLogError(path: path, operation: "examine", code: error)
        }
        let kind = status.type
        var repairedNote: String?
        var size: Int = 0
        if kind == .regular {
            size = Int(status.size)
            if size > 0 {
                let head = Self.readBytes(fd, at: 0, count: min(size, Self.maximumRecordBytes))
                if let refusal = Self.refusal(head: head, size: size) {
                    _ = try? fd.close()
                    throw SessionLogError(path: path, refusal: refusal)
                }
            }
            // A torn last line (no newline: the writer died mid-write) was never shown; cut it off
            // so the next record starts on a line of its own.
            if size > 0, let end = Self.lastNewline(fd, size: size), end != size {
                guard size - end <= Self.maximumRecordBytes else {
                    _ = try? fd.close()
                    throw SessionLogError(
                        path: path, refusal: "its last \(size - end) bytes have no line end: longer than any verdict record")
                }
                do {
                    try fd.resize(to: Int64(end))
                } catch {
                    _ = try? fd.close()
                    throw SessionLogError(path: path, operation: "truncate a torn last line", code: error)
                }
                repairedNote = "\(path): cut off a torn last line of \(size - end) bytes (a verdict that was never shown)"
            }
        } else if kind != .fifo && kind != .characterSpecial {
            _ = try? fd.close()
            throw SessionLogError(path: path, refusal: "it is not a regular file, a FIFO or a character device")
        }
        if kind == .regular && size == 0 { Self.syncDirectory(of: path) }
        descriptor = Mutex(fd)
        repaired = repairedNote
    }

    /// Why a regular file that starts with `head` (its first bytes, `size` in all) is not a session
    /// log, or nil when it is one: its first line is a verdict record, or it holds a single torn
    /// line that starts as every record does.
    static func refusal(head: [UInt8], size: Int) -> String? {
        guard let newline = head.firstIndex(of: 0x0A) else {
            // No line end at all: a lone first record torn while it was written, or not a log.
            if size <= maximumRecordBytes, head.starts(with: Array(recordPrefix.utf8)) { return nil }
            return "its first line is not a verdict record"
        }
        var line = head[..<newline]
        if line.last == 0x0D { line = line.dropLast() }
        guard let value = try? JSONValue.parse(line), isRecord(value) else {
            return "its first line is not a verdict record"
        }
        return nil
    }

    /// How every record starts (`SessionRecord.encoded()` writes `time` first).
    static let recordPrefix = SessionRecord.linePrefix

    /// Whether `value` is a verdict record: a JSON object with an ISO 8601 `time` and a `verdict`
    /// string (the members `SessionRecord` requires; schema in docs/verifier.md).
    public static func isRecord(_ value: JSONValue) -> Bool {
        isRecord(time: value["time"]?.string, verdict: value["verdict"]?.string)
    }

    /// `isRecord` from a record's `time` and `verdict` strings, however they were read.
    public static func isRecord(time: String?, verdict: String?) -> Bool {
        guard let time, Timestamp(iso8601: time) != nil else { return false }
        return verdict != nil
    }

    /// Appends one record (a line of JSON, without its newline) and waits until it is on the disk.
    public func append(_ line: String) throws(SessionLogError) {
        try append(bytes: Array((line + "\n").utf8))
    }

    /// Appends records (lines of JSON, without their newlines), in order, with one write and one
    /// `fsync` for all of them (a group commit: the verdicts of phone taps that arrived together),
    /// and waits until they are on the disk. A failure leaves at most a torn last line, as
    /// `append`'s does, and none of them may be taken as logged.
    public func append(contentsOf lines: [String]) throws(SessionLogError) {
        guard !lines.isEmpty else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(lines.reduce(0) { $0 + $1.utf8.count + 1 })
        for line in lines {
            bytes += line.utf8
            bytes.append(0x0A)
        }
        try append(bytes: bytes)
    }

    private func append(bytes: [UInt8]) throws(SessionLogError) {
        let failure = descriptor.withLock { fd -> SessionLogError? in
            guard let fd else { return SessionLogError(path: path, operation: "write", code: .badFileDescriptor) }
            do throws(Errno) {
                try fd.writeAll(bytes)
            } catch {
                return SessionLogError(path: path, operation: "write", code: error)
            }
            do throws(Errno) {
                try fd.sync()
            } catch {
                return SessionLogError(path: path, operation: "fsync", code: error)
            }
            return nil
        }
        if let failure { throw failure }
    }

    public func close() {
        descriptor.withLock { fd in
            _ = try? fd?.close()
            fd = nil
        }
    }

    deinit { close() }

    /// The byte offset just past the last newline of the file's first `size` bytes (0 if none).
    private static func lastNewline(_ fd: FileDescriptor, size: Int) -> Int? {
        var end = size
        while end > 0 {
            let start = max(0, end - 4096)
            let chunk = readBytes(fd, at: start, count: end - start)
            guard chunk.count == end - start else { return nil }
            if let index = chunk.lastIndex(of: 0x0A) { return start + index + 1 }
            end = start
        }
        return 0
    }

    /// Up to `count` bytes of `fd` from `offset` (fewer at the end of the file or on an error).
    private static func readBytes(_ fd: FileDescriptor, at offset: Int, count: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let result = buffer.withUnsafeMutableBytes { bytes in
                try? fd.read(fromAbsoluteOffset: Int64(offset + filled), into: UnsafeMutableRawBufferPointer(rebasing: bytes[filled...]))
            }
            guard let result, result > 0 else { break }
            filled += result
        }
        return Array(buffer.prefix(filled))
    }

    /// fsync of the folder, so a new file's name is as durable as its contents.
    private static func syncDirectory(of path: String) {
        let folder = path.contains("/") ? String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) : "."
        guard let fd = try? FileDescriptor.open(folder.isEmpty ? "/" : folder, .readOnly, options: [.directory, .closeOnExec]) else {
            return
        }
        try? fd.closeAfter { () throws(Errno) in try fd.sync() }
    }
}

/// A session log that could not be written.
public struct SessionLogError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var operation: String
    /// What the system said (`Errno(rawValue: 0)` for a refusal).
    public var code: Errno
    /// Why an existing file is not a session log and was left as it was (nil: an I/O error).
    public var refusal: String?

    /// `code`'s number.
    public var errno: Int32 {
        get { code.rawValue }
        set { code = Errno(rawValue: newValue) }
    }

    public init(path: String, operation: String, code: Errno) {
        self.path = path
        self.operation = operation
        self.code = code
    }

    public init(path: String, operation: String, errno: Int32) {
        self.init(path: path, operation: operation, code: Errno(rawValue: errno))
    }

    /// A file that is not a session log, refused before a byte of it was changed.
    public init(path: String, refusal: String) {
        self.init(path: path, operation: "append to", code: Errno(rawValue: 0))
        self.refusal = refusal
    }

    public var description: String {
        if let refusal {
            return "\(path) is not a TagFix session log (\(refusal)); it was left as it was: "
                + "give --log a new file name or a log an earlier run wrote"
        }
        let hint: String
        switch code {
        case .noSpace: hint = "free some space, or log to another disk"
        case .permissionDenied, .notPermitted, .readOnlyFileSystem: hint = "check the file's and its folder's permissions, or log elsewhere"
        case .noSuchFileOrDirectory: hint = "create the folder first"
        default: hint = "check the disk"
        }
        return "cannot \(operation) the session log \(path) (\(code)): \(hint)"
    }
}

// MARK: - Reading

/// A session log read back: its records, and what was skipped.
public struct SessionLogContents: Sendable {
    /// Each record with its line number.
    public var records: [(line: Int, value: JSONValue)]
    /// A torn last line (the writer was killed mid-write), skipped.
    public var tornLastLine: Int?
}

extension SessionLog {
    /// Parses a log's bytes. A last line without its newline that is not valid JSON is torn and
    /// skipped; any other line that is not a JSON object is an error naming it.
    public static func parse(_ bytes: [UInt8]) throws(DataFileError) -> SessionLogContents {
        var records: [(line: Int, value: JSONValue)] = []
        var torn: Int?
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            lineNumber += 1
            let newline = bytes[start...].firstIndex(of: 0x0A)
            let end = newline ?? bytes.count
            let line = bytes[start..<end]
            start = end + 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { continue }
            do {
                let value = try JSONValue.parse(line)
                guard value.members != nil else {
                    throw DataFileError(line: lineNumber, message: "expected a JSON object per line, found \(value.kindName)")
                }
                records.append((lineNumber, value))
            } catch let error as DataFileError {
                throw error
            } catch {
                if newline == nil {
                    torn = lineNumber
                    continue
                }
                throw DataFileError(line: lineNumber, message: "not a JSON object: \(error)")
            }
        }
        return SessionLogContents(records: records, tornLastLine: torn)
    }

    /// Reads the log at `path`.
    /// Reads the log at `path` as bytes: a torn last line may end inside a UTF-8 sequence.
    public static func read(path: String) throws(DataFileError) -> SessionLogContents {
        guard let data = FileManager.default.contents(atPath: path) else {
            _ = try TextFile.read(path)  // says why: missing, a folder, or unreadable
            throw DataFileError(file: path, line: nil, message: "cannot read the file", unreadable: true)
        }
        do {
            return try parse(Array(data))
        } catch {
            throw error.inFile(path)
        }
    }
}
