import Foundation

/// Averages the fixes taken while standing at a tag's spot into one position with an honest
/// accuracy: the enrolment step of `tagfix enroll`. Pure.
///
/// - Each usable fix (2D/3D, a position, an accuracy, not simulated) is weighted by 1/σ², σ being
///   its stated accuracy.
/// - Outliers are dropped: a fix farther from the weighted mean than both its own accuracy and
///   three times the median distance of all fixes (a multipath jump, a cold-start fix). The mean
///   is then taken again; at most half of the fixes may go.
/// - The accuracy of the result is not the textbook σ/√n: fixes a second apart share most of their
///   error, which wanders with a time constant of tens of seconds (a first-order Gauss–Markov
///   process). The mean of such errors over T seconds varies as the mean of T / (2 τ) independent
///   ones, so n fixes count as at most that many. The result is the larger of the combined stated
///   accuracy and the 95th-percentile scatter of the kept fixes, shrunk by √(independent).
/// - Fixes that scatter far more than they claim (two clusters, a receiver drifting) are refused
///   as inconsistent rather than averaged.
public struct PositionAverager: Sendable, Hashable {
    /// Fewest usable fixes for an average.
    public var minimumFixes = 5
    /// The worst averaged accuracy (95 %, metres) an enrolment accepts.
    public var maximumAccuracy = 10.0
    /// How long GNSS errors stay correlated.
    public var correlationTime: Duration = .seconds(10)
    public var allowSimulated = false

    public init() {}

    /// An averaged position.
    public struct Result: Sendable, Hashable {
        public var coordinate: Coordinate
        /// 95 % horizontal accuracy, metres.
        public var accuracy: Double
        /// Fixes used, and fixes dropped as outliers.
        public var kept: Int
        public var rejected: Int
        /// Usable fixes seen (kept + rejected) and fixes that could not be used at all.
        public var unusable: Int
        /// From the first to the last kept fix.
        public var span: Duration
    }

    /// Why no position was recorded, and what to do.
    public enum Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        case tooFewFixes(usable: Int, needed: Int, unusable: Int)
        case inconsistent(kept: Int, of: Int)
        case tooInaccurate(Result, limit: Double)

        public var description: String {
            switch self {
            case .tooFewFixes(0, _, 0):
                "no fixes at all came from the GPS: check that gpsd has a receiver with a fix (tagfix doctor, tagfix fix), then enrol again"
            case .tooFewFixes(let usable, let needed, let unusable):
                "only \(usable) usable fix\(usable == 1 ? "" : "es") (need \(needed); \(unusable) without a position or an accuracy): move to open sky, wait for a 3D fix, and enrol again"
            case .inconsistent(let kept, let total):
                "the fixes disagree far more than their accuracy says (\(kept) of \(total) kept; multipath near buildings, or the receiver moved?): stand still away from walls and enrol again"
            case .tooInaccurate(let result, let limit):
                "the averaged position is only good to ±\(Coordinate.format(result.accuracy, 1)) m, worse than the limit of ±\(Coordinate.format(limit, 1)) m (--max-accuracy): wait for a better sky (open sky, more satellites, away from walls) and enrol again, or accept it with --max-accuracy \(Int(result.accuracy.rounded(.up)))"
            }
        }
    }

    /// The average of `fixes`.
    public func average(_ fixes: [Fix]) -> Swift.Result<Result, Refusal> {
        var usable: [(fix: Fix, coordinate: Coordinate, sigma: Double)] = []
        for fix in fixes {
            guard fix.mode != .noFix, let coordinate = fix.coordinate, let sigma = fix.horizontalAccuracy else { continue }
            if fix.status == .simulated && !allowSimulated { continue }
            usable.append((fix, coordinate, max(sigma, 0.01)))
        }
        let unusable = fixes.count - usable.count
        guard usable.count >= minimumFixes else {
            return .failure(.tooFewFixes(usable: usable.count, needed: minimumFixes, unusable: unusable))
        }
        // A local east/north plane (metres) around the first fix: fine over the metres a tech
        // stands still, and free of the longitude wrap at ±180°.
        let origin = usable[0].coordinate
        let metresPerDegreeLatitude = 111_132.954 - 559.822 * cos(2 * origin.latitude * .pi / 180)
        let metresPerDegreeLongitude = 111_412.84 * cos(origin.latitude * .pi / 180)
        let points: [(x: Double, y: Double, sigma: Double, time: Timestamp)] = usable.map { item in
            var dLon = item.coordinate.longitude - origin.longitude
            if dLon > 180 { dLon -= 360 }
            if dLon < -180 { dLon += 360 }
            return (
                dLon * metresPerDegreeLongitude, (item.coordinate.latitude - origin.latitude) * metresPerDegreeLatitude, item.sigma,
                item.fix.time
            )
        }
        var kept = Array(points.indices)
        var mean = weightedMean(points, kept)
        for _ in 0..<5 {
            let distances = points.indices.map { hypot(points[$0].x - mean.x, points[$0].y - mean.y) }
            let median = Self.median(kept.map { distances[$0] })
            let next = points.indices.filter { distances[$0] <= max(points[$0].sigma, 3 * median) }
            guard next.count * 2 >= points.count else {
                return .failure(.inconsistent(kept: next.count, of: points.count))
            }
            if next == kept { break }
            kept = next
            mean = weightedMean(points, kept)
        }
        let times = kept.map { points[$0].time }
        let span = times.min().flatMap { first in times.max().map { first.duration(to: $0) } } ?? .zero
        let independent = max(1, min(Double(kept.count), span.seconds / (2 * max(correlationTime.seconds, 0.001))))
        let weights = kept.map { 1 / (points[$0].sigma * points[$0].sigma) }
        let totalWeight = weights.reduce(0, +)
        let combined = sqrt(zip(kept, weights).map { $1 * points[$0].sigma * points[$0].sigma }.reduce(0, +) / totalWeight)
        let scatter = Self.percentile(kept.map { hypot(points[$0].x - mean.x, points[$0].y - mean.y) }, 0.95)
        guard scatter <= 3 * combined else { return .failure(.inconsistent(kept: kept.count, of: points.count)) }
        let accuracy = max(combined, scatter) / sqrt(independent)
        var longitude = origin.longitude + mean.x / metresPerDegreeLongitude
        if longitude > 180 { longitude -= 360 }
        if longitude < -180 { longitude += 360 }
        let latitude = min(90, max(-90, origin.latitude + mean.y / metresPerDegreeLatitude))
        let result = Result(
            coordinate: Coordinate(validLatitude: latitude, longitude: longitude), accuracy: accuracy, kept: kept.count,
            rejected: points.count - kept.count, unusable: unusable, span: span)
        guard accuracy <= maximumAccuracy else { return .failure(.tooInaccurate(result, limit: maximumAccuracy)) }
        return .success(result)
    }

    private func weightedMean(_ points: [(x: Double, y: Double, sigma: Double, time: Timestamp)], _ indices: [Int]) -> (
        x: Double, y: Double
    ) {
        var (x, y, total) = (0.0, 0.0, 0.0)
        for index in indices {
            let w = 1 / (points[index].sigma * points[index].sigma)
            x += w * points[index].x
            y += w * points[index].y
            total += w
        }
        return (x / total, y / total)
    }

    static func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let rank = p * Double(sorted.count - 1)
        let low = Int(rank.rounded(.down)), high = Int(rank.rounded(.up))
        return sorted[low] + (sorted[high] - sorted[low]) * (rank - Double(low))
    }
}
