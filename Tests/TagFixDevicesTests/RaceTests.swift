import Synchronization
import TagFixCore
import TagFixDevices
import TagFixTesting
import Testing

/// A racer's own record of how it ended.
private final class Ending: Sendable {
    private let cancelled = Mutex<Bool?>(nil)
    var sawCancellation: Bool? { cancelled.withLock { $0 } }
    func end() { cancelled.withLock { $0 = Task.isCancelled } }
}

private struct Broken: Error, Equatable {}

@Suite("One race against a deadline, on a manual clock")
struct RaceTests {
    static let second = Duration.seconds(1)

    @Test("the deadline comes first: timedOut, and the work is cancelled and has ended when the race returns")
    func deadlineFirst() async {
        let clock = ManualClock()
        let ending = Ending()
        let (never, _) = AsyncStream<Int>.makeStream()
        let deadline = clock.now.advanced(by: .seconds(5))
        let racing = Task {
            await race(deadline: deadline, clock: clock) { () async -> Int in
                for await value in never { return value }
                ending.end()
                return -1
            }
        }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(4))
        #expect(ending.sawCancellation == nil, "before the deadline nothing has ended")
        clock.advance(by: .seconds(1))
        #expect(await racing.value == .timedOut)
        #expect(ending.sawCancellation == true)
    }

    @Test("the work comes first: its value, and the deadline's wait is gone from the clock")
    func workFirst() async {
        let clock = ManualClock()
        let (values, feed) = AsyncStream<Int>.makeStream()
        let racing = Task {
            await race(deadline: clock.now.advanced(by: .seconds(5)), clock: clock) { () async -> Int in
                for await value in values { return value }
                return -1
            }
        }
        await clock.waitForSleepers(count: 1)
        feed.yield(42)
        #expect(await racing.value == .value(42))
        #expect(clock.sleeperCount == 0)
    }

    @Test("a work that fails first: its error, typed, as the value's failure")
    func workFails() async {
        let clock = ManualClock()
        let outcome = await race(deadline: clock.now.advanced(by: .seconds(5)), clock: clock) { () async -> Result<Int, Broken> in
            .failure(Broken())
        }
        #expect(outcome == .value(.failure(Broken())))
    }

    @Test("outcomes switched over in another module, with an empty value and with a payload", arguments: [false, true])
    func switchedOver(timeout: Bool) async {
        enum End: Sendable { case counted, stopped(String) }
        let clock = ManualClock()
        let (signals, signal) = AsyncStream<String>.makeStream()
        let deadline = clock.now.advanced(by: .seconds(timeout ? 0 : 5))
        if !timeout { signal.yield("SIGTERM") }
        let ended = await race(deadline: deadline, clock: clock) { () async -> End in
            for await name in signals { return .stopped(name) }
            return .counted
        }
        let empty = await race(deadline: deadline, clock: clock) { () async -> Void in
            if !timeout { return }
            for await _ in AsyncStream<Int>.makeStream().stream {}
        }
        switch ended {
        case .value(.stopped(let name)): #expect(!timeout && name == "SIGTERM")
        case .value(.counted), .cancelled: Issue.record("\(ended)")
        case .timedOut: #expect(timeout)
        }
        switch empty {
        case .value: #expect(!timeout)
        case .timedOut: #expect(timeout)
        case .cancelled: Issue.record("cancelled")
        }
    }

    @Test("the calling task is cancelled first: cancelled, even though the work then returns a value")
    func cancelled() async {
        let clock = ManualClock()
        let ending = Ending()
        let (never, _) = AsyncStream<Int>.makeStream()
        let racing = Task {
            await race(deadline: clock.now.advanced(by: .seconds(5)), clock: clock) { () async -> Int in
                for await value in never { return value }
                ending.end()
                return 7  // what a session returns once it has wound down
            }
        }
        await clock.waitForSleepers(count: 1)
        racing.cancel()
        #expect(await racing.value == .cancelled)
        #expect(ending.sawCancellation == true)
    }

    @Test("no deadline: only the work (or a cancellation) ends the race")
    func noDeadline() async {
        let clock = ManualClock()
        let (values, feed) = AsyncStream<String>.makeStream()
        let racing = Task {
            await race(deadline: nil, clock: clock) { () async -> String in
                for await value in values { return value }
                return ""
            }
        }
        clock.advance(by: .seconds(86_400))
        feed.yield("tag")
        #expect(await racing.value == .value("tag"))
    }

    @Test("first of several: the racer that finishes first decides, the others are cancelled")
    func firstOfSeveral() async {
        let clock = ManualClock()
        let (signals, signal) = AsyncStream<Void>.makeStream()
        let (tags, _) = AsyncStream<String>.makeStream()
        let ending = Ending()
        let racing = Task {
            await race(
                deadline: clock.now.advanced(by: .seconds(5)), clock: clock,
                first: [
                    { @Sendable () async -> String in
                        for await tag in tags { return tag }
                        ending.end()
                        return "reader closed"
                    },
                    { @Sendable () async -> String in
                        for await _ in signals { return "stopped" }
                        return "no signal"
                    },
                ])
        }
        await clock.waitForSleepers(count: 1)
        signal.yield()
        #expect(await racing.value == .value("stopped"))
        #expect(ending.sawCancellation == true)
    }

    @Test("a deadline already passed: timedOut without the clock moving")
    func pastDeadline() async {
        let clock = ManualClock()
        let (never, _) = AsyncStream<Int>.makeStream()
        let outcome = await race(deadline: clock.now.advanced(by: .seconds(-1)), clock: clock) { () async -> Int in
            for await value in never { return value }
            return -1
        }
        #expect(outcome == .timedOut)
    }
}
