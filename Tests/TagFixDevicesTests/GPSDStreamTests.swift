import Foundation
import TagFixCore
import TagFixDevices
import TagFixTesting
import Testing

/// gpsd's reports through the epoch state machine, without gpsd: hand-made streams for each rule,
/// then gpsd's own regression output (`.chk`).
@Suite("gpsd's reports merged into epochs (GPSDStream)")
struct GPSDStreamTests {
    static let t0 = Timestamp(iso8601: "2030-04-11T20:00:04Z")!
    /// Where the session's axis stands when the first report arrives (the axis is not UTC).
    static let axis0 = Timestamp(nanosecondsSinceEpoch: 5_000_000_000)
    static let here = (latitude: 55.073905, longitude: 10.425643333)
    static let next = (latitude: 55.073906667, longitude: 10.425641667)

    static func tpv(
        _ seconds: Int, mode: Int, at position: (latitude: Double, longitude: Double)? = here, altHAE: Double? = nil,
        eph: Double? = nil, epv: Double? = nil
    ) -> GPSDReport {
        .tpv(
            GPSDReport.TPV(
                time: t0.advanced(by: .seconds(seconds)), mode: mode, latitude: position?.latitude, longitude: position?.longitude,
                altHAE: altHAE, eph: eph, epv: epv))
    }

    /// A stream that has seen a SKY (so nothing waits for one), fed `reports` 50 ms apart.
    static func play(_ reports: [GPSDReport], sky: Bool = true) -> [FixEvent] {
        var stream = GPSDStream()
        var events: [FixEvent] = []
        if sky { events += stream.receive(.sky(satellitesUsed: 7, satellitesVisible: 12), arrival: axis0) }
        for (index, report) in reports.enumerated() {
            events += stream.receive(report, arrival: axis0.advanced(by: .milliseconds(50 * (index + 1))))
        }
        return events
    }

    static func fixes(_ events: [FixEvent]) -> [(refined: Bool, fix: Fix)] {
        events.compactMap { event in
            switch event {
            case .fix(let fix): (false, fix)
            case .refined(let fix): (true, fix)
            default: nil
            }
        }
    }

    @Test("2D, then 3D with its altitude, for one time: the 2D fix at once, then the 3D one as its refinement, at the same axis time")
    func twoDThenThreeD() throws {
        let out = Self.fixes(Self.play([Self.tpv(0, mode: 2), Self.tpv(0, mode: 3, altHAE: 34.8, eph: 11.9)]))
        try #require(out.count == 2)
        #expect(!out[0].refined && out[0].fix.mode == .twoD && out[0].fix.altitudeHAE == nil)
        #expect(out[1].refined && out[1].fix.mode == .threeD && out[1].fix.altitudeHAE == 34.8)
        #expect(out[1].fix.horizontalAccuracy == 11.9)
        #expect(out[1].fix.time == out[0].fix.time, "the same epoch on the axis")
        #expect(out[1].fix.receiverTime == Self.t0)
    }

    @Test("epv added by a later report is delivered; a report that adds nothing is not")
    func epvAdded() throws {
        let out = Self.fixes(
            Self.play([
                Self.tpv(0, mode: 3, altHAE: 34.8), Self.tpv(0, mode: 3, altHAE: 34.8, epv: 5.75),
                Self.tpv(0, mode: 3, altHAE: 34.8, epv: 5.75),
            ]))
        #expect(out.map(\.refined) == [false, true])
        #expect(out.last?.fix.errorEstimates?.epv == 5.75)
    }

    @Test("a lower mode after a higher one keeps the higher, and the fields the later report adds")
    func noDemotion() throws {
        let out = Self.fixes(
            Self.play([
                Self.tpv(0, mode: 3), Self.tpv(0, mode: 2, altHAE: 34.8, eph: 11.875), Self.tpv(0, mode: 1, at: nil),
            ]))
        #expect(out.map(\.refined) == [false, true])
        #expect(out.last?.fix.mode == .threeD)
        #expect(out.last?.fix.altitudeHAE == 34.8)
        #expect(out.last?.fix.horizontalAccuracy == 11.875)
    }

    @Test("the next position under the old time is not a refinement: dropped, and delivered under its own time")
    func earlyNextPosition() throws {
        let out = Self.fixes(
            Self.play([
                Self.tpv(0, mode: 2), Self.tpv(0, mode: 3, at: Self.next, altHAE: 40), Self.tpv(1, mode: 3, at: Self.next, altHAE: 40),
            ]))
        try #require(out.count == 2)
        #expect(out.allSatisfy { !$0.refined })
        #expect(out[0].fix.receiverTime == Self.t0 && out[0].fix.mode == .twoD)
        #expect(out[0].fix.coordinate?.latitude == Self.here.latitude)
        #expect(out[1].fix.receiverTime == Self.t0.advanced(by: .seconds(1)))
        #expect(out[1].fix.coordinate?.latitude == Self.next.latitude)
    }

    @Test("a refinement that arrives after a newer epoch is ignored (no refinement, no new stream)")
    func lateRefinement() throws {
        let events = Self.play([Self.tpv(0, mode: 2), Self.tpv(1, mode: 2), Self.tpv(0, mode: 3, altHAE: 34.8)])
        #expect(Self.fixes(events).map(\.refined) == [false, false])
        #expect(!events.contains { if case .restarted = $0 { true } else { false } })
    }

    @Test("an earlier time long after it was seen is a new stream, not a late refinement")
    func replayedAgain() throws {
        var stream = GPSDStream()
        _ = stream.receive(.sky(satellitesUsed: 7, satellitesVisible: 12), arrival: Self.axis0)
        _ = stream.receive(Self.tpv(0, mode: 2), arrival: Self.axis0)
        _ = stream.receive(Self.tpv(1, mode: 2), arrival: Self.axis0.advanced(by: .seconds(1)))
        let again = stream.receive(Self.tpv(0, mode: 2), arrival: Self.axis0.advanced(by: GPSDStream.lateLimit + .seconds(1)))
        #expect(again.first == .restarted(from: Self.t0.advanced(by: .seconds(1)), to: Self.t0))
        #expect(Self.fixes(again).count == 1)
    }

    @Test("a no-fix report, then a position for the same time: the position refines the no-fix epoch")
    func firstPosition() throws {
        let out = Self.fixes(Self.play([Self.tpv(0, mode: 1, at: nil), Self.tpv(0, mode: 2)]))
        try #require(out.map(\.refined) == [false, true])
        #expect(out[0].fix.mode == .noFix && out[1].fix.hasPosition)
    }

    @Test("the lone fix of a gpsd that sends no SKY: held for its SKY, delivered skyWait after it arrived")
    func loneFix() throws {
        var stream = GPSDStream()
        let arrival = Self.axis0
        #expect(stream.receive(Self.tpv(0, mode: 2), arrival: arrival).isEmpty, "waits for the epoch's SKY")
        #expect(stream.nextDeadline == arrival.advanced(by: GPSDStream.skyWait))
        // Its refinements merge into it meanwhile.
        #expect(stream.receive(Self.tpv(0, mode: 3, altHAE: 12), arrival: arrival.advanced(by: .milliseconds(10))).isEmpty)
        #expect(stream.advance(to: arrival.advanced(by: .milliseconds(499))).isEmpty)
        let out = Self.fixes(stream.advance(to: arrival.advanced(by: GPSDStream.skyWait)))
        #expect(out.count == 1 && out.first?.refined == false)
        #expect(out.first?.fix.mode == .threeD && out.first?.fix.altitudeHAE == 12)
        #expect(out.first?.fix.time == arrival, "stamped when it arrived, not when it was released")
        #expect(stream.nextDeadline == nil)
        // That gpsd sends no SKY: the next epoch is not held.
        #expect(Self.fixes(stream.receive(Self.tpv(1, mode: 2), arrival: arrival.advanced(by: .seconds(1)))).count == 1)
    }

    @Test("the first fix held for its SKY leaves with the SKY's satellites; the next epoch ends the wait too")
    func heldForSky() throws {
        var stream = GPSDStream()
        #expect(stream.receive(Self.tpv(0, mode: 3), arrival: Self.axis0).isEmpty)
        let out = Self.fixes(stream.receive(.sky(satellitesUsed: 9, satellitesVisible: 14), arrival: Self.axis0))
        #expect(out.first?.fix.satellitesUsed == 9 && out.first?.fix.satellitesVisible == 14)
        var other = GPSDStream()
        #expect(other.receive(Self.tpv(0, mode: 3), arrival: Self.axis0).isEmpty)
        let both = Self.fixes(other.receive(Self.tpv(1, mode: 3), arrival: Self.axis0.advanced(by: .seconds(1))))
        #expect(both.map { $0.fix.receiverTime } == [Self.t0, Self.t0.advanced(by: .seconds(1))])
    }

    @Test("a mode 3 report with a NaN position for the epoch's time is rejected, and changes nothing")
    func nanRefinement() throws {
        let events = Self.play([Self.tpv(0, mode: 2), Self.tpv(0, mode: 3, at: (.nan, .nan))])
        #expect(events.contains(.rejected(.noPosition)))
        #expect(Self.fixes(events).count == 1)
    }

    // MARK: - gpsd's regression output

    /// gpsd's `.chk` output for its regression logs, played line by line, 20 ms apart.
    @Test(
        "gpsd's .chk reports: each time once as a fix, then refined to the highest mode and the altitude gpsd gave for its first position",
        .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)),
        arguments: TestData.files(in: "nmea/gpsd", suffix: ".log"))
    func checkFiles(_ log: String) throws {
        let reports = try TestData.gpsdCheckReports(forLog: log)
        let truth = GPSDEpochTruth.epochs(reports)
        var stream = GPSDStream()
        var firsts: [Timestamp: Fix] = [:]
        var finals: [Timestamp: Fix] = [:]
        var order: [Timestamp] = []
        for (index, report) in reports.enumerated() {
            let now = Self.axis0.advanced(by: .milliseconds(20 * index))
            for event in stream.receive(report, arrival: now) + stream.advance(to: now) {
                switch event {
                case .fix(let fix):
                    let time = fix.reportedTime
                    #expect(firsts[time] == nil, "\(time) delivered as a new epoch twice")
                    firsts[time] = fix
                    finals[time] = fix
                    order.append(time)
                case .refined(let fix):
                    let time = fix.reportedTime
                    let first = try #require(firsts[time], "a refinement of \(time), never delivered")
                    #expect(fix.time == first.time)
                    #expect(order.last == time, "only the latest epoch is refined")
                    finals[time] = fix
                default: break
                }
            }
        }
        #expect(Set(finals.keys) == Set(truth.keys))
        for (time, epoch) in truth {
            let fix = try #require(finals[time])
            #expect(fix.mode.rawValue == max(epoch.mode, 1), "\(time)")
            if epoch.mode >= 2 {
                #expect(fix.coordinate == epoch.positions.first, "\(time): the first position gpsd gave for it")
                #expect(fix.altitudeHAE == epoch.latest(\.altHAE), "\(time)")
                #expect(fix.errorEstimates?.epv == epoch.latest(\.epv), "\(time)")
                #expect(fix.errorEstimates?.eph == epoch.latest(\.eph), "\(time)")
            }
        }
    }
}
