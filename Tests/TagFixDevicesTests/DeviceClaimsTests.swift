import Synchronization
import Testing

@testable import TagFixDevices

/// `DeviceThread.Claims`: one user of a device at a time in a process. A reader that opened a
/// device its last user was still closing talked over it on the line (a tag reset under a read,
/// its SUN counter counted twice: the CI run of 5 Dec); `libnfcScansVerifiedSUNs` shows it
/// through libnfc and the emulator, these the claims themselves.
@Suite struct DeviceClaimsTests {
    @Test("a claimed device is not claimed again until released; another device is claimed at once; a claim not wanted leaves no waiter")
    func oneUserEach() {
        let claims = DeviceThread.Claims()
        #expect(claims.claim("pn532 A", while: { false }))
        #expect(claims.isClaimed("pn532 A"))
        var asked = 0
        #expect(
            !claims.claim("pn532 A") {
                asked += 1
                return asked < 3
            }, "claimed twice")
        #expect(asked == 3, "the claim waited \(asked - 1) times instead of 2 before giving up")
        #expect(claims.claim("pn532 B", while: { false }), "one device's claim held up another's")
        claims.release("pn532 A")
        #expect(!claims.isClaimed("pn532 A"))
        #expect(claims.claim("pn532 A", while: { false }), "a released device could not be claimed")
    }

    @Test("a claim waiting on another thread goes ahead once the device is released, and not before", arguments: [1, 4])
    func waiterGoesAheadOnRelease(waiters: Int) async {
        let claims = DeviceThread.Claims()
        let order = Mutex<[String]>([])
        #expect(claims.claim("reader", while: { false }))
        let (claimed, done) = AsyncStream<Int>.makeStream()
        for index in 0..<waiters {
            DeviceThread.detach(name: "claim \(index)") {
                let got = claims.claim("reader", while: { true })
                order.withLock { $0.append("claimed \(index)") }
                #expect(got)
                // Each waiter lets the next one go: one user at a time.
                order.withLock { $0.append("released \(index)") }
                claims.release("reader")
                done.yield(index)
            }
        }
        order.withLock { $0.append("released first") }
        claims.release("reader")
        var finished = 0
        for await _ in claimed {
            finished += 1
            if finished == waiters { break }
        }
        let events = order.withLock { $0 }
        #expect(events.first == "released first", "a waiter claimed the device before its user released it: \(events)")
        // Claims and releases alternate: never two users at once.
        for (position, event) in events.enumerated().dropFirst() {
            #expect(event.hasPrefix(position % 2 == 1 ? "claimed" : "released"), "two users at once: \(events)")
        }
        #expect(!claims.isClaimed("reader"))
    }
}
