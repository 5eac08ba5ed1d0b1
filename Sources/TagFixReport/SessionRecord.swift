public import TagFixCore

/// One verdict of a session log, as `tagfix verify --json` / `--log` writes it (schema in
/// docs/verifier.md). Pure: decoded from a parsed JSON object.
public struct SessionRecord: Sendable, Hashable {
    public struct Region: Sendable, Hashable {
        public var id: String?
        public var name: String?
        public var center: Coordinate
        public var radius: Double
        public var source: String?
    }

    public struct Position: Sendable, Hashable {
        public var coordinate: Coordinate
        public var accuracy: Double?
        public var time: Timestamp?
    }

    public var line: Int
    public var time: Timestamp
    /// confirmed, outside, inconclusive, notRegistered, disallowed, untrusted.
    public var verdict: String
    public var reason: String?
    public var message: String
    public var uid: String?
    public var tagID: String?
    public var url: String?
    public var distance: Double?
    public var accuracy: Double?
    public var bearing: Double?
    public var region: Region?
    public var fix: Position?

    /// The tag this record is about: its id, else its UID.
    public var tagKey: String { tagID ?? region?.id ?? uid ?? "?" }

    public static let verdicts = ["confirmed", "outside", "inconclusive", "notRegistered", "disallowed", "untrusted"]

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
        tagID = try string(value, "tag_id")
        url = try string(value, "url")
        distance = try number(value, "distance_m")
        accuracy = try number(value, "accuracy_m")
        bearing = try number(value, "bearing_deg")
        if let object = value["region"], !object.isNull {
            guard let radius = try number(object, "radius_m"), radius > 0 else { throw fail("region without a positive radius_m") }
            region = Region(
                id: try string(object, "id"), name: try string(object, "name"), center: try coordinate(object, "region"), radius: radius,
                source: try string(object, "source"))
        }
        if let object = value["fix"], !object.isNull, object["lat"].map({ !$0.isNull }) == true {
            fix = Position(
                coordinate: try coordinate(object, "fix"), accuracy: try number(object, "accuracy_m"),
                time: try string(object, "time").flatMap { Timestamp(iso8601: $0) })
        }
    }
}
