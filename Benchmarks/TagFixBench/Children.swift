import Glibc
import Synchronization
import TagFixDevices

/// Every program the benchmarks start (the serve under test, the peers, the floor, the
/// workers), so that a benchmark stopped by a signal stops them too: bench/run stops a section's
/// whole process group, but `TagFixBench` run by hand and sent SIGTERM alone left its
/// `tagfix serve` running. (SIGKILL still leaves them: nothing here outlives a `kill -9`.)
final class BenchChildren: Sendable {
    static let shared = BenchChildren()
    private let children = Mutex<[ChildProcess]>([])

    /// Starts a program as `ChildProcess` does, and keeps it to be stopped on a signal.
    static func start(
        executable: String, arguments: [String], environment: [String: String]? = nil, standardInput: Int32? = nil,
        standardOutput: Int32? = nil, standardError: Int32? = nil
    ) throws(ChildProcessError) -> ChildProcess {
        let child = try ChildProcess(
            executable: executable, arguments: arguments, environment: environment, standardInput: standardInput,
            standardOutput: standardOutput, standardError: standardError)
        shared.children.withLock { $0.append(child) }
        return child
    }

    /// SIGTERM to every child still running (a reaped one is never signalled again).
    func stopAll() {
        for child in children.withLock({ $0 }) { child.signal(SIGTERM) }
    }

    /// From now on, SIGINT, SIGTERM and SIGHUP stop every child and then this process, with the
    /// shell's status for the signal (128 + its number).
    static func stopOnSignals() {
        let signals = StopSignals([SIGINT, SIGTERM, SIGHUP])
        Task.detached {
            guard let signal = await signals.wait() else { return }
            shared.stopAll()
            exit(128 + signal)
        }
    }
}
