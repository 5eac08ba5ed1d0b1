import Foundation
import TagFixCore
import TagFixDevices
import TagFixScenarios
import TagFixTesting
import Testing

@Suite("Enrolment's averaging window on the manual clock")
struct FixWindowTests {
    static let spot = Coordinate(validLatitude: 53.545, longitude: 9.966)

    static func fix(at time: Timestamp) -> Fix {
        Fix(time: time, mode: .threeD, coordinate: spot, horizontalAccuracy: 3)
    }

    /// A busy machine: the collecting task gets its turn only after the window is over. The fixes
    /// that arrived in the window (stamped by the device thread) still count; the first one after
    /// it ends the collection. Counting by when the task saw them left one fix or none (CI).
    @Test("fixes that arrived in the window count even when they are taken after it", arguments: [1, 2, 8])
    func lateButInTime(_ seconds: Int) async throws {
        let clock = ManualClock()
        let start = clock.now
        let source = MockFixSource(clock: clock)
        let window = Duration.seconds(seconds)
        let collecting = Task { await FixWindow.collect(from: source, for: window, clock: clock) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: window + .seconds(1))
        let inside = (1...(4 * seconds)).map { start.advanced(by: .milliseconds(250 * $0 - 125)) }
        for time in inside { source.send(Self.fix(at: time)) }
        source.send(Self.fix(at: start.advanced(by: window + .milliseconds(100))))
        let collected = await collecting.value
        #expect(collected.fixes.map(\.time) == inside)
        #expect(collected.unreachable == nil)
    }

    @Test("a source gone silent ends the collection the grace period after the window", arguments: [1, 2, 8])
    func silent(_ seconds: Int) async throws {
        let clock = ManualClock()
        let source = MockFixSource(clock: clock)
        let collecting = Task { await FixWindow.collect(from: source, for: .seconds(seconds), grace: .seconds(3), clock: clock) }
        await clock.waitForSleepers(count: 1)
        source.send(Self.fix(at: clock.now.advanced(by: .milliseconds(500))))
        clock.advance(by: .seconds(seconds + 3))
        let collected = await collecting.value
        #expect(collected.fixes.count == 1)
    }

    @Test("gpsd unreachable before any fix: said at once, with the source's reason")
    func unreachable() async throws {
        let clock = ManualClock()
        let source = MockFixSource(clock: clock)
        let collecting = Task { await FixWindow.collect(from: source, for: .seconds(30), clock: clock) }
        source.send(.unavailable("cannot connect to gpsd at 127.0.0.1:1"))
        let collected = await collecting.value
        #expect(collected.unreachable == "cannot connect to gpsd at 127.0.0.1:1")
        #expect(collected.fixes.isEmpty)
    }
}
