import Foundation
import Glibc
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

    /// Sleeps `duration` on the device thread, in short steps, returning early once stopped or
    /// once `stop` holds (the process ending).
    public func pause(_ duration: Duration, or stop: () -> Bool = { false }) {
        var remaining = duration
        while remaining > .zero, !isStopped, !stop() {
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
    /// The devices this process has open, one user each: a device thread claims its device
    /// before it opens it and releases it once closed, and a second claim of the same device
    /// waits for that. Two users of one serial reader in one process (a command that returned
    /// while its reader was still closing, and the next one opening it) would otherwise talk
    /// over each other on the line: the old one's field-off reset the tag under the new one's
    /// read (libnfc's own claim of a serial port does not hold on a pty).
    public final class Claims: Sendable {
        /// The process's claims.
        public static let shared = Claims()

        /// Each claimed device, with whoever waits for it.
        private let held = Mutex<[String: [Wakeup]]>([:])

        public init() {}

        /// Claims `device`: at once when no one in this process has it, or else once its user
        /// releases it, waiting on the calling device thread while `wanted` holds (asked before
        /// each wait of at most 50 ms). Returns whether it was claimed.
        public func claim(_ device: String, while wanted: () -> Bool) -> Bool {
            let wakeup = Wakeup()
            while true {
                let claimed = held.withLock { held -> Bool in
                    guard var waiting = held[device] else {
                        held[device] = []
                        return true
                    }
                    if !waiting.contains(where: { $0 === wakeup }) {
                        waiting.append(wakeup)
                        held[device] = waiting
                    }
                    return false
                }
                if claimed { return true }
                guard wanted() else { break }
                _ = wakeup.block(upTo: .milliseconds(50))
            }
            held.withLock { held in held[device]?.removeAll { $0 === wakeup } }
            return false
        }

        /// Releases `device`, claimed by the caller: the next claim of it goes ahead.
        public func release(_ device: String) {
            let waiting = held.withLock { $0.removeValue(forKey: device) ?? [] }
            for wakeup in waiting { wakeup.signal() }
        }

        /// Whether `device` is claimed now.
        public func isClaimed(_ device: String) -> Bool { held.withLock { $0[device] != nil } }

        /// How many claims wait for `device` now (for tests).
        func waiting(_ device: String) -> Int { held.withLock { $0[device]?.count ?? 0 } }
    }
}

extension DeviceThread {
    /// What device threads hold of a C library, so that the process's end waits for them to let
    /// go: a library whose destructors free what a thread still uses (pcsc-lite's contexts), or
    /// a device left half closed (a libnfc reader's field left on), needs its threads done
    /// first. At exit (one `atexit` handler for every library, run before the libraries'
    /// destructors) each held thing's blocking call is interrupted once, device loops stop
    /// (`exiting`), nothing more is taken, and the exit waits, at most a second for them all,
    /// until each is let go.
    public final class HeldAtExit<Key: Hashable & Sendable>: Sendable {
        private struct Holding {
            var count: Int
            let interrupt: @Sendable () -> Void
        }
        private struct State {
            var held: [Key: Holding] = [:]
            /// Things being taken (a device being opened): the exit waits for them too.
            var taking = 0
            var exiting = false
            var registered = false
        }
        private let state = Mutex(State())

        public init() {}

        /// Whether the process is ending: device loops stop, and nothing more is taken.
        public var exiting: Bool { state.withLock { $0.exiting } }

        /// Something is about to be taken (a device opened): false once the process is ending,
        /// when it must not be. `took` or `failedToTake` follows a true.
        public func willTake() -> Bool {
            let (taking, register) = state.withLock { state -> (Bool, Bool) in
                guard !state.exiting else { return (false, false) }
                state.taking += 1
                defer { state.registered = true }
                return (true, !state.registered)
            }
            if register { HeldAtExitDrain.add(self) }
            return taking
        }

        /// What `willTake` announced was not taken.
        public func failedToTake() { state.withLock { $0.taking -= 1 } }

        /// What `willTake` announced is held as `key`; `interrupt` ends its blocking call.
        public func took(_ key: Key, interrupt: @escaping @Sendable () -> Void) {
            state.withLock { $0.taking -= 1 }
            hold(key, interrupt: interrupt)
        }

        /// `key` is held once more (taken without `willTake`: a call that cannot be refused).
        public func hold(_ key: Key, interrupt: @escaping @Sendable () -> Void) {
            let register = state.withLock { state -> Bool in
                state.held[key, default: Holding(count: 0, interrupt: interrupt)].count += 1
                defer { state.registered = true }
                return !state.registered
            }
            if register { HeldAtExitDrain.add(self) }
        }

        /// `key` is let go once.
        public func release(_ key: Key) {
            state.withLock { state in
                guard let holding = state.held[key] else { return }
                state.held[key] = holding.count > 1 ? Holding(count: holding.count - 1, interrupt: holding.interrupt) : nil
            }
        }

        /// The process is ending: nothing more is taken, and each blocking call is interrupted,
        /// once (a second interrupt could cut short what a thread does to let go).
        fileprivate func beginExit() {
            let interrupts = state.withLock { state -> [@Sendable () -> Void] in
                state.exiting = true
                return state.held.values.map(\.interrupt)
            }
            for interrupt in interrupts { interrupt() }
        }

        /// Whether everything is let go.
        fileprivate var isLetGo: Bool { state.withLock { $0.held.isEmpty && $0.taking == 0 } }
    }
}

/// Every `HeldAtExit` in use, drained together by one `atexit` handler.
private enum HeldAtExitDrain {
    private struct Part: Sendable {
        let beginExit: @Sendable () -> Void
        let isLetGo: @Sendable () -> Bool
    }
    private static let parts = Mutex<(installed: Bool, parts: [Part])>((false, []))

    static func add<Key>(_ held: DeviceThread.HeldAtExit<Key>) {
        let install = parts.withLock { state -> Bool in
            state.parts.append(Part(beginExit: { held.beginExit() }, isLetGo: { held.isLetGo }))
            defer { state.installed = true }
            return !state.installed
        }
        if install { atexit { HeldAtExitDrain.drain() } }
    }

    private static func drain() {
        let all = parts.withLock { $0.parts }
        for part in all { part.beginExit() }
        DeviceThread.blockAtExit(upTo: .seconds(1)) { all.allSatisfy { $0.isLetGo() } }
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

    /// The thread `map`, `startMap` and `feed` share their items with.
    private static let mapWorker = Worker(name: "tagfix-map")

    /// Whether the machine has more than one core to run a map's two halves on: asked once
    /// (Foundation reads it from the system at every call, a group's map at a time).
    private static let severalCores = ProcessInfo.processInfo.activeProcessorCount > 1

    /// `transform` of each of `items`, in order, computed by the calling thread (one that may
    /// block: a committer's) and, for `splitFrom` items or more on a machine of more than one
    /// core, by a worker thread beside it (`startMap`). A group of verdicts' records (a reader
    /// session's fan-out) is encoded on both cores. Fewer items are not worth the hand-over.
    public static func map<Item: Sendable, Value: Sendable>(
        _ items: [Item], splitFrom threshold: Int, _ transform: @escaping @Sendable (Item) -> Value
    ) -> [Value] {
        guard items.count >= max(2, threshold), severalCores else { return items.map(transform) }
        return startMap(items, transform).finish()
    }

    /// Starts `transform` of each of `items` on the map worker, at once; `finish()` gives the
    /// values, in order (`map` calls it straight away). The items are taken one at a time, by
    /// the worker from the start and by the caller once it calls `finish()`, so the two share
    /// what is left however late either comes. The caller waits only for an item the worker is
    /// in the middle of, never for a worker that has not begun (busy with another map, or not
    /// yet scheduled: a thread woken on a busy machine can run milliseconds late); what it has
    /// not taken, the caller does. So `transform` may itself map.
    static func startMap<Item: Sendable, Value: Sendable>(
        _ items: [Item], _ transform: @escaping @Sendable (Item) -> Value
    ) -> Feed<Item, Value> {
        // A feed whose items all come at once, the worker asked from the first.
        let feed = Feed(threshold: 1, transform)
        feed.add(items)
        return feed
    }

    /// A map whose items come over time (a group's taps, batch by batch, as the committer decides
    /// them): the map worker takes them as they come, beside the thread that hands them over, once
    /// `splitFrom` are waiting (fewer are not worth waking it; on one core it is never woken);
    /// `finish()` takes what is left on the calling thread and gives every value, in order. The
    /// worker's part is done while the caller goes on with its own work (the next batch, a
    /// commit), so a value the caller needs at the end is often made already.
    public static func feed<Item: Sendable, Value: Sendable>(
        splitFrom threshold: Int, _ transform: @escaping @Sendable (Item) -> Value
    ) -> Feed<Item, Value> {
        Feed(threshold: severalCores ? max(1, threshold) : nil, transform)
    }

    /// Items handed over in batches (`add`), mapped as they come (`DeviceThread.feed`). Used by
    /// one caller: `add`, then `finish()` once.
    public final class Feed<Item: Sendable, Value: Sendable>: Sendable {
        private struct State {
            var items: [Item] = []
            var values: [Value?] = []
            var next = 0
            /// The worker has a job for this feed queued or running.
            var workerHas = false
            /// The worker is making a value (taken, not yet stored).
            var workerBusy = false
            /// `finish()` waits for the worker's value.
            var finishWaits = false
            var finished = false
        }

        /// `nil`: the worker is never asked (one core).
        private let threshold: Int?
        private let transform: @Sendable (Item) -> Value
        private let state = Mutex(State())
        private let done = Wakeup()

        /// `threshold`: how many items waiting wake the worker (`nil`: never); `feed` gives
        /// `nil` on one core.
        init(threshold: Int?, _ transform: @escaping @Sendable (Item) -> Value) {
            self.threshold = threshold
            self.transform = transform
        }

        /// Hands `items` over, after those before. Never waits.
        public func add<Items: Collection<Item>>(_ items: Items) {
            let wake = state.withLock { state -> Bool in
                precondition(!state.finished, "DeviceThread.Feed.add after finish()")
                state.items.append(contentsOf: items)
                state.values.append(contentsOf: repeatElement(nil, count: items.count))
                guard let threshold, !state.workerHas, state.items.count - state.next >= threshold else { return false }
                state.workerHas = true
                return true
            }
            if wake { mapWorker.run { [self] in work() } }
        }

        /// The next item nobody has taken, and its place; `byWorker`: the worker's, which is then busy.
        private func take(byWorker: Bool) -> (Int, Item)? {
            state.withLock { state in
                guard state.next < state.items.count else {
                    if byWorker { state.workerHas = false }
                    return nil
                }
                defer { state.next += 1 }
                if byWorker { state.workerBusy = true }
                return (state.next, state.items[state.next])
            }
        }

        /// The worker's part: items until none is left (the next `add` of enough asks it again).
        private func work() {
            while let (index, item) = take(byWorker: true) {
                let value = transform(item)
                let wakes = state.withLock { state -> Bool in
                    state.values[index] = value
                    state.workerBusy = false
                    defer { state.finishWaits = false }
                    return state.finishWaits
                }
                if wakes { done.signal() }
            }
        }

        /// Every item's value, in order: the caller makes those nobody took, then waits for the
        /// one the worker may be making. Call it once, after the last `add`, from a thread that
        /// may block (a committer's), never the cooperative pool.
        public func finish() -> [Value] {
            state.withLock { state in
                precondition(!state.finished, "DeviceThread.Feed.finish() called twice")
                state.finished = true
            }
            var mine: [(Int, Value)] = []
            while let (index, item) = take(byWorker: false) { mine.append((index, transform(item))) }
            let waits = state.withLock { state -> Bool in
                state.finishWaits = state.workerBusy
                return state.finishWaits
            }
            if waits { done.block() }
            return state.withLock { state in
                for (index, value) in mine { state.values[index] = value }
                return state.values.map { $0! }
            }
        }
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
