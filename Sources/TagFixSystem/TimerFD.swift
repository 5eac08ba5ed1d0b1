internal import CSystem
import Glibc

/// A timerfd (`timerfd_create(2)` on `CLOCK_BOOTTIME`, the clock of Swift's `ContinuousClock`):
/// a descriptor that turns readable when its one expiry comes, to the nanosecond as the kernel
/// keeps it. What an `IOLoop` client registers when it must wake finer than the loop's own timers
/// (whole milliseconds): the PN532 emulator's simulated serial line. Non-blocking, close-on-exec.
public struct TimerFD: Hashable, Sendable {
    /// The descriptor to watch for reading; readable once the expiry has come, until `drain()`.
    public let descriptor: FileDescriptor

    /// Makes a timer, disarmed.
    /// - Throws: `Errno` (`.tooManyOpenFiles`).
    public init() throws(Errno) {
        descriptor = FileDescriptor(rawValue: try valueOrErrno { csystem_timerfd() })
    }

    /// Arms the timer to expire `delay` from now (`timerfd_settime(2)`), replacing any expiry it
    /// had; a delay of zero or less expires at once (a nanosecond from now).
    public func arm(after delay: Duration) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = max(1, seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000)
        _ = try? nothingOrErrno { csystem_timerfd_arm(descriptor.rawValue, nanoseconds) }
    }

    /// Disarms the timer: it does not expire until armed again.
    public func disarm() {
        _ = try? nothingOrErrno { csystem_timerfd_arm(descriptor.rawValue, 0) }
    }

    /// Takes the expiry count (`read(2)`): the timer is no longer readable. Returns how many
    /// expiries there were (0: none yet).
    @discardableResult
    public func drain() -> UInt64 {
        var count: UInt64 = 0
        let read = (try? withUnsafeMutableBytes(of: &count) { bytes throws(Errno) in try descriptor.read(into: bytes) }) ?? 0
        return read == 8 ? count : 0
    }

    /// Closes the descriptor.
    public func close() throws(Errno) { try descriptor.close() }
}
