import Foundation

/// Decides where a tag is from the fixes taken while standing at its spot, and stops as soon as
/// more fixes no longer help: the enrolment step of `tagfix enroll`. Pure.
///
/// GNSS errors wander slowly: they stay correlated for minutes (a first-order Gauss–Markov process
/// with τ of one to several minutes; GNSSErrorModel). Within one visit of a few seconds the
/// fixes share almost all of their error, so a 30 s mean is hardly better than a few good fixes,
/// and the accuracy of the mean cannot shrink by √n. So:
///
/// - **Usable fixes**: 2D/3D, with a position and a stated accuracy (`eph`, a 95 % radius), not
///   simulated (unless `allowSimulated`).
/// - **Agreement**: fixes agree when each lies within `agreement` times its stated σ (per axis,
///   eph / 2.448; at least 0.3 m) of their mean — consistent fixes share their slow error, so
///   they agree far better than their σ.
/// - **Stop**: as soon as the latest fixes agree over at least `minimumFixes` fixes and
///   `minimumSpan`: their weighted mean is the position. Fixes before them that disagree (a
///   receiver still settling after lock, a stray fix) are left out.
/// - **Outlier**: one or two fixes that disagree with the fixes both before and after them are
///   dropped.
/// - **Drift**: agreeing fixes whose earlier and later halves are apart by more than half their
///   tolerance are still moving (settling after lock): their oldest are left out, and below
///   `minimumFixes` the rule waits.
/// - **Jump**: three fixes agree on a new place, away from the last place fixes agreed on by more
///   than `jump` stated σ — farther than the slow error moves in seconds (a reflected signal
///   switching on or off: multipath). After one jump the fixes must agree again for `quietAfterJump`, and the stated
///   accuracy covers the jump too (either place may be the biased one); a second jump refuses the
///   enrolment.
/// - **Accuracy** (95 %, stated and recorded): √((margin · E)² + (2.448 s)² + J²), E the fixes'
///   combined stated 95 % radius, s the observed scatter (σ per axis) of the fixes used, J the
///   largest jump seen (0 without). Not divided by √n: the fixes of one visit are one look at
///   the slow error. The margin covers a receiver that states its σ a little optimistically and
///   the rare multipath episode that lasts the whole visit.
/// - **Deadline** (`finish`, `enroll --average S`): the fixes never agreed long enough; refused
///   with the reason (too few fixes, multipath, still moving, too inaccurate).
public struct PositionAverager: Sendable, Hashable {
    /// Fewest agreeing fixes for a position.
    public var minimumFixes = 5
    /// The agreeing fixes span at least this (a multipath switch or a drift shows within it).
    public var minimumSpan: Duration = .seconds(2)
    /// After a jump, the fixes must agree for this long before enrolment stops.
    public var quietAfterJump: Duration = .seconds(10)
    /// The worst accuracy (95 %, metres) an enrolment accepts.
    public var maximumAccuracy = 10.0
    /// Fixes agree within this many of their stated σ (per axis) of their mean.
    public var agreement = 1.0
    /// A new place the fixes agree on, farther than this many stated σ from the last one, is a
    /// jump: the slow error does not move that far in seconds.
    public var jump = 2.0
    /// The receiver's stated 95 % radius is widened by this factor in the accuracy.
    public var margin = 1.2
    public var allowSimulated = false

    public init() {}

    /// A decided position.
    public struct Result: Sendable, Hashable {
        public var coordinate: Coordinate
        /// 95 % horizontal accuracy, metres.
        public var accuracy: Double
        /// Fixes used (the agreeing ones), and usable fixes not used (settling, outliers, the
        /// place before a jump).
        public var kept: Int
        public var rejected: Int
        /// Fixes that could not be used at all (no position, no accuracy, simulated).
        public var unusable: Int
        /// From the first to the last fix used.
        public var span: Duration
        /// From the first usable fix to the decision: how long the tech stood there.
        public var elapsed: Duration
        /// The fixes' combined stated 95 % radius, metres, and the jumps seen.
        public var stated: Double
        public var jumps: Int
    }

    /// Why no position was recorded, and what to do.
    public enum Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        case tooFewFixes(usable: Int, needed: Int, unusable: Int)
        /// The position jumped `jumps` times, by up to `jump` metres, while the receiver stated
        /// ±`stated` m: multipath.
        case multipath(jumps: Int, jump: Double, stated: Double)
        /// The fixes kept moving: over `span` they spread over `spread` metres while stating
        /// ±`stated` m.
        case unsettled(spread: Double, stated: Double, span: Duration)
        case tooInaccurate(Result, limit: Double)

        public var description: String {
            switch self {
            case .tooFewFixes(0, _, 0):
                "no fixes at all came from the GPS: check that gpsd has a receiver with a fix (tagfix doctor, tagfix fix), then enrol again"
            case .tooFewFixes(let usable, let needed, let unusable):
                "only \(usable) usable fix\(usable == 1 ? "" : "es") (need \(needed); \(unusable) without a position or an accuracy): move to open sky, wait for a 3D fix, and enrol again"
            case .multipath(let jumps, let jump, let stated):
                "multipath: the position jumped \(jumps == 1 ? "once" : "\(jumps) times") by up to \(Coordinate.format(jump, 1)) m, more than the receiver's ±\(Coordinate.format(stated, 1)) m explains (a signal reflected off walls, vehicles or metal switching on and off): move the antenna away from them, or enrol from a few metres off in the open and note the offset, then enrol again"
            case .unsettled(let spread, let stated, let span):
                "the fixes kept moving: over \(Coordinate.format(span.seconds, 0)) s they spread over \(Coordinate.format(spread, 1)) m while the receiver states ±\(Coordinate.format(stated, 1)) m (a receiver still settling after lock, or the GPS is moving): hold the receiver still at the spot for a minute and enrol again, or allow longer with --average"
            case .tooInaccurate(let result, let limit):
                "the position is only good to ±\(Coordinate.format(result.accuracy, 1)) m, worse than the limit of ±\(Coordinate.format(limit, 1)) m (--max-accuracy): wait for a better sky (open sky, more satellites, away from walls) and enrol again, or accept it with --max-accuracy \(Int(result.accuracy.rounded(.up)))"
            }
        }
    }

    /// The rule on a recorded series of fixes: the decision at the first fix that decides, or, if
    /// none does, at the end of the series (as at `enroll`'s deadline).
    public func average(_ fixes: [Fix]) -> Swift.Result<Result, Refusal> {
        var session = Session(self)
        for fix in fixes {
            if let decision = session.add(fix) { return decision }
        }
        return session.finish()
    }

    /// The rule fed one fix at a time, as they arrive.
    public struct Session: Sendable {
        public let rule: PositionAverager
        private struct Point: Sendable {
            var x: Double
            var y: Double
            /// Stated σ per axis and the tolerance of agreement, metres.
            var sigma: Double
            var tolerance: Double
            var time: Timestamp
        }
        private var origin: Coordinate?
        private var metresPerDegree = (latitude: 0.0, longitude: 0.0)
        private var points: [Point] = []
        private var dropped: Set<Int> = []
        private var unusable = 0
        /// The last place fixes agreed on (three at least) and its newest fix.
        private var anchor: (x: Double, y: Double, last: Int)?
        private var jumps: [(size: Double, stated: Double, index: Int)] = []
        /// The best position that was too inaccurate to accept, for the refusal at the deadline.
        private var poor: Result?

        public init(_ rule: PositionAverager) { self.rule = rule }

        /// Fixes seen so far, usable or not.
        public var fixesSeen: Int { points.count + unusable }

        /// Takes the next fix; a decision once there is one (then stop feeding).
        public mutating func add(_ fix: Fix) -> Swift.Result<Result, Refusal>? {
            guard fix.mode != .noFix, let coordinate = fix.coordinate, let eph = fix.horizontalAccuracy, eph.isFinite,
                fix.status != .simulated || rule.allowSimulated
            else {
                unusable += 1
                return nil
            }
            let point = place(coordinate, eph: max(eph, 0.01), time: fix.time)
            points.append(point)
            let newest = points.count - 1
            track(newest)
            if jumps.count >= 2, let largest = jumps.max(by: { $0.size < $1.size }) {
                return .failure(.multipath(jumps: jumps.count, jump: largest.size, stated: largest.stated))
            }
            guard let run = steadyRun() else { return nil }
            let span = points[run[0]].time.duration(to: points[newest].time)
            let quiet = jumps.last.map { points[$0.index].time.duration(to: points[newest].time) >= rule.quietAfterJump } ?? true
            guard span >= rule.minimumSpan, quiet else { return nil }
            let result = self.result(run)
            guard result.accuracy <= rule.maximumAccuracy else {
                // A receiver still converging states less and less: wait for the deadline.
                if poor.map({ result.accuracy < $0.accuracy }) ?? true { poor = result }
                return nil
            }
            return .success(result)
        }

        /// The deadline: the decision on what arrived.
        public func finish() -> Swift.Result<Result, Refusal> {
            guard points.count >= rule.minimumFixes else {
                return .failure(.tooFewFixes(usable: points.count, needed: rule.minimumFixes, unusable: unusable))
            }
            if let largest = jumps.max(by: { $0.size < $1.size }) {
                return .failure(.multipath(jumps: jumps.count, jump: largest.size, stated: largest.stated))
            }
            // A window shorter than minimumSpan (a short --average) decides on what agreed.
            if let run = steadyRun() {
                let result = self.result(run)
                if result.accuracy <= rule.maximumAccuracy { return .success(result) }
                return .failure(.tooInaccurate(result, limit: rule.maximumAccuracy))
            }
            if let poor { return .failure(.tooInaccurate(poor, limit: rule.maximumAccuracy)) }
            let used = points.indices.filter { !dropped.contains($0) }
            let mean = weightedMean(used)
            let spread = 2 * (used.map { hypot(points[$0].x - mean.x, points[$0].y - mean.y) }.max() ?? 0)
            let stated = combinedRadius(used)
            let span = points[used.first ?? 0].time.duration(to: points[used.last ?? 0].time)
            return .failure(.unsettled(spread: spread, stated: stated, span: span))
        }

        // MARK: - The rule's parts

        private mutating func place(_ coordinate: Coordinate, eph: Double, time: Timestamp) -> Point {
            // A local east/north plane (metres) around the first fix: fine over the metres a tech
            // stands still, and free of the longitude wrap at ±180°.
            if origin == nil {
                origin = coordinate
                metresPerDegree = (
                    111_132.954 - 559.822 * cos(2 * coordinate.latitude * .pi / 180), 111_412.84 * cos(coordinate.latitude * .pi / 180)
                )
            }
            let origin = self.origin ?? coordinate
            var dLon = coordinate.longitude - origin.longitude
            if dLon > 180 { dLon -= 360 }
            if dLon < -180 { dLon += 360 }
            let sigma = eph / GNSSErrorModel.radius95PerSigma
            return Point(
                x: dLon * metresPerDegree.longitude, y: (coordinate.latitude - origin.latitude) * metresPerDegree.latitude, sigma: sigma,
                tolerance: max(0.3, rule.agreement * sigma), time: time)
        }

        /// Outliers and jumps, at each new fix.
        private mutating func track(_ newest: Int) {
            let point = points[newest]
            // Back at the last agreed place after one or two stray fixes: they are dropped.
            if let anchor, (2...3).contains(newest - anchor.last), hypot(point.x - anchor.x, point.y - anchor.y) <= point.tolerance {
                for index in (anchor.last + 1)..<newest { dropped.insert(index) }
            }
            guard let run = agreeingRun(endingAt: newest), run.count >= 3 else { return }
            let mean = weightedMean(run)
            // A new place (three agreeing fixes none of which agreed with the last place) away from
            // the last one by more than the slow error can move in seconds: a jump.
            if let anchor, run[0] > anchor.last {
                let distance = hypot(mean.x - anchor.x, mean.y - anchor.y)
                if distance > rule.jump * point.sigma {
                    jumps.append((distance, GNSSErrorModel.radius95PerSigma * point.sigma, run[0]))
                    for index in 0..<run[0] { dropped.insert(index) }
                }
            }
            anchor = (mean.x, mean.y, newest)
        }

        /// The longest run of agreeing fixes ending at the newest (dropped fixes skipped).
        private func agreeingRun() -> [Int]? { points.indices.last.flatMap { agreeingRun(endingAt: $0) } }

        /// The agreeing run ending at the newest fix, its oldest fixes left out while it drifts
        /// (the tail of a receiver's settling); `nil` below `minimumFixes`.
        private func steadyRun() -> [Int]? {
            guard var run = agreeingRun() else { return nil }
            while run.count >= rule.minimumFixes {
                if !drifting(run) { return run }
                run.removeFirst()
            }
            return nil
        }

        /// Whether a run's fixes still move: its first and second halves' means apart by more than
        /// half the newest fix's tolerance (a receiver settling after lock, a walk).
        private func drifting(_ run: [Int]) -> Bool {
            let half = run.count / 2
            let early = weightedMean(Array(run[..<half])), late = weightedMean(Array(run[(run.count - half)...]))
            return hypot(late.x - early.x, late.y - early.y) > 0.5 * points[run[run.count - 1]].tolerance
        }

        private func agreeingRun(endingAt last: Int) -> [Int]? {
            guard last >= 0 else { return nil }
            var run: [Int] = []
            var (sx, sy, sw) = (0.0, 0.0, 0.0)
            var index = last
            // Looks back over at most 150 fixes (30 s at 5 Hz).
            while index >= 0, run.count < 150 {
                defer { index -= 1 }
                if dropped.contains(index) { continue }
                let p = points[index]
                let w = 1 / (p.sigma * p.sigma)
                let (nx, ny, nw) = (sx + w * p.x, sy + w * p.y, sw + w)
                let mean = (x: nx / nw, y: ny / nw)
                let fits = ([index] + run).allSatisfy { hypot(points[$0].x - mean.x, points[$0].y - mean.y) <= points[$0].tolerance }
                if !fits { break }
                run.insert(index, at: 0)
                (sx, sy, sw) = (nx, ny, nw)
            }
            return run.isEmpty ? nil : run
        }

        private func result(_ run: [Int]) -> Result {
            let mean = weightedMean(run)
            let stated = combinedRadius(run)
            let scatter = (run.map { pow(points[$0].x - mean.x, 2) + pow(points[$0].y - mean.y, 2) }.reduce(0, +) / Double(2 * run.count))
                .squareRoot()
            let jump = jumps.map(\.size).max() ?? 0
            let accuracy = (pow(rule.margin * stated, 2) + pow(GNSSErrorModel.radius95PerSigma * scatter, 2) + jump * jump).squareRoot()
            let origin = self.origin ?? Coordinate(validLatitude: 0, longitude: 0)
            var longitude = origin.longitude + mean.x / metresPerDegree.longitude
            if longitude > 180 { longitude -= 360 }
            if longitude < -180 { longitude += 360 }
            let latitude = min(90, max(-90, origin.latitude + mean.y / metresPerDegree.latitude))
            let usable = points.count
            return Result(
                coordinate: Coordinate(validLatitude: latitude, longitude: longitude), accuracy: accuracy, kept: run.count,
                rejected: usable - run.count, unusable: unusable, span: points[run[0]].time.duration(to: points[run[run.count - 1]].time),
                elapsed: points[0].time.duration(to: points[usable - 1].time), stated: stated, jumps: jumps.count)
        }

        /// The combined stated 95 % radius of fixes weighted by 1/σ²: √(n / Σ 1/eph²).
        private func combinedRadius(_ indices: [Int]) -> Double {
            guard !indices.isEmpty else { return 0 }
            let inverse = indices.map { 1 / pow(GNSSErrorModel.radius95PerSigma * points[$0].sigma, 2) }.reduce(0, +)
            return (Double(indices.count) / inverse).squareRoot()
        }

        private func weightedMean(_ indices: [Int]) -> (x: Double, y: Double) {
            var (x, y, total) = (0.0, 0.0, 0.0)
            for index in indices {
                let w = 1 / (points[index].sigma * points[index].sigma)
                x += w * points[index].x
                y += w * points[index].y
                total += w
            }
            return total > 0 ? (x / total, y / total) : (0, 0)
        }
    }
}
