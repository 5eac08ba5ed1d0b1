internal import CSystem
import Glibc

/// An open file descriptor, as swift-system's `FileDescriptor`: a number, not an owner (nothing
/// closes it but `close()`). Every call retries on `EINTR` (`valueOrErrno`) and throws `Errno`.
public struct FileDescriptor: RawRepresentable, Hashable, Sendable {
    /// The descriptor's number.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static var standardInput: FileDescriptor { FileDescriptor(rawValue: STDIN_FILENO) }
    public static var standardOutput: FileDescriptor { FileDescriptor(rawValue: STDOUT_FILENO) }
    public static var standardError: FileDescriptor { FileDescriptor(rawValue: STDERR_FILENO) }

    // MARK: - Opening and closing

    /// How a file is opened: for reading, writing or both.
    public struct AccessMode: RawRepresentable, Hashable, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static var readOnly: AccessMode { AccessMode(rawValue: O_RDONLY) }
        public static var writeOnly: AccessMode { AccessMode(rawValue: O_WRONLY) }
        public static var readWrite: AccessMode { AccessMode(rawValue: O_RDWR) }
    }

    /// `open(2)`'s flags beyond the access mode.
    public struct OpenOptions: OptionSet, Hashable, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static var append: OpenOptions { OpenOptions(rawValue: O_APPEND) }
        public static var create: OpenOptions { OpenOptions(rawValue: O_CREAT) }
        public static var exclusiveCreate: OpenOptions { OpenOptions(rawValue: O_EXCL) }
        public static var truncate: OpenOptions { OpenOptions(rawValue: O_TRUNC) }
        public static var nonBlocking: OpenOptions { OpenOptions(rawValue: O_NONBLOCK) }
        public static var noFollow: OpenOptions { OpenOptions(rawValue: O_NOFOLLOW) }
        public static var closeOnExec: OpenOptions { OpenOptions(rawValue: O_CLOEXEC) }
        public static var directory: OpenOptions { OpenOptions(rawValue: O_DIRECTORY) }
        public static var noControllingTerminal: OpenOptions { OpenOptions(rawValue: O_NOCTTY) }
    }

    /// Opens `path` (`open(2)`). A new file gets `permissions` less the umask.
    public static func open(
        _ path: String, _ mode: AccessMode, options: OpenOptions = [], permissions: FilePermissions? = nil,
        retryOnInterrupt: Bool = true
    ) throws(Errno) -> FileDescriptor {
        let flags = mode.rawValue | options.rawValue
        let fd = try valueOrErrno(retryOnInterrupt: retryOnInterrupt) {
            permissions.map { Glibc.open(path, flags, $0.rawValue) } ?? Glibc.open(path, flags)
        }
        return FileDescriptor(rawValue: fd)
    }

    /// Closes the descriptor (`close(2)`; never retried: on Linux the number is gone either way).
    public func close() throws(Errno) {
        try nothingOrErrno(retryOnInterrupt: false) { Glibc.close(rawValue) }
    }

    /// Runs `body`, then closes the descriptor, whatever `body` did; `body`'s error wins over
    /// close's.
    public func closeAfter<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        defer { _ = try? close() }
        return try body()
    }

    /// A second descriptor for the same open file (`dup(2)`, close-on-exec), or this one copied
    /// onto `target` (`dup3(2)`).
    public func duplicate(as target: FileDescriptor? = nil, retryOnInterrupt: Bool = true) throws(Errno) -> FileDescriptor {
        let fd = try valueOrErrno(retryOnInterrupt: retryOnInterrupt) {
            if let target { return csystem_dup3(rawValue, target.rawValue, O_CLOEXEC) }
            return fcntl(rawValue, F_DUPFD_CLOEXEC, 0)
        }
        return FileDescriptor(rawValue: fd)
    }

    /// A pipe, both ends close-on-exec from birth (`pipe2(2)` with `O_CLOEXEC`: no child spawned
    /// meanwhile by another thread inherits them).
    public static func pipe() throws(Errno) -> (readEnd: FileDescriptor, writeEnd: FileDescriptor) {
        var fds: [Int32] = [-1, -1]
        try nothingOrErrno { fds.withUnsafeMutableBufferPointer { csystem_pipe2($0.baseAddress!, O_CLOEXEC) } }
        return (FileDescriptor(rawValue: fds[0]), FileDescriptor(rawValue: fds[1]))
    }

    // MARK: - Flags

    /// Makes reads and writes return `.wouldBlock` instead of waiting (`O_NONBLOCK`), or wait
    /// again.
    public func setNonBlocking(_ enabled: Bool = true) throws(Errno) {
        let flags = try valueOrErrno { fcntl(rawValue, F_GETFL) }
        let wanted = enabled ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        guard wanted != flags else { return }
        try nothingOrErrno { fcntl(rawValue, F_SETFL, wanted) }
    }

    /// Sets close-on-exec (`FD_CLOEXEC`) on a descriptor made without it.
    public func setCloseOnExec() throws(Errno) {
        try nothingOrErrno { fcntl(rawValue, F_SETFD, FD_CLOEXEC) }
    }

    // MARK: - Reading and writing

    /// Reads what is there, up to the buffer's size (`read(2)`); 0 at the end of the file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, retryOnInterrupt: Bool = true) throws(Errno) -> Int {
        try valueOrErrno(retryOnInterrupt: retryOnInterrupt) { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads from `offset` without moving the file's offset (`pread(2)`).
    public func read(fromAbsoluteOffset offset: Int64, into buffer: UnsafeMutableRawBufferPointer, retryOnInterrupt: Bool = true)
        throws(Errno) -> Int
    {
        try valueOrErrno(retryOnInterrupt: retryOnInterrupt) { pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Writes what the descriptor takes of `buffer` (`write(2)`); returns how much it took.
    public func write(_ buffer: UnsafeRawBufferPointer, retryOnInterrupt: Bool = true) throws(Errno) -> Int {
        try valueOrErrno(retryOnInterrupt: retryOnInterrupt) { Glibc.write(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads what is there into `bytes` from its start, up to its count; 0 at the end of the file.
    public func read(into bytes: inout [UInt8], retryOnInterrupt: Bool = true) throws(Errno) -> Int {
        try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(Errno) in try read(into: buffer, retryOnInterrupt: retryOnInterrupt) }
        }.get()
    }

    /// Writes what the descriptor takes of `bytes`; returns how much it took.
    public func write(_ bytes: ArraySlice<UInt8>, retryOnInterrupt: Bool = true) throws(Errno) -> Int {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(Errno) in try write(buffer, retryOnInterrupt: retryOnInterrupt) }
        }.get()
    }

    /// Writes every byte of `bytes`, through short writes and `EINTR`; returns how many (all).
    @discardableResult
    public func writeAll<S: Sequence<UInt8>>(_ bytes: S) throws(Errno) -> Int {
        let array = Array(bytes)
        var written = 0
        while written < array.count {
            written += try write(array[written...])
        }
        return written
    }

    /// Flushes the file's data and metadata to the disk (`fsync(2)`).
    public func sync() throws(Errno) {
        try nothingOrErrno { fsync(rawValue) }
    }

    /// Cuts the file to (or extends it to) `newSize` bytes (`ftruncate(2)`).
    public func resize(to newSize: Int64, retryOnInterrupt: Bool = true) throws(Errno) {
        try nothingOrErrno(retryOnInterrupt: retryOnInterrupt) { ftruncate(rawValue, off_t(newSize)) }
    }

    /// Sets the permission bits (`fchmod(2)`).
    public func setPermissions(_ permissions: FilePermissions) throws(Errno) {
        try nothingOrErrno { fchmod(rawValue, permissions.rawValue) }
    }

    /// Gives the file to `user` and `group` (`fchown(2)`).
    public func setOwner(user: UInt32, group: UInt32) throws(Errno) {
        try nothingOrErrno { fchown(rawValue, user, group) }
    }

    /// Whether the descriptor is a terminal (`isatty(3)`).
    public var isTerminal: Bool { isatty(rawValue) == 1 }

    /// Makes the terminal raw (`cfmakeraw(3)`: no echo, no line editing, no translation, 8 bits),
    /// now (`tcsetattr(TCSANOW)`).
    public func makeRawTerminal() throws(Errno) {
        var settings = termios()
        try nothingOrErrno { tcgetattr(rawValue, &settings) }
        cfmakeraw(&settings)
        try nothingOrErrno { tcsetattr(rawValue, TCSANOW, &settings) }
    }

    /// What the kernel says of the open file (`fstat(2)`).
    public func stat() throws(Errno) -> Stat {
        var status = Glibc.stat()
        try nothingOrErrno { fstat(rawValue, &status) }
        return Stat(status)
    }
}

/// A file's permission bits (`mode_t`), as swift-system's `FilePermissions`.
public struct FilePermissions: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static var ownerRead: FilePermissions { FilePermissions(rawValue: 0o400) }
    public static var ownerWrite: FilePermissions { FilePermissions(rawValue: 0o200) }
    public static var ownerReadWrite: FilePermissions { FilePermissions(rawValue: 0o600) }
    public static var groupRead: FilePermissions { FilePermissions(rawValue: 0o040) }
    public static var otherRead: FilePermissions { FilePermissions(rawValue: 0o004) }

    /// Octal, as `ls` and `chmod` write it: `644`.
    public var description: String { String(rawValue, radix: 8) }
}

/// What `stat(2)` says of a file, as swift-system's `Stat`: its type, permissions, size, owner.
public struct Stat: Sendable, Hashable {
    /// A file's type (`st_mode & S_IFMT`).
    public struct FileType: RawRepresentable, Hashable, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        public static var regular: FileType { FileType(rawValue: S_IFREG) }
        public static var directory: FileType { FileType(rawValue: S_IFDIR) }
        public static var symbolicLink: FileType { FileType(rawValue: S_IFLNK) }
        public static var fifo: FileType { FileType(rawValue: S_IFIFO) }
        public static var characterSpecial: FileType { FileType(rawValue: S_IFCHR) }
        public static var blockSpecial: FileType { FileType(rawValue: S_IFBLK) }
        public static var socket: FileType { FileType(rawValue: S_IFSOCK) }
    }

    /// `st_mode`, type and permission bits.
    public var mode: UInt32
    public var size: Int64
    public var userID: UInt32
    public var groupID: UInt32
    /// The device a device file stands for (`st_rdev`): `major`, `minor`.
    public var device: (major: UInt32, minor: UInt32)

    init(_ status: Glibc.stat) {
        mode = status.st_mode
        size = Int64(status.st_size)
        userID = status.st_uid
        groupID = status.st_gid
        // glibc's major() and minor(), macros Swift does not import.
        let raw = UInt64(status.st_rdev)
        device = (
            UInt32(truncatingIfNeeded: ((raw >> 8) & 0xFFF) | ((raw >> 32) & ~0xFFF)),
            UInt32(truncatingIfNeeded: (raw & 0xFF) | ((raw >> 12) & ~0xFF))
        )
    }

    public static func == (a: Stat, b: Stat) -> Bool {
        a.mode == b.mode && a.size == b.size && a.userID == b.userID && a.groupID == b.groupID && a.device == b.device
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(mode)
        hasher.combine(size)
        hasher.combine(userID)
        hasher.combine(groupID)
        hasher.combine(device.major)
        hasher.combine(device.minor)
    }

    /// What `path` names (`stat(2)`), or, with `followTargetSymlink` false, the link itself
    /// (`lstat(2)`).
    public init(_ path: String, followTargetSymlink: Bool = true) throws(Errno) {
        var status = Glibc.stat()
        if followTargetSymlink {
            try nothingOrErrno { stat(path, &status) }
        } else {
            try nothingOrErrno { lstat(path, &status) }
        }
        self.init(status)
    }

    public var type: FileType { FileType(rawValue: mode & S_IFMT) }

    /// The permission bits (with set-user-ID, set-group-ID and sticky).
    public var permissions: FilePermissions { FilePermissions(rawValue: mode & 0o7777) }
}
