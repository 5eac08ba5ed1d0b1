import TagFixSystem
import Testing

@testable import TagFixEmulators

/// The simulated UART's timing, on instants made up for the test (nothing sleeps).
@Suite("Serial line timing")
struct SerialLineTests {
    let t0 = ContinuousClock.now

    @Test(
        "wire time is 10 bits a byte, exact to the nanosecond",
        arguments: [(1, 115_200), (6, 115_200), (257, 115_200), (100, 9_600), (13, 921_600)])
    func wireTime(bytes: Int, baud: Int) {
        let line = SerialLine<ContinuousClock.Instant>(baud: baud)
        #expect(line.wireTime(of: bytes) == .nanoseconds(Int64(bytes) * 10_000_000_000 / Int64(baud)))
    }

    @Test("back-to-back bursts end one wire time after another, however late the sender woke")
    func backToBack() {
        var line = SerialLine<ContinuousClock.Instant>(baud: 115_200)
        let ack = line.send(6, handedOver: t0)
        #expect(ack == t0 + line.wireTime(of: 6))
        // The response was ready with the ACK (handed over at t0 too): it follows the ACK at
        // once, whenever the thread that waited for the ACK's end woke up.
        let response = line.send(100, handedOver: t0)
        #expect(response == ack + line.wireTime(of: 100))
        // Handed over while the line is still busy: it waits for the line, not for its sender.
        let third = line.send(10, handedOver: ack)
        #expect(third == response + line.wireTime(of: 10))
    }

    @Test("a burst handed over once the line is idle starts then", arguments: [1, 500, 20_000])
    func idleLine(gapMicroseconds: Int) {
        var line = SerialLine<ContinuousClock.Instant>(baud: 115_200)
        let first = line.send(12, handedOver: t0)
        let later = first + .microseconds(gapMicroseconds)
        #expect(line.send(12, handedOver: later) == later + line.wireTime(of: 12))
        #expect(line.freeAt == later + line.wireTime(of: 12))
    }

    @Test("a wire-time wait on the line's loop ends at its deadline, not before", arguments: [700, 5_000])
    func waitReachesDeadline(microseconds: Int) async throws {
        // Not a timing assertion: only that the wait does not end early (the alarm wakes the
        // loop before the deadline, and the rest is spun).
        let line = try ServedLine(named: "test")
        line.start {}
        let deadline = ContinuousClock.now + .microseconds(microseconds)
        let woke: ContinuousClock.Instant = await withCheckedContinuation { continuation in
            line.loop.execute {
                if !line.wait(until: deadline, then: { continuation.resume(returning: ContinuousClock.now) }) {
                    continuation.resume(returning: ContinuousClock.now)
                }
            }
        }
        #expect(woke >= deadline)
        await line.stopped()
    }
}
