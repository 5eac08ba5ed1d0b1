import Foundation
import TagFixCore
import TagFixDevices
import TagFixScenarios
import TagFixTesting
import Testing

/// A running `LiveVerifier` on a manual clock with mock devices; verdicts come out of a stream the
/// test awaits, so nothing sleeps and nothing polls.
final class Harness: Sendable {
    static let origin = Coordinate(validLatitude: 48.8584, longitude: 2.2945)
    static let uid = try! TagUID(hex: "04112233445566")
    let clock = ManualClock(now: Timestamp(iso8601: "2026-06-01T12:00:00Z")!)
    let reader: MockTagReader<ManualClock>
    let gps: MockFixSource<ManualClock>
    let verdicts: AsyncStream<Verdict>
    let events: AsyncStream<VerifierEvent>
    let task: Task<Void, Never>

    init(policy: VerificationPolicy = VerificationPolicy()) {
        reader = MockTagReader(readerID: "mock", clock: clock)
        gps = MockFixSource(clock: clock)
        let registry = try! InMemoryRegistry([
            RegistryEntry(
                id: "E1", uid: Self.uid, region: try! CircularRegion(center: Self.origin, radius: 30, identifier: "E1"), name: "Tower")
        ])
        let (verdicts, verdictSink) = AsyncStream<Verdict>.makeStream()
        let (events, eventSink) = AsyncStream<VerifierEvent>.makeStream()
        self.verdicts = verdicts
        self.events = events
        let live = LiveVerifier(verifier: Verifier(policy: policy, registry: registry), clock: clock)
        task = Task { [reader, gps] in
            await live.run(reader: reader, gps: gps) { event in
                if case .verdict(let verdict) = event { verdictSink.yield(verdict) } else { eventSink.yield(event) }
            }
            verdictSink.finish()
            eventSink.finish()
        }
    }

    func fix(_ offset: Double, north: Double = 0, accuracy: Double = 3, mode: Fix.Mode = .threeD) -> Fix {
        Fix(
            time: clock.now.advanced(by: .seconds(exactly: offset)!), mode: mode,
            coordinate: Coordinate(validLatitude: Self.origin.latitude + north / 111_320, longitude: Self.origin.longitude),
            horizontalAccuracy: accuracy)
    }

    func tap() {
        reader.present(uid: Self.uid, url: "https://tags.example.org/t/E1")
    }
}

@Suite("Live verifier on the manual clock")
struct LiveVerifierTests {
    @Test("waits for the fix after the scan and interpolates")
    func interpolates() async throws {
        let h = Harness()
        var verdicts = h.verdicts.makeAsyncIterator()
        h.gps.send(h.fix(-0.5, north: -4))
        h.tap()
        h.clock.advance(by: .milliseconds(500))
        h.gps.send(h.fix(0, north: 4))
        let verdict = try #require(await verdicts.next())
        #expect(verdict.kind == .confirmed)
        #expect(verdict.interpolated)
        #expect(try #require(verdict.distance) < 0.1)
        h.reader.finish()
        #expect(await verdicts.next() == nil, "the run ends when the reader ends and nothing waits")
    }

    @Test("no fix: the verdict waits for the timeout on the clock, then says no fix")
    func timesOut() async throws {
        let h = Harness()
        var verdicts = h.verdicts.makeAsyncIterator()
        h.tap()
        await h.clock.waitForSleepers(count: 1)  // the verifier's fix timeout
        h.clock.advance(by: .seconds(4))
        #expect(h.clock.sleeperCount == 1, "still waiting before the 5 s timeout")
        h.clock.advance(by: .seconds(1))
        let verdict = try #require(await verdicts.next())
        #expect(verdict.kind == .inconclusive(.noFix))
        h.task.cancel()
    }

    @Test("a fix within the timeout decides without waiting for the clock")
    func fixArrives() async throws {
        let h = Harness()
        var verdicts = h.verdicts.makeAsyncIterator()
        h.tap()
        await h.clock.waitForSleepers(count: 1)
        h.clock.advance(by: .seconds(1))
        h.gps.send(h.fix(0, north: 100))
        let verdict = try #require(await verdicts.next())
        #expect(verdict.kind == .outside)
        #expect(verdict.fixAge == .seconds(1))
        h.task.cancel()
    }

    @Test("cancelling the run still gives every waiting scan its verdict, once")
    func cancellation() async throws {
        let h = Harness()
        h.tap()
        await h.clock.waitForSleepers(count: 1)
        h.task.cancel()
        var all: [Verdict] = []
        for await verdict in h.verdicts { all.append(verdict) }
        #expect(all.map(\.kind) == [.inconclusive(.noFix)])
    }

    @Test("device events reach the caller: reader errors and GPS status")
    func deviceEvents() async throws {
        let h = Harness()
        var events = h.events.makeAsyncIterator()
        h.reader.fail(ReaderError(code: .incompleteRead, message: "tag left the field", hint: "hold it still"))
        h.gps.send(.unavailable("gpsd not reachable"))
        var seen: [String] = []
        for _ in 0..<2 {
            switch await events.next() {
            case .reader(.failed(let error)): seen.append(error.code.rawValue)
            case .gps(.unavailable(let why)): seen.append(why)
            default: seen.append("?")
            }
        }
        #expect(Set(seen) == ["incomplete_read", "gpsd not reachable"])
        h.task.cancel()
    }

    @Test("a fix dropout during a scan gives inconclusive(noFix) from the receiver's report")
    func dropout() async throws {
        let h = Harness()
        var verdicts = h.verdicts.makeAsyncIterator()
        h.gps.send(h.fix(-0.3, mode: .noFix))
        h.tap()
        h.gps.send(h.fix(0.7, mode: .noFix))
        let verdict = try #require(await verdicts.next())
        #expect(verdict.kind == .inconclusive(.noFix))
        h.task.cancel()
    }
}

@Suite("Manual clock")
struct ManualClockTests {
    @Test("sleepers wake in deadline order, only when time reaches them")
    func order() async throws {
        let clock = ManualClock()
        let start = clock.now
        let (woken, sink) = AsyncStream<Int>.makeStream()
        let tasks = [3, 1, 2].map { n in
            Task {
                try await clock.sleep(until: start.advanced(by: .seconds(n)))
                sink.yield(n)
            }
        }
        await clock.waitForSleepers(count: 3)
        clock.advance(by: .milliseconds(1500))
        var iterator = woken.makeAsyncIterator()
        #expect(await iterator.next() == 1)
        #expect(clock.sleeperCount == 2)
        clock.advance(to: start.advanced(by: .seconds(3)))
        let rest = [await iterator.next(), await iterator.next()].compactMap { $0 }
        #expect(Set(rest) == [2, 3])
        for task in tasks { try await task.value }
    }

    @Test("a deadline already passed returns at once; cancellation throws")
    func pastAndCancelled() async {
        let clock = ManualClock()
        await #expect(throws: Never.self) { try await clock.sleep(until: clock.now.advanced(by: .seconds(-1))) }
        let task = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(60))) }
        await clock.waitForSleepers(count: 1)
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test("time never goes backwards")
    func monotonic() {
        let clock = ManualClock()
        let start = clock.now
        clock.advance(to: start.advanced(by: .seconds(-5)))
        #expect(clock.now == start)
    }
}

@Suite("The monotonic clock's UTC label")
struct MonotonicClockLabelTests {
    @Test("reads UTC close to Foundation's clock")
    func utc() {
        let now = MonotonicClock().now.secondsSinceEpoch
        #expect(abs(now - Date().timeIntervalSince1970) < 5)
    }
}
