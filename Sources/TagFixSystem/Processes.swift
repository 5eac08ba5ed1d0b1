import CSystem
import Glibc

/// Other processes, through the system layer: signals to them, and their exits.
public enum Processes {
    /// Sends `signal` to the process `pid` (`kill(2)`).
    /// - Throws: `.noSuchProcess` when it has gone, `.notPermitted` when it is not ours to signal.
    public static func signal(_ signal: Int32, to pid: Int32) throws(Errno) {
        try nothingOrErrno { kill(pid, signal) }
    }

    /// Reaps the child `pid` if it has exited (`waitpid(WNOHANG)`: never waits), and returns its
    /// raw wait status; `nil` while it runs.
    /// - Throws: `.noChildProcess` when it is not a child of this process, or was reaped before.
    public static func reapIfExited(_ pid: Int32) throws(Errno) -> Int32? {
        var status: Int32 = 0
        let result = try valueOrErrno { waitpid(pid, &status, WNOHANG) }
        return result == pid ? status : nil
    }
}

/// A process as its /proc/PID/stat line shows it (proc(5)).
public struct ProcessStatus: Sendable, Hashable {
    /// Its command's name (field 2, without the parentheses; it may hold spaces and parentheses).
    public let name: String
    /// The fields after the name, from field 3: `fields[0]` is the state, `fields[1]` the
    /// parent, `fields[11]` and `fields[12]` the user and system time in clock ticks,
    /// `fields[19]` the start time (field 22).
    public let fields: [String]

    /// The state: `R`, `S`, `D`, `T` (stopped), `Z` (a zombie), `X` (dead), …
    public var state: String { fields[0] }
    public var parent: Int32? { Int32(fields[1]) }
    /// Whether it has not exited: neither a zombie nor dead.
    public var isRunning: Bool { state != "Z" && state != "X" }
}

extension Processes {
    /// The process `pid` as /proc/PID/stat shows it now; `nil` once it has gone (and reaped).
    public static func status(of pid: Int32) -> ProcessStatus? {
        guard let text = FileSystem.readToEnd("/proc/\(pid)/stat"), let open = text.firstIndex(of: "("),
            let close = text.lastIndex(of: ")"), open < close
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ").map(String.init)
        guard fields.count >= 2 else { return nil }
        return ProcessStatus(name: String(text[text.index(after: open)..<close]), fields: fields)
    }

    /// Whether `pid` is a process that has not exited (a zombie has: it only waits to be reaped).
    public static func isRunning(_ pid: Int32) -> Bool { status(of: pid)?.isRunning ?? false }
}

extension Processes {
    /// This process's (soft) limit of open descriptors (`RLIMIT_NOFILE`): a descriptor numbered
    /// at or above it cannot be made (`EMFILE`); `nil` when the system does not say. An
    /// unlimited one is `Int.max`.
    public static var openFileLimit: Int? {
        var soft: UInt64 = 0
        guard csystem_open_file_limit(&soft) == 0 else { return nil }
        return Int(clamping: soft)
    }
}
