import Testing

@testable import TagFixCore

@Suite("The session-log record: the encoder beside its decoder")
struct SessionRecordCodecTests {
    static let samples = Dictionary(uniqueKeysWithValues: VerdictSamples.all.map { ($0.name, $0.verdict) })

    @Test("the samples cover every verdict kind and every reason")
    func everyCase() {
        #expect(Set(VerdictSamples.all.map { VerdictSamples.case(of: $0.verdict.kind) }) == VerdictSamples.everyCase)
        #expect(Set(VerdictSamples.all.map(\.verdict.kind.name)) == Set(SessionRecord.verdicts))
    }

    @Test("encode → decode → equal: every member read back, the text a fixed point", arguments: VerdictSamples.all.map(\.name))
    func roundTrip(_ name: String) throws {
        let verdict = try #require(Self.samples[name])
        let written = SessionRecord(verdict, line: 3)
        let text = written.encoded()
        let value = try JSONValue.parse(text)
        #expect(text.hasPrefix(SessionRecord.linePrefix), "SessionLog knows a log by it")
        let read = try SessionRecord(value, line: 3)
        #expect(read.encoded() == text, "decoded and encoded again: the same bytes")
        #expect(try SessionRecord(JSONValue.parse(read.encoded()), line: 3) == read, "and the same record")

        // What was read is what was written, to the precision the log keeps.
        func near(_ a: Double?, _ b: Double?, _ tolerance: Double) -> Bool {
            switch (a, b) {
            case (nil, nil): true
            case (let a?, let b?): abs(a - b) <= tolerance
            default: false
            }
        }
        #expect(abs(read.time.nanosecondsSinceEpoch - written.time.nanosecondsSinceEpoch) < 1_000_000)
        #expect(read.verdict == verdict.kind.name)
        #expect(read.reason == verdict.kind.reasonCode)
        #expect(read.message == verdict.message)
        #expect(read.uid == verdict.scan.uid.hex)
        #expect(read.tagType == verdict.scan.tagType.rawValue)
        #expect(read.tagID == verdict.tagID)
        #expect(read.url == verdict.scan.url.map(SignedLocation.redacted))
        #expect(read.sunCounter == verdict.sun?.counter.map { Int($0) })
        #expect(read.reader == verdict.scan.readerID)
        #expect(near(read.distance, verdict.distance, 5e-4))
        #expect(near(read.accuracy, verdict.accuracy, 5e-4))
        #expect(near(read.bearing, verdict.bearing, 0.05))
        #expect(near(read.fixAge, verdict.fixAge?.seconds, 5e-4))
        #expect(read.interpolated == verdict.interpolated)
        #expect(read.region?.id == verdict.region?.identifier)
        #expect(read.region?.name == verdict.regionName)
        #expect(read.region?.source == verdict.regionSource?.rawValue)
        #expect(near(read.region?.center.latitude, verdict.region?.center.latitude, 5e-8))
        #expect(near(read.region?.center.longitude, verdict.region?.center.longitude, 5e-8))
        #expect(near(read.region?.radius, verdict.region?.radius, 5e-4))
        #expect((read.loggedFix == nil) == (verdict.fix == nil))
        if let fix = verdict.fix, let logged = read.loggedFix {
            #expect(logged.time.map { abs($0.nanosecondsSinceEpoch - fix.reportedTime.nanosecondsSinceEpoch) < 1_000_000 } == true)
            #expect(logged.mode == (fix.mode == .noFix ? "no_fix" : fix.mode == .twoD ? "2d" : "3d"))
            #expect(near(logged.coordinate?.latitude, fix.coordinate?.latitude, 5e-8))
            #expect(near(logged.coordinate?.longitude, fix.coordinate?.longitude, 5e-8))
            #expect(near(logged.accuracy, fix.horizontalAccuracy, 5e-4))
            #expect(logged.status == fix.status.name)
            #expect(logged.satellitesUsed == fix.satellitesUsed)
            #expect((read.fix != nil) == (fix.coordinate != nil), "a map plots the fixes with a position")
        }
        #expect(read.clock?.source == verdict.timeStamp?.source.rawValue)
        #expect(near(read.clock?.offset, verdict.timeStamp?.systemMinusGPS?.seconds, 5e-4))
    }

    @Test("numbers that are not finite are written as null, never NaN or inf, and read back as absent")
    func notFinite() throws {
        var verdict = VerdictSamples.measured(.confirmed, north: 1)
        verdict.distance = .nan
        verdict.accuracy = .infinity
        verdict.timeStamp = TimeStamp(source: .gps, systemMinusGPS: nil)
        let text = SessionRecord(verdict).encoded()
        #expect(text.contains(#""distance_m":null,"accuracy_m":null"#))
        let value = try JSONValue.parse(text)  // a bare NaN or inf would not parse
        for key in ["distance_m", "accuracy_m", "bearing_deg", "clock_offset_s"] { #expect(value[key]?.isNull == true, "\(key)") }
        let read = try SessionRecord(value, line: 1)
        #expect(read.distance == nil && read.accuracy == nil && read.bearing == nil)
        #expect(read.clock == SessionRecord.ClockStamp(source: "gps", offset: nil))
        #expect(read.encoded() == text)
    }

    /// Over the kinds and reasons there were at 7e9ab4d: a sample added later (a new reason)
    /// needs no golden line, only the round trip.
    @Test(
        "byte for byte the line verify --json and --log wrote before the encoder moved to the core",
        arguments: GoldenRecords.lines.keys.sorted())
    func golden(_ name: String) throws {
        let verdict = try #require(Self.samples[name])
        #expect(SessionRecord(verdict).encoded() == GoldenRecords.lines[name])
    }
}

/// Written by `VerdictFormat.json` in TagFixCLI before it moved to the core (commit 7e9ab4d).
enum GoldenRecords {
    static let lines: [String: String] = Dictionary(uniqueKeysWithValues: [
        (
            "confirmed (registry, interpolated, system clock)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"confirmed","reason":null,"message":"3.3 m ± 4.3 m from the centre, within 25 m","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":3.302,"accuracy_m":4.25,"bearing_deg":14.3,"region":{"id":"T01","name":"Pump house \"B\" – Süd","lat":53.5451235,"lon":9.9669877,"radius_m":25,"source":"registry"},"fix_age_s":0.4,"interpolated":true,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"3d","lat":53.5451522,"lon":9.967,"accuracy_m":4.25,"status":"gps","satellites_used":9},"time_source":"system","clock_offset_s":0.012}"#
        ),
        (
            "outside (URL region, GPS time before the offset was known)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"outside","reason":null,"message":"the tag is 180 m N of where it should be (± 4.3 m, radius 25 m): was it moved?","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":179.964,"accuracy_m":4.25,"bearing_deg":0.3,"region":{"id":"T01","name":null,"lat":53.5451235,"lon":9.9669877,"radius_m":25,"source":"url"},"fix_age_s":0.4,"interpolated":false,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"3d","lat":53.5467404,"lon":9.967,"accuracy_m":4.25,"status":"gps","satellites_used":9},"time_source":"gps","clock_offset_s":null}"#
        ),
        (
            "outside (GPS time, clock 3 h 12.3456 s behind)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"outside","reason":null,"message":"the tag is 240.5 m S of where it should be (± 4.3 m, radius 25 m): was it moved?","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":240.451,"accuracy_m":4.25,"bearing_deg":179.8,"region":{"id":"T01","name":"Pump house \"B\" – Süd","lat":53.5451235,"lon":9.9669877,"radius_m":25,"source":"registry"},"fix_age_s":0.4,"interpolated":true,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"3d","lat":53.542963,"lon":9.967,"accuracy_m":4.25,"status":"gps","satellites_used":9},"time_source":"gps","clock_offset_s":-10812.346}"#
        ),
        (
            "inconclusive no_fix",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"no_fix","message":"no GPS fix: move to open sky and wait for a fix, then tap again","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":0.4,"interpolated":false,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"no_fix","lat":null,"lon":null,"accuracy_m":null,"status":"gps","satellites_used":0}}"#
        ),
        (
            "inconclusive no_fix (no fix at all)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"no_fix","message":"no GPS fix: move to open sky and wait for a fix, then tap again","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "inconclusive stale_fix",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"stale_fix","message":"the nearest fix is 3.4 s from the scan (limit 2 s): wait for a fresh fix, then tap again","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":0.4,"interpolated":false,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"3d","lat":53.5451522,"lon":9.967,"accuracy_m":4.25,"status":"gps","satellites_used":9}}"#
        ),
        (
            "inconclusive poor_accuracy",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"poor_accuracy","message":"GPS accuracy ±61.5 m is worse than ±50 m: wait for a better fix, then tap again","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":2.159,"accuracy_m":61.5,"bearing_deg":22.2,"region":{"id":"T01","name":"Pump house \"B\" – Süd","lat":53.5451235,"lon":9.9669877,"radius_m":25,"source":"registry"},"fix_age_s":0.4,"interpolated":true,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"3d","lat":53.5451414,"lon":9.967,"accuracy_m":61.5,"status":"gps","satellites_used":9},"time_source":"system","clock_offset_s":0.012}"#
        ),
        (
            "inconclusive unknown_accuracy",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"unknown_accuracy","message":"the receiver reports no accuracy estimate: wait for a fix with satellites in view, then tap again","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":0.4,"interpolated":false,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"3d","lat":53.5451522,"lon":9.967,"accuracy_m":null,"status":"gps","satellites_used":9}}"#
        ),
        (
            "inconclusive simulated_fix",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"simulated_fix","message":"the fix is simulated (gpsd status 8): use a real receiver, or allow simulated fixes","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":0.4,"interpolated":false,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"3d","lat":53.5451522,"lon":9.967,"accuracy_m":4.25,"status":"simulated","satellites_used":9}}"#
        ),
        (
            "inconclusive straddles_boundary",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"straddles_boundary","message":"22 m ± 7.5 m against a radius of 25 m: the accuracy circle crosses the region's edge: wait for a better fix, then tap again","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":22.01,"accuracy_m":7.5,"bearing_deg":2.1,"region":{"id":"T01","name":"Pump house \"B\" – Süd","lat":53.5451235,"lon":9.9669877,"radius_m":25,"source":"registry"},"fix_age_s":0.4,"interpolated":true,"fix":{"time":"2026-05-14T08:00:00.523Z","mode":"3d","lat":53.5453211,"lon":9.967,"accuracy_m":7.5,"status":"gps","satellites_used":9},"time_source":"system","clock_offset_s":0.012}"#
        ),
        (
            "inconclusive invalid_tag_location",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"invalid_tag_location","message":"lat=\"5x3\" is not a decimal number: rewrite the tag's URL","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01?lat=5x3&lon=9","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "inconclusive registry_unavailable",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"registry_unavailable","message":"registry unavailable: database is locked: check the registry file","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "inconclusive gps_unavailable",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"gps_unavailable","message":"GPS unavailable: gpsd://localhost:2947: connection refused; tap again once gpsd answers","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "inconclusive read_failed",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"inconclusive","reason":"read_failed","message":"the tag could not be read (capability container says version 2.0): hold it still on the reader and tap again; if it fails again, rewrite the tag or check it with tagfix scan","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":null,"url":null,"reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "notRegistered",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"notRegistered","reason":null,"message":"no registry entry for this tag and no location in its URL: enrol it, or write its location into the URL","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"X9","url":"https://t.example/t/X9","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "disallowed confirmation_disabled",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"disallowed","reason":"confirmation_disabled","message":"location confirmation is turned off for this run","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "disallowed tag_disallowed",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"disallowed","reason":"tag_disallowed","message":"location confirmation is turned off for tag T01","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "disallowed not_physical_tag",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"disallowed","reason":"not_physical_tag","message":"the URL did not come from a physical tag","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01?x=\"\\\n","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "untrusted uid_mismatch",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"untrusted","reason":"uid_mismatch","message":"this tag's UID 04A224B2C56480 is not the enrolled 04112233445566: a copy or a replaced tag; check the tag at T01","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "untrusted signature_invalid (a key)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"untrusted","reason":"signature_invalid","message":"the tag's NXP originality signature does not verify with the NTAG21x key: not an original NXP chip, so a copy; check the tag at T01 and replace it","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "untrusted signature_invalid (no key)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"untrusted","reason":"signature_invalid","message":"the tag's NXP originality signature does not verify: not an original NXP chip, so a copy; check the tag at 04A224B2C56480 and replace it","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "untrusted signature_missing (unsupported)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"untrusted","reason":"signature_missing","message":"this chip has no NXP originality signature and genuine tags are required: replace the tag at T01 with an NTAG21x, or allow unsigned tags (--allow-unsigned-tags)","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "untrusted signature_missing (not checked)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"untrusted","reason":"signature_missing","message":"the reader gave no originality check for this tag and genuine tags are required: read it with a libnfc reader, or check the tag at T01","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
        (
            "untrusted signature_missing (absent)",
            #"{"time":"2026-05-14T08:00:00.123Z","verdict":"untrusted","reason":"signature_missing","message":"the tag gave no NXP originality signature and genuine tags are required: a copy or a blank chip; check the tag at T01","uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"T01","url":"https://t.example/t/T01","reader":"pn532_uart:/dev/ttyUSB0","distance_m":null,"accuracy_m":null,"bearing_deg":null,"region":null,"fix_age_s":null,"interpolated":false,"fix":null}"#
        ),
    ])
}
