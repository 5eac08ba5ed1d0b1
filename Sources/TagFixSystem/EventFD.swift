internal import CSystem
import Glibc

/// An eventfd (`eventfd(2)`): a counter in the kernel that one thread bumps (`signal()`) to wake
/// another polling it, and that the woken one empties (`drain()`). One descriptor, non-blocking
/// and close-on-exec: the wake-up of a poll loop.
public struct EventFD: Hashable, Sendable {
    /// The descriptor to poll for reading; readable while the counter is above zero.
    public let descriptor: FileDescriptor

    /// Makes an eventfd with its counter at 0.
    public init() throws(Errno) {
        let fd = try valueOrErrno { csystem_eventfd(0) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// Adds one to the counter, waking a poller. Never waits (a counter at its maximum, which
    /// takes 2⁶⁴ − 2 signals undrained, is left as it is).
    public func signal() {
        var one: UInt64 = 1
        _ = try? withUnsafeBytes(of: &one) { bytes throws(Errno) in try descriptor.write(bytes) }
    }

    /// Empties the counter; returns what it held (0: nothing was signalled).
    @discardableResult
    public func drain() -> UInt64 {
        var count: UInt64 = 0
        let read = (try? withUnsafeMutableBytes(of: &count) { bytes throws(Errno) in try descriptor.read(into: bytes) }) ?? 0
        return read == 8 ? count : 0
    }

    /// Closes the descriptor.
    public func close() throws(Errno) { try descriptor.close() }
}
