import Foundation
import Glibc
import Synchronization
import TagFixDevices
import TagFixSystem
import Testing

@Suite("ChildProcess: scoped runs, and a stop that awaits the exit", .timeLimit(.minutes(1)))
struct ChildProcessTests {
    @Test("run { } stops the child when its body ends: SIGTERM, awaited, reaped")
    func scopedRun() async throws {
        let child = try await ChildProcess.run(executable: "/bin/sleep", arguments: ["30"]) { child in
            #expect(child.isRunning)
            return child
        }
        #expect(!child.isRunning)
        #expect(child.termination == .signalled(SIGTERM))
        #expect(kill(child.pid, 0) != 0, "the child was reaped: its pid is gone")
    }

    @Test("run { } stops the child when its body throws too")
    func scopedRunThrows() async throws {
        struct Failure: Error {}
        let seen = Mutex<ChildProcess?>(nil)
        await #expect(throws: Failure.self) {
            try await ChildProcess.run(executable: "/bin/sleep", arguments: ["30"]) { child in
                seen.withLock { $0 = child }
                throw Failure()
            }
        }
        #expect(seen.withLock { $0 }?.termination == .signalled(SIGTERM))
    }

    @Test("stop(grace:) sends SIGKILL after the grace to a child that ignores SIGTERM")
    func stopEscalates() async throws {
        // Ignored signals stay ignored across exec: sleep itself ignores SIGTERM. The shell says
        // when its trap is in place (a line on a pipe, awaited on the process's loop): signalled
        // before, it would simply have died of SIGTERM.
        let (said, shell) = try FileDescriptor.pipe()
        defer { try? said.close() }
        let child = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "trap '' TERM; echo trapped; exec sleep 30"], standardOutput: shell.rawValue)
        try shell.close()
        #expect(try await ProcessLoop.shared.readable(said, within: nil))
        // Stops at all only by SIGKILL (the suite's time limit catches a stop that never comes).
        await child.stop(grace: .milliseconds(300))
        #expect(child.termination == .signalled(SIGKILL))
    }

    @Test("exited() awaits the exit and says how it ended")
    func exited() async throws {
        let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "sleep 0.2; exit 3"])
        #expect(await child.exited() == .exited(3))
        #expect(!child.isRunning)
        await child.stop()
    }

    @Test("awaiting many exits holds no thread of the cooperative pool: the test still runs to stop them")
    func poolStaysFree() async throws {
        // More waiters than the pool has threads (one per core): were each parked on a pool thread,
        // nothing would be left to run the stops below, and the exits would never come.
        let children = try (0..<8).map { _ in try ChildProcess(executable: "/bin/sleep", arguments: ["60"]) }
        await withTaskGroup(of: ChildProcess.Termination.self) { group in
            for child in children { group.addTask { await child.exited() } }
            // The waiters park; this body needs a pool thread to wake up and signal.
            try? await Task.sleep(for: .milliseconds(300))
            for child in children { child.signal(SIGTERM) }
            for await termination in group { #expect(termination == .signalled(SIGTERM)) }
        }
        #expect(children.allSatisfy { !$0.isRunning })
    }
}
