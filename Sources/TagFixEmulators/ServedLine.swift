import Synchronization
import TagFixSystem

/// A pseudo-terminal served on an `IOLoop` of its own: what both pty emulators share. The loop's
/// thread is the only one that reads or writes the line; it runs the emulator's handlers, its
/// timers and its wire-time alarms, one at a time.
///
/// Writes never wait: what the client's side has no room for yet is kept and goes out when the
/// loop says the line is writable. `stop()` only asks: the loop ends the line once the emulator
/// is idle (`isBusy` false: no frame half sent), closes the pty, then ends itself; `stopped()`
/// awaits that end. So a client sees the device go away after the last byte, never in the middle
/// of a frame, and nothing blocks a caller, `deinit` included.
final class ServedLine: Sendable {
    let pty: PseudoTerminal
    let loop: IOLoop<ContinuousClock>
    /// Wakes the loop to the nanosecond for a wire-time deadline (`wait(until:then:)`).
    private let alarm: TimerFD
    private let state = Mutex(State())

    private struct State {
        var line: IORegistration?
        var alarm: IORegistration?
        var interest: IOEvents = .readable
        /// Whether the emulator takes the client's bytes now (it does not while it answers).
        var reading = true
        /// What the client's side had no room for yet.
        var outgoing: [UInt8] = []
        /// What runs when the alarm goes off, at its deadline.
        var wakeUp: (deadline: ContinuousClock.Instant, body: @Sendable () -> Void)?
        var stopping = false
        var ended = false
        /// Who awaits the end; `nil` once it has come.
        var waiters: [@Sendable () -> Void]? = []
        var isBusy: @Sendable () -> Bool = { false }
    }

    /// Opens a pty and a loop to serve it on, its thread called `name` and the pty's number
    /// ("pn532 pts/7": what `top -H` shows of it).
    init(named name: String) throws(EmulatorError) {
        let pty = try PseudoTerminal()
        do throws(Errno) {
            alarm = try TimerFD()
            do throws(Errno) {
                loop = try IOLoop(name: "\(name) \(pty.path.dropFirst("/dev/".count))")
            } catch {
                _ = try? alarm.close()
                throw error
            }
        } catch {
            pty.close()
            throw .pty("no I/O loop for \(pty.path) (\(error)): too many open files or threads? (ulimit -n, ulimit -u)")
        }
        self.pty = pty
    }

    /// Starts serving: `readable` runs on the loop's thread whenever the client has written and
    /// the emulator is reading. `isBusy` says, on the loop's thread, whether the emulator is in
    /// the middle of an answer (a stop waits for it to say no).
    func start(isBusy: @escaping @Sendable () -> Bool = { false }, readable: @escaping @Sendable () -> Void) {
        state.withLock { $0.isBusy = isBusy }
        do throws(IOLoopError) {
            let line = try loop.register(pty.descriptor, for: .readable) { [self] events in
                if events.contains(.writable) { flush() }
                if !events.isDisjoint(with: [.readable, .hangUp, .error]) {
                    guard state.withLock({ $0.reading && !$0.stopping }) else { return }
                    readable()
                }
            }
            let alarm = try loop.register(self.alarm.descriptor, for: .readable) { [self] _ in
                self.alarm.drain()
                guard let wakeUp = state.withLock({ $0.wakeUp.take() }) else { return }
                wakeUp.deadline.spinUntilReached()
                wakeUp.body()
            }
            state.withLock { state in
                state.line = line
                state.alarm = alarm
            }
        } catch {
            // The loop has only just been made: nothing closes it before this.
            preconditionFailure("the emulator's own loop refused its line: \(error)")
        }
    }

    // MARK: - On the loop's thread

    /// Writes `bytes` to the client: what the line takes now, the rest when it has room.
    func write(_ bytes: [UInt8]) {
        let queued = state.withLock { state -> Bool in
            state.outgoing += bytes
            return state.outgoing.count > bytes.count
        }
        if !queued { flush() }
    }

    /// Stops or resumes taking the client's bytes (they wait in the pty meanwhile).
    func setReading(_ reading: Bool) {
        state.withLock { $0.reading = reading }
        updateInterest()
    }

    /// Returns false when `deadline` has come (spun to, when it was less than `spin` away);
    /// true when it is further: the alarm calls `then` at `deadline` (set `spin` before it by the
    /// kernel's timer, then spun to within a few microseconds). A plain sleep wakes ~80 µs late on
    /// average here (the VM's wake-up, whatever the timer slack), a tenth of a 100-byte frame's
    /// wire time at 115200 baud; the loop's own timers are whole milliseconds.
    func wait(
        until deadline: ContinuousClock.Instant, spin: Duration = .microseconds(200), then: @escaping @Sendable () -> Void
    ) -> Bool {
        let early = deadline - spin
        let now = ContinuousClock.now
        if early > now {
            state.withLock { $0.wakeUp = (deadline, then) }
            alarm.arm(after: early - now)
            return true
        }
        deadline.spinUntilReached()
        return false
    }

    /// Ends the line if a stop is waiting and the emulator is idle: what the emulator calls when
    /// it has finished an answer.
    func endIfStopping() {
        let (stopping, isBusy) = state.withLock { ($0.stopping && !$0.ended, $0.isBusy) }
        guard stopping, !isBusy() else { return }
        end()
    }

    private func flush() {
        let pending = state.withLock { $0.outgoing }
        guard !pending.isEmpty else { return }
        let written = pty.write(pending[...]) ?? pending.count  // a closed line takes nothing more
        state.withLock { $0.outgoing.removeFirst(written) }
        updateInterest()
    }

    private func updateInterest() {
        let change = state.withLock { state -> (IORegistration, IOEvents)? in
            guard let line = state.line else { return nil }
            var interest: IOEvents = state.reading ? .readable : []
            if !state.outgoing.isEmpty { interest.insert(.writable) }
            guard interest != state.interest else { return nil }
            state.interest = interest
            return (line, interest)
        }
        guard let (line, interest) = change else { return }
        try? loop.modify(line, interest: interest)
    }

    private func end() {
        let registrations = state.withLock { state -> [IORegistration] in
            state.ended = true
            state.wakeUp = nil
            state.isBusy = { false }  // it holds the emulator, which holds this line
            return [state.line.take(), state.alarm.take()].compactMap { $0 }
        }
        for registration in registrations { loop.deregister(registration) }
        pty.close()
        _ = try? alarm.close()
        loop.close { [self] in
            for waiter in state.withLock({ $0.waiters.take() ?? [] }) { waiter() }
        }
    }

    // MARK: - Stopping, from any thread

    /// Asks the line to end once the emulator is idle; returns at once. Works once.
    func stop() {
        let first = state.withLock { state -> Bool in
            defer { state.stopping = true }
            return !state.stopping
        }
        guard first else { return }
        loop.execute { [self] in endIfStopping() }
    }

    /// `stop()`, then returns once the pty is closed and the loop's thread has ended.
    func stopped() async {
        stop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = state.withLock { state -> Bool in
                if state.waiters == nil { return true }
                state.waiters?.append { continuation.resume() }
                return false
            }
            if ended { continuation.resume() }
        }
    }
}
