public import TagFixCore

/// `tagfix registry refine`'s output: per tag, the enrolled centre and accuracy, where the taps
/// put it, the shift, and what `--apply` records; as text or JSON Lines. Pure.
public enum RefinementReport {
    static func position(_ c: Coordinate) -> String { "\(Coordinate.format(c.latitude, 7)),\(Coordinate.format(c.longitude, 7))" }
    static func metres(_ value: Double?) -> String { value.map { Coordinate.format($0, 1) } ?? "?" }

    /// What the estimate says of the tag, in a word: moved, refined, unchanged, too few visits, no taps.
    public static func status(_ e: PlacementRefiner.Estimate) -> String {
        if e.moved { return "moved" }
        if e.fromTaps == nil { return "no_taps" }
        if e.refined == nil { return "too_few_visits" }
        return e.changesPlacement ? "refined" : "unchanged"
    }

    /// One line per tag.
    public static func line(_ e: PlacementRefiner.Estimate) -> String {
        var text = e.tagID + (e.name.map { " (\($0))" } ?? "") + ": enrolled \(position(e.enrolled))"
        text += e.enrolledAccuracy.map { " ±\(metres($0)) m" } ?? " (accuracy unknown)"
        guard let taps = e.fromTaps else {
            return text + "; no confirmed taps" + (e.otherPlacementTaps > 0 ? " (\(e.otherPlacementTaps) of an earlier placement)" : "")
        }
        let visits = e.independentVisits
        text += "; taps \(position(taps.coordinate)) ±\(metres(taps.accuracy)) m from \(visits) visit\(visits == 1 ? "" : "s")"
        text += " (\(e.taps) tap\(e.taps == 1 ? "" : "s")"
        let rejected = e.visits.count - visits
        if rejected > 0 { text += ", \(rejected) visit\(rejected == 1 ? "" : "s") left out as outliers" }
        text += "); shift \(metres(e.shift)) m"
        if let azimuth = e.shiftAzimuth, (e.shift ?? 0) >= 0.05 { text += " \(Geodesic.compassPoint(forAzimuth: azimuth))" }
        if e.moved {
            text +=
                ": MOVED — the taps agree on a place \(metres(e.shift)) m from its centre, beyond ±\(metres(e.movedThreshold)) m: check the tag; re-enrol it (tagfix enroll --replace) if it belongs there now"
        } else if let refined = e.refined {
            text += "; refined \(position(refined.coordinate)) ±\(metres(refined.accuracy)) m"
            if !e.changesPlacement { text += " (recorded already)" }
        } else {
            text += "; too few visits to refine (need \(PlacementRefiner().minimumVisits))"
        }
        return text
    }

    public static func json(_ e: PlacementRefiner.Estimate) -> String {
        var object = JSONObjectWriter()
        object.add("id", e.tagID)
        object.add("name", e.name)
        object.add("status", status(e))
        object.add("radius_m", e.radius)
        object.add("enrolled_lat", e.enrolled.latitude, digits: 9)
        object.add("enrolled_lon", e.enrolled.longitude, digits: 9)
        object.add("enrolled_accuracy_m", e.enrolledAccuracy)
        object.add("current_lat", e.current.latitude, digits: 9)
        object.add("current_lon", e.current.longitude, digits: 9)
        object.add("current_accuracy_m", e.currentAccuracy)
        object.add("taps", e.taps)
        object.add("taps_other_placement", e.otherPlacementTaps)
        object.add("visits", e.independentVisits)
        object.add("visits_rejected", e.visits.count - e.independentVisits)
        object.add("taps_lat", e.fromTaps?.coordinate.latitude, digits: 9)
        object.add("taps_lon", e.fromTaps?.coordinate.longitude, digits: 9)
        object.add("taps_accuracy_m", e.fromTaps?.accuracy)
        object.add("shift_m", e.shift)
        object.add("shift_bearing_deg", e.shiftAzimuth, digits: 1)
        object.add("moved_threshold_m", e.movedThreshold)
        object.add("moved", e.moved)
        object.add("refined_lat", e.refined?.coordinate.latitude, digits: 9)
        object.add("refined_lon", e.refined?.coordinate.longitude, digits: 9)
        object.add("refined_accuracy_m", e.refined?.accuracy)
        return object.text
    }

    /// What `--apply` changed, for one tag.
    public static func applied(_ change: PlacementChange) -> String {
        "applied \(change.tagID): \(position(change.from)) ±\(metres(change.fromAccuracy)) m → \(position(change.to)) ±\(metres(change.toAccuracy)) m "
            + "(\(Coordinate.format(Geodesic.fastDistance(from: change.from, to: change.to), 2)) m, \(change.visits) visits); the previous placement is kept in the history"
    }

    public static func appliedJSON(_ change: PlacementChange) -> String {
        var object = JSONObjectWriter()
        object.add("applied", change.tagID)
        object.add("from_lat", change.from.latitude, digits: 9)
        object.add("from_lon", change.from.longitude, digits: 9)
        object.add("from_accuracy_m", change.fromAccuracy)
        object.add("to_lat", change.to.latitude, digits: 9)
        object.add("to_lon", change.to.longitude, digits: 9)
        object.add("to_accuracy_m", change.toAccuracy)
        object.add("visits", change.visits)
        return object.text
    }
}
