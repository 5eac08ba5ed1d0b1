/// One direction of a simulated UART: when each burst of bytes has crossed it, at 10 bits a byte
/// (start, 8 data, stop).
///
/// Bytes go out one after the other: a burst starts when it is handed over or when the line is
/// free of the previous burst, whichever is later, and ends its wire time after that. Deadlines
/// follow from deadlines, not from when a waiting thread happened to wake, so a late wake-up costs
/// its own burst and never the next one: an ACK and the response behind it take exactly their
/// two wire times end to end. (Each burst waited for its wire time from the moment the last wait
/// returned before: three waits an exchange, each ~80 µs late on this VM, made every client's
/// read ~0.25 ms an exchange slower than the line it simulates; see docs/benchmarks.md.)
///
/// Pure timing over any instant type, so tests can check it without a clock that runs.
struct SerialLine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration, Instant: Sendable {
    let baud: Int
    /// When the last burst has crossed; `nil` before the first.
    private(set) var freeAt: Instant?

    init(baud: Int) {
        precondition(baud > 0, "a serial line needs a positive baud rate")
        self.baud = baud
    }

    /// The time `count` bytes take on the line.
    func wireTime(of count: Int) -> Duration {
        // Exact in nanoseconds (10 bits a byte), without a Double's rounding.
        .nanoseconds(Int64(count) * 10 * 1_000_000_000 / Int64(baud))
    }

    /// Sends a burst of `count` bytes handed over at `handedOver`: the instant its last byte has
    /// crossed, which the line is busy until.
    mutating func send(_ count: Int, handedOver: Instant) -> Instant {
        let start = freeAt.map { max($0, handedOver) } ?? handedOver
        let end = start.advanced(by: wireTime(of: count))
        freeAt = end
        return end
    }
}

extension ContinuousClock.Instant {
    /// Spins the calling thread (the emulator's loop, the last microseconds before a wire-time
    /// deadline: `ServedLine.wait(until:then:)`) until this instant.
    func spinUntilReached() {
        while ContinuousClock.now < self {}
    }
}
