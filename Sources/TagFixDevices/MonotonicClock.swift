import CSystemClock
import Foundation
import Synchronization
public import TagFixCore
import TagFixSystem

/// The clock a session runs on: the monotonic clock (`CLOCK_MONOTONIC`), labelled with UTC as the
/// system clock read once, when the process first asked for the time.
///
/// Its instants are `Timestamp`s so scans and fixes (mapped onto the same axis, see
/// `ReceiverTimeline`) share one axis; its differences are real elapsed time whatever the wall
/// clock does: wrong by years, stepped by NTP or by hand mid-session. Whether its UTC labels are
/// right is a separate question, answered by `TimeReference` (the system clock when the kernel
/// says it is synchronised, else GPS time).
///
/// `sleep` is served by the timers of one `IOLoop` on this clock (its `epoll_wait` timeouts are
/// measured by the kernel on the monotonic clock), not by Dispatch timers: under `faketime` (the tests' wrong wall clock) Dispatch's timers and
/// `Task.sleep` stop firing, while the kernel's monotonic clock keeps going, as on a real Pi.
public struct MonotonicClock: Clock, Sendable {
    public typealias Instant = Timestamp
    public typealias Duration = Swift.Duration

    public init() {}

    /// UTC by the system clock, and the monotonic reading, at the process's first read.
    private static let anchor: (utc: Timestamp, monotonic: Int64) = (systemNow(), monotonicNanoseconds())

    public var now: Timestamp {
        Self.anchor.utc.advanced(by: .nanoseconds(Self.monotonicNanoseconds() &- Self.anchor.monotonic))
    }

    public var minimumResolution: Swift.Duration { .microseconds(1) }

    public func sleep(until deadline: Timestamp, tolerance: Swift.Duration?) async throws {
        try await MonotonicTimer.shared.sleep(until: deadline)
    }

    /// `CLOCK_MONOTONIC` in nanoseconds.
    static func monotonicNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    }

    /// The system clock (`CLOCK_REALTIME`) now, right or wrong.
    static func systemNow() -> Timestamp {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Timestamp(nanosecondsSinceEpoch: Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec))
    }
}

// MARK: - The system clock

/// What the system clock says and whether the kernel vouches for it.
public struct SystemClockReading: Sendable, Hashable {
    /// `CLOCK_REALTIME`.
    public var now: Timestamp
    /// The kernel's synchronisation status: `true` when NTP/chrony keeps the clock in step,
    /// `false` when it does not (`STA_UNSYNC`), `nil` when the kernel could not be asked.
    public var synchronised: Bool?

    public init(now: Timestamp, synchronised: Bool?) {
        self.now = now
        self.synchronised = synchronised
    }
}

/// A source of system-clock readings: the kernel in the field, a fake in tests.
public protocol SystemClock: Sendable {
    func read() -> SystemClockReading
}

/// The kernel's clock: `clock_gettime(CLOCK_REALTIME)` and `ntp_adjtime` (read only).
public struct KernelClock: SystemClock {
    public init() {}

    public func read() -> SystemClockReading {
        var maximumError: Int64 = 0
        let status = csystemclock_synchronised(&maximumError)
        return SystemClockReading(now: MonotonicClock.systemNow(), synchronised: status < 0 ? nil : status == 1)
    }
}

// MARK: - The timer

/// Wakes sleepers at their deadlines from the process's loop (`ProcessLoop.shared`, on the
/// monotonic clock: the loop waits in `epoll_wait` with a relative timeout, which the kernel
/// measures on the monotonic clock), shared by every `MonotonicClock`. No thread or poll loop of
/// its own.
final class MonotonicTimer: Sendable {
    static let shared = MonotonicTimer()

    private struct Sleeper {
        var timer: IOTimer?
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var sleepers: [UInt64: Sleeper] = [:]
        /// Sleepers cancelled before they were registered.
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())
    private var loop: IOLoop<MonotonicClock> { ProcessLoop.shared }

    func sleep(until deadline: Timestamp) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= loop.clock.now { return .success(()) }
                    state.sleepers[id] = Sleeper(continuation: continuation)
                    return nil
                }
                if let outcome {
                    continuation.resume(with: outcome)
                    return
                }
                let timer = loop.schedule(at: deadline) { [self] in
                    state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume()
                }
                // Cancelled meanwhile: its handler has resumed it; the timer goes too.
                let waiting = state.withLock { state -> Bool in
                    guard state.sleepers[id] != nil else { return false }
                    state.sleepers[id]?.timer = timer
                    return true
                }
                if !waiting { loop.cancel(timer) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper }
                state.cancelled.insert(id)
                return nil
            }
            if let sleeper {
                if let timer = sleeper.timer { loop.cancel(timer) }
                sleeper.continuation.resume(throwing: CancellationError())
            }
        }
    }
}

// MARK: - Watching the two clocks

/// Keeps a `TimeReference` current from the fixes a session sees and the system clock, and says
/// once when the system clock is off GPS time.
public struct ClockWatch: Sendable {
    /// `nil`: the axis's labels are UTC (a test clock, a scenario).
    public let systemClock: (any SystemClock)?
    public private(set) var reference = TimeReference()
    private var reported = false

    public init(systemClock: (any SystemClock)?) {
        self.systemClock = systemClock
    }

    /// Reads the system clock at axis instant `axisNow`.
    public mutating func readSystemClock(axisNow: Timestamp) {
        let reading = systemClock?.read() ?? SystemClockReading(now: axisNow, synchronised: true)
        reference.system(now: reading.now, synchronised: reading.synchronised, axisNow: axisNow)
    }

    /// A fix arrived. Returns the reference the first time it shows the system clock off GPS
    /// time (say so, once), else `nil`.
    public mutating func observe(_ fix: Fix, axisNow: Timestamp) -> TimeReference? {
        guard let receiverTime = fix.receiverTime, fix.hasPosition else { return nil }
        reference.gps(receiverTime: receiverTime, axisTime: fix.time)
        readSystemClock(axisNow: axisNow)
        guard !reported, reference.systemClockIsOff else { return nil }
        reported = true
        return reference
    }

    /// Stamps a verdict decided on the axis: its scan time in UTC by the chosen clock, and which.
    public mutating func stamp(_ verdict: Verdict, axisNow: Timestamp) -> Verdict {
        readSystemClock(axisNow: axisNow)
        var stamped = verdict
        stamped.scan.time = reference.utc(verdict.scan.time)
        stamped.timeStamp = reference.stamp
        return stamped
    }
}
