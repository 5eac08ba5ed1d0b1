public import TagFixCore

// The body of a phone tap's POST (issue 34): what the tap page sends once the browser has
// answered for its position. Strict on purpose: the body comes from anyone who can reach the
// server, so every member is known, typed and in range, and nothing else is taken — a `source`,
// a `uid` or a `verdict` in the body is refused, never believed.

/// One phone tap as the page posts it: the URL the phone opened, and the browser's position or
/// why it has none.
///
/// ```json
/// {"url":"https://tags.example.org/t/E1","lat":53.545,"lon":9.966,"accuracy_m":12.5,"timestamp_ms":1780305243201}
/// {"url":"https://tags.example.org/t/E1","error":"denied"}
/// ```
public struct PhoneTapRequest: Sendable, Hashable {
    /// What the browser's Geolocation API answered.
    public enum Position: Sendable, Hashable {
        /// A position: the coordinate and its accuracy in metres (the API's 95 % radius).
        case fix(Coordinate, accuracy: Double)
        /// The browser gave no position (`GeolocationPositionError`).
        case unavailable(PositionError)
    }

    /// Why the browser gave no position: `GeolocationPositionError`'s three codes.
    public enum PositionError: String, Sendable, Hashable, CaseIterable {
        /// PERMISSION_DENIED: the person declined, or location is off for the browser.
        case denied
        /// POSITION_UNAVAILABLE: the phone has no position to give.
        case unavailable
        /// TIMEOUT: no position came in the time the page allowed.
        case timeout
    }

    /// The URL the phone opened (the page's `location.href`), as sent.
    public var url: String
    public var position: Position
    /// When the browser took the position (its `timestamp`), milliseconds since 1970 UTC.
    public var timestamp: Timestamp?

    public init(url: String, position: Position, timestamp: Timestamp? = nil) {
        self.url = url
        self.position = position
        self.timestamp = timestamp
    }

    /// The largest body read: a URL of `maximumURL` bytes and the numbers fit well within it.
    public static let maximumBody = 4096
    /// The longest URL taken (a SUN URL with encrypted file data is some 200 bytes).
    public static let maximumURL = 2048
    /// The worst accuracy taken as a position at all, metres: a browser that places the phone by
    /// its IP address says some kilometres; beyond this the number is not a position.
    public static let maximumAccuracy = 100_000.0

    /// The members a body may carry.
    static let members: Set<String> = ["url", "lat", "lon", "accuracy_m", "error", "timestamp_ms"]

    /// Parses a POST body.
    /// - Throws: `PhoneTapRequestError` saying which member is wrong and why.
    public init(body: some Collection<UInt8>) throws(PhoneTapRequestError) {
        guard body.count <= Self.maximumBody else { throw .tooLarge(body.count) }
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw .notJSON(error.description)
        }
        guard let members = value.members else { throw .notAnObject(value.kindName) }
        var seen: Set<String> = []
        for (key, _) in members {
            guard Self.members.contains(key) else { throw .unknownMember(Self.printable(key)) }
            guard seen.insert(key).inserted else { throw .repeatedMember(key) }
        }
        func number(_ key: String) throws(PhoneTapRequestError) -> Double? {
            guard let member = value[key] else { return nil }
            guard let number = member.double else { throw .wrongType(member: key, expected: "a number", found: member.kindName) }
            guard number.isFinite else { throw .notFinite(member: key) }
            return number
        }
        guard let urlMember = value["url"] else { throw .missingMember("url") }
        guard let url = urlMember.string else { throw .wrongType(member: "url", expected: "a string", found: urlMember.kindName) }
        guard !url.isEmpty, url.utf8.count <= Self.maximumURL else { throw .badURL("it is empty or longer than \(Self.maximumURL) bytes") }
        guard url.hasPrefix("https://") || url.hasPrefix("http://") else { throw .badURL("it is not an http(s) URL") }
        guard url.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else {
            throw .badURL("it holds spaces or control characters")
        }
        self.url = url

        if let stamp = try number("timestamp_ms") {
            // 2000-01-01 to 2100-01-01: anything else is not a browser's clock.
            guard stamp >= 946_684_800_000, stamp < 4_102_444_800_000 else { throw .outOfRange(member: "timestamp_ms", value: stamp) }
            timestamp = Timestamp(nanosecondsSinceEpoch: Int64(stamp.rounded()) * 1_000_000)
        } else {
            timestamp = nil
        }

        let lat = try number("lat")
        let lon = try number("lon")
        let accuracy = try number("accuracy_m")
        if let errorMember = value["error"] {
            guard lat == nil, lon == nil, accuracy == nil else { throw .positionAndError }
            guard let text = errorMember.string else {
                throw .wrongType(member: "error", expected: "a string", found: errorMember.kindName)
            }
            guard let error = PositionError(rawValue: text) else { throw .unknownError(Self.printable(text)) }
            position = .unavailable(error)
            return
        }
        guard let lat else { throw .missingMember("lat") }
        guard let lon else { throw .missingMember("lon") }
        guard let accuracy else { throw .missingMember("accuracy_m") }
        guard (-90...90).contains(lat) else { throw .outOfRange(member: "lat", value: lat) }
        guard (-180...180).contains(lon) else { throw .outOfRange(member: "lon", value: lon) }
        guard accuracy > 0, accuracy <= Self.maximumAccuracy else { throw .outOfRange(member: "accuracy_m", value: accuracy) }
        do {
            position = .fix(try Coordinate(latitude: lat, longitude: lon), accuracy: accuracy)
        } catch {
            throw .outOfRange(member: "lat", value: lat)
        }
    }

    /// A name or value from the body, safe to put in a message: at most 40 printable ASCII
    /// characters, anything else as `?`.
    static func printable(_ text: String) -> String {
        let cut = text.unicodeScalars.prefix(40).map { $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?" }
        return String(cut) + (text.unicodeScalars.count > 40 ? "…" : "")
    }

    /// The body the page would send for this request (the tests' and the fuzz target's round trip).
    public var body: String {
        var object = JSONObjectWriter()
        object.add("url", url)
        switch position {
        case .fix(let coordinate, let accuracy):
            object.add("lat", coordinate.latitude, digits: 7)
            object.add("lon", coordinate.longitude, digits: 7)
            object.add("accuracy_m", accuracy)
        case .unavailable(let error):
            object.add("error", error.rawValue)
        }
        if let timestamp { object.add("timestamp_ms", Int(timestamp.nanosecondsSinceEpoch / 1_000_000)) }
        return object.text
    }
}

/// Why a tap's body was refused: the page answers 400 (413 for `tooLarge`) with the description,
/// and nothing is logged.
public enum PhoneTapRequestError: Error, Sendable, Hashable, CustomStringConvertible {
    case tooLarge(Int)
    case notJSON(String)
    case notAnObject(String)
    /// A member the page never sends (`source`, `uid`, `verdict`…): refused, not ignored.
    case unknownMember(String)
    case repeatedMember(String)
    case missingMember(String)
    case wrongType(member: String, expected: String, found: String)
    case notFinite(member: String)
    case outOfRange(member: String, value: Double)
    case badURL(String)
    case unknownError(String)
    case positionAndError

    /// The HTTP status the server answers with.
    public var status: Int {
        if case .tooLarge = self { return 413 }
        return 400
    }

    public var description: String {
        switch self {
        case .tooLarge(let count):
            "the tap's body is \(count) bytes, more than \(PhoneTapRequest.maximumBody): reload the tag's page and tap again"
        case .notJSON(let why): "the tap's body is not JSON (\(why)): reload the tag's page and tap again"
        case .notAnObject(let kind): "the tap's body is \(kind), not a JSON object: reload the tag's page and tap again"
        case .unknownMember(let key):
            "the tap's body has a member \"\(key)\" the tap page never sends (it takes url, lat, lon, accuracy_m, error, timestamp_ms)"
        case .repeatedMember(let key): "the tap's body gives \"\(key)\" twice"
        case .missingMember(let key): "the tap's body has no \"\(key)\": reload the tag's page and tap again"
        case .wrongType(let member, let expected, let found): "the tap's \"\(member)\" must be \(expected), found \(found)"
        case .notFinite(let member): "the tap's \"\(member)\" is not a finite number"
        case .outOfRange(let member, let value):
            switch member {
            case "lat": "the tap's latitude \(value) is not within -90…90°"
            case "lon": "the tap's longitude \(value) is not within -180…180°"
            case "accuracy_m":
                "the tap's accuracy \(value) m is not within 0 (excluded) … \(Int(PhoneTapRequest.maximumAccuracy)) m"
            default: "the tap's timestamp \(value) ms is not a time between 2000 and 2100"
            }
        case .badURL(let why): "the tap's url is refused: \(why); open the tag's URL as the tag gives it"
        case .unknownError(let text): "the tap's error \"\(text)\" is not one of denied, unavailable, timeout"
        case .positionAndError: "the tap's body gives both a position and an error: it gives one or the other"
        }
    }
}
