import Foundation
import Synchronization
public import TagFixCore

#if canImport(Glibc)
    import Glibc
#endif

/// The durable session log: JSON Lines, one verdict per line, appended and flushed to the disk
/// (`fsync`) before the caller shows the verdict. A `kill -9`, a power cut or a pulled USB stick at
/// any moment loses no verdict that was shown: the most it leaves is a torn last line, of a
/// verdict that was never shown, which `read` skips and the next `open` cuts off.
public final class SessionLog: Sendable {
    public let path: String
    private let descriptor: Mutex<Int32>
    /// What `open` found and repaired: a torn last line it cut off, as a message for the user.
    public let repaired: String?

    /// Opens (creating it if needed) the log at `path` for appending.
    /// - Throws: `SessionLogError` saying why the file cannot be written.
    public init(path: String) throws(SessionLogError) {
        self.path = path
        let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SessionLogError(path: path, operation: "open", errno: errno) }
        var repairedNote: String?
        // A torn last line (no newline: the writer died mid-write) was never shown; cut it off so
        // the next record starts on a line of its own.
        let size = lseek(fd, 0, SEEK_END)
        if size > 0, let end = Self.lastNewline(path: path, size: Int(size)), end != Int(size) {
            if ftruncate(fd, off_t(end)) != 0 {
                let code = errno
                Glibc.close(fd)
                throw SessionLogError(path: path, operation: "truncate a torn last line", errno: code)
            }
            repairedNote = "\(path): cut off a torn last line of \(Int(size) - end) bytes (a verdict that was never shown)"
        }
        if size == 0 { Self.syncDirectory(of: path) }
        descriptor = Mutex(fd)
        repaired = repairedNote
    }

    /// Appends one record (a line of JSON, without its newline) and waits until it is on the disk.
    public func append(_ line: String) throws(SessionLogError) {
        let bytes = Array((line + "\n").utf8)
        let failure = descriptor.withLock { fd -> SessionLogError? in
            guard fd >= 0 else { return SessionLogError(path: path, operation: "write", errno: EBADF) }
            var written = 0
            while written < bytes.count {
                let result = bytes.withUnsafeBytes { buffer -> Int in
                    guard let base = buffer.baseAddress else { return 0 }
                    return write(fd, base + written, buffer.count - written)
                }
                if result < 0 {
                    if errno == EINTR { continue }
                    return SessionLogError(path: path, operation: "write", errno: errno)
                }
                written += result
            }
            while fsync(fd) != 0 {
                if errno != EINTR { return SessionLogError(path: path, operation: "fsync", errno: errno) }
            }
            return nil
        }
        if let failure { throw failure }
    }

    public func close() {
        descriptor.withLock { fd in
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }
    }

    deinit { close() }

    /// The byte offset just past the last newline of the file's first `size` bytes (0 if none).
    private static func lastNewline(path: String, size: Int) -> Int? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var end = size
        var buffer = [UInt8](repeating: 0, count: 4096)
        while end > 0 {
            let start = max(0, end - buffer.count)
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, end - start, off_t(start)) }
            guard count == end - start else { return nil }
            if let index = buffer[0..<count].lastIndex(of: 0x0A) { return start + index + 1 }
            end = start
        }
        return 0
    }

    /// fsync of the folder, so a new file's name is as durable as its contents.
    private static func syncDirectory(of path: String) {
        let folder = path.contains("/") ? String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) : "."
        let fd = Glibc.open(folder.isEmpty ? "/" : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        Glibc.close(fd)
    }
}

/// A session log that could not be written.
public struct SessionLogError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32

    public var description: String {
        let reason = String(cString: strerror(errno))
        let hint: String
        switch errno {
        case ENOSPC: hint = "free some space, or log to another disk"
        case EACCES, EPERM, EROFS: hint = "check the file's and its folder's permissions, or log elsewhere"
        case ENOENT: hint = "create the folder first"
        default: hint = "check the disk"
        }
        return "cannot \(operation) the session log \(path) (\(reason)): \(hint)"
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
