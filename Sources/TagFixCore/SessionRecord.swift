/// One verdict of a session log, as `tagfix verify --json` / `--log` writes it (schema in
/// docs/verifier.md): the encoder (`init(_:)` from a verdict, then `encoded()`) and the decoder
/// (`init(_:line:)`) side by side, so that what is written is what is read. Pure.
public struct SessionRecord: Sendable, Hashable {
    public struct Region: Sendable, Hashable {
        public var id: String?
        public var name: String?
        public var center: Coordinate
        public var radius: Double
        /// `registry` or `url`.
        public var source: String?
    }

    /// A fix's position, when the record's fix has one (what a map plots).
    public struct Position: Sendable, Hashable {
        public var coordinate: Coordinate
        public var accuracy: Double?
        public var time: Timestamp?
    }

    /// The fix the verdict was decided on, as logged (`fix`).
    public struct LoggedFix: Sendable, Hashable {
        /// The receiver's time, as gpsd reported it.
        public var time: Timestamp?
        /// `no_fix`, `2d` or `3d`.
        public var mode: String?
        public var coordinate: Coordinate?
        public var accuracy: Double?
        /// gpsd's status name (`gps`, `dgps`, `simulated`, …).
        public var status: String?
        public var satellitesUsed: Int?
    }

    /// Which clock stamped a live run's verdict (`time_source`, `clock_offset_s`).
    public struct ClockStamp: Sendable, Hashable {
        /// `system` or `gps`.
        public var source: String
        /// The system clock minus GPS time, seconds; `nil` before GPS time was known.
        public var offset: Double?
    }

    public var line: Int
    public var time: Timestamp
    /// confirmed, outside, inconclusive, notRegistered, disallowed, untrusted.
    public var verdict: String
    public var reason: String?
    public var message: String
    public var uid: String?
    public var tagType: String?
    public var tagID: String?
    public var url: String?
    public var reader: String?
    public var distance: Double?
    public var accuracy: Double?
    public var bearing: Double?
    public var region: Region?
    /// Seconds between the scan and the nearest fix used.
    public var fixAge: Double?
    public var interpolated: Bool
    public var loggedFix: LoggedFix?
    /// Live runs only.
    public var clock: ClockStamp?
    /// A SUN tag's read counter, accepted with this verdict (never a key or a MAC).
    public var sunCounter: Int?
    /// How the tap's read went (`read`: attempts, RF errors, time), when the reader knew.
    public var read: ReadEffort?
    /// Where the scan came from when it was not a reader: `phone` (issue 34); `nil` for a
    /// reader's scan, whose records are what they always were.
    public var source: String?
    /// Who made a phone tap (`phone`: the token's name, the client's address, the user agent).
    public var phone: Phone?

    /// A phone tap's audit: what `PhoneAudit` keeps.
    public struct Phone: Sendable, Hashable {
        public var token: String?
        public var client: String?
        public var userAgent: String?

        public init(token: String?, client: String?, userAgent: String?) {
            self.token = token
            self.client = client
            self.userAgent = userAgent
        }
    }

    /// The fix's position, when the record has a fix with one.
    public var fix: Position? {
        guard let loggedFix, let coordinate = loggedFix.coordinate else { return nil }
        return Position(coordinate: coordinate, accuracy: loggedFix.accuracy, time: loggedFix.time)
    }

    /// The tag this record is about: its id, else its UID.
    public var tagKey: String { tagID ?? region?.id ?? uid ?? "?" }

    public static let verdicts = ["confirmed", "outside", "inconclusive", "notRegistered", "disallowed", "untrusted"]

    /// How every encoded record starts: `time` comes first, and `SessionLog` knows a log by it
    /// (even a lone first record torn while it was written).
    public static let linePrefix = #"{"time":""#

    // MARK: - Encoding

    /// The record of `verdict`, numbers at full precision (`encoded()` rounds them as it writes).
    public init(_ verdict: Verdict, line: Int = 0) {
        self.line = line
        time = verdict.scan.time
        self.verdict = verdict.kind.name
        reason = verdict.kind.reasonCode
        message = verdict.message
        uid = verdict.scan.uid.hex
        tagType = verdict.scan.tagType.rawValue
        tagID = verdict.tagID
        // No signature bytes in output or logs (docs/trust.md).
        url = verdict.scan.url.map(SignedLocation.redacted)
        reader = verdict.scan.readerID
        distance = verdict.distance
        accuracy = verdict.accuracy
        bearing = verdict.bearing
        region = verdict.region.map { region in
            Region(
                id: region.identifier, name: verdict.regionName, center: region.center, radius: region.radius,
                source: verdict.regionSource?.rawValue)
        }
        fixAge = verdict.fixAge?.seconds
        interpolated = verdict.interpolated
        loggedFix = verdict.fix.map { fix in
            LoggedFix(
                time: fix.reportedTime, mode: fix.mode == .noFix ? "no_fix" : fix.mode == .twoD ? "2d" : "3d", coordinate: fix.coordinate,
                accuracy: fix.horizontalAccuracy, status: fix.status.name, satellitesUsed: fix.satellitesUsed)
        }
        clock = verdict.timeStamp.map { ClockStamp(source: $0.source.rawValue, offset: $0.systemMinusGPS?.seconds) }
        sunCounter = verdict.sun?.counter.map { Int($0) }
        read = verdict.scan.readEffort
        if verdict.scan.source == .phone {
            source = ScanSource.phone.rawValue
            // A phone reads no UID: only a SUN proof gives one (`phoneVerdict` puts it in the scan).
            if verdict.scan.uid == .phoneUnknown { uid = nil }
            tagType = nil
            phone = verdict.scan.phone.map { Phone(token: $0.token, client: $0.client, userAgent: $0.userAgent) }
        }
    }

    /// The JSON Lines record, without its newline, in the documented key order: `time` first
    /// (`SessionLog` recognises a log by it), numbers rounded (distances to the millimetre,
    /// coordinates to 1e-7°, the bearing to 0.1°) and never NaN (a non-finite number is `null`).
    public func encoded() -> String {
        // Room for the whole line at once: the fixed part (keys, numbers; a phone tap's is some
        // 400 bytes) and the texts it holds, without a second allocation to grow, and no more
        // than it needs (a buffer of over a kilobyte takes glibc's slow path for large blocks:
        // 3 % of serve's CPU a tap, when every record reserved 1,024 bytes).
        var texts = message.utf8.count + (url?.utf8.count ?? 0) + (region?.name?.utf8.count ?? 0) + (region?.id?.utf8.count ?? 0)
        texts += (tagID?.utf8.count ?? 0) + (reader?.utf8.count ?? 0) + (reason?.utf8.count ?? 0)
        if let phone { texts += (phone.token?.utf8.count ?? 0) + (phone.client?.utf8.count ?? 0) + (phone.userAgent?.utf8.count ?? 0) }
        let fixed = 448 + (loggedFix == nil ? 0 : 224) + (read == nil ? 0 : 64) + (clock == nil ? 0 : 64)
        var object = JSONObjectWriter(capacity: fixed + texts + texts / 8)
        object.add("time", time.iso8601)
        object.add("verdict", verdict)
        object.add("reason", reason)
        object.add("message", message)
        object.add("uid", uid)
        object.add("tag_type", tagType)
        object.add("tag_id", tagID)
        object.add("url", url)
        object.add("reader", reader)
        object.add("distance_m", distance)
        object.add("accuracy_m", accuracy)
        object.add("bearing_deg", bearing, digits: 1)
        if let region {
            object.add("region") { r in
                r.add("id", region.id)
                r.add("name", region.name)
                r.add("lat", region.center.latitude, digits: 7)
                r.add("lon", region.center.longitude, digits: 7)
                r.add("radius_m", region.radius)
                r.add("source", region.source)
            }
        } else {
            object.add("region", raw: nil)
        }
        object.add("fix_age_s", fixAge)
        object.add("interpolated", interpolated)
        if let fix = loggedFix {
            object.add("fix") { f in
                f.add("time", fix.time?.iso8601)
                f.add("mode", fix.mode)
                f.add("lat", fix.coordinate?.latitude, digits: 7)
                f.add("lon", fix.coordinate?.longitude, digits: 7)
                f.add("accuracy_m", fix.accuracy)
                f.add("status", fix.status)
                f.add("satellites_used", fix.satellitesUsed)
            }
        } else {
            object.add("fix", raw: nil)
        }
        if let clock {
            object.add("time_source", clock.source)
            object.add("clock_offset_s", clock.offset, digits: 3)
        }
        if let sunCounter { object.add("sun_counter", sunCounter) }
        // Last, and only when the reader knew: records without it are what they always were.
        if let read {
            object.add("read") { r in
                r.add("attempts", read.attempts)
                r.add("rf_errors", read.rfErrors)
                r.add("time_ms", read.duration.seconds * 1000, digits: 1)
            }
        }
        // After it, and only for a phone's tap: a reader's records keep their bytes.
        if let source { object.add("source", source) }
        if let phone {
            object.add("phone") { p in
                p.add("token", phone.token)
                p.add("client", phone.client)
                p.add("user_agent", phone.userAgent)
            }
        }
        return object.text
    }

    // MARK: - Decoding

    /// Decodes one record.
    /// - Throws: `DataFileError` naming the line and the member at fault.
    public init(_ value: JSONValue, line: Int) throws(DataFileError) {
        func fail(_ message: String) -> DataFileError { DataFileError(line: line, message: message) }
        func string(_ object: JSONValue, _ key: String) throws(DataFileError) -> String? {
            guard let member = object[key], !member.isNull else { return nil }
            guard let text = member.string else { throw fail("\"\(key)\" must be a string, found \(member.kindName)") }
            return text
        }
        func number(_ object: JSONValue, _ key: String) throws(DataFileError) -> Double? {
            guard let member = object[key], !member.isNull else { return nil }
            guard let number = member.double, number.isFinite else { throw fail("\"\(key)\" must be a number, found \(member.kindName)") }
            return number
        }
        func integer(_ object: JSONValue, _ key: String) throws(DataFileError) -> Int? {
            guard let number = try number(object, key) else { return nil }
            guard number == number.rounded(), abs(number) < 1e15 else { throw fail("\"\(key)\" must be a whole number, found \(number)") }
            return Int(number)
        }
        func boolean(_ object: JSONValue, _ key: String) throws(DataFileError) -> Bool? {
            guard let member = object[key], !member.isNull else { return nil }
            guard let flag = member.bool else { throw fail("\"\(key)\" must be true or false, found \(member.kindName)") }
            return flag
        }
        func coordinate(_ object: JSONValue, _ what: String) throws(DataFileError) -> Coordinate {
            guard let lat = try number(object, "lat"), let lon = try number(object, "lon") else { throw fail("\(what) without lat/lon") }
            do {
                return try Coordinate(latitude: lat, longitude: lon)
            } catch {
                throw fail("\(what): \(error)")
            }
        }
        guard let timeText = try string(value, "time"), let time = Timestamp(iso8601: timeText) else {
            throw fail("a verdict without a valid \"time\" (not a tagfix session log?)")
        }
        guard let verdict = try string(value, "verdict"), Self.verdicts.contains(verdict) else {
            throw fail("\"verdict\" must be one of \(Self.verdicts.joined(separator: ", "))")
        }
        self.line = line
        self.time = time
        self.verdict = verdict
        reason = try string(value, "reason")
        message = try string(value, "message") ?? ""
        uid = try string(value, "uid")
        tagType = try string(value, "tag_type")
        tagID = try string(value, "tag_id")
        url = try string(value, "url")
        reader = try string(value, "reader")
        distance = try number(value, "distance_m")
        accuracy = try number(value, "accuracy_m")
        bearing = try number(value, "bearing_deg")
        if let object = value["region"], !object.isNull {
            guard let radius = try number(object, "radius_m"), radius > 0 else { throw fail("region without a positive radius_m") }
            region = Region(
                id: try string(object, "id"), name: try string(object, "name"), center: try coordinate(object, "region"), radius: radius,
                source: try string(object, "source"))
        }
        fixAge = try number(value, "fix_age_s")
        interpolated = try boolean(value, "interpolated") ?? false
        if let object = value["fix"], !object.isNull {
            let hasPosition = object["lat"].map { !$0.isNull } == true || object["lon"].map { !$0.isNull } == true
            loggedFix = LoggedFix(
                time: try string(object, "time").flatMap { Timestamp(iso8601: $0) }, mode: try string(object, "mode"),
                coordinate: hasPosition ? try coordinate(object, "fix") : nil, accuracy: try number(object, "accuracy_m"),
                status: try string(object, "status"), satellitesUsed: try integer(object, "satellites_used"))
        }
        if let source = try string(value, "time_source") {
            clock = ClockStamp(source: source, offset: try number(value, "clock_offset_s"))
        }
        sunCounter = try integer(value, "sun_counter")
        if let object = value["read"], !object.isNull {
            guard let attempts = try integer(object, "attempts"), attempts >= 1 else { throw fail("read without attempts of 1 or more") }
            let rfErrors = try integer(object, "rf_errors") ?? 0
            guard rfErrors >= 0 else { throw fail("read's rf_errors must not be negative") }
            let milliseconds = try number(object, "time_ms") ?? 0
            guard milliseconds >= 0, milliseconds < 1e12 else { throw fail("read's time_ms must be 0 or more") }
            read = ReadEffort(attempts: attempts, rfErrors: rfErrors, duration: .milliseconds(milliseconds), completed: true)
        }
        source = try string(value, "source")
        if let object = value["phone"], !object.isNull {
            phone = Phone(
                token: try string(object, "token"), client: try string(object, "client"), userAgent: try string(object, "user_agent"))
        }
    }
}

extension Verdict {
    /// What a person should read about the verdict: the log's `message`, and the end of the
    /// terminal's line.
    public var message: String {
        func metres(_ value: Double?) -> String { value.map { Coordinate.format($0, 1) } ?? "?" }
        let radius = region.map { "\(metres($0.radius)) m" } ?? "?"
        switch kind {
        case .confirmed:
            return "\(metres(distance)) m ± \(metres(accuracy)) m from the centre, within \(radius)"
        case .outside:
            // "12 m NE of where it should be"; without a bearing (a phone's position not kept),
            // "12 m from where it should be".
            let direction = bearing.map { " \(Geodesic.compassPoint(forAzimuth: $0)) of" } ?? " from"
            return
                "the tag is \(metres(distance)) m\(direction) where it should be (± \(metres(accuracy)) m, radius \(radius)): was it moved?"
        case .inconclusive(let reason):
            if case .straddlesBoundary = reason {
                return "\(metres(distance)) m ± \(metres(accuracy)) m against a radius of \(radius): \(reason)"
            }
            // A phone's position is stale only when its browser stamped it further from the
            // server's time than a phone's clock may be off (`PhoneTapPolicy.clockSkew`): its clock
            // is wrong, or the position is an old one. Waiting for a fresh fix, as a receiver's
            // reason says, would not help.
            if case .staleFix(let age, _) = reason, scan.source == .phone {
                return
                    "the phone's position is stamped \(metres(age.seconds)) s from the server's time: set the phone's date and time to automatic, then tap again"
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
}

/// A verdict with its session record and the record's JSON line, made once for every sink that
/// writes the record (the session log's line; `serve`'s VERDICT line, which is the same object
/// with `class` and `id` in front): a verdict is encoded once, not once per sink.
public struct RecordedVerdict: Sendable {
    public let verdict: Verdict
    public let record: SessionRecord
    /// `record.encoded()`: the session log's line, without its newline.
    public let line: String

    public init(_ verdict: Verdict) {
        self.verdict = verdict
        record = SessionRecord(verdict)
        line = record.encoded()
    }
}
