import Synchronization
public import TagFixCore

/// A clock that moves only when a test says so. Sleepers are resumed in deadline order when
/// `advance(by:)` or `advance(to:)` passes their deadline; a sleep whose deadline has already
/// passed returns at once. No real time passes, so tests never sleep.
public final class ManualClock: Clock, Sendable {
    public typealias Instant = Timestamp
    public typealias Duration = Swift.Duration

    private struct Sleeper {
        var id: UInt64
        var deadline: Timestamp
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Timestamp
        var sleepers: [Sleeper] = []
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
        var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Mutex<State>

    /// A clock reading `now`; by default 2026-01-01T00:00:00Z.
    public init(now: Timestamp = Timestamp(nanosecondsSinceEpoch: 1_767_225_600_000_000_000)) {
        state = Mutex(State(now: now))
    }

    public var now: Timestamp { state.withLock { $0.now } }
    public var minimumResolution: Swift.Duration { .nanoseconds(1) }

    /// How many tasks are sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Timestamp, tolerance: Swift.Duration? = nil) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case wait, resume, cancel }
                let (outcome, waiters) = state.withLock { state -> (Outcome, [CheckedContinuation<Void, Never>]) in
                    if state.cancelled.remove(id) != nil { return (.cancel, []) }
                    if deadline <= state.now { return (.resume, []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    let count = state.sleepers.count
                    let ready = state.sleeperWaiters.filter { $0.count <= count }.map(\.continuation)
                    state.sleeperWaiters.removeAll { $0.count <= count }
                    return (.wait, ready)
                }
                for waiter in waiters { waiter.resume() }
                switch outcome {
                case .wait: break
                case .resume: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                if let index = state.sleepers.firstIndex(where: { $0.id == id }) {
                    return state.sleepers.remove(at: index)
                }
                state.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration` and wakes every sleeper whose deadline has come.
    public func advance(by duration: Swift.Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// Moves time to `instant` (never backwards) and wakes every sleeper whose deadline has come,
    /// earliest first.
    public func advance(to instant: Timestamp) {
        let due = state.withLock { state -> [Sleeper] in
            if instant > state.now { state.now = instant }
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due.sorted { ($0.deadline, $0.id) < ($1.deadline, $1.id) }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Suspends until at least `count` tasks are sleeping on this clock — how a test knows the
    /// code under test has reached its wait before it advances time.
    public func waitForSleepers(count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.sleeperWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
