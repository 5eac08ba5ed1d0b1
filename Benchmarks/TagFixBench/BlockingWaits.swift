import Glibc
import TagFixDevices

// The benchmarks' own blocking waits for a child. A benchmark measures from its main thread or a
// thread of its own, which may block; the product and the tests await a child's end instead
// (`ChildProcess.stop(grace:)`, `exited()`), which has no blocking form.

/// Blocks until `child` has exited, looking every 10 ms; reaps it.
func blockUntilExit(_ child: ChildProcess) {
    while child.isRunning { usleep(10_000) }
}

/// SIGTERM, up to `grace` for `child` to end, then SIGKILL; blocks until it is reaped.
func blockingStop(_ child: ChildProcess, grace: Duration = .seconds(1)) {
    guard child.isRunning else { return }
    child.signal(SIGTERM)
    var waited = Duration.zero
    while child.isRunning, waited < grace {
        usleep(10_000)
        waited += .milliseconds(10)
    }
    child.signal(SIGKILL)
    blockUntilExit(child)
}
