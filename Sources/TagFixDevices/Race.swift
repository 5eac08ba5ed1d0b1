/// How a race against a deadline ended: whichever came first.
///
/// A work that can fail returns a `Result` (`.value(.failure(error))`): the outcome has no case
/// of its own for an error, so it is never instantiated with an uninhabited payload (`Never`),
/// whose generic enum layout the Swift 6 compiler and runtime disagree on (a switch over a
/// `RaceOutcome<T, Never>` in another module trapped with "unexpected enum case").
public enum RaceOutcome<Value: Sendable>: Sendable {
    /// A racer returned first.
    case value(Value)
    /// The deadline passed first.
    case timedOut
    /// The task running the race was cancelled before it took a racer's result (a racer that
    /// then returns, because it was cancelled, does not count).
    case cancelled
}

extension RaceOutcome: Equatable where Value: Equatable {}

/// Runs `work` against `deadline` on `clock` (`nil`: no deadline) and the cancellation of the
/// calling task. The first to come decides; the rest are then cancelled and awaited, so nothing
/// of the race runs on once it returns. Cancellation is cooperative: the race returns when
/// `work` does.
public func race<C: Clock, Value: Sendable>(
    deadline: C.Instant?, clock: C, _ work: @escaping @Sendable () async -> Value
) async -> RaceOutcome<Value> {
    await race(deadline: deadline, clock: clock, first: [work])
}

/// The first of several racers (a device's events, a stop signal, a count reached…) against
/// `deadline` on `clock` and the cancellation of the calling task; see `race(deadline:clock:_:)`.
/// With no racer and no deadline there is nothing to wait for: `.cancelled` at once.
public func race<C: Clock, Value: Sendable>(
    deadline: C.Instant?, clock: C, first racers: [@Sendable () async -> Value]
) async -> RaceOutcome<Value> {
    await withTaskGroup(of: RaceOutcome<Value>?.self) { group in
        for racer in racers {
            group.addTask { .value(await racer()) }
        }
        if let deadline {
            group.addTask {
                // Cancelled: another came first, and this has no outcome of its own.
                guard (try? await clock.sleep(until: deadline, tolerance: nil)) != nil else { return nil }
                return .timedOut
            }
        }
        var first: RaceOutcome<Value>?
        while first == nil, let next = await group.next() { first = next }
        group.cancelAll()
        // The flag is set before any racer hears of the cancellation, so a racer that returned
        // because of it is never taken for the winner.
        if Task.isCancelled { return .cancelled }
        return first ?? .cancelled
    }
}
