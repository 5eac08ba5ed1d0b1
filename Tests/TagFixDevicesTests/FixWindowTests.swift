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
        // The window opened with the first fix (125 ms in): this one is just after it.
        source.send(Self.fix(at: start.advanced(by: window + .milliseconds(200))))
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
        source.send(Self.fix(at: clock.now))
        clock.advance(by: .seconds(seconds + 3))
        let collected = await collecting.value
        #expect(collected.fixes.count == 1)
    }

    /// gpsd slow to answer WATCH (a Pi starting, a loaded CI machine): the window opens with the
    /// first fix, so the average still gets the whole window's fixes. Opened at the call, a 2 s
    /// window at 5 Hz kept 4 fixes (enrol refused: too few), or none when the first came later.
    @Test("the window opens with the first fix, however late the source answers", arguments: [(2, 3), (2, 0.4), (10, 12)])
    func lateSource(_ seconds: Int, late: Double) async throws {
        let clock = ManualClock()
        let start = clock.now
        let source = MockFixSource(clock: clock)
        let collecting = Task { await FixWindow.collect(from: source, for: .seconds(seconds), clock: clock) }
        await clock.waitForSleepers(count: 1)
        let first = start.advanced(by: .seconds(late))
        let inside = (0...(5 * seconds)).map { first.advanced(by: .milliseconds(200 * $0)) }
        for time in inside { source.send(Self.fix(at: time)) }
        source.send(Self.fix(at: first.advanced(by: .seconds(seconds) + .milliseconds(200))))
        let collected = await collecting.value
        #expect(collected.fixes.map(\.time) == inside)
        #expect(collected.fixes.count == 5 * seconds + 1)
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

@Suite("Enrolment's averaging window and gpsd's refined epochs")
struct FixWindowRefinedTests {
    @Test("a refinement replaces its epoch's fix in the window, and is never counted as another fix")
    func refinementReplaces() async throws {
        let clock = ManualClock()
        let start = clock.now
        let source = MockFixSource(clock: clock)
        let collecting = Task { await FixWindow.collect(from: source, for: .seconds(2), clock: clock) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(3))
        let times = (0..<4).map { start.advanced(by: .milliseconds(500 * $0)) }
        for time in times {
            source.send(Fix(time: time, mode: .twoD, coordinate: FixWindowTests.spot, horizontalAccuracy: nil))
            source.send(.refined(Fix(time: time, mode: .threeD, coordinate: FixWindowTests.spot, horizontalAccuracy: 3)))
        }
        source.send(FixWindowTests.fix(at: start.advanced(by: .seconds(3))))
        let collected = await collecting.value
        #expect(collected.fixes.map(\.time) == times)
        #expect(collected.fixes.allSatisfy { $0.mode == .threeD && $0.horizontalAccuracy == 3 })
    }
}
