import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Writing an output file (`--output FILE`) the way careful tools do, so that no path a user types
/// wrecks what is there:
/// - a regular file, or a new one, is written to a temporary file in the same folder, `fsync`ed
///   and renamed over it (keeping the old file's permission bits): a reader sees the old contents
///   or the new ones, never half, and a full disk leaves the old file as it was;
/// - `-`, `/dev/stdout` and `/dev/stderr` are the process's own descriptors, written in place;
/// - a FIFO or a character device (`/dev/null`, a terminal) is opened and written in place;
/// - a symlink is followed: its target is replaced as above and the link stays a link;
/// - anything else (a folder, a socket, a block device) is refused, and nothing is ever unlinked
///   but the temporary file.
public enum OutputFile {
    /// Writes `bytes` to `path` (see the type's rules).
    /// - Throws: `OutputFileError` saying what failed and what to do.
    public static func write(_ bytes: [UInt8], to path: String) throws(OutputFileError) {
        if let fd = standardDescriptor(path) {
            if let code = writeAll(fd, bytes) { throw OutputFileError(path: path, operation: "write", errno: code) }
            return
        }
        var status = stat()
        if stat(path, &status) == 0 {
            let kind = status.st_mode & S_IFMT
            if kind == S_IFIFO || kind == S_IFCHR || path.hasPrefix("/dev/fd/") || path.hasPrefix("/proc/self/fd/") {
                try writeInPlace(bytes, to: path)
                return
            }
            guard kind == S_IFREG else {
                throw OutputFileError(path: path, operation: "replace", errno: kind == S_IFDIR ? EISDIR : EINVAL)
            }
            try replace(path: try resolved(path), with: bytes, mode: status.st_mode & 0o7777, owner: (status.st_uid, status.st_gid))
        } else if errno == ENOENT {
            try replace(path: try resolved(path), with: bytes, mode: nil, owner: nil)
        } else {
            throw OutputFileError(path: path, operation: "examine", errno: errno)
        }
    }

    /// Writes every byte to `fd`, retrying short writes and EINTR. Returns the errno of a failure.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Glibc.write(fd, base + written, buffer.count - written)
            }
            if result < 0 {
                if errno == EINTR { continue }
                return errno
            }
            written += result
        }
        return nil
    }

    /// The descriptor `path` names for this process itself: `-` and `/dev/stdout` are 1,
    /// `/dev/stderr` is 2 (written in place: what the shell redirected them to is not replaced).
    static func standardDescriptor(_ path: String) -> Int32? {
        switch path {
        case "-", "/dev/stdout", "/proc/self/fd/1", "/dev/fd/1": STDOUT_FILENO
        case "/dev/stderr", "/proc/self/fd/2", "/dev/fd/2": STDERR_FILENO
        default: nil
        }
    }

    private static func writeInPlace(_ bytes: [UInt8], to path: String) throws(OutputFileError) {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw OutputFileError(path: path, operation: "open", errno: errno) }
        defer { close(fd) }
        if let code = writeAll(fd, bytes) { throw OutputFileError(path: path, operation: "write", errno: code) }
    }

    /// The file a path names once every symlink on its last component is followed (the target
    /// may not exist yet: a dangling link names the file to create).
    static func resolved(_ path: String) throws(OutputFileError) -> String {
        var current = path
        for _ in 0..<40 {
            var status = stat()
            guard lstat(current, &status) == 0, status.st_mode & S_IFMT == S_IFLNK else { return current }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlink(current, &buffer, buffer.count - 1)
            guard count >= 0 else { throw OutputFileError(path: path, operation: "follow the link", errno: errno) }
            let target = String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            current = target.hasPrefix("/") ? target : folder(of: current) + "/" + target
        }
        throw OutputFileError(path: path, operation: "follow the link", errno: ELOOP)
    }

    private static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let folder = String(path[..<slash])
        return folder.isEmpty ? "/" : folder
    }

    /// Writes a temporary file beside `path`, syncs it and renames it over `path`.
    private static func replace(path: String, with bytes: [UInt8], mode: mode_t?, owner: (uid_t, gid_t)?) throws(OutputFileError) {
        let folder = folder(of: path)
        let name = path.split(separator: "/").last.map(String.init) ?? "output"
        var temporary = ""
        var fd: Int32 = -1
        for attempt in 0..<100 {
            temporary = "\(folder)/.\(name).\(getpid()).\(attempt).\(UInt32.random(in: 0...UInt32.max)).tmp"
            // 0o666 less the umask, like any new file; an existing file's bits are set below.
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw OutputFileError(path: path, operation: "create a file in the folder of", errno: errno) }
        func fail(_ operation: String, _ code: Int32) -> OutputFileError {
            close(fd)
            unlink(temporary)
            return OutputFileError(path: path, operation: operation, errno: code)
        }
        if let owner { _ = fchown(fd, owner.0, owner.1) }  // as root; otherwise it stays ours
        if let mode, fchmod(fd, mode) != 0 { throw fail("set the permissions of", errno) }
        if let code = writeAll(fd, bytes) { throw fail("write", code) }
        while fsync(fd) != 0 {
            if errno != EINTR { throw fail("fsync", errno) }
        }
        guard close(fd) == 0 else {
            let code = errno
            unlink(temporary)
            throw OutputFileError(path: path, operation: "write", errno: code)
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw OutputFileError(path: path, operation: "replace", errno: code)
        }
        let directory = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }
}

/// An output that could not be written; the file that was there is as it was.
public struct OutputFileError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32

    public init(path: String, operation: String, errno: Int32) {
        self.path = path
        self.operation = operation
        self.errno = errno
    }

    public var description: String {
        let reason = String(cString: strerror(errno))
        let hint: String
        switch errno {
        case ENOSPC, EDQUOT: hint = "free some space, or write to another disk"
        case EACCES, EPERM, EROFS: hint = "check the file's and its folder's permissions, or write elsewhere"
        case ENOENT: hint = "create the folder first"
        case EISDIR: hint = "give a file name, not a folder"
        case EINVAL: hint = "give a regular file, a FIFO or a character device"
        default: hint = "check the disk"
        }
        return "cannot \(operation) \(path) (\(reason)): \(hint)"
    }
}
