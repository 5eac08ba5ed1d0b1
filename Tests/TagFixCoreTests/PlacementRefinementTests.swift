import Foundation
import TagFixCore
import Testing

private let centre = Coordinate(validLatitude: 53.545, longitude: 9.966)
private let day0 = Timestamp(iso8601: "2026-05-14T08:00:00Z")!

/// A point `east` and `north` metres from `origin` (a local plane; fine over metres).
private func offset(_ origin: Coordinate, east: Double, north: Double) -> Coordinate {
    Coordinate(
        validLatitude: origin.latitude + north / 111_257.6,
        longitude: origin.longitude + east / (111_412.84 * cos(origin.latitude * .pi / 180)))
}

private func entry(id: String = "T01", at point: Coordinate = centre, accuracy: Double? = 3, radius: Double = 25) throws -> RegistryEntry {
    RegistryEntry(
        id: id, uid: nil, region: try CircularRegion(center: point, radius: radius, identifier: id), name: "Gate",
        enrolment: accuracy.map { Enrolment(at: day0, accuracy: $0, fixes: 30) })
}

private func tap(
    _ id: String = "T01", day: Double, minutes: Double = 0, east: Double, north: Double, accuracy: Double = 3,
    against: Coordinate = centre, from origin: Coordinate = centre
) -> PlacementTap {
    let time = day0.advanced(by: .seconds(day * 86_400 + minutes * 60))
    return PlacementTap(
        tagID: id, time: time, coordinate: offset(origin, east: east, north: north), accuracy: accuracy, confirmedAgainst: against,
        key: "\(time.nanosecondsSinceEpoch)/04A1")
}

/// A log line (the verdict and its fix) as `verify --log` writes it.
private func record(verdict: String, fix: Coordinate?, accuracy: Double? = 3, tagID: String = "T01") throws -> SessionRecord {
    var object = #"{"time":"2026-05-20T09:00:00Z","verdict":"\#(verdict)","message":"","uid":"04A1","tag_id":"\#(tagID)","#
    object += #""region":{"id":"\#(tagID)","lat":53.545,"lon":9.966,"radius_m":25,"source":"registry"},"interpolated":false"#
    if let fix {
        object += #","fix":{"time":"2026-05-20T09:00:00Z","mode":"3d","lat":\#(fix.latitude),"lon":\#(fix.longitude),"#
        object += #""accuracy_m":\#(accuracy.map { "\($0)" } ?? "null")}"#
    }
    return try SessionRecord(try JSONValue.parse(object + "}"), line: 1)
}

@Suite("Placements that learn from confirmed taps")
struct PlacementRefinementTests {
    @Test("taps minutes apart are one visit; taps on other days are visits of their own")
    func visits() throws {
        let taps = [
            tap(day: 1, minutes: 0, east: 2, north: 0), tap(day: 1, minutes: 4, east: 2.1, north: 0),
            tap(day: 1, minutes: 25, east: 2.2, north: 0),  // chained: within 30 min of the previous tap
            tap(day: 2, east: 1.8, north: 0.1), tap(day: 3, east: 2, north: -0.1),
        ]
        let estimate = PlacementRefiner().refine(PlacementEvidence(entry: try entry(), history: [], taps: taps))
        #expect(estimate.taps == 5)
        #expect(estimate.visits.map(\.taps) == [3, 1, 1])
        #expect(estimate.independentVisits == 3)
        // One hour apart is two visits.
        let apart = PlacementRefiner().refine(
            PlacementEvidence(
                entry: try entry(), history: [], taps: [tap(day: 1, east: 2, north: 0), tap(day: 1, minutes: 60, east: 2, north: 0)]))
        #expect(apart.independentVisits == 2)
    }

    @Test("many taps in one visit claim no more than one look: the accuracy is a single visit's, not shrunk by √n")
    func oneVisitIsOneLook() throws {
        let taps = (0..<10).map { tap(day: 1, minutes: Double($0), east: 2, north: 0, accuracy: 4) }
        let estimate = PlacementRefiner().refine(PlacementEvidence(entry: try entry(), history: [], taps: taps))
        #expect(estimate.independentVisits == 1)
        let accuracy = try #require(estimate.fromTaps?.accuracy)
        #expect(accuracy >= 4, "\(accuracy)")
        #expect(estimate.refined == nil, "one visit is too few to move a placement")
    }

    @Test("visits are weighted by their accuracy: a precise visit pulls the centre, a poor one barely")
    func weights() throws {
        let taps = [tap(day: 1, east: 0, north: 0, accuracy: 1), tap(day: 2, east: 4, north: 0, accuracy: 8)]
        let estimate = PlacementRefiner().refine(PlacementEvidence(entry: try entry(accuracy: nil), history: [], taps: taps))
        let position = try #require(estimate.fromTaps)
        // The weighted mean: 4 × (1/64) / (1 + 1/64) ≈ 0.06 m east.
        #expect(Geodesic.distance(from: centre, to: position.coordinate) < 0.2)
        let plain = PlacementRefiner().refine(
            PlacementEvidence(
                entry: try entry(accuracy: nil), history: [],
                taps: [tap(day: 1, east: 0, north: 0, accuracy: 3), tap(day: 2, east: 4, north: 0, accuracy: 3)]))
        #expect(abs(Geodesic.distance(from: centre, to: try #require(plain.fromTaps).coordinate) - 2) < 0.05)
    }

    @Test("visits that agree near the centre refine it, not moved; the refined accuracy is better than the enrolment's")
    func notMoved() throws {
        let taps = (1...6).map { tap(day: Double($0), east: 1.5 + 0.3 * sin(Double($0)), north: 0.3 * cos(Double($0))) }
        let estimate = PlacementRefiner().refine(PlacementEvidence(entry: try entry(accuracy: 4), history: [], taps: taps))
        #expect(!estimate.moved)
        let refined = try #require(estimate.refined)
        #expect(refined.accuracy < 4)
        let east = Geodesic.distance(from: centre, to: refined.coordinate)
        #expect(east > 1 && east < 1.6, "between the enrolment and the taps, nearer the taps: \(east)")
        #expect(estimate.changesPlacement)
    }

    @Test("taps that agree on a place 8 m away, beyond both accuracies, are a move, and nothing is refined")
    func moved() throws {
        let taps = (1...4).map { tap(day: Double($0), east: 8 + 0.4 * sin(Double($0)), north: 0.4 * cos(Double($0)), accuracy: 2.5) }
        let estimate = PlacementRefiner().refine(PlacementEvidence(entry: try entry(accuracy: 2.5), history: [], taps: taps))
        #expect(estimate.moved)
        #expect(estimate.refined == nil)
        #expect(try #require(estimate.shift) > 7.5)
        #expect(try #require(estimate.shiftAzimuth) > 80 && estimate.shiftAzimuth! < 100, "east")
        // Two visits are not yet enough to call it.
        let early = PlacementRefiner().refine(PlacementEvidence(entry: try entry(accuracy: 2.5), history: [], taps: Array(taps.prefix(2))))
        #expect(!early.moved)
    }

    @Test("an enrolment that claims ±0.5 m is weighed as one visit: six visits 3 m away refine it, they do not call it moved")
    func enrolmentIsOneVisit() throws {
        let taps = (1...6).map { tap(day: Double($0), east: 3 + 0.3 * sin(Double($0)), north: 0.3 * cos(Double($0))) }
        let estimate = PlacementRefiner().refine(PlacementEvidence(entry: try entry(accuracy: 0.5), history: [], taps: taps))
        #expect(estimate.enrolledAccuracyUsed == 3)
        #expect(!estimate.moved)
        let refined = try #require(estimate.refined)
        #expect(Geodesic.distance(from: centre, to: refined.coordinate) > 2, "the taps outweigh one visit")
    }

    @Test("taps that scatter widely do not agree on a place: widened by their scatter, not a move")
    func scatter() throws {
        let taps = [
            tap(day: 1, east: 12, north: 0, accuracy: 2), tap(day: 2, east: -2, north: 9, accuracy: 2),
            tap(day: 3, east: 3, north: -10, accuracy: 2), tap(day: 4, east: 8, north: 4, accuracy: 2),
        ]
        let estimate = PlacementRefiner().refine(PlacementEvidence(entry: try entry(accuracy: 3), history: [], taps: taps))
        let accuracy = try #require(estimate.fromTaps?.accuracy)
        #expect(accuracy > 4, "the visits' scatter, not their stated ±2 m: \(accuracy)")
        #expect(!estimate.moved)
    }

    @Test("a visit far from the others (multipath) is left out")
    func outlier() throws {
        var taps = (1...6).map { tap(day: Double($0), east: 1 + 0.2 * sin(Double($0)), north: 0.2 * cos(Double($0)), accuracy: 2) }
        taps.append(tap(day: 7, east: 15, north: 0, accuracy: 2))
        let estimate = PlacementRefiner().refine(PlacementEvidence(entry: try entry(), history: [], taps: taps))
        #expect(estimate.visits.filter(\.rejected).count == 1)
        #expect(estimate.visits.last?.rejected == true)
        #expect(Geodesic.distance(from: offset(centre, east: 1, north: 0), to: try #require(estimate.fromTaps).coordinate) < 0.3)
    }

    @Test(
        "only a confirmed verdict with a fix and an accuracy is evidence",
        arguments: ["confirmed", "outside", "inconclusive", "untrusted", "disallowed", "notRegistered"])
    func onlyConfirmed(_ verdict: String) throws {
        let fix = offset(centre, east: 3, north: 0)
        let tap = PlacementTap(try record(verdict: verdict, fix: fix))
        #expect((tap != nil) == (verdict == "confirmed"))
        if let tap {
            #expect(tap.tagID == "T01")
            #expect(tap.accuracy == 3)
            #expect(tap.confirmedAgainst == centre)
        }
        #expect(PlacementTap(try record(verdict: verdict, fix: nil)) == nil, "no fix, no evidence")
        #expect(PlacementTap(try record(verdict: verdict, fix: fix, accuracy: nil)) == nil, "no accuracy, no evidence")
    }

    @Test("taps confirmed against another centre (an earlier placement) do not count; those of a refinement applied do")
    func lineage() throws {
        let old = offset(centre, east: 40, north: 0)
        let refinedCentre = offset(centre, east: 1, north: 0)
        let history = [
            PlacementChange(
                tagID: "T01", at: day0, from: old, fromAccuracy: 3, to: offset(old, east: 1, north: 0), toAccuracy: 2, visits: 3),
            PlacementChange(tagID: "T01", at: day0, from: centre, fromAccuracy: 4, to: refinedCentre, toAccuracy: 1.5, visits: 4),
        ]
        let taps = [
            tap(day: 1, east: 1, north: 0, against: centre), tap(day: 2, east: 1, north: 0, against: refinedCentre),
            tap(day: 3, east: 1, north: 0, against: old, from: old),
        ]
        let evidence = PlacementEvidence(entry: try entry(at: refinedCentre, accuracy: 1.5), history: history, taps: taps)
        #expect(evidence.enrolled == centre, "the refinement's start, not the earlier placement's")
        #expect(evidence.enrolledAccuracy == 4)
        #expect(evidence.currentAccuracy == 1.5)
        let estimate = PlacementRefiner().refine(evidence)
        #expect(estimate.taps == 2)
        #expect(estimate.otherPlacementTaps == 1)
    }

    @Test("refining what was refined already changes nothing (no double counting)")
    func idempotentApply() throws {
        let taps = (1...5).map { tap(day: Double($0), east: 1.5 + 0.2 * sin(Double($0)), north: 0.2 * cos(Double($0))) }
        let first = PlacementRefiner().refine(PlacementEvidence(entry: try entry(accuracy: 4), history: [], taps: taps))
        let refined = try #require(first.refined)
        let change = PlacementChange(
            tagID: "T01", at: day0, from: centre, fromAccuracy: 4, to: refined.coordinate, toAccuracy: refined.accuracy, visits: 5)
        let second = PlacementRefiner().refine(
            PlacementEvidence(entry: try entry(at: refined.coordinate, accuracy: refined.accuracy), history: [change], taps: taps))
        #expect(second.refined == refined)
        #expect(!second.changesPlacement)
    }

    @Test("the stated accuracy of the refined centre covers the truth at least 93 % of the time (correlated errors, 400 tags)")
    func honest() throws {
        var random = SeededGenerator(seed: 7)
        var covered = 0, refined = 0
        for index in 0..<400 {
            let sigma = 1 + 2 * random.unit()
            let stated = 2.4477 * sigma
            let truth = offset(centre, east: 1000 * random.unit(), north: 1000 * random.unit())
            let enrolled = offset(truth, east: sigma * random.gaussian(), north: sigma * random.gaussian())
            let id = "T\(index)"
            let taps = (1...8).map { day in
                tap(
                    id, day: Double(day), east: sigma * random.gaussian(), north: sigma * random.gaussian(), accuracy: stated,
                    against: enrolled, from: truth)
            }
            let estimate = PlacementRefiner().refine(
                PlacementEvidence(entry: try entry(id: id, at: enrolled, accuracy: stated), history: [], taps: taps))
            guard let position = estimate.refined else { continue }
            refined += 1
            if Geodesic.distance(from: truth, to: position.coordinate) <= position.accuracy { covered += 1 }
        }
        #expect(refined >= 390)
        #expect(Double(covered) >= 0.93 * Double(refined), "\(covered) of \(refined)")
    }
}
