public import TagFixCore

/// A fix as `tagfix fix` shows it: one line, or one JSON object.
public enum FixReport {
    public static func line(_ fix: Fix) -> String {
        var line = "\(fix.reportedTime.iso8601)  \(fix.mode)"
        if let position = fix.coordinate { line += "  \(position)" }
        if let accuracy = fix.horizontalAccuracy { line += "  ±\(Coordinate.format(accuracy, 1)) m" }
        if let satellites = fix.satellitesUsed { line += "  \(satellites) sats" }
        if fix.status != .gps { line += "  \(fix.status)" }
        return line
    }

    /// One JSON object; `refined`: a more complete report of an epoch already printed, which
    /// replaces it (`"refined":true`).
    public static func json(_ fix: Fix, refined: Bool = false) -> String {
        var object = JSONObjectWriter()
        object.add("time", fix.reportedTime.iso8601)
        object.add("mode", fix.mode.rawValue)
        object.add("lat", fix.coordinate?.latitude, digits: 9)
        object.add("lon", fix.coordinate?.longitude, digits: 9)
        object.add("alt_hae", fix.altitudeHAE)
        object.add("alt_msl", fix.altitudeMSL)
        object.add("eph", fix.errorEstimates?.eph)
        object.add("epx", fix.errorEstimates?.epx)
        object.add("epy", fix.errorEstimates?.epy)
        object.add("accuracy_m", fix.horizontalAccuracy)
        object.add("status", fix.status.name)
        object.add("satellites_used", fix.satellitesUsed)
        object.add("satellites_visible", fix.satellitesVisible)
        object.add("speed", fix.speed)
        object.add("track", fix.track)
        object.add("climb", fix.climb)
        object.add("device", fix.device)
        if refined { object.add("refined", true) }
        return object.text
    }
}

/// A registry entry as `tagfix registry list` and `show` show it: a line, the details, or one
/// JSON object.
public enum RegistryEntryReport {
    public static func line(_ entry: RegistryEntry) -> String {
        let c = entry.region.center
        var text = "\(pad(entry.id, 10)) \(pad(entry.uid?.hex ?? "-", 16)) "
        text += "\(Coordinate.format(c.latitude, 7)),\(Coordinate.format(c.longitude, 7)) r \(Coordinate.format(entry.region.radius, 1)) m"
        if let name = entry.name { text += "  \(name)" }
        return text
    }

    public static func details(_ entry: RegistryEntry, history: [PlacementChange] = []) -> String {
        var lines = ["id:        \(entry.id)"]
        lines.append("uid:       \(entry.uid?.hex ?? "-")")
        lines.append("name:      \(entry.name ?? "-")")
        lines.append("centre:    \(entry.region.center)")
        lines.append("radius:    \(Coordinate.format(entry.region.radius, 1)) m")
        if let enrolment = entry.enrolment {
            var line = "enrolled:  \(enrolment.at.formatted(fractionDigits: 0))"
            if let by = enrolment.by { line += " by \(by)" }
            if let accuracy = enrolment.accuracy { line += ", ±\(Coordinate.format(accuracy, 1)) m" }
            if let fixes = enrolment.fixes { line += " from \(fixes) fixes" }
            lines.append(line)
        }
        if let notes = entry.notes { lines.append("notes:     \(notes)") }
        for (index, change) in history.enumerated() {
            lines.append((index == 0 ? "history:   " : "           ") + Self.line(change))
        }
        return lines.joined(separator: "\n")
    }

    /// One refinement applied (`registry refine --apply`), as `registry show` prints it: when, how
    /// far the centre moved, from where to where with each accuracy, and on how many visits.
    public static func line(_ change: PlacementChange) -> String {
        let accuracy = { (metres: Double?) in metres.map { " ±\(Coordinate.format($0, 1)) m" } ?? "" }
        let shift = Geodesic.distance(from: change.from, to: change.to)
        return "\(change.at.formatted(fractionDigits: 0)) refined, moved \(Coordinate.format(shift, 1)) m: \(change.from)"
            + "\(accuracy(change.fromAccuracy)) → \(change.to)\(accuracy(change.toAccuracy)), from \(change.visits) visit\(change.visits == 1 ? "" : "s")"
    }

    /// The entry as one JSON object; with `history` (registry show), its refinements oldest first.
    public static func json(_ entry: RegistryEntry, history: [PlacementChange]? = nil) -> String {
        var object = JSONObjectWriter()
        object.add("id", entry.id)
        object.add("uid", entry.uid?.hex)
        object.add("name", entry.name)
        object.add("lat", entry.region.center.latitude, digits: 9)
        object.add("lon", entry.region.center.longitude, digits: 9)
        object.add("radius_m", entry.region.radius)
        object.add("enrolled_at", entry.enrolment?.at.iso8601)
        object.add("enrolled_by", entry.enrolment?.by)
        object.add("accuracy_m", entry.enrolment?.accuracy)
        object.add("fixes", entry.enrolment?.fixes)
        object.add("notes", entry.notes)
        if let history {
            let changes = history.map { change in
                var item = JSONObjectWriter()
                item.add("at", change.at.iso8601)
                item.add("from_lat", change.from.latitude, digits: 9)
                item.add("from_lon", change.from.longitude, digits: 9)
                item.add("from_accuracy_m", change.fromAccuracy)
                item.add("to_lat", change.to.latitude, digits: 9)
                item.add("to_lon", change.to.longitude, digits: 9)
                item.add("to_accuracy_m", change.toAccuracy)
                item.add("shift_m", Geodesic.distance(from: change.from, to: change.to), digits: 3)
                item.add("visits", change.visits)
                return item.text
            }
            object.add("history", raw: "[" + changes.joined(separator: ",") + "]")
        }
        return object.text
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
