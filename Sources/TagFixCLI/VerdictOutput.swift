import TagFixCore
import TagFixDevices

/// How verdicts are shown to a person (the JSON Lines record is `SessionRecord`, in TagFixCore).
enum VerdictFormat {
    /// One line for a terminal or a log: time, symbol, verdict, tag, message.
    /// - Parameter message: `verdict.message`, when the caller has it already (a record's).
    static func line(_ verdict: Verdict, message: String? = nil) -> String {
        // A phone reads no UID (only a SUN proof gives one): its placeholder is no tag's.
        var tag = verdict.tagID ?? (verdict.scan.uid == .phoneUnknown ? "–" : verdict.scan.uid.hex)
        if let name = verdict.regionName { tag += " (\(name))" }
        let message = message ?? verdict.message
        // Into one array of bytes: `serve` writes a line for every phone tap.
        var line: [UInt8] = []
        line.reserveCapacity(56 + tag.utf8.count + message.utf8.count)
        line += verdict.scan.time.formatted(fractionDigits: 0).utf8.dropFirst(11).prefix(8)
        line += "  ".utf8
        line += verdict.kind.symbol.utf8
        line.append(0x20)
        pad(verdict.kind.words, 14, into: &line)
        line.append(0x20)
        pad(tag, 24, into: &line)
        line.append(0x20)
        line += message.utf8
        return String(decoding: line, as: UTF8.self)
    }

    /// `text`'s bytes appended to `bytes`, padded with spaces to `width` characters. A printable
    /// ASCII text (nearly every tag id) is measured in bytes: counting characters walks the
    /// grapheme rules, for every verdict line.
    static func pad(_ text: String, _ width: Int, into bytes: inout [UInt8]) {
        let count = text.utf8.allSatisfy { (0x20..<0x7F).contains($0) } ? text.utf8.count : text.count
        bytes += text.utf8
        if count < width { bytes += repeatElement(0x20, count: width - count) }
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
