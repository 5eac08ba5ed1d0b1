import Foundation
import Glibc
import Synchronization
import TagFixDevices

/// The programs the benchmarks start themselves (the serve under test, the peers, the floor, the
/// workers, the collectors), so that a SIGTERM sent to the harness alone stops them too: bench/run
/// stops a section's whole process group, but `TagFixBench` run by hand and sent SIGTERM left its
/// `tagfix serve` running. (The private daemons, gpsd, pcscd, mosquitto and PostgreSQL, have
/// watchdogs of their own. SIGKILL still leaves these; Ctrl-C reaches the whole foreground group.)
final class BenchChildren: Sendable {
    static let shared = BenchChildren()
    private let children = Mutex<[ChildProcess]>([])
    /// Kept for the process's life: it catches SIGTERM.
    private let signals = Mutex<StopSignals?>(nil)

    /// Starts a program as `ChildProcess` does, and keeps it to be stopped on SIGTERM.
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

    /// From now on a SIGTERM stops every child, then this process at once with the shell's
    /// status for it (143), from the signals' own queue: not through the cooperative pool, which a
    /// benchmark's blocking waits may hold, and without running exit handlers beside threads still
    /// at work.
    static func stopOnTerm() {
        let caught = StopSignals([SIGTERM]) { signal in
            shared.stopAll()
            _exit(128 + signal)
        }
        shared.signals.withLock { $0 = caught }
    }
}
