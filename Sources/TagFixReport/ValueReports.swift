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

    public static func details(_ entry: RegistryEntry) -> String {
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
        return lines.joined(separator: "\n")
    }

    public static func json(_ entry: RegistryEntry) -> String {
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
        return object.text
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
