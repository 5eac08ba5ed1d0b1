import Foundation
import Synchronization
import TagFixCore
import TagFixSystem

/// The thread a hardware device lives on: its blocking C calls run there, never on the
/// cooperative pool, and its events reach async code through an `AsyncStream`. Ending the stream
/// (the consumer stops or is cancelled) sets `isStopped`, which the device's loop checks, and runs
/// `onStop` (e.g. nfc_abort_command) to interrupt a blocking call.
public final class DeviceThread: Sendable {
    private let stopped = Mutex(false)

    public init() {}

    /// Whether the consumer has gone: the device loop should return.
    public var isStopped: Bool { stopped.withLock { $0 } }

    /// Starts `body` on a new thread named `name`; its events form the returned stream, which
    /// finishes when `body` returns.
    public func start<Event: Sendable>(
        name: String, onStop: @escaping @Sendable () -> Void = {},
        _ body: @escaping @Sendable (AsyncStream<Event>.Continuation) -> Void
    ) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream()
        continuation.onTermination = { [self] _ in
            stopped.withLock { $0 = true }
            onStop()
        }
        Self.mustStart(name) {
            body(continuation)
            continuation.finish()
        }
        return stream
    }

    /// Sleeps `duration` on the device thread, in short steps, returning early once stopped.
    public func pause(_ duration: Duration) {
        var remaining = duration
        while remaining > .zero, !isStopped {
            let step = min(remaining, .milliseconds(50))
            Thread.sleep(forTimeInterval: step.seconds)
            remaining -= step
        }
    }

    /// Blocks the exiting thread (an `atexit` handler's: the process is ending, nothing else
    /// runs on it) until `done` holds or `limit` has passed, looking every 10 ms: for device
    /// threads to let go of what a library's destructors would otherwise pull from under them.
    public static func blockAtExit(upTo limit: Duration, until done: () -> Bool) {
        var waited = Duration.zero
        while !done(), waited < limit {
            Thread.sleep(forTimeInterval: 0.01)
            waited += .milliseconds(10)
        }
    }

    /// Starts `body` on a long-lived thread of its own named `name` (a client's network loop, a
    /// timer, a pipe's reader), which ends when `body` returns; nothing joins it.
    public static func detach(name: String, _ body: @escaping @Sendable () -> Void) {
        mustStart(name, body)
    }

    /// `SystemThread.start`, where a thread that cannot be had leaves nothing to go on with: a
    /// stream nobody would ever feed, a call nobody would ever answer, a client that never runs.
    /// It stops the process with the reason instead of hanging it.
    static func mustStart(_ name: String, _ body: @escaping @Sendable () -> Void) {
        do throws(Errno) {
            try SystemThread.start(name: name, body)
        } catch {
            fatalError("cannot start the thread \"\(name)\": \(error) (the process's or the user's thread limit; see ulimit -u)")
        }
    }
}

extension DeviceThread {
    /// What a thread that may block (a device's, a committing thread's, never the cooperative
    /// pool's) waits on until another thread signals it. With `pause` and `blockAtExit`, every
    /// blocking wait of the product is in this file (a house rule): a new one is a choice made here.
    public final class Wakeup: Sendable {
        private let semaphore = DispatchSemaphore(value: 0)

        public init() {}

        /// Wakes one wait, now or the next one (signals are counted).
        public func signal() { semaphore.signal() }

        /// Blocks the calling thread until a signal comes (at once for one that came before).
        public func block() { semaphore.wait() }

        /// `block()` for at most `limit`: whether a signal came (and was taken).
        public func block(upTo limit: Duration) -> Bool {
            semaphore.wait(timeout: .now() + .nanoseconds(Int(limit.nanoseconds))) == .success
        }
    }
}

extension DeviceThread {
    /// A thread that runs the jobs handed to it (`run`), one after another in the order handed,
    /// and waits between them; it ends once it has waited `idle` with nothing to do, and the
    /// next job starts another. For work that comes in bursts and may block (a committer's):
    /// a thread started for each burst was the scheduler's newest and lowest, and a busy
    /// machine ran it 2 to 3.4 ms late (phone taps in bursts of 200 on two cores, 04 Dec);
    /// a waiting thread that is woken runs at once.
    public final class Worker: Sendable {
        public let name: String
        private let idle: Duration
        private let state = Mutex(State())
        private let wakeup = Wakeup()

        private struct State {
            var jobs: [@Sendable () -> Void] = []
            /// A thread is there (running jobs, or waiting for one).
            var running = false
            /// The thread waits for a job: `run` signals it.
            var waiting = false
        }

        public init(name: String, idle: Duration = .seconds(1)) {
            self.name = name
            self.idle = idle
        }

        /// Hands `job` to the thread: started when there is none, woken when it waits. Never waits.
        public func run(_ job: @escaping @Sendable () -> Void) {
            let (start, wake) = state.withLock { state -> (Bool, Bool) in
                state.jobs.append(job)
                if !state.running {
                    state.running = true
                    return (true, false)
                }
                guard state.waiting else { return (false, false) }
                state.waiting = false
                return (false, true)
            }
            if wake { wakeup.signal() }
            if start { mustStart(name) { [self] in work() } }
        }

        private func work() {
            while true {
                let jobs = state.withLock { state -> [@Sendable () -> Void] in
                    defer { state.jobs = [] }
                    if state.jobs.isEmpty { state.waiting = true }
                    return state.jobs
                }
                guard jobs.isEmpty else {
                    for job in jobs { job() }
                    continue
                }
                if wakeup.block(upTo: idle) { continue }
                // Waited `idle` for nothing: the thread ends, unless a job came as the wait ran
                // out (its `run` signalled: that signal is taken, and the job run).
                let ends = state.withLock { state -> Bool in
                    guard state.waiting else { return false }
                    state.waiting = false
                    state.running = false
                    return true
                }
                if ends { return }
                wakeup.block()
            }
        }
    }

    /// The thread `map` computes second halves on.
    private static let mapWorker = Worker(name: "tagfix-map")

    /// `transform` of each of `items`, in order, computed by the calling thread (one that may
    /// block: a committer's) and, for `splitFrom` items or more on a machine of more than one
    /// core, by a worker thread for the second half (`Worker`, shared by every `map`), which it
    /// waits for. A group of 200 phone taps' records is encoded on both cores while the rest of
    /// the server waits for their answers. Fewer items are not worth the hand-over. `transform`
    /// must not call `map` (the one worker would wait for itself).
    public static func map<Item: Sendable, Value: Sendable>(
        _ items: [Item], splitFrom threshold: Int, _ transform: @escaping @Sendable (Item) -> Value
    ) -> [Value] {
        guard items.count >= max(2, threshold), ProcessInfo.processInfo.activeProcessorCount > 1 else { return items.map(transform) }
        let middle = items.count / 2
        let second = Array(items[middle...])
        let result = Mutex<[Value]>([])
        let done = Wakeup()
        mapWorker.run {
            let values = second.map(transform)
            result.withLock { $0 = values }
            done.signal()
        }
        var values = items[..<middle].map(transform)
        done.block()
        values += result.withLock { $0 }
        return values
    }
}

/// Runs a blocking call (a child's exit, a daemon's start-up, a pipe read to its end) on a thread
/// of its own and waits for it without holding a thread of the cooperative pool. The pool has one
/// thread per core (two on a Pi): one `waitUntilExit()` on it stalls every task that shares it,
/// a verifier's fix stream among them.
public func offThePool<Value: Sendable, Failure: Error>(
    _ name: String = "blocking call", _ body: @escaping @Sendable () throws(Failure) -> Value
) async throws(Failure) -> Value {
    let result: Result<Value, Failure> = await withCheckedContinuation { continuation in
        DeviceThread.mustStart(name) {
            do throws(Failure) {
                continuation.resume(returning: .success(try body()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try result.get()
}
