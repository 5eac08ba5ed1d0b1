import Synchronization

/// A value that comes at most once, and the tasks waiting for it: `finish(_:)` sets it (the first
/// call wins), `close()` gives up on it, and every `wait()`, before or after, returns the value,
/// or `nil` once closed without one or when the waiting task is cancelled. The first signal a
/// `StopSignals` catches; the reason a collector ended on its own.
public final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var closed = false
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
    }
    private let state = Mutex(State())

    public init() {}

    /// The value, once it has come.
    public var value: Value? { state.withLock { $0.value } }

    /// Sets the value, unless one came first, and wakes every waiter with it.
    public func finish(_ value: Value) {
        let (waiters, first) = state.withLock { state in
            if state.value == nil { state.value = value }
            defer { state.waiters = [:] }
            return (Array(state.waiters.values), state.value)
        }
        for waiter in waiters { waiter.resume(returning: first) }
    }

    /// Gives up: waiters now and later get `nil` (a value that already came stays).
    public func close() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// Suspends until the value comes (at once if it has) and returns it; `nil` if closed first
    /// or when the task is cancelled.
    public func wait() async -> Value? {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let now: Value?? = state.withLock { state in
                    if let value = state.value { return .some(value) }
                    if state.closed || Task.isCancelled { return .some(nil) }
                    state.waiters[id] = continuation
                    return .none
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
        }
    }
}
