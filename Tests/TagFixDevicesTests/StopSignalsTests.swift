import Foundation
import Synchronization
import TagFixDevices
import TagFixSystem
import Testing

/// StopSignals in this process, with SIGUSR2 (which nothing else here uses) standing for SIGTERM.
/// Serialized: the process's SIGUSR2 disposition is shared; a test that cancels its StopSignals
/// gives SIGUSR2 back its default action (ending the process) while another may still send it.
@Suite("StopSignals turns a signal into a normal end", .serialized, .timeLimit(.minutes(1)))
struct StopSignalsTests {
    @Test("a signal wakes every waiter with its number, and later waiters at once")
    func wakesWaiters() async {
        let stop = StopSignals([SIGUSR2])
        defer { stop.cancel() }
        // Never send the signal unless it is caught: its default action ends the test process.
        guard stop.isInstalled else {
            Issue.record("StopSignals could not be installed")
            return
        }
        async let first = stop.wait()
        async let second = stop.wait()
        // The handler is installed in init, so the signal is caught whenever it comes.
        kill(getpid(), SIGUSR2)
        #expect(await first == SIGUSR2)
        #expect(await second == SIGUSR2)
        #expect(await stop.wait() == SIGUSR2)
        #expect(stop.received == SIGUSR2)
    }

    @Test("onSignal is called with the signal's number before the waiters wake")
    func onSignal() async {
        final class Seen: Sendable { let signals = Mutex<[Int32]>([]) }
        let seen = Seen()
        let stop = StopSignals([SIGUSR2]) { signal in seen.signals.withLock { $0.append(signal) } }
        defer { stop.cancel() }
        guard stop.isInstalled else {
            Issue.record("StopSignals could not be installed")
            return
        }
        try? Processes.signal(SIGUSR2, to: getpid())
        #expect(await stop.wait() == SIGUSR2)
        #expect(seen.signals.withLock { $0 } == [SIGUSR2])
    }

    @Test("made and cancelled many times in a row, each catches its own signal (the pipe's descriptors are reused)")
    func manyInARow() async {
        for round in 0..<100 {
            let stop = StopSignals([SIGUSR2])
            guard stop.isInstalled else {
                Issue.record("StopSignals could not be installed (round \(round))")
                return
            }
            try? Processes.signal(SIGUSR2, to: getpid())
            let caught = await stop.wait()
            stop.cancel()
            guard caught == SIGUSR2 else {
                Issue.record("round \(round): \(String(describing: caught))")
                return
            }
        }
    }

    @Test("run cancels its body on a signal and returns what the body returns when cancelled")
    func runCancelsBody() async {
        let stop = StopSignals([SIGUSR2])
        defer { stop.cancel() }
        guard stop.isInstalled else {
            Issue.record("StopSignals could not be installed")
            return
        }
        let result = await stop.run { () -> String in
            kill(getpid(), SIGUSR2)
            // A session that runs until cancelled, then finishes its pending work.
            try? await Task.sleep(for: .seconds(3600))
            return Task.isCancelled ? "finished after the signal" : "ran to its end"
        }
        #expect(result == "finished after the signal")
    }

    @Test("cancel wakes a waiter with nil; a cancelled task's wait returns nil")
    func cancelWakes() async {
        let stop = StopSignals([SIGUSR2])
        let waiter = Task { await stop.wait() }
        let cancelled = Task { await stop.wait() }
        cancelled.cancel()
        #expect(await cancelled.value == nil)
        stop.cancel()
        #expect(await waiter.value == nil)
        #expect(stop.received == nil)
    }
}
