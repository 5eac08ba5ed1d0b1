import Glibc
public import TagFixSystem

/// The process's own `IOLoop`, on the monotonic clock, for what waits without a thread of its
/// own and without a component's loop to wait on: the monotonic clock's sleepers
/// (`MonotonicClock.sleep`) and children's exits (`ChildProcess.exited()`, through a pidfd).
/// Started on first use; it lives as long as the process. What runs on it must not block: its
/// handlers take nothing longer than a non-blocking system call. SIGPIPE is blocked on its
/// thread: a write there to a pipe whose reader has gone fails with `.brokenPipe` instead of
/// ending the process.
public enum ProcessLoop {
    public static let shared: IOLoop<MonotonicClock> = {
        do {
            let loop = try IOLoop(name: "tagfix loop", clock: MonotonicClock())
            loop.execute {
                var blocked = sigset_t()
                sigemptyset(&blocked)
                sigaddset(&blocked, SIGPIPE)
                pthread_sigmask(SIG_BLOCK, &blocked, nil)
            }
            return loop
        } catch {
            fatalError("no I/O loop for the process's timers and children (\(error)): too many open files or threads? (ulimit -n, -u)")
        }
    }()
}
