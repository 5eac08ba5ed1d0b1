import Foundation
public import TagFixCore

/// The system's real-time clock, with UTC `Timestamp`s as instants so scan times and GPS fix
/// times share one axis. Sleeps measure elapsed time on the monotonic clock, so a wall-clock
/// step does not stretch or cut a wait.
public struct WallClock: Clock, Sendable {
    public typealias Instant = Timestamp
    public typealias Duration = Swift.Duration

    public init() {}

    public var now: Timestamp {
        Timestamp(secondsSinceEpoch: Date().timeIntervalSince1970) ?? Timestamp(nanosecondsSinceEpoch: 0)
    }

    public var minimumResolution: Swift.Duration { .microseconds(1) }

    public func sleep(until deadline: Timestamp, tolerance: Swift.Duration?) async throws {
        let remaining = now.duration(to: deadline)
        guard remaining > .zero else { return }
        try await ContinuousClock().sleep(for: remaining, tolerance: tolerance)
    }
}
