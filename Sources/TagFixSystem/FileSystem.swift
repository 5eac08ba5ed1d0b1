import Glibc

/// The calls on a path rather than a descriptor: make a folder, remove, rename, read a link, set
/// permissions and owner. Each throws `Errno` (retried on `EINTR` by `valueOrErrno`).
public enum FileSystem {
    /// The whole of a file read to its end, as text (a /proc file's size reads as 0, so it is
    /// read until end of file, not to its size); `nil` when it cannot be opened or read.
    public static func readToEnd(_ path: String) -> String? {
        guard let fd = try? FileDescriptor.open(path, .readOnly, options: .closeOnExec) else { return nil }
        defer { try? fd.close() }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            guard let n = try? fd.read(into: &chunk) else { return nil }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether this process may do `access` to `path` (`access(2)`: `R_OK`, `W_OK`, `X_OK`).
    public static func check(_ access: Int32, of path: String) throws(Errno) {
        try nothingOrErrno { Glibc.access(path, access) }
    }

    /// Removes the name `path` (`unlink(2)`; not a folder).
    public static func removeFile(_ path: String) throws(Errno) {
        try nothingOrErrno { unlink(path) }
    }

    /// Gives `source` the name `destination`, replacing a file there atomically (`rename(2)`).
    public static func rename(_ source: String, to destination: String) throws(Errno) {
        try nothingOrErrno { Glibc.rename(source, destination) }
    }

    /// What the symbolic link at `path` holds (`readlink(2)`), as it is written there.
    public static func symbolicLinkTarget(_ path: String) throws(Errno) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = try valueOrErrno { readlink(path, &buffer, buffer.count - 1) }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Makes the folder `path` with `permissions` (less the umask) (`mkdir(2)`; one level, and
    /// `.fileExists` when there is one).
    public static func makeDirectory(_ path: String, permissions: FilePermissions) throws(Errno) {
        try nothingOrErrno { mkdir(path, permissions.rawValue) }
    }

    /// Sets the permission bits of what `path` names (`chmod(2)`).
    public static func setPermissions(_ permissions: FilePermissions, of path: String) throws(Errno) {
        try nothingOrErrno { chmod(path, permissions.rawValue) }
    }

    /// Gives what `path` names to `user` and `group` (`chown(2)`; `nil` leaves one as it is).
    public static func setOwner(user: UInt32? = nil, group: UInt32? = nil, of path: String) throws(Errno) {
        try nothingOrErrno { chown(path, user ?? .max, group ?? .max) }
    }
}
