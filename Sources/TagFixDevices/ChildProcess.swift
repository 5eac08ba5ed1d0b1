internal import CProcess
import Foundation
public import Glibc
import Synchronization
import TagFixCore
import TagFixSystem

/// A program TagFix starts (the private daemons and their watchdogs): the one way the product
/// spawns a process. The child starts with an empty signal mask and every signal at its default
/// disposition, whatever thread spawns it, so SIGTERM stops it. (Foundation's `Process` passes on
/// the spawning thread's mask: spawned from a dispatch or cooperative thread, which blocks almost
/// every signal, a gpsd kept SIGTERM pending forever and only SIGKILL stopped it.) Its standard
/// descriptors are the ones given (`nil`: /dev/null) and no other descriptor is inherited.
///
/// Async code runs a child scoped, `ChildProcess.run(executable:…) { child in … }`, whose
/// teardown awaits the exit (`stop(grace:)`: SIGTERM, SIGKILL after the grace, reaped). The exit
/// is awaited through a pidfd (readable once the child has exited) watched on the process's loop
/// (`ProcessLoop.shared`): no thread waits for it, none sleeps in steps. There is no blocking
/// stop: code without an async context hands the child to a task that awaits `stop`.
public final class ChildProcess: Sendable {
    public let pid: Int32
    /// The exit status once reaped; never signalled after that, so a reused pid is left alone.
    private let status = Mutex<Int32?>(nil)

    /// Runs `executable` for the length of `body`, which gets the running child; then stops it
    /// (`stop(grace:)`: SIGTERM, SIGKILL after `grace`, reaped), whether `body` returns or throws.
    /// - Throws: `ChildProcessError` when the program cannot be started, or what `body` throws.
    public static func run<Value>(
        executable: String, arguments: [String], environment: [String: String]? = nil, standardInput: Int32? = nil,
        standardOutput: Int32? = nil, standardError: Int32? = nil, grace: Duration = .seconds(1),
        isolation: isolated (any Actor)? = #isolation, _ body: (ChildProcess) async throws -> Value
    ) async throws -> Value {
        let child = try ChildProcess(
            executable: executable, arguments: arguments, environment: environment, standardInput: standardInput,
            standardOutput: standardOutput, standardError: standardError)
        let value: Value
        do {
            value = try await body(child)
        } catch {
            await child.stop(grace: grace)
            throw error
        }
        await child.stop(grace: grace)
        return value
    }

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
            do throws(Errno) {
                guard let raw = try Processes.reapIfExited(pid) else { return true }
                status = raw
            } catch {
                // Not ours to wait for (reaped elsewhere): it is not running as our child.
                guard error == .noChildProcess else { return true }
                status = 0
            }
            return false
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
            if status == nil { try? Processes.signal(signal, to: pid) }
        }
    }

    /// Waits for the child to exit and reaps it, its pidfd watched on the process's loop, holding no thread.
    @discardableResult
    public func exited() async -> Termination {
        while true {
            if let termination { return termination }
            _ = await awaitExit(within: nil)
        }
    }

    /// Signals `signal` (default SIGTERM), awaits the exit for up to `grace`, then sends SIGKILL
    /// and awaits the exit; the child is reaped when this returns. Nothing waits on the
    /// cooperative pool.
    public func stop(grace: Duration = .seconds(1), signal first: Int32 = SIGTERM) async {
        guard isRunning else { return }
        signal(first)
        if grace > .zero, await awaitExit(within: grace) { return }
        signal(SIGKILL)
        await exited()
    }

    /// Waits up to `timeout` (`nil`: until it happens) for the child's exit, on the process's
    /// loop (`ProcessLoop.shared`: its pidfd watched there), holding no thread; true once it has
    /// exited, and then it is reaped.
    private func awaitExit(within timeout: Duration?) async -> Bool {
        // The pidfd is opened for this wait only and closed after it: held for the object's life,
        // a test process with a hundred children alive pushed libnfc's and libgps's descriptors
        // past select()'s 1024, which aborts. Opened under the status lock while the child is not
        // reaped (only this object reaps it, under that lock), so the pid names this child, a
        // zombie at worst, never a later process that reused the number.
        let opened: Int32 = status.withLock { status in status == nil ? cprocess_pidfd_open(pid) : -1 }
        guard opened >= 0 else { return await lookForExit(within: timeout) }
        let exit = FileDescriptor(rawValue: opened)
        defer { try? exit.close() }
        do throws(IOLoopError) {
            guard try await ProcessLoop.shared.readable(exit, within: timeout) else { return !isRunning }
        } catch {
            return await lookForExit(within: timeout)
        }
        return !isRunning
    }

    /// `awaitExit` without a pidfd (a kernel before 5.3, or a loop that will not watch it):
    /// looks every 10 ms, sleeping on the monotonic clock between looks.
    private func lookForExit(within timeout: Duration?) async -> Bool {
        let clock = MonotonicClock()
        let deadline = timeout.map { clock.now.advanced(by: $0) }
        while isRunning {
            if let deadline, clock.now >= deadline { return false }
            try? await clock.sleep(for: .milliseconds(10))
        }
        return true
    }
}

/// A program that could not be started.
public struct ChildProcessError: Error, Sendable, CustomStringConvertible {
    public var executable: String
    public var errno: Int32
    public init(executable: String, errno: Int32) {
        self.executable = executable
        self.errno = errno
    }
    public var description: String { "cannot start \(executable): \(Errno(rawValue: errno))" }
}
