import Foundation
import TagFixCore

// `TagFixBench enrol [N]`: N simulated enrolments (default 1,000) on the correlated sky
// (GNSSErrorModel), the stopping rule `enroll` uses (PositionAverager) beside the 30 s
// average `enroll` made before it (`thirtySecondAverage`, kept here as the baseline), on the same
// fix streams in one run. Every stream is a receiver at 1 Hz standing at a known spot: σ 1–3 m
// per axis, τ 30–600 s (log-uniform), 0.2 m of jitter; a quarter of them with multipath
// episodes (3–10 m, on 5–20 s, off 10–40 s on average), a fifth still settling after lock
// (2–8 m off, converging with τ 3 s). Times are the simulated seconds from the first fix to the
// decision. One JSON object per rule and kind of sky on standard output.

/// The stream of one simulated enrolment, and what it was made of.
struct EnrolStream {
    var fixes: [Fix]
    var truth: Coordinate
    var kind: String
}

func enrolStream(seed: UInt64, seconds: Int = 60) -> EnrolStream {
    var draw = SeededGenerator(seed: seed &* 0x9E37_79B9 &+ 17)
    let sigma = 1 + 2 * draw.unit()
    let tau = 30 * pow(20, draw.unit())  // 30–600 s, log-uniform
    var sky = GNSSErrorModel.Sky(correlationTime: tau, jitter: 0.2)
    var kind = "open"
    if draw.unit() < 0.25 {
        let on = 5 + 15 * draw.unit(), off = 10 + 30 * draw.unit()
        sky.multipath = GNSSErrorModel.Multipath(
            magnitude: 3 + 7 * draw.unit(), meanOn: on, meanOff: off, startsOn: draw.unit() < on / (on + off))
        kind = "multipath"
    } else if draw.unit() < 0.2 / 0.75 {
        sky.settling = GNSSErrorModel.Settling(offset: 2 + 6 * draw.unit(), timeConstant: 3)
        kind = "settling"
    }
    let truth = Coordinate(validLatitude: -60 + 120 * draw.unit(), longitude: -180 + 360 * draw.unit())
    var model = GNSSErrorModel(sigma: sigma, sky: sky, seed: seed)
    let start = Timestamp(iso8601: "2026-05-14T08:00:00Z")!
    let metresPerDegree = (
        latitude: 111_132.954 - 559.822 * cos(2 * truth.latitude * .pi / 180), longitude: 111_412.84 * cos(truth.latitude * .pi / 180)
    )
    let fixes = (0..<seconds).map { second -> Fix in
        let error = model.sample(at: .seconds(second))
        var longitude = truth.longitude + error.east / metresPerDegree.longitude
        if longitude > 180 { longitude -= 360 }
        if longitude < -180 { longitude += 360 }
        return Fix(
            time: start.advanced(by: .seconds(second)), mode: .threeD,
            coordinate: Coordinate(validLatitude: truth.latitude + error.north / metresPerDegree.latitude, longitude: longitude),
            horizontalAccuracy: error.statedRadius95, status: .dgps, satellitesUsed: error.multipath ? 10 : 12)
    }
    return EnrolStream(fixes: fixes, truth: truth, kind: kind)
}

/// `enroll` before the stopping rule: 30 s of fixes from the first, weighted by 1/σ², outliers
/// (farther than their accuracy and 3× the median distance) dropped, the accuracy the larger of
/// the combined stated one and the 95th-percentile scatter divided by √(span / 2τ), τ = 10 s.
/// The baseline, kept here and not in the product.
func thirtySecondAverage(_ all: [Fix]) -> (coordinate: Coordinate, accuracy: Double)? {
    guard let first = all.first else { return nil }
    let fixes = all.filter { $0.time <= first.time.advanced(by: .seconds(30)) }
    let usable = fixes.compactMap { fix in fix.coordinate.flatMap { c in fix.horizontalAccuracy.map { (fix, c, max($0, 0.01)) } } }
    guard usable.count >= 5 else { return nil }
    let origin = usable[0].1
    let mLat = 111_132.954 - 559.822 * cos(2 * origin.latitude * .pi / 180)
    let mLon = 111_412.84 * cos(origin.latitude * .pi / 180)
    let points: [(x: Double, y: Double, sigma: Double, time: Timestamp)] = usable.map { item in
        var dLon = item.1.longitude - origin.longitude
        if dLon > 180 { dLon -= 360 }
        if dLon < -180 { dLon += 360 }
        return (dLon * mLon, (item.1.latitude - origin.latitude) * mLat, item.2, item.0.time)
    }
    func mean(_ indices: [Int]) -> (x: Double, y: Double) {
        var (x, y, t) = (0.0, 0.0, 0.0)
        for i in indices {
            let w = 1 / (points[i].sigma * points[i].sigma)
            x += w * points[i].x
            y += w * points[i].y
            t += w
        }
        return (x / t, y / t)
    }
    func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let rank = p * Double(sorted.count - 1)
        let low = Int(rank.rounded(.down)), high = Int(rank.rounded(.up))
        return sorted[low] + (sorted[high] - sorted[low]) * (rank - Double(low))
    }
    var kept = Array(points.indices)
    var centre = mean(kept)
    for _ in 0..<5 {
        let distances = points.indices.map { hypot(points[$0].x - centre.x, points[$0].y - centre.y) }
        let median = percentile(kept.map { distances[$0] }, 0.5)
        let next = points.indices.filter { distances[$0] <= max(points[$0].sigma, 3 * median) }
        guard next.count * 2 >= points.count else { return nil }
        if next == kept { break }
        kept = next
        centre = mean(kept)
    }
    let times = kept.map { points[$0].time }
    let span = times.min()!.duration(to: times.max()!)
    let independent = max(1, min(Double(kept.count), span.seconds / 20))
    let weights = kept.map { 1 / (points[$0].sigma * points[$0].sigma) }
    let combined = sqrt(zip(kept, weights).map { $1 * points[$0].sigma * points[$0].sigma }.reduce(0, +) / weights.reduce(0, +))
    let scatter = percentile(kept.map { hypot(points[$0].x - centre.x, points[$0].y - centre.y) }, 0.95)
    guard scatter <= 3 * combined else { return nil }
    let accuracy = max(combined, scatter) / sqrt(independent)
    guard accuracy <= 10 else { return nil }
    return (Coordinate(validLatitude: origin.latitude + centre.y / mLat, longitude: origin.longitude + centre.x / mLon), accuracy)
}

/// One rule's outcome on one stream.
private struct EnrolOutcome {
    var seconds: Double?
    var error: Double?
    var accuracy: Double?
    var refusal: String?
}

func enrolBenchmark(enrolments: Int) -> [String] {
    var outcomes: [(kind: String, rule: EnrolOutcome, baseline: EnrolOutcome)] = []
    for seed in 1...max(1, enrolments) {
        let stream = enrolStream(seed: UInt64(seed))
        // The rule as enroll runs it: fixes as they come, until it decides or 30 s (--average) pass.
        var session = PositionAverager.Session(PositionAverager())
        var decision: Result<PositionAverager.Result, PositionAverager.Refusal>?
        var decidedAt = 30.0
        let first = stream.fixes[0].time
        for fix in stream.fixes where first.duration(to: fix.time) <= .seconds(30) {
            if let decided = session.add(fix) {
                decision = decided
                decidedAt = first.duration(to: fix.time).seconds
                break
            }
        }
        var rule = EnrolOutcome()
        switch decision ?? session.finish() {
        case .success(let result):
            rule = EnrolOutcome(
                seconds: decidedAt, error: Geodesic.distance(from: result.coordinate, to: stream.truth), accuracy: result.accuracy)
        case .failure(let refusal):
            rule.seconds = decidedAt
            rule.refusal =
                switch refusal {
                case .tooFewFixes: "too_few_fixes"
                case .multipath: "multipath"
                case .unsettled: "unsettled"
                case .tooInaccurate: "too_inaccurate"
                }
        }
        var baseline = EnrolOutcome(seconds: 30, refusal: "inconsistent_or_inaccurate")
        if let average = thirtySecondAverage(stream.fixes) {
            baseline = EnrolOutcome(
                seconds: 30, error: Geodesic.distance(from: average.coordinate, to: stream.truth), accuracy: average.accuracy)
        }
        outcomes.append((stream.kind, rule, baseline))
    }
    func percentile(_ values: [Double], _ p: Double) -> Double? {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return nil }
        let rank = p * Double(sorted.count - 1)
        let low = Int(rank.rounded(.down)), high = Int(rank.rounded(.up))
        return sorted[low] + (sorted[high] - sorted[low]) * (rank - Double(low))
    }
    func number(_ value: Double?) -> String { value.map { String(format: "%.3f", $0) } ?? "null" }
    var lines: [String] = []
    for kind in ["all", "open", "settling", "multipath"] {
        let group = outcomes.filter { kind == "all" || $0.kind == kind }
        // Both rules accepted: the true errors compared on the same streams.
        let both = group.filter { $0.rule.error != nil && $0.baseline.error != nil }
        for (name, pick) in [
            ("stopping_rule", \(kind: String, rule: EnrolOutcome, baseline: EnrolOutcome).rule), ("average_30s", \.baseline),
        ] {
            let outcomes = group.map { $0[keyPath: pick] }
            let accepted = outcomes.filter { $0.error != nil }
            let errors = accepted.compactMap(\.error)
            let covered = accepted.filter { $0.error! <= $0.accuracy! }.count
            var refusals: [String: Int] = [:]
            for outcome in outcomes { if let refusal = outcome.refusal { refusals[refusal, default: 0] += 1 } }
            let common = both.compactMap { $0[keyPath: pick].error }
            let fields = [
                #""bench":"enrol""#, #""rule":"\#(name)""#, #""sky":"\#(kind)""#, #""enrolments":\#(group.count)"#,
                #""accepted":\#(accepted.count)"#, #""refused":\#(outcomes.count - accepted.count)"#,
                #""refusals":{\#(refusals.keys.sorted().map { "\"\($0)\":\(refusals[$0]!)" }.joined(separator: ","))}"#,
                #""seconds_median":\#(number(percentile(outcomes.compactMap(\.seconds), 0.5)))"#,
                #""seconds_p90":\#(number(percentile(outcomes.compactMap(\.seconds), 0.9)))"#,
                #""error_median_m":\#(number(percentile(errors, 0.5)))"#, #""error_p95_m":\#(number(percentile(errors, 0.95)))"#,
                #""accuracy_median_m":\#(number(percentile(accepted.compactMap(\.accuracy), 0.5)))"#,
                #""coverage":\#(number(accepted.isEmpty ? nil : Double(covered) / Double(accepted.count)))"#,
                #""both_accepted":\#(both.count)"#, #""both_error_median_m":\#(number(percentile(common, 0.5)))"#,
                #""both_error_p95_m":\#(number(percentile(common, 0.95)))"#,
            ]
            lines.append("{" + fields.joined(separator: ",") + "}")
        }
    }
    return lines
}
