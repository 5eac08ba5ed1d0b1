import Foundation
import TagFixCore

// `TagFixBench refine [TAGS]`: placements refined from confirmed taps on later days, on a sky whose
// errors wander (a first-order Gauss–Markov process per axis, σ 1–3 m, τ 30–600 s, white jitter
// on top, multipath biases the receiver does not see: the shared GNSSErrorModel the NMEA emulator and
// the enrolment benchmark use). Each tag is enrolled with enroll's
// stopping rule (`PositionAverager`, fed at most 30 s of 1 Hz fixes), then tapped once a day for 10 days, at arm's length
// (0.5–1 m, mostly from the same side); only taps the verifier's rule confirms (distance +
// accuracy ≤ radius) feed `PlacementRefiner`. Run with multipath in one look in ten, and without. Prints the true errors of the enrolled and the refined
// centres, the coverage of their stated 95 % accuracies, the tags reported moved that were not,
// and, for tags moved 8 m after enrolment (radius 25 m), how many are reported moved after 3, 5
// and 10 days of taps. Seeded: the same numbers on every machine.

/// One tag's sky: σ and τ drawn for the tag, each look at it (a visit, or a tap on another day,
/// hours apart: independent of the others) sampled from the shared model of the sky,
/// `GNSSErrorModel`, with white jitter on top and, in `share` of the looks, a multipath bias the
/// receiver does not see (3.3–7.7 m, on for the whole look: no jump within it to give it away).
private struct Sky {
    var sigma: Double
    var tau: Double
    var jitter = 0.3

    func look(multipath share: Double, _ random: inout SeededGenerator) -> GNSSErrorModel {
        let bias =
            random.unit() < share
            ? GNSSErrorModel.Multipath(magnitude: 5.5, meanOn: .infinity, meanOff: .infinity, startsOn: true) : nil
        return GNSSErrorModel(
            sigma: sigma, sky: GNSSErrorModel.Sky(correlationTime: tau, jitter: jitter, multipath: bias), seed: random.next())
    }
}

private struct RefineTag {
    var truth: (x: Double, y: Double)
    var front: Double
    var sky: Sky
}

private func offsetCoordinate(_ origin: Coordinate, x: Double, y: Double) -> Coordinate {
    let perLat = 111_132.954 - 559.822 * cos(2 * origin.latitude * .pi / 180)
    let perLon = 111_412.84 * cos(origin.latitude * .pi / 180)
    return Coordinate(validLatitude: origin.latitude + y / perLat, longitude: origin.longitude + x / perLon)
}

/// Arm's length: 0.5–1 m, within 60° of the side the tag is read from.
private func arm(_ tag: RefineTag, _ random: inout SeededGenerator) -> (Double, Double) {
    let d = 0.5 + 0.5 * random.unit(), a = tag.front + (random.unit() - 0.5) * 2 * .pi / 3
    return (d * cos(a), d * sin(a))
}

private func refinePercentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let rank = p * Double(sorted.count - 1)
    let low = Int(rank.rounded(.down)), high = Int(rank.rounded(.up))
    return sorted[low] + (sorted[high] - sorted[low]) * (rank - Double(low))
}

func refineBenchmark(tags count: Int, multipath share: Double) -> [String] {
    let origin = Coordinate(validLatitude: 53.545, longitude: 9.966)
    let start = Timestamp(nanosecondsSinceEpoch: 1_780_000_000_000_000_000)
    let radius = 25.0
    var random = SeededGenerator(seed: 31)
    let averager = PositionAverager()
    let refiner = PlacementRefiner()

    /// Enrols a tag: 30 s of fixes through today's averager (again, if it refuses).
    func enrol(_ tag: RefineTag, at time: Timestamp) -> (Coordinate, Double, refusals: Int) {
        var refusals = 0
        while true {
            let offset = arm(tag, &random)
            var sky = tag.sky.look(multipath: share, &random)
            var fixes: [Fix] = []
            for second in 0..<30 {
                let error = sky.sample(at: .seconds(second))
                let x = tag.truth.x + offset.0 + error.east, y = tag.truth.y + offset.1 + error.north
                fixes.append(
                    Fix(
                        time: time.advanced(by: .seconds(second)), mode: .threeD, coordinate: offsetCoordinate(origin, x: x, y: y),
                        horizontalAccuracy: error.statedRadius95, satellitesUsed: 9))
            }
            if case .success(let result) = averager.average(fixes) { return (result.coordinate, result.accuracy, refusals) }
            refusals += 1
        }
    }

    /// A confirmed tap on `day` (nil when the verifier would not confirm it).
    func tap(_ tag: RefineTag, id: String, day: Int, after enrolled: Timestamp, centre: Coordinate) -> PlacementTap? {
        let offset = arm(tag, &random)
        var sky = tag.sky.look(multipath: share, &random)
        let error = sky.sample(at: .zero)
        let coordinate = offsetCoordinate(origin, x: tag.truth.x + offset.0 + error.east, y: tag.truth.y + offset.1 + error.north)
        guard Geodesic.fastDistance(from: centre, to: coordinate) + error.statedRadius95 <= radius else { return nil }
        let time = enrolled.advanced(by: .seconds(Double(day) * 86_400 + 28_800 * random.unit()))
        return PlacementTap(
            tagID: id, time: time, coordinate: coordinate, accuracy: error.statedRadius95, confirmedAgainst: centre, key: "\(day)")
    }

    func makeTag() -> RefineTag {
        RefineTag(
            truth: (1000 * (random.unit() - 0.5), 1000 * (random.unit() - 0.5)), front: 2 * .pi * random.unit(),
            sky: Sky(sigma: 1 + 2 * random.unit(), tau: 30 + 570 * random.unit()))
    }

    func entry(_ id: String, _ centre: Coordinate, _ accuracy: Double, _ time: Timestamp) -> RegistryEntry {
        // 25 m is within the cap: the region cannot fail.
        let region = (try? CircularRegion(center: centre, radius: radius, identifier: id))!
        return RegistryEntry(id: id, uid: nil, region: region, name: nil, enrolment: Enrolment(at: time, accuracy: accuracy, fixes: 30))
    }

    // Tags that stay where they were enrolled.
    var enrolledErrors: [Double] = [], refinedErrors: [Double] = []
    var enrolledCovered = 0, refinedCovered = 0, refinedCount = 0, falseMoved = 0, refusals = 0, confirmed = 0, offered = 0
    var visits: [Double] = [], tapsErrors: [Double] = []
    var tapsCovered = 0, refinedOnlyCovered = 0, falseMovedGoodEnrolment = 0
    for index in 0..<count {
        let tag = makeTag(), id = "S\(index)"
        let time = start.advanced(by: .seconds(Double(index) * 60))
        let (centre, accuracy, refused) = enrol(tag, at: time)
        refusals += refused
        let truth = offsetCoordinate(origin, x: tag.truth.x, y: tag.truth.y)
        let enrolledError = Geodesic.fastDistance(from: truth, to: centre)
        enrolledErrors.append(enrolledError)
        if enrolledError <= accuracy { enrolledCovered += 1 }
        let taps = (1...10).compactMap { tap(tag, id: id, day: $0, after: time, centre: centre) }
        offered += 10
        confirmed += taps.count
        let estimate = refiner.refine(PlacementEvidence(entry: entry(id, centre, accuracy, time), history: [], taps: taps))
        visits.append(Double(estimate.independentVisits))
        if estimate.moved {
            falseMoved += 1
            if enrolledError <= (estimate.enrolledAccuracyUsed ?? accuracy) { falseMovedGoodEnrolment += 1 }
        }
        let refined = estimate.refined ?? PlacementRefiner.Position(coordinate: centre, accuracy: accuracy)
        if estimate.refined != nil { refinedCount += 1 }
        let refinedError = Geodesic.fastDistance(from: truth, to: refined.coordinate)
        refinedErrors.append(refinedError)
        if refinedError <= refined.accuracy { refinedCovered += 1 }
        if estimate.refined != nil, refinedError <= refined.accuracy { refinedOnlyCovered += 1 }
        if let fromTaps = estimate.fromTaps {
            tapsErrors.append(Geodesic.fastDistance(from: truth, to: fromTaps.coordinate))
            if tapsErrors.last! <= fromTaps.accuracy { tapsCovered += 1 }
        }
    }

    // Tags moved 8 m after they were enrolled.
    let shift = 8.0
    var detected = [3: 0, 5: 0, 10: 0]
    var movedConfirmed = 0
    for index in 0..<count {
        var tag = makeTag()
        let id = "M\(index)", time = start.advanced(by: .seconds(Double(index) * 60))
        let (centre, accuracy, _) = enrol(tag, at: time)
        let direction = 2 * .pi * random.unit()
        tag.truth = (tag.truth.x + shift * cos(direction), tag.truth.y + shift * sin(direction))
        let taps = (1...10).compactMap { tap(tag, id: id, day: $0, after: time, centre: centre) }
        movedConfirmed += taps.count
        for days in detected.keys.sorted() {
            let seen = taps.filter { (Int($0.key) ?? 0) <= days }
            let estimate = refiner.refine(PlacementEvidence(entry: entry(id, centre, accuracy, time), history: [], taps: seen))
            if estimate.moved { detected[days, default: 0] += 1 }
        }
    }
    func fraction(_ n: Int, _ of: Int) -> String { String(format: "%.4f", Double(n) / Double(max(of, 1))) }
    func metres(_ v: Double) -> String { String(format: "%.3f", v) }
    let stay =
        #"{"bench":"refine","multipath_share":\#(share),"tags":\#(count),"days":10,"radius_m":\#(radius),"taps_offered":\#(offered),"taps_confirmed":\#(confirmed),"#
        + #""enrol_refusals":\#(refusals),"enrolled_error_median_m":\#(metres(refinePercentile(enrolledErrors, 0.5))),"#
        + #""enrolled_error_p95_m":\#(metres(refinePercentile(enrolledErrors, 0.95))),"enrolled_coverage":\#(fraction(enrolledCovered, count)),"#
        + #""refined_error_median_m":\#(metres(refinePercentile(refinedErrors, 0.5))),"refined_error_p95_m":\#(metres(refinePercentile(refinedErrors, 0.95))),"#
        + #""refined_coverage":\#(fraction(refinedCovered, count)),"refined_tags":\#(refinedCount),"#
        + #""visits_median":\#(refinePercentile(visits, 0.5)),"taps_only_error_median_m":\#(metres(refinePercentile(tapsErrors, 0.5))),"taps_only_coverage":\#(fraction(tapsCovered, tapsErrors.count)),"false_moved":\#(fraction(falseMoved, count)),"#
        + #""false_moved_good_enrolment":\#(fraction(falseMovedGoodEnrolment, count)),"refined_only_coverage":\#(fraction(refinedOnlyCovered, refinedCount))}"#
    let moved =
        #"{"bench":"refine-moved","multipath_share":\#(share),"tags":\#(count),"shift_m":\#(shift),"radius_m":\#(radius),"taps_confirmed":\#(movedConfirmed),"#
        + #""taps_offered":\#(10 * count),"detected_after_3":\#(fraction(detected[3] ?? 0, count)),"#
        + #""detected_after_5":\#(fraction(detected[5] ?? 0, count)),"detected_after_10":\#(fraction(detected[10] ?? 0, count))}"#
    return [stay, moved]
}
