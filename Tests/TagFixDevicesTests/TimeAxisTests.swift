import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixScenarios
import TagFixTesting
import Testing

/// A system clock that is the test's manual clock shifted by an error, synchronised or not.
/// A system clock that reads the test's manual clock, stepped by `step` (set mid-walk: NTP or a
/// person setting the clock while a session runs).
final class ShiftedSystemClock: SystemClock {
    let clock: ManualClock
    let synchronised: Bool?
    let step = Mutex(Duration.zero)
    init(clock: ManualClock, synchronised: Bool?) {
        self.clock = clock
        self.synchronised = synchronised
    }
    func read() -> SystemClockReading {
        SystemClockReading(now: clock.now.advanced(by: step.withLock { $0 }), synchronised: synchronised)
    }
}

/// One walk of taps around a tag, in true time, played with the system clock wrong by `error`.
/// The manual clock is the session axis labelled by the wrong system clock; the receiver tells
/// true time and its fixes arrive 100 ms after their epoch, placed on the axis as gpsd's are.
struct WrongClockWalk {
    static let trueStart = Timestamp(iso8601: "2026-06-01T12:00:00Z")!
    static let latency = Duration.milliseconds(100)
    static let origin = Coordinate(validLatitude: 48.8584, longitude: 2.2945)
    static let uid = try! TagUID(hex: "04112233445566")

    /// North offsets (metres) of the tech at each tap, and whether the receiver goes quiet.
    static let taps: [(north: Double, quiet: Bool)] = [(2, false), (45, false), (-12, false), (0, true), (300, false), (8, false)]

    static func run(error: Duration, synchronised: Bool?, stepAfterTap: (index: Int, by: Duration)? = nil) async throws -> [Verdict] {
        let clock = ManualClock(now: trueStart.advanced(by: error))
        let reader = MockTagReader(readerID: "mock", clock: clock)
        let gps = MockFixSource(clock: clock)
        let registry = try InMemoryRegistry([
            RegistryEntry(id: "E1", uid: uid, region: try CircularRegion(center: origin, radius: 30, identifier: "E1"), name: "Tower")
        ])
        let (verdicts, sink) = AsyncStream<Verdict>.makeStream()
        let system = ShiftedSystemClock(clock: clock, synchronised: synchronised)
        let live = LiveVerifier(verifier: Verifier(policy: VerificationPolicy(), registry: registry), clock: clock, systemClock: system)
        let task = Task {
            await live.run(reader: reader, gps: gps) { event in
                if case .verdict(let verdict) = event { sink.yield(verdict) }
            }
            sink.finish()
        }
        var timeline = ReceiverTimeline()
        var trueNow = trueStart
        func advance(to time: Timestamp) { clock.advance(to: time.advanced(by: error)) }
        func send(epoch: Timestamp, north: Double) {
            advance(to: epoch.advanced(by: latency))
            let fix = Fix(
                time: epoch, mode: .threeD,
                coordinate: Coordinate(validLatitude: origin.latitude + north / 111_320, longitude: origin.longitude), horizontalAccuracy: 4
            )
            gps.send(timeline.place(fix, arrival: clock.now).fix)
        }
        var iterator = verdicts.makeAsyncIterator()
        var all: [Verdict] = []
        for (index, tap) in taps.enumerated() {
            if let stepAfterTap, stepAfterTap.index == index { system.step.withLock { $0 = stepAfterTap.by } }
            trueNow = trueNow.advanced(by: .seconds(20))
            if tap.quiet {
                advance(to: trueNow)
                reader.present(uid: uid, url: "https://tags.example.org/t/E1")
                await clock.waitForSleepers(count: 1)
                advance(to: trueNow.advanced(by: .seconds(6)))
            } else {
                send(epoch: trueNow.advanced(by: .milliseconds(-400)), north: tap.north - 1)
                advance(to: trueNow)
                reader.present(uid: uid, url: "https://tags.example.org/t/E1")
                send(epoch: trueNow.advanced(by: .milliseconds(600)), north: tap.north + 1)
            }
            all.append(try #require(await iterator.next()))
        }
        reader.finish()
        task.cancel()
        return all
    }
}

@Suite("The time axis: decisions never depend on the wall clock")
struct TimeAxisTests {
    static let errors: [Duration] = [
        .seconds(-20 * 365 * 86_400), .seconds(-10 * 86_400), .seconds(-1), .zero, .seconds(3600), .seconds(3 * 365 * 86_400),
        .seconds(20 * 365 * 86_400),
    ]

    @Test(
        "the same walk with the wall clock wrong by −20 years … +20 years gives the same verdicts, stamped with GPS time", arguments: errors
    )
    func sameVerdicts(_ error: Duration) async throws {
        let right = try await WrongClockWalk.run(error: .zero, synchronised: true)
        let wrong = try await WrongClockWalk.run(error: error, synchronised: false)
        #expect(right.map(\.kind.name) == ["confirmed", "outside", "confirmed", "inconclusive", "outside", "confirmed"])
        #expect(wrong.count == right.count)
        for (a, b) in zip(right, wrong) {
            #expect(a.kind == b.kind)
            #expect(a.distance == b.distance)
            #expect(a.fixAge == b.fixAge)
            #expect(a.interpolated == b.interpolated)
            #expect(a.accuracy == b.accuracy)
        }
        for (verdict, index) in zip(wrong, 1...) {
            // Not synchronised: once a fix is known, UTC is GPS time, whatever the system clock says.
            let trueTime = WrongClockWalk.trueStart.advanced(by: .seconds(20 * index))
            #expect(verdict.timeStamp?.source == .gps)
            // GPS time as gpsd delivers it: late by the fastest delivery seen (here every delivery's).
            #expect(verdict.scan.time == trueTime.advanced(by: .zero - WrongClockWalk.latency))
            #expect(verdict.timeStamp?.systemMinusGPS == error + WrongClockWalk.latency)
        }
        // Right and synchronised: the system clock stamps.
        #expect(right.allSatisfy { $0.timeStamp?.source == .system })
    }

    @Test(
        "the system clock stepped mid-session (by NTP, or by hand) changes no verdict",
        arguments: [Duration.seconds(-3600), .seconds(86_400)])
    func steppedMidSession(_ step: Duration) async throws {
        let steady = try await WrongClockWalk.run(error: .zero, synchronised: true)
        let stepped = try await WrongClockWalk.run(error: .zero, synchronised: true, stepAfterTap: (3, step))
        #expect(stepped.map(\.kind) == steady.map(\.kind))
        #expect(stepped.map(\.distance) == steady.map(\.distance))
        #expect(stepped.map(\.fixAge) == steady.map(\.fixAge))
        // Before the step the synchronised clock stamps; after it, it disagrees with GPS: GPS time does.
        #expect(stepped.prefix(3).allSatisfy { $0.timeStamp?.source == .system })
        #expect(stepped.dropFirst(3).allSatisfy { $0.timeStamp?.source == .gps })
        #expect(zip(stepped, steady).allSatisfy { abs($0.scan.time.duration(to: $1.scan.time).seconds) <= 0.1 + 1e-9 })
    }

    @Test("a synchronised clock that disagrees with GPS by years is not believed")
    func synchronisedButWrong() async throws {
        let verdicts = try await WrongClockWalk.run(error: .seconds(3 * 365 * 86_400), synchronised: true)
        #expect(verdicts.allSatisfy { $0.timeStamp?.source == .gps })
    }
}

@Suite("A receiver's timeline")
struct ReceiverTimelineTests {
    static let t0 = Timestamp(iso8601: "2002-03-04T05:06:07Z")!
    static let a0 = Timestamp(iso8601: "2026-12-02T00:00:00Z")!

    @Test("fixes map onto the axis by the smallest delivery delay seen, so jitter does not move them")
    func minimumDelay() {
        var timeline = ReceiverTimeline()
        let delays = [300, 120, 450, 100, 200]  // ms
        var placed: [Timestamp] = []
        for (index, delay) in delays.enumerated() {
            let receiver = Self.t0.advanced(by: .seconds(index))
            let (axis, observation) = timeline.observe(
                receiverTime: receiver, arrival: Self.a0.advanced(by: .seconds(index) + .milliseconds(delay)))
            #expect(observation == (index == 0 ? .started : .continued))
            placed.append(axis)
        }
        #expect(timeline.offset == Self.t0.duration(to: Self.a0) + .milliseconds(100))
        #expect(placed.last == Self.a0.advanced(by: .seconds(4) + .milliseconds(100)))
        #expect(zip(placed, placed.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test("a repeated epoch is said so; a time that goes backwards or leaps ahead starts a new stream, once")
    func restarts() {
        var timeline = ReceiverTimeline()
        _ = timeline.observe(receiverTime: Self.t0, arrival: Self.a0)
        #expect(timeline.observe(receiverTime: Self.t0, arrival: Self.a0.advanced(by: .milliseconds(10))).observation == .repeated)
        let (_, back) = timeline.observe(receiverTime: Self.t0.advanced(by: .seconds(-3600)), arrival: Self.a0.advanced(by: .seconds(1)))
        #expect(back == .restarted(previous: Self.t0))
        let (afterBack, next) = timeline.observe(
            receiverTime: Self.t0.advanced(by: .seconds(-3599)), arrival: Self.a0.advanced(by: .seconds(2)))
        #expect(next == .continued)
        #expect(afterBack == Self.a0.advanced(by: .seconds(2)), "the new stream is placed by its own delays")
        let rollover = Self.t0.advanced(by: .seconds(1024 * 7 * 86_400))
        let (leapt, leap) = timeline.observe(receiverTime: rollover, arrival: Self.a0.advanced(by: .seconds(3)))
        #expect(leap == .restarted(previous: Self.t0.advanced(by: .seconds(-3599))))
        #expect(leapt == Self.a0.advanced(by: .seconds(3)))
        // A replay running ten times faster than time is one stream: its fixes follow their arrival.
        var fast = ReceiverTimeline()
        for index in 0..<50 {
            let (axis, observation) = fast.observe(
                receiverTime: Self.t0.advanced(by: .seconds(index)), arrival: Self.a0.advanced(by: .milliseconds(100 * index)))
            #expect(observation != .restarted(previous: Self.t0), "index \(index)")
            #expect(axis == Self.a0.advanced(by: .milliseconds(100 * index)))
        }
    }

    static let descriptions: [(Double, String)] = [
        (-863_999.8, "the system clock is 10 d 0 h behind GPS time"), (94_608_000, "the system clock is 1095 d 0 h ahead of GPS time"),
        (-125.4, "the system clock is 2 min 5 s behind GPS time"), (7.25, "the system clock is 7.3 s ahead of GPS time"),
    ]

    @Test("the offset between the clocks is described for a person", arguments: descriptions)
    func described(_ seconds: Double, _ text: String) {
        #expect(TimeReference.describe(systemMinusGPS: .seconds(exactly: seconds)!) == text)
    }
}

@Suite("The monotonic clock")
struct MonotonicClockTests {
    @Test("no sleep ends before its deadline, and a cancelled sleep throws")
    func sleeps() async throws {
        let clock = MonotonicClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for ms in [30, 10, 20] {
                group.addTask {
                    let deadline = start.advanced(by: .milliseconds(ms))
                    try await clock.sleep(until: deadline, tolerance: nil)
                    #expect(clock.now >= deadline, "woke before its deadline")
                }
            }
            try await group.waitForAll()
        }
        let long = Task { try await clock.sleep(for: .seconds(3600), tolerance: nil) }
        long.cancel()
        await #expect(throws: CancellationError.self) { try await long.value }
    }
}
