import Foundation

/// One confirmed tap as evidence of where a tag is: the fix at the tap, with its accuracy, taken
/// at arm's length from the tag. Pure.
public struct PlacementTap: Sendable, Hashable {
    public var tagID: String
    /// When the tap was made: the fix's receiver (GPS) time when the log has it, else the
    /// verdict's time. Only differences of these decide anything (which taps are one visit).
    public var time: Timestamp
    /// Where the fix put the reader.
    public var coordinate: Coordinate
    /// The fix's horizontal accuracy, metres (95 %).
    public var accuracy: Double
    /// The centre of the region the tap was confirmed against: which placement it speaks for.
    public var confirmedAgainst: Coordinate
    /// A stable identity: the same tap read from two logs (or one log imported twice) is one tap.
    public var key: String

    public init(tagID: String, time: Timestamp, coordinate: Coordinate, accuracy: Double, confirmedAgainst: Coordinate, key: String) {
        self.tagID = tagID
        self.time = time
        self.coordinate = coordinate
        self.accuracy = accuracy
        self.confirmedAgainst = confirmedAgainst
        self.key = key
    }

    /// The tap a session record is evidence of: only a `confirmed` verdict against a region, with
    /// a logged fix that has a position and an accuracy. Any other verdict (outside, untrusted,
    /// inconclusive…) is no evidence of where the tag is, and gives `nil`.
    public init?(_ record: SessionRecord) {
        guard record.verdict == "confirmed", let region = record.region, let fix = record.fix, let accuracy = fix.accuracy,
            accuracy.isFinite, accuracy >= 0
        else { return nil }
        let id = record.tagID ?? region.id
        guard let id, !id.isEmpty else { return nil }
        self.init(
            tagID: id, time: fix.time ?? record.time, coordinate: fix.coordinate, accuracy: accuracy, confirmedAgainst: region.center,
            key: "\(record.time.nanosecondsSinceEpoch)/\(record.uid ?? "")")
    }
}

/// A refinement recorded by `tagfix registry refine --apply`: the placement before and after.
public struct PlacementChange: Sendable, Hashable {
    public var tagID: String
    /// When it was applied (the system clock's label: for people, it decides nothing).
    public var at: Timestamp
    public var from: Coordinate
    public var fromAccuracy: Double?
    public var to: Coordinate
    public var toAccuracy: Double?
    /// The independent visits the refined placement stood on.
    public var visits: Int

    public init(tagID: String, at: Timestamp, from: Coordinate, fromAccuracy: Double?, to: Coordinate, toAccuracy: Double?, visits: Int) {
        self.tagID = tagID
        self.at = at
        self.from = from
        self.fromAccuracy = fromAccuracy
        self.to = to
        self.toAccuracy = toAccuracy
        self.visits = visits
    }
}

/// What is known of one tag's placement: the registry's entry, the refinements applied to it,
/// and the confirmed taps recorded for it.
public struct PlacementEvidence: Sendable, Hashable {
    public var entry: RegistryEntry
    /// The centre and accuracy as enrolled, before any refinement.
    public var enrolled: Coordinate
    public var enrolledAccuracy: Double?
    /// The centres this placement has had (as enrolled, and each refinement): a tap confirmed
    /// against one of them speaks for it; a tap confirmed against another centre (before the tag
    /// was enrolled again) does not.
    public var lineage: [Coordinate]
    /// The accuracy of the registry's centre now: the enrolment's, else the last refinement's.
    public var currentAccuracy: Double?
    public var taps: [PlacementTap]

    /// Centres closer than this are one (a log rounds coordinates to 1e-7°, about a centimetre).
    public static let sameCentre = 0.1

    /// The evidence of `entry`, given the refinements recorded for its id (oldest first) and its
    /// taps. The history counts only as far back as it leads to the entry's centre: a refinement
    /// whose result is not where the next one (or the entry) started belongs to an earlier
    /// placement (the tag was enrolled again since).
    public init(entry: RegistryEntry, history: [PlacementChange], taps: [PlacementTap]) {
        self.entry = entry
        var centre = entry.region.center
        var accuracy = entry.enrolment?.accuracy
        var lineage = [centre]
        // The registry keeps an accuracy only with an enrolment: without one, the last refinement's.
        var current = accuracy
        var currentKnown = accuracy != nil
        for change in history.reversed() {
            guard Geodesic.fastDistance(from: change.to, to: centre) <= Self.sameCentre else { break }
            if !currentKnown {
                current = change.toAccuracy
                currentKnown = true
            }
            centre = change.from
            accuracy = change.fromAccuracy
            lineage.append(centre)
        }
        enrolled = centre
        enrolledAccuracy = accuracy
        currentAccuracy = current
        self.lineage = lineage
        self.taps = taps
    }

    /// Whether `tap` was confirmed against this placement.
    public func speaksFor(_ tap: PlacementTap) -> Bool {
        tap.tagID == entry.id && lineage.contains { Geodesic.fastDistance(from: $0, to: tap.confirmedAgainst) <= Self.sameCentre }
    }
}

/// Refines a placement from its confirmed taps, the way a surveyor would: each visit to the tag
/// is one independent look at where it is; the looks are weighted by their accuracy and
/// combined with the enrolment. Pure.
///
/// - **Visits.** GNSS errors wander: taps minutes apart share most of their error, so they are one
///   look, not several. Taps chained by gaps of at most `visitGap` (3 τ, τ = 10 min, the long end
///   of the correlation times published for hand-held and consumer receivers: errors of taps
///   farther apart are correlated by e^-3 ≈ 5 % or less) are one visit. A visit's position is its
///   taps' weighted mean, and its accuracy their combined stated accuracy, not shrunk by their
///   number.
/// - **Weights.** Visits are weighted by 1/a², a being the visit's 95 % accuracy. The combined
///   accuracy 1/√Σ(1/a²) is widened by the Birge ratio when the visits scatter more than they
///   claim (√(χ²/2(n−1)), χ² of the visits' distances from the mean over their σ), and a visit
///   beyond 4 σ of the others (multipath) is left out. Arm's length (the reader is up to
///   `armLength` from the tag, often on the same side of it every time) is added in quadrature:
///   it does not average away.
/// - **Moved.** The taps agree on a place away from the enrolled centre beyond both accuracies
///   (`movedFactor` × √(a_enrolled² + a_taps²): 1.24× those 95 % radii is the 99 % level of their
///   difference, so a site of honest placements sees about one false alarm in 100 tags), on at
///   least `minimumVisitsForMoved` visits: the tag is reported moved, even while every tap is
///   still confirmed. A moved tag gets no refined placement: it needs a person to look.
/// - **Refined.** Otherwise, with at least `minimumVisits` visits, the enrolment and the taps'
///   estimate combined by their weights (the taps' alone when the enrolled accuracy is unknown).
public struct PlacementRefiner: Sendable, Hashable {
    /// The correlation time assumed for GNSS errors.
    public static let correlationTime: Duration = .seconds(600)
    /// Taps closer in time than this (to the visit's previous tap) are one visit.
    public var visitGap: Duration = .seconds(1800)
    /// How far from the tag the reader may be at a tap, metres.
    public var armLength = 1.0
    /// Fewest visits for a refined placement.
    public var minimumVisits = 2
    /// Fewest visits for a "moved" report.
    public var minimumVisitsForMoved = 3
    /// How far beyond the combined 95 % accuracy a shift must go to be a move.
    public var movedFactor = 1.24

    public init() {}

    /// One independent look at the tag.
    public struct Visit: Sendable, Hashable {
        public var start: Timestamp
        public var end: Timestamp
        public var taps: Int
        public var coordinate: Coordinate
        /// 95 %, metres.
        public var accuracy: Double
        /// Left out as an outlier (multipath).
        public var rejected: Bool
    }

    /// A position with its 95 % accuracy.
    public struct Position: Sendable, Hashable {
        public var coordinate: Coordinate
        public var accuracy: Double

        public init(coordinate: Coordinate, accuracy: Double) {
            self.coordinate = coordinate
            self.accuracy = accuracy
        }
    }

    /// The refinement of one tag.
    public struct Estimate: Sendable, Hashable {
        public var tagID: String
        public var name: String?
        public var radius: Double
        /// The registry's centre now (the enrolled one, or a refinement applied since).
        public var current: Coordinate
        public var currentAccuracy: Double?
        public var enrolled: Coordinate
        public var enrolledAccuracy: Double?
        /// Confirmed taps that speak for this placement, and those confirmed against another one.
        public var taps: Int
        public var otherPlacementTaps: Int
        public var visits: [Visit]
        /// Where the taps put the tag (nil without taps).
        public var fromTaps: Position?
        /// From the enrolled centre to `fromTaps`: metres and azimuth.
        public var shift: Double?
        public var shiftAzimuth: Double?
        /// The enrolled accuracy as weighed: the stated one, but no better than a visit's.
        public var enrolledAccuracyUsed: Double?
        /// √(a_enrolled² + a_taps²) × `movedFactor`: a shift beyond this is a move.
        public var movedThreshold: Double?
        public var moved: Bool
        /// What `--apply` records; nil when moved or with too few visits.
        public var refined: Position?

        public var independentVisits: Int { visits.filter { !$0.rejected }.count }
        /// Whether `refined` differs from the registry's centre or accuracy now.
        public var changesPlacement: Bool {
            guard let refined else { return false }
            return Geodesic.fastDistance(from: refined.coordinate, to: current) > PlacementEvidence.sameCentre
                || currentAccuracy.map { abs($0 - refined.accuracy) >= 0.05 } ?? true
        }
    }

    /// Refines one placement.
    public func refine(_ evidence: PlacementEvidence) -> Estimate {
        let entry = evidence.entry
        let taps = evidence.taps.filter(evidence.speaksFor).sorted { ($0.time, $0.key) < ($1.time, $1.key) }
        var estimate = Estimate(
            tagID: entry.id, name: entry.name, radius: entry.region.radius, current: entry.region.center,
            currentAccuracy: evidence.currentAccuracy, enrolled: evidence.enrolled, enrolledAccuracy: evidence.enrolledAccuracy,
            taps: taps.count, otherPlacementTaps: evidence.taps.count - taps.count, visits: [], moved: false)
        guard !taps.isEmpty else { return estimate }
        let plane = LocalPlane(origin: evidence.enrolled)
        var visits = self.visits(taps, plane)
        // Leave out visits beyond 4 σ of the others, one at a time, at most a third of them.
        while visits.filter({ !$0.rejected }).count >= 3 {
            let kept = visits.indices.filter { !visits[$0].rejected }
            guard visits.filter(\.rejected).count + 1 <= visits.count / 3 else { break }
            var worst: (index: Int, score: Double)?
            for index in kept {
                let others = Self.mean(kept.filter { $0 != index }.map { visits[$0] })
                let sigma = Self.sigma(visits[index].accuracy)
                let score = hypot(visits[index].x - others.x, visits[index].y - others.y) / hypot(sigma, Self.sigma(others.accuracy))
                if score > (worst?.score ?? 4) { worst = (index, score) }
            }
            guard let worst else { break }
            visits[worst.index].rejected = true
        }
        let kept = visits.filter { !$0.rejected }
        let mean = Self.mean(kept)
        var birge = 1.0
        if kept.count >= 2 {
            let chi2 = kept.map { pow(hypot($0.x - mean.x, $0.y - mean.y) / Self.sigma($0.accuracy), 2) }.reduce(0, +)
            birge = max(1, sqrt(chi2 / (2 * Double(kept.count - 1))))
        }
        let statistical = mean.accuracy * birge
        let accuracy = hypot(statistical, armLength)
        let fromTaps = Position(coordinate: plane.coordinate(x: mean.x, y: mean.y), accuracy: accuracy)
        estimate.visits = visits.map {
            Visit(
                start: $0.start, end: $0.end, taps: $0.taps, coordinate: plane.coordinate(x: $0.x, y: $0.y), accuracy: $0.accuracy,
                rejected: $0.rejected)
        }
        estimate.fromTaps = fromTaps
        let line = Geodesic.fastInverse(from: evidence.enrolled, to: fromTaps.coordinate)
        estimate.shift = line.distance
        estimate.shiftAzimuth = line.initialAzimuth
        // An enrolment is one visit: averaging within it cannot beat the slow error its fixes
        // share, so it is taken as no better than the taps' typical visit (their median accuracy),
        // whatever it states.
        let typicalVisit = Self.median(kept.map(\.accuracy))
        let enrolledAccuracy = evidence.enrolledAccuracy.map { max($0, typicalVisit) }
        estimate.enrolledAccuracyUsed = enrolledAccuracy
        let threshold = movedFactor * hypot(enrolledAccuracy ?? 0, accuracy)
        estimate.movedThreshold = threshold
        estimate.moved = kept.count >= minimumVisitsForMoved && line.distance > threshold
        guard !estimate.moved, kept.count >= minimumVisits else { return estimate }
        if let enrolledAccuracy {
            let a = max(enrolledAccuracy, 0.01)
            // Weighed by their random errors; arm's length is a bias the enrolment shares (the
            // reader held by the tag), which no combination removes.
            let we = 1 / (a * a), wt = 1 / (statistical * statistical)
            let x = wt * mean.x / (we + wt), y = wt * mean.y / (we + wt)
            estimate.refined = Position(coordinate: plane.coordinate(x: x, y: y), accuracy: hypot(1 / sqrt(we + wt), armLength))
        } else {
            estimate.refined = fromTaps
        }
        return estimate
    }

    /// Refines every placement.
    public func refine(_ evidence: [PlacementEvidence]) -> [Estimate] { evidence.map(refine) }

    // MARK: - Visits

    struct PlaneVisit {
        var start: Timestamp
        var end: Timestamp
        var taps: Int
        var x: Double
        var y: Double
        var accuracy: Double
        var rejected = false
    }

    /// Taps (in time order) chained by gaps of at most `visitGap`, each group one visit: its
    /// weighted mean, and the combined accuracy of its taps (they share their error).
    func visits(_ taps: [PlacementTap], _ plane: LocalPlane) -> [PlaneVisit] {
        var groups: [[PlacementTap]] = []
        for tap in taps {
            if let last = groups.last?.last, last.time.duration(to: tap.time) <= visitGap {
                groups[groups.count - 1].append(tap)
            } else {
                groups.append([tap])
            }
        }
        return groups.map { group in
            var (x, y, total) = (0.0, 0.0, 0.0)
            for tap in group {
                let a = max(tap.accuracy, 0.01)
                let p = plane.point(tap.coordinate)
                x += p.x / (a * a)
                y += p.y / (a * a)
                total += 1 / (a * a)
            }
            return PlaneVisit(
                start: group[0].time, end: group[group.count - 1].time, taps: group.count, x: x / total, y: y / total,
                accuracy: sqrt(Double(group.count) / total))
        }
    }

    /// The weighted mean of visits, and its 95 % accuracy from theirs.
    static func mean(_ visits: [PlaneVisit]) -> (x: Double, y: Double, accuracy: Double) {
        var (x, y, total) = (0.0, 0.0, 0.0)
        for visit in visits {
            let w = 1 / (visit.accuracy * visit.accuracy)
            x += w * visit.x
            y += w * visit.y
            total += w
        }
        return (x / total, y / total, 1 / sqrt(total))
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// The σ per axis of a circular normal error whose 95 % radius is `accuracy`.
    static func sigma(_ accuracy: Double) -> Double { accuracy / 2.447_746_830_680_816 }
}

/// An east/north plane in metres around a point: fine over the metres a placement moves, free of
/// the longitude wrap at ±180°.
struct LocalPlane {
    var origin: Coordinate
    var metresPerDegreeLatitude: Double
    var metresPerDegreeLongitude: Double

    init(origin: Coordinate) {
        self.origin = origin
        metresPerDegreeLatitude = 111_132.954 - 559.822 * cos(2 * origin.latitude * .pi / 180)
        metresPerDegreeLongitude = max(1e-6, 111_412.84 * cos(origin.latitude * .pi / 180))
    }

    func point(_ c: Coordinate) -> (x: Double, y: Double) {
        (
            (Geodesic.normalizedDegrees(c.longitude - origin.longitude)) * metresPerDegreeLongitude,
            (c.latitude - origin.latitude) * metresPerDegreeLatitude
        )
    }

    func coordinate(x: Double, y: Double) -> Coordinate {
        let latitude = min(90, max(-90, origin.latitude + y / metresPerDegreeLatitude))
        var longitude = Geodesic.normalizedDegrees(origin.longitude + x / metresPerDegreeLongitude)
        if longitude == -180 { longitude = 180 }
        return Coordinate(validLatitude: latitude, longitude: longitude)
    }
}
