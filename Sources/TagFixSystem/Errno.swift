import Glibc

/// A POSIX error number (`errno`) with a readable name, as swift-system's `Errno` names them, so
/// that a later switch to swift-system is mechanical: `.noSuchFileOrDirectory` for `ENOENT`,
/// `.brokenPipe` for `EPIPE`. Every call in `FileDescriptor` throws one.
public struct Errno: RawRepresentable, Hashable, Sendable, Error, CustomStringConvertible {
    /// The number, as `errno` holds it.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `errno` now (the last failed call's error on this thread).
    public static var current: Errno {
        get { Errno(rawValue: Glibc.errno) }
        set { Glibc.errno = newValue.rawValue }
    }

    /// What `strerror` says of it: "No such file or directory".
    public var description: String { String(cString: strerror(rawValue)) }

    // MARK: - Names (swift-system's)

    /// `EPERM`: Operation not permitted.
    public static var notPermitted: Errno { Errno(rawValue: EPERM) }
    /// `ENOENT`: No such file or directory.
    public static var noSuchFileOrDirectory: Errno { Errno(rawValue: ENOENT) }
    /// `ESRCH`: No such process.
    public static var noSuchProcess: Errno { Errno(rawValue: ESRCH) }
    /// `EINTR`: Interrupted system call.
    public static var interrupted: Errno { Errno(rawValue: EINTR) }
    /// `EIO`: Input/output error.
    public static var ioError: Errno { Errno(rawValue: EIO) }
    /// `EBADF`: Bad file descriptor.
    public static var badFileDescriptor: Errno { Errno(rawValue: EBADF) }
    /// `ECHILD`: No child processes.
    public static var noChildProcess: Errno { Errno(rawValue: ECHILD) }
    /// `EAGAIN`: Resource temporarily unavailable.
    public static var resourceTemporarilyUnavailable: Errno { Errno(rawValue: EAGAIN) }
    /// `EWOULDBLOCK` (the same number as `EAGAIN` on Linux).
    public static var wouldBlock: Errno { Errno(rawValue: EWOULDBLOCK) }
    /// `ENOMEM`: Cannot allocate memory.
    public static var noMemory: Errno { Errno(rawValue: ENOMEM) }
    /// `EACCES`: Permission denied.
    public static var permissionDenied: Errno { Errno(rawValue: EACCES) }
    /// `EEXIST`: File exists.
    public static var fileExists: Errno { Errno(rawValue: EEXIST) }
    /// `ENOTDIR`: Not a directory.
    public static var notDirectory: Errno { Errno(rawValue: ENOTDIR) }
    /// `EISDIR`: Is a directory.
    public static var isDirectory: Errno { Errno(rawValue: EISDIR) }
    /// `EINVAL`: Invalid argument.
    public static var invalidArgument: Errno { Errno(rawValue: EINVAL) }
    /// `EMFILE`: Too many open files.
    public static var tooManyOpenFiles: Errno { Errno(rawValue: EMFILE) }
    /// `ENOSPC`: No space left on device.
    public static var noSpace: Errno { Errno(rawValue: ENOSPC) }
    /// `EROFS`: Read-only file system.
    public static var readOnlyFileSystem: Errno { Errno(rawValue: EROFS) }
    /// `EPIPE`: Broken pipe.
    public static var brokenPipe: Errno { Errno(rawValue: EPIPE) }
    /// `ELOOP`: Too many levels of symbolic links.
    public static var tooManySymbolicLinkLevels: Errno { Errno(rawValue: ELOOP) }
    /// `EDQUOT`: Disk quota exceeded.
    public static var diskQuotaExceeded: Errno { Errno(rawValue: EDQUOT) }
    /// `EADDRINUSE`: Address already in use.
    public static var addressInUse: Errno { Errno(rawValue: EADDRINUSE) }
    /// `ECONNRESET`: Connection reset by peer.
    public static var connectionReset: Errno { Errno(rawValue: ECONNRESET) }
    /// `ENOTCONN`: Transport endpoint is not connected.
    public static var socketNotConnected: Errno { Errno(rawValue: ENOTCONN) }
    /// `ETIMEDOUT`: Connection timed out.
    public static var timedOut: Errno { Errno(rawValue: ETIMEDOUT) }
    /// `ECONNREFUSED`: Connection refused.
    public static var connectionRefused: Errno { Errno(rawValue: ECONNREFUSED) }

    /// Matches an error against this one in a `catch` or `switch` (`case .brokenPipe:`).
    public static func ~= (pattern: Errno, value: any Error) -> Bool {
        (value as? Errno) == pattern
    }
}

// MARK: - The one place a call is retried on EINTR

/// Runs a C call that returns -1 and sets `errno` on failure, and returns its result, retrying
/// it while it fails with `EINTR` (a signal arrived; unless `retryOnInterrupt` is false).
/// Every call in this module goes through here: the only EINTR loop in the product's sources.
/// - Throws: the call's `Errno` when it fails for any other reason.
@inlinable
public func valueOrErrno<Value: FixedWidthInteger & SignedInteger>(retryOnInterrupt: Bool = true, _ call: () -> Value) throws(Errno)
    -> Value
{
    while true {
        let value = call()
        if value != -1 { return value }
        let error = Errno.current
        if retryOnInterrupt && error == .interrupted { continue }
        throw error
    }
}

/// `valueOrErrno` for a call whose result is only success (0) or failure (-1).
@inlinable
public func nothingOrErrno<Value: FixedWidthInteger & SignedInteger>(retryOnInterrupt: Bool = true, _ call: () -> Value) throws(Errno) {
    _ = try valueOrErrno(retryOnInterrupt: retryOnInterrupt, call)
}
