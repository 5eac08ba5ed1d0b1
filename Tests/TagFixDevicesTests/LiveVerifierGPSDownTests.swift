import Foundation
import TagFixCore
import TagFixDevices
import TagFixScenarios
import TagFixTesting
import Testing

@Suite("Live verifier: gpsd that cannot be reached")
struct LiveVerifierGPSDownTests {
    @Test("a tap while the fix source is unavailable is inconclusive(gps_unavailable) with its message; once it is back, no_fix")
    func gpsDown() async throws {
        let h = Harness()
        var verdicts = h.verdicts.makeAsyncIterator()
        var events = h.events.makeAsyncIterator()
        let why = "gpsd at localhost:2947 does not answer (cannot connect: nothing listens there)"
        h.gps.send(.unavailable(why))
        // The event has been handled before the tap is read: one input stream, in order.
        guard case .gps(.unavailable) = await events.next() else {
            Issue.record("the unavailable event was expected first")
            return
        }
        h.tap()
        await h.clock.waitForSleepers(count: 1)
        h.clock.advance(by: .seconds(5))
        let verdict = try #require(await verdicts.next())
        #expect(verdict.kind == .inconclusive(.gpsUnavailable(why)))

        h.gps.send(.resumed)
        // Past the first tap's reader events, to the resumption.
        while let event = await events.next() {
            if case .gps(.resumed) = event { break }
        }
        h.tap()
        await h.clock.waitForSleepers(count: 1)
        h.clock.advance(by: .seconds(5))
        #expect(try #require(await verdicts.next()).kind == .inconclusive(.noFix))
        h.task.cancel()
    }
}
