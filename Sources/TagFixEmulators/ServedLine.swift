import Foundation
import Synchronization
import TagFixDevices

/// A pseudo-terminal answered by one thread of its own: what both emulators share.
///
/// `stop()` works once, from any thread (async code calls it on a thread of its own:
/// `EmulatorLab.stopping`). It raises `isStopped`, waits for the serving loop to see it and
/// return, and only then closes the line. So a client sees the device go away after the last
/// byte, never in the middle of a frame. Nothing stops it in `deinit`: the serving thread holds
/// its emulator until it returns.
final class ServedLine: Sendable {
    let pty: PseudoTerminal
    private let stopped = Mutex(false)
    private let done = DispatchSemaphore(value: 0)

    init() throws(EmulatorError) { pty = try PseudoTerminal() }

    /// Runs `serve` on a thread named `name`. `serve` returns once `isStopped` is true (or the
    /// line fails).
    func start(name: String, _ serve: @escaping @Sendable () -> Void) {
        DeviceThread.detach(name: name) { [done] in
            serve()
            done.signal()
        }
    }

    var isStopped: Bool { stopped.withLock { $0 } }

    func stop() {
        let first = stopped.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        done.wait()
        pty.close()
    }
}
