import Synchronization
import Testing

@testable import TagFixDevices

/// `DeviceThread.Claims`: one user of a device at a time in a process. A reader that opened a
/// device its last user was still closing talked over it on the line (a tag reset under a read,
/// its SUN counter counted twice: the CI run of 5 Dec); `libnfcScansVerifiedSUNs` shows it
/// through libnfc and the emulator, these the claims themselves. A claim that never went ahead
/// would hang here: the time limit reports it.
@Suite(.timeLimit(.minutes(1))) struct DeviceClaimsTests {
    @Test("a claimed device is not claimed again until released; another device is claimed at once; a claim given up leaves no waiter")
    func oneUserEach() {
        let claims = DeviceThread.Claims()
        #expect(claims.claim("pn532 A", while: { false }))
        #expect(claims.isClaimed("pn532 A"))
        var asked = 0
        let again = claims.claim("pn532 A") {
            asked += 1
            #expect(claims.waiting("pn532 A") == 1, "the waiting claim is not counted once")
            return asked < 3
        }
        #expect(!again, "claimed twice")
        #expect(asked == 3, "the claim asked \(asked) times whether it was still wanted, not 3")
        #expect(claims.waiting("pn532 A") == 0, "a claim given up is still waiting")
        #expect(claims.claim("pn532 B", while: { false }), "one device's claim held up another's")
        claims.release("pn532 A")
        #expect(!claims.isClaimed("pn532 A"))
        #expect(claims.claim("pn532 A", while: { false }), "a released device could not be claimed")
    }

    @Test("claims waiting on other threads go ahead one at a time once the device is released, and not before", arguments: [1, 4])
    func waitersGoAheadOnRelease(waiters: Int) async {
        let claims = DeviceThread.Claims()
        let order = Mutex<[String]>([])
        #expect(claims.claim("reader", while: { false }))
        let (claimed, done) = AsyncStream<Bool>.makeStream()
        for index in 0..<waiters {
            DeviceThread.detach(name: "claim \(index)") {
                let got = claims.claim("reader", while: { true })
                order.withLock { $0.append("claimed \(index)") }
                // Each lets the next one go: one user at a time.
                order.withLock { $0.append("released \(index)") }
                claims.release("reader")
                done.yield(got)
            }
        }
        // Every waiter is queued before the device is released.
        while claims.waiting("reader") < waiters { try? await Task.sleep(for: .milliseconds(1)) }
        order.withLock { $0.append("released first") }
        claims.release("reader")
        var results: [Bool] = []
        for await got in claimed {
            results.append(got)
            if results.count == waiters { break }
        }
        #expect(results == Array(repeating: true, count: waiters))
        let events = order.withLock { $0 }
        #expect(events.first == "released first", "a waiter claimed the device before its user released it: \(events)")
        for (position, event) in events.enumerated().dropFirst() {
            #expect(event.hasPrefix(position % 2 == 1 ? "claimed" : "released"), "two users at once: \(events)")
        }
        #expect(!claims.isClaimed("reader"))
    }
}
