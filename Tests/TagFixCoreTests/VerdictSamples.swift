@testable import TagFixCore

/// One verdict of every kind and every reason, with the fields a live run fills in (a fix, a
/// region from the registry or the URL, the clock that stamped it) and text that needs escaping.
/// `case(of:)` switches over every kind and reason without a default, so a new reason does not
/// compile until it has a sample here.
enum VerdictSamples {
    static let start = Timestamp(iso8601: "2026-05-14T08:00:00.123456789Z")!

    static func scan(url: String? = "https://t.example/t/T01", uid: String = "04A224B2C56480", at offset: Duration = .zero) -> TagScan {
        TagScan(
            readerID: "pn532_uart:/dev/ttyUSB0", uid: try! TagUID(hex: uid), tagType: .ntag213, url: url, time: start.advanced(by: offset))
    }

    static let centre = Coordinate(validLatitude: 53.545_123_456_7, longitude: 9.966_987_654_3)

    static func region(_ id: String = "T01", radius: Double = 25) -> CircularRegion {
        try! CircularRegion(center: centre, radius: radius, identifier: id)
    }

    static func fix(north: Double = 3.2, accuracy: Double? = 4.25, mode: Fix.Mode = .threeD, status: Fix.Status = .gps) -> Fix {
        Fix(
            time: start.advanced(by: .milliseconds(400)), mode: mode,
            coordinate: Coordinate(validLatitude: centre.latitude + north / 111_320, longitude: centre.longitude + 0.000_012_3),
            horizontalAccuracy: accuracy, status: status, satellitesUsed: mode == .noFix ? 0 : 9)
    }

    /// A verdict decided on a fix, as the verifier makes them.
    static func measured(
        _ kind: Verdict.Kind, north: Double, accuracy: Double = 4.25, source: RegionSource = .registry,
        name: String? = "Pump house \"B\" – Süd",
        interpolated: Bool = true, stamp: TimeStamp? = TimeStamp(source: .system, systemMinusGPS: .milliseconds(12))
    ) -> Verdict {
        let fix = fix(north: north, accuracy: accuracy)
        var verdict = Verdict(
            kind: kind, scan: scan(), tagID: "T01", region: region(), regionSource: source, regionName: name, fix: fix,
            fixAge: .milliseconds(400), interpolated: interpolated,
            distance: Geodesic.distance(from: centre, to: fix.coordinate ?? centre), accuracy: accuracy)
        verdict.timeStamp = stamp
        return verdict
    }

    /// A verdict that needed no fix (or had none that could be used).
    static func bare(_ kind: Verdict.Kind, url: String? = "https://t.example/t/T01", tagID: String? = "T01", fix: Fix? = nil) -> Verdict {
        Verdict(kind: kind, scan: scan(url: url), tagID: tagID, fix: fix, fixAge: fix.map { _ in .milliseconds(400) }, interpolated: false)
    }

    static let enrolled = try! TagUID(hex: "04112233445566")

    /// Every kind and reason, named for the test's arguments.
    static let all: [(name: String, verdict: Verdict)] = [
        ("confirmed (registry, interpolated, system clock)", measured(.confirmed, north: 3.2)),
        (
            "outside (URL region, GPS time before the offset was known)",
            measured(
                .outside, north: 180, source: .url, name: nil, interpolated: false, stamp: TimeStamp(source: .gps, systemMinusGPS: nil))
        ),
        (
            "outside (GPS time, clock 3 h 12.3456 s behind)",
            measured(.outside, north: -240.5, stamp: TimeStamp(source: .gps, systemMinusGPS: .seconds(-10_812.345_6)))
        ),
        ("inconclusive no_fix", bare(.inconclusive(.noFix), fix: fix(accuracy: nil, mode: .noFix))),
        ("inconclusive no_fix (no fix at all)", bare(.inconclusive(.noFix))),
        ("inconclusive stale_fix", bare(.inconclusive(.staleFix(age: .milliseconds(3400), limit: .seconds(2))), fix: fix())),
        ("inconclusive poor_accuracy", measured(.inconclusive(.poorAccuracy(accuracy: 61.5, limit: 50)), north: 2, accuracy: 61.5)),
        ("inconclusive unknown_accuracy", bare(.inconclusive(.unknownAccuracy), fix: fix(accuracy: nil))),
        ("inconclusive simulated_fix", bare(.inconclusive(.simulatedFix), fix: fix(status: .simulated))),
        ("inconclusive straddles_boundary", measured(.inconclusive(.straddlesBoundary), north: 22, accuracy: 7.5)),
        (
            "inconclusive invalid_tag_location",
            bare(.inconclusive(.invalidTagLocation(.notANumber(field: "lat", text: "5x3"))), url: "https://t.example/t/T01?lat=5x3&lon=9")
        ),
        ("inconclusive registry_unavailable", bare(.inconclusive(.registryUnavailable(RegistryError("database is locked"))))),
        ("inconclusive gps_unavailable", bare(.inconclusive(.gpsUnavailable("gpsd://localhost:2947: connection refused")))),
        ("inconclusive read_failed", bare(.inconclusive(.readFailed("capability container says version 2.0")), url: nil, tagID: nil)),
        ("notRegistered", bare(.notRegistered, url: "https://t.example/t/X9", tagID: "X9")),
        ("disallowed confirmation_disabled", bare(.disallowed(.confirmationDisabled))),
        ("disallowed tag_disallowed", bare(.disallowed(.tagDisallowed("T01")))),
        ("disallowed not_physical_tag", bare(.disallowed(.notPhysicalTag), url: "https://t.example/t/T01?x=\"\\\n")),
        ("untrusted uid_mismatch", bare(.untrusted(.uidMismatch(read: scan().uid, enrolled: enrolled, tagID: "T01")))),
        ("untrusted signature_invalid (a key)", bare(.untrusted(.signatureInvalid(key: "NTAG21x", tag: "T01")))),
        ("untrusted signature_invalid (no key)", bare(.untrusted(.signatureInvalid(key: nil, tag: "04A224B2C56480")))),
        ("untrusted signature_missing (unsupported)", bare(.untrusted(.signatureMissing(status: .unsupported, tag: "T01")))),
        ("untrusted signature_missing (not checked)", bare(.untrusted(.signatureMissing(status: nil, tag: "T01")))),
        ("untrusted signature_missing (absent)", bare(.untrusted(.signatureMissing(status: .absent, tag: "T01")))),
        ("inconclusive sun_unchecked", bare(.inconclusive(.sunUnchecked(tag: "T01", keyName: "site")))),
        (
            "untrusted location_unsigned",
            bare(.untrusted(.locationUnsigned(tag: "T01")), url: "https://t.example/t/T01?lat=53.5&lon=9.9&r=20")
        ),
        ("untrusted location_signature_invalid", bare(.untrusted(.locationSignatureInvalid(tag: "T01")))),
        (
            "untrusted gps_jump",
            bare(
                .untrusted(
                    .gpsJump(
                        GPSJump(
                            time: start, distance: 812.5, seconds: 1, accuracies: [3.5, nil], limit: 70, window: .seconds(30)))),
                fix: fix())
        ),
        ("untrusted gps_simulated", bare(.untrusted(.gpsSimulated), fix: fix(status: .simulated))),
        ("untrusted sun_invalid", bare(.untrusted(.sunInvalid(tag: "T01", problem: .macMismatch)))),
        ("untrusted sun_replayed", bare(.untrusted(.sunReplayed(tag: "T01", counter: 40, last: 41)))),
        ("confirmed (a SUN tag's counter)", sunConfirmed),
        ("disallowed position_denied", bare(.disallowed(.positionDenied))),
        ("untrusted sun_required", bare(.untrusted(.sunRequired(tag: "T01")))),
    ]

    /// A SUN tag's confirmed verdict: it carries the read counter it accepted.
    static var sunConfirmed: Verdict {
        var verdict = measured(.confirmed, north: 1)
        verdict.sun = SUNEvidence(uid: try! TagUID(hex: "04DE5F1EACC040"), counter: 62)
        return verdict
    }

    /// The kind and reason of `kind`, as the JSON names them; exhaustive, with no default.
    static func `case`(of kind: Verdict.Kind) -> String {
        let reason: String
        switch kind {
        case .confirmed, .outside, .notRegistered: return kind.name
        case .inconclusive(let why):
            switch why {
            case .noFix, .staleFix, .poorAccuracy, .unknownAccuracy, .simulatedFix, .straddlesBoundary, .invalidTagLocation,
                .registryUnavailable, .gpsUnavailable, .readFailed, .sunUnchecked:
                reason = why.code
            }
        case .disallowed(let why):
            switch why {
            case .confirmationDisabled, .tagDisallowed, .notPhysicalTag, .positionDenied: reason = why.code
            }
        case .untrusted(let why):
            switch why {
            case .uidMismatch, .signatureInvalid, .signatureMissing, .locationUnsigned, .locationSignatureInvalid, .gpsJump, .gpsSimulated,
                .sunInvalid, .sunReplayed, .sunRequired:
                reason = why.code
            }
        }
        return kind.name + " " + reason
    }

    /// Every kind and reason there is (docs/verifier.md's table).
    static let everyCase: Set<String> = [
        "confirmed", "outside", "notRegistered",
        "inconclusive no_fix", "inconclusive stale_fix", "inconclusive poor_accuracy", "inconclusive unknown_accuracy",
        "inconclusive simulated_fix", "inconclusive straddles_boundary", "inconclusive invalid_tag_location",
        "inconclusive registry_unavailable", "inconclusive gps_unavailable", "inconclusive read_failed",
        "disallowed confirmation_disabled", "disallowed tag_disallowed", "disallowed not_physical_tag",
        "untrusted uid_mismatch", "untrusted signature_invalid", "untrusted signature_missing",
        "inconclusive sun_unchecked", "untrusted location_unsigned", "untrusted location_signature_invalid", "untrusted gps_jump",
        "untrusted gps_simulated", "untrusted sun_invalid", "untrusted sun_replayed",
        "disallowed position_denied", "untrusted sun_required",
    ]
}
