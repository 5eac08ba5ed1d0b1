/// A UTC instant with nanosecond resolution: the one timeline scans, fixes and verdicts share.
///
/// GPS fixes carry UTC from the receiver and scans are stamped by the injected clock, whose
/// `Instant` is also a `Timestamp` (see `TagFixDevices.MonotonicClock` and
/// `TagFixTesting.ManualClock`), so fix ages are differences on one axis. The type is pure: it
/// never reads a clock itself.
public struct Timestamp: Sendable, Hashable, Comparable, InstantProtocol, CustomStringConvertible {
    /// Nanoseconds since 1970-01-01T00:00:00Z, leap seconds not counted (POSIX time).
    public var nanosecondsSinceEpoch: Int64

    public init(nanosecondsSinceEpoch: Int64) {
        self.nanosecondsSinceEpoch = nanosecondsSinceEpoch
    }

    /// A timestamp from seconds since the epoch; `nil` when not finite or out of range.
    public init?(secondsSinceEpoch seconds: Double) {
        guard seconds.isFinite, abs(seconds) < 9.2e9 else { return nil }
        self.nanosecondsSinceEpoch = Int64((seconds * 1e9).rounded())
    }

    public var secondsSinceEpoch: Double { Double(nanosecondsSinceEpoch) / 1e9 }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch
    }

    public func advanced(by duration: Duration) -> Timestamp {
        Timestamp(nanosecondsSinceEpoch: nanosecondsSinceEpoch &+ duration.nanoseconds)
    }

    public func duration(to other: Timestamp) -> Duration {
        .nanoseconds(other.nanosecondsSinceEpoch &- nanosecondsSinceEpoch)
    }

    public var description: String { iso8601 }
}

extension Duration {
    /// The duration in whole nanoseconds, saturating at the limits of `Int64`.
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = product.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return sum
    }

    /// The duration in seconds as a `Double`.
    public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// A duration from seconds; `nil` when not finite or beyond ±292 years.
    public static func seconds(exactly value: Double) -> Duration? {
        guard value.isFinite, abs(value) < 9.2e9 else { return nil }
        return .nanoseconds(Int64((value * 1e9).rounded()))
    }
}

// MARK: - ISO 8601

extension Timestamp {
    /// RFC 3339 / ISO 8601 in UTC with millisecond precision, e.g. `2026-05-14T08:00:00.250Z`.
    public var iso8601: String { formatted(fractionDigits: 3) }

    /// RFC 3339 in UTC with the given number of fraction digits (0…9).
    public func formatted(fractionDigits: Int) -> String {
        let digits = max(0, min(9, fractionDigits))
        let nanos = nanosecondsSinceEpoch
        var seconds = nanos / 1_000_000_000
        var fraction = nanos % 1_000_000_000
        if fraction < 0 {
            fraction += 1_000_000_000
            seconds -= 1
        }
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = Self.civil(fromDays: days)
        // Written as bytes into one string (every record and terminal line has a time): the
        // nanoseconds of an Int64 span the years 1677…2262, so the year has four digits.
        let length = 20 + (digits > 0 ? digits + 1 : 0)
        return String(unsafeUninitializedCapacity: length) { out in
            var at = 0
            func put(_ value: Int64, _ width: Int) {
                var value = value
                for index in stride(from: at + width - 1, through: at, by: -1) {
                    out[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                at += width
            }
            func put(_ byte: Unicode.Scalar) {
                out[at] = UInt8(ascii: byte)
                at += 1
            }
            put(year, 4)
            put("-")
            put(month, 2)
            put("-")
            put(day, 2)
            put("T")
            put(secondOfDay / 3600, 2)
            put(":")
            put(secondOfDay / 60 % 60, 2)
            put(":")
            put(secondOfDay % 60, 2)
            if digits > 0 {
                var scaled = fraction
                for _ in digits..<9 { scaled /= 10 }
                put(".")
                put(scaled, digits)
            }
            put("Z")
            return at
        }
    }

    /// Parses RFC 3339 (`2026-05-14T08:00:00Z`, `…T08:00:00.123+02:00`), as gpsd and scenario files
    /// write it. Returns `nil` for anything else, including out-of-range fields.
    public init?(iso8601 text: some StringProtocol) {
        var scanner = DigitScanner(Array(text.utf8))
        guard let year = scanner.number(digits: 4), scanner.take(UInt8(ascii: "-")),
            let month = scanner.number(digits: 2), scanner.take(UInt8(ascii: "-")),
            let day = scanner.number(digits: 2),
            scanner.take(UInt8(ascii: "T")) || scanner.take(UInt8(ascii: "t")) || scanner.take(UInt8(ascii: " ")),
            let hour = scanner.number(digits: 2), scanner.take(UInt8(ascii: ":")),
            let minute = scanner.number(digits: 2), scanner.take(UInt8(ascii: ":")),
            let second = scanner.number(digits: 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= Self.daysIn(month: month, year: year),
            hour < 24, minute < 60, second < 61
        else { return nil }
        var nanos: Int64 = 0
        if scanner.take(UInt8(ascii: ".")) {
            var count = 0
            while let digit = scanner.digit() {
                if count < 9 { nanos = nanos * 10 + Int64(digit) }
                count += 1
            }
            guard count > 0 else { return nil }
            for _ in min(count, 9)..<9 { nanos *= 10 }
        }
        var offsetSeconds: Int64 = 0
        if scanner.take(UInt8(ascii: "Z")) || scanner.take(UInt8(ascii: "z")) {
        } else if let sign = scanner.sign() {
            guard let offsetHours = scanner.number(digits: 2), scanner.take(UInt8(ascii: ":")),
                let offsetMinutes = scanner.number(digits: 2), offsetHours < 24, offsetMinutes < 60
            else { return nil }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard scanner.atEnd else { return nil }
        let days = Self.days(fromCivil: year, month, day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offsetSeconds
        // Nanoseconds in Int64 cover 1677…2262: outside that, a time is not representable (and
        // from a receiver, not plausible).
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return nil }
        let (total, overflow2) = scaled.addingReportingOverflow(nanos)
        guard !overflow2 else { return nil }
        self.nanosecondsSinceEpoch = total
    }

    private static func isLeap(_ year: Int64) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's days-from-civil and civil-from-days algorithms (proleptic Gregorian).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// A cursor over ASCII bytes for the fixed-layout timestamp grammar.
private struct DigitScanner {
    let bytes: [UInt8]
    var index = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }

    mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    mutating func digit() -> Int? {
        guard index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 else { return nil }
        defer { index += 1 }
        return Int(bytes[index] - 0x30)
    }

    mutating func number(digits: Int) -> Int64? {
        var value: Int64 = 0
        for _ in 0..<digits {
            guard let digit = digit() else { return nil }
            value = value * 10 + Int64(digit)
        }
        return value
    }

    mutating func sign() -> Int64? {
        if take(UInt8(ascii: "+")) { return 1 }
        if take(UInt8(ascii: "-")) { return -1 }
        return nil
    }
}
