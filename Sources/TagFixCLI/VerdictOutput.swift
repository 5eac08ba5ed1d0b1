import TagFixCore
import TagFixDevices

/// How verdicts are shown: one JSON object per line, or one line a person reads.
enum VerdictFormat {
    /// The JSON Lines record for a verdict (schema in docs/verifier.md).
    static func json(_ verdict: Verdict) -> String {
        var object = JSONObjectWriter()
        object.add("time", verdict.scan.time.iso8601)
        object.add("verdict", verdict.kind.name)
        object.add("reason", verdict.kind.reasonCode)
        object.add("message", message(verdict))
        object.add("uid", verdict.scan.uid.hex)
        object.add("tag_type", verdict.scan.tagType.rawValue)
        object.add("tag_id", verdict.tagID)
        object.add("url", verdict.scan.url.map(SignedLocation.redacted))  // no signature bytes in output or logs
        object.add("reader", verdict.scan.readerID)
        object.add("distance_m", verdict.distance)
        object.add("accuracy_m", verdict.accuracy)
        object.add("bearing_deg", verdict.bearing, digits: 1)
        object.add(
            "region",
            raw: verdict.region.map { region in
                var r = JSONObjectWriter()
                r.add("id", region.identifier)
                r.add("name", verdict.regionName)
                r.add("lat", region.center.latitude, digits: 7)
                r.add("lon", region.center.longitude, digits: 7)
                r.add("radius_m", region.radius)
                r.add("source", verdict.regionSource?.rawValue)
                return r.text
            })
        object.add("fix_age_s", verdict.fixAge?.seconds)
        object.add("interpolated", verdict.interpolated)
        object.add("fix", raw: verdict.fix.map(fixJSON))
        if let stamp = verdict.timeStamp {
            object.add("time_source", stamp.source.rawValue)
            object.add("clock_offset_s", stamp.systemMinusGPS?.seconds, digits: 3)
        }
        // A SUN tag's proof: its read counter, accepted with this verdict (never a key or a MAC).
        if let counter = verdict.sun?.counter { object.add("sun_counter", Int(counter)) }
        return object.text
    }

    static func fixJSON(_ fix: Fix) -> String {
        var f = JSONObjectWriter()
        f.add("time", fix.reportedTime.iso8601)
        f.add("mode", fix.mode == .noFix ? "no_fix" : fix.mode == .twoD ? "2d" : "3d")
        f.add("lat", fix.coordinate?.latitude, digits: 7)
        f.add("lon", fix.coordinate?.longitude, digits: 7)
        f.add("accuracy_m", fix.horizontalAccuracy)
        f.add("status", fix.status.name)
        f.add("satellites_used", fix.satellitesUsed)
        return f.text
    }

    /// What a person should read about the verdict.
    static func message(_ verdict: Verdict) -> String {
        let radius = verdict.region.map { "\(metres($0.radius)) m" } ?? "?"
        switch verdict.kind {
        case .confirmed:
            return "\(metres(verdict.distance)) m ± \(metres(verdict.accuracy)) m from the centre, within \(radius)"
        case .outside:
            let direction = verdict.bearing.map { " \(Geodesic.compassPoint(forAzimuth: $0))" } ?? ""
            return
                "the tag is \(metres(verdict.distance)) m\(direction) of where it should be (± \(metres(verdict.accuracy)) m, radius \(radius)): was it moved?"
        case .inconclusive(let reason):
            if case .straddlesBoundary = reason {
                return "\(metres(verdict.distance)) m ± \(metres(verdict.accuracy)) m against a radius of \(radius): \(reason)"
            }
            return reason.description
        case .notRegistered:
            return "no registry entry for this tag and no location in its URL: enrol it, or write its location into the URL"
        case .disallowed(let reason):
            return reason.description
        case .untrusted(let reason):
            return reason.description
        }
    }

    /// One line for a terminal or a log: time, symbol, verdict, tag, message.
    static func line(_ verdict: Verdict) -> String {
        let symbol: String
        switch verdict.kind {
        case .confirmed: symbol = "✓"
        case .outside: symbol = "✗"
        case .inconclusive: symbol = "?"
        case .notRegistered: symbol = "–"
        case .disallowed: symbol = "⊘"
        case .untrusted: symbol = "⚠"
        }
        let kind: String
        switch verdict.kind {
        case .notRegistered: kind = "not registered"
        default: kind = verdict.kind.name
        }
        var tag = verdict.tagID ?? verdict.scan.uid.hex
        if let name = verdict.regionName { tag += " (\(name))" }
        return "\(clockTime(verdict.scan.time))  \(symbol) \(pad(kind, 14)) \(pad(tag, 24)) \(message(verdict))"
    }

    static func clockTime(_ time: Timestamp) -> String {
        let iso = time.formatted(fractionDigits: 0)
        return String(iso.dropFirst(11).prefix(8))
    }

    static func metres(_ value: Double?) -> String {
        guard let value else { return "?" }
        return Coordinate.format(value, 1)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}

/// Counts of each verdict kind, for the closing summary.
struct VerdictTally {
    var counts: [String: Int] = [:]
    var total = 0

    mutating func add(_ verdict: Verdict) {
        counts[verdict.kind.name, default: 0] += 1
        total += 1
    }

    var summary: String {
        let order = [
            ("confirmed", "confirmed"), ("outside", "outside"), ("inconclusive", "inconclusive"), ("notRegistered", "not registered"),
            ("disallowed", "disallowed"), ("untrusted", "untrusted"),
        ]
        let parts = order.compactMap { key, label in counts[key].map { "\($0) \(label)" } }
        return "\(total) scan\(total == 1 ? "" : "s"): " + (parts.isEmpty ? "none" : parts.joined(separator: ", "))
    }
}

/// Reader and GPS events worth a line in human output.
enum DeviceEventFormat {
    static func line(_ event: VerifierEvent) -> String? {
        switch event {
        case .verdict: return nil
        case .reader(let event):
            switch event {
            case .failed(let error): return "          ! reader: \(error)"
            case .disconnected(let error): return "          ! reader disconnected: \(error)"
            default: return nil
            }
        case .gps(let event):
            switch event {
            case .unavailable(let why): return "          ! GPS unavailable: \(why)"
            case .silent(let duration): return "          ! GPS: no fix data for \(Coordinate.format(duration.seconds, 0)) s"
            case .resumed: return "          · GPS: fixes resumed"
            case .rejected(let why): return "          ! GPS: dropped \(why)"
            case .restarted(let from, let to): return "          · GPS: \(ClockFormat.restarted(from: from, to: to))"
            default: return nil
            }
        case .clockOffset: return nil  // a note on standard error (VerdictPrinter)
        }
    }
}

/// What a person reads about the clocks.
enum ClockFormat {
    /// Said once when the system clock is off GPS time.
    static func offset(_ reference: TimeReference) -> String {
        let difference = reference.systemMinusGPS.map(TimeReference.describe(systemMinusGPS:)) ?? "the system clock is off GPS time"
        switch reference.source {
        case .gps:
            return
                "\(difference): TagFix stamps verdicts and log lines with GPS time. To set the clock from the receiver, see hardware.md#time"
        case .system:
            return "\(difference), though the kernel says it is synchronised: check chrony/NTP (see hardware.md#time)"
        }
    }

    /// Said once for each jump of the receiver's time.
    static func restarted(from: Timestamp, to: Timestamp) -> String {
        "the receiver's time jumped from \(from.iso8601) to \(to.iso8601) (a replayed log, a week rollover or a reset): a new stream of fixes starts"
    }
}
