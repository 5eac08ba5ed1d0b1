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
