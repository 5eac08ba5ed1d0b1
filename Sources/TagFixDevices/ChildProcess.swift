internal import CProcess
import Foundation
public import Glibc
import Synchronization

/// A program TagFix starts (the private gpsd and its watchdog): the one way the product spawns a
/// process. The child starts with an empty signal mask and every signal at its default
/// disposition, whatever thread spawns it, so SIGTERM stops it. (Foundation's `Process` passes on
/// the spawning thread's mask: spawned from a dispatch or cooperative thread, which blocks almost
/// every signal, a gpsd kept SIGTERM pending forever and only SIGKILL stopped it.) Its standard
/// descriptors are the ones given (`nil`: /dev/null) and no other descriptor is inherited.
public final class ChildProcess: Sendable {
    public let pid: Int32
    /// The exit status once reaped; never signalled after that, so a reused pid is left alone.
    private let status = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments` (without the program name) and `environment`
    /// (default: this process's).
    public init(
        executable: String, arguments: [String], environment: [String: String]? = nil, standardInput: Int32? = nil,
        standardOutput: Int32? = nil, standardError: Int32? = nil
    ) throws(ChildProcessError) {
        let argv = [executable] + arguments
        let envp = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        // strdup'ed copies, freed after the spawn (posix_spawn has copied them into the child).
        let argvC: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        let envpC: [UnsafeMutablePointer<CChar>?] = envp.map { strdup($0) } + [nil]
        defer { for pointer in argvC + envpC { free(pointer) } }
        var child: Int32 = 0
        let error = cprocess_spawn(&child, executable, argvC, envpC, standardInput ?? -1, standardOutput ?? -1, standardError ?? -1)
        guard error == 0 else { throw ChildProcessError(executable: executable, errno: error) }
        pid = child
    }

    /// Whether the child still runs; reaps it once it has exited.
    public var isRunning: Bool {
        status.withLock { status in
            if status != nil { return false }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            if result == pid || (result < 0 && errno == ECHILD) {
                status = raw
                return false
            }
            return true
        }
    }

    /// How the child ended, once it has: `.exited(code)` or `.signalled(number)`; `nil` while it runs.
    public var termination: Termination? {
        guard !isRunning, let raw = status.withLock({ $0 }) else { return nil }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (macros).
        return raw & 0x7F == 0 ? .exited((raw >> 8) & 0xFF) : .signalled(raw & 0x7F)
    }

    public enum Termination: Sendable, Hashable {
        case exited(Int32)
        case signalled(Int32)
    }

    /// Sends `signal`, unless the child has been reaped.
    public func signal(_ signal: Int32) {
        status.withLock { status in
            if status == nil { _ = kill(pid, signal) }
        }
    }

    /// Waits for the child to exit, polling every 10 ms (a blocking `waitpid` would hold the lock
    /// that `signal` needs).
    public func waitUntilExit() {
        while isRunning { usleep(10_000) }
    }

    /// Signals `signal` (default SIGTERM), waits up to `grace` for the child to exit, then sends
    /// SIGKILL and reaps it.
    public func stop(grace: Duration = .seconds(1), signal first: Int32 = SIGTERM) {
        guard isRunning else { return }
        signal(first)
        let polls = Int(grace.components.seconds * 100 + grace.components.attoseconds / 10_000_000_000_000_000)
        for _ in 0..<max(polls, 1) where isRunning { usleep(10_000) }
        if isRunning { signal(SIGKILL) }
        waitUntilExit()
    }
}

/// A program that could not be started.
public struct ChildProcessError: Error, Sendable, CustomStringConvertible {
    public var executable: String
    public var errno: Int32
    public var description: String { "cannot start \(executable): \(String(cString: strerror(errno)))" }
}
