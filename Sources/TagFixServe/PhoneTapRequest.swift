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
    /// The best accuracy taken, metres: no phone knows where it is to within a centimetre, and a
    /// smaller number (5e-324, a subnormal one) is a forged body's or a broken browser's, which
    /// the log would show as 0.
    public static let minimumAccuracy = 0.01

    /// Parses a POST body.
    ///
    /// A body as the page sends it (the six members at most, once each, strings without escapes,
    /// numbers) is read straight from its bytes (`Fields.plain`); anything else (an escape, a
    /// member of another type or name, a repeat, a syntax error) is read by the strict JSON
    /// reader, which says what is wrong. Both give the same `Fields`, checked by one `init`.
    /// - Throws: `PhoneTapRequestError` saying which member is wrong and why.
    public init(body: some Collection<UInt8>) throws(PhoneTapRequestError) {
        guard body.count <= Self.maximumBody else { throw .tooLarge(body.count) }
        let plain = body.withContiguousStorageIfAvailable { Fields.plain($0) } ?? Array(body).withUnsafeBufferPointer { Fields.plain($0) }
        if let plain {
            try self.init(fields: plain)
        } else {
            try self.init(fields: try Fields.parsed(body))
        }
    }

    /// The members of a body, each as its JSON kind.
    struct Fields: Equatable {
        enum Member: Equatable {
            case string(String)
            case number(Double)
            /// Any other kind, by its name for the message ("an object", "null"…).
            case other(String)

            var kindName: String {
                switch self {
                case .string: "a string"
                case .number: "a number"
                case .other(let name): name
                }
            }
        }

        var url: Member?
        var lat: Member?
        var lon: Member?
        var accuracy: Member?
        var error: Member?
        var timestamp: Member?

        /// The six names a body may carry.
        fileprivate enum Name {
            case url, lat, lon, accuracy, error, timestamp

            /// The name `key` spells, if it is one of the six (compared byte for byte).
            init?(_ key: String) {
                var key = key
                guard let name = key.withUTF8({ Name($0) }) else { return nil }
                self = name
            }

            /// The name `key`'s bytes spell, if it is one of the six.
            init?(_ key: UnsafeBufferPointer<UInt8>) {
                func spells(_ name: StaticString) -> Bool {
                    guard name.utf8CodeUnitCount == key.count else { return false }
                    for offset in 0..<key.count where name.utf8Start[offset] != key[offset] { return false }
                    return true
                }
                switch key.count {
                case 3 where spells("url"): self = .url
                case 3 where spells("lat"): self = .lat
                case 3 where spells("lon"): self = .lon
                case 5 where spells("error"): self = .error
                case 10 where spells("accuracy_m"): self = .accuracy
                case 12 where spells("timestamp_ms"): self = .timestamp
                default: return nil
                }
            }
        }

        /// Sets the member `name` unless it was set (a repeat): whether it was set.
        fileprivate mutating func set(_ name: Name, _ member: Member) -> Bool {
            func set(_ field: inout Member?) -> Bool {
                guard field == nil else { return false }
                field = member
                return true
            }
            switch name {
            case .url: return set(&url)
            case .lat: return set(&lat)
            case .lon: return set(&lon)
            case .accuracy: return set(&accuracy)
            case .error: return set(&error)
            case .timestamp: return set(&timestamp)
            }
        }

        /// A body read by the strict JSON reader; names it does not take are refused here.
        static func parsed(_ body: some Collection<UInt8>) throws(PhoneTapRequestError) -> Fields {
            let value: JSONValue
            do {
                value = try JSONValue.parse(body)
            } catch {
                throw .notJSON(error.description)
            }
            guard let members = value.members else { throw .notAnObject(value.kindName) }
            var fields = Fields()
            for (key, value) in members {
                guard let name = Name(key) else { throw .unknownMember(PhoneTapRequest.printable(key)) }
                let member: Member =
                    if let text = value.string { .string(text) } else if let number = value.double { .number(number) } else {
                        .other(value.kindName)
                    }
                guard fields.set(name, member) else { throw .repeatedMember(key) }
            }
            return fields
        }

        /// A body as the page sends it, read from its bytes; nil for anything else (the strict
        /// reader then reads it, and refuses it if it must). What it gives is what `parsed` gives.
        static func plain(_ bytes: UnsafeBufferPointer<UInt8>) -> Fields? {
            var index = 0
            let end = bytes.count
            func skipWhitespace() {
                while index < end, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D {
                    index += 1
                }
            }
            /// A string with no escape or control character, as valid UTF-8, after its opening quote.
            func string() -> String? {
                let start = index
                while index < end, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                    index += 1
                }
                guard index < end, bytes[index] == UInt8(ascii: "\"") else { return nil }
                defer { index += 1 }
                return String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            }
            /// A number by the strict reader's grammar (`JSONValue.scanNumber`), read as it reads it.
            func number() -> Double? {
                let (numberEnd, fault) = JSONValue.scanNumber(bytes, from: index)
                guard fault == nil else { return nil }
                defer { index = numberEnd }
                guard let value = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<numberEnd]), as: UTF8.self)),
                    value.isFinite
                else { return nil }
                return value
            }

            var fields = Fields()
            skipWhitespace()
            guard index < end, bytes[index] == UInt8(ascii: "{") else { return nil }
            index += 1
            while true {
                skipWhitespace()
                guard index < end, bytes[index] == UInt8(ascii: "\"") else { return nil }
                index += 1
                let keyStart = index
                while index < end, bytes[index] > 0x20, bytes[index] < 0x7F, bytes[index] != UInt8(ascii: "\""),
                    bytes[index] != UInt8(ascii: "\\")
                {
                    index += 1
                }
                guard index < end, bytes[index] == UInt8(ascii: "\""), index > keyStart,
                    let name = Name(UnsafeBufferPointer(rebasing: bytes[keyStart..<index]))
                else { return nil }
                index += 1
                skipWhitespace()
                guard index < end, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                skipWhitespace()
                guard index < end else { return nil }
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    index += 1
                    guard let text = string(), fields.set(name, .string(text)) else { return nil }
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    guard let value = number(), fields.set(name, .number(value)) else { return nil }
                default:
                    return nil
                }
                skipWhitespace()
                guard index < end else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { return nil }
                index += 1
                skipWhitespace()
                return index == end ? fields : nil
            }
        }
    }

    /// A request from its members, each checked in turn.
    init(fields: Fields) throws(PhoneTapRequestError) {
        func number(_ member: Fields.Member?, _ key: String) throws(PhoneTapRequestError) -> Double? {
            guard let member else { return nil }
            guard case .number(let number) = member else { throw .wrongType(member: key, expected: "a number", found: member.kindName) }
            guard number.isFinite else { throw .notFinite(member: key) }
            return number
        }
        guard let urlMember = fields.url else { throw .missingMember("url") }
        guard case .string(let url) = urlMember else {
            throw .wrongType(member: "url", expected: "a string", found: urlMember.kindName)
        }
        guard !url.isEmpty, url.utf8.count <= Self.maximumURL else { throw .badURL("it is empty or longer than \(Self.maximumURL) bytes") }
        guard url.hasPrefix("https://") || url.hasPrefix("http://") else { throw .badURL("it is not an http(s) URL") }
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw .badURL("it holds spaces or control characters")
        }
        self.url = url

        if let stamp = try number(fields.timestamp, "timestamp_ms") {
            // 2000-01-01 to 2100-01-01: anything else is not a browser's clock.
            guard stamp >= 946_684_800_000, stamp < 4_102_444_800_000 else { throw .outOfRange(member: "timestamp_ms", value: stamp) }
            timestamp = Timestamp(nanosecondsSinceEpoch: Int64(stamp.rounded()) * 1_000_000)
        } else {
            timestamp = nil
        }

        let lat = try number(fields.lat, "lat")
        let lon = try number(fields.lon, "lon")
        let accuracy = try number(fields.accuracy, "accuracy_m")
        if let errorMember = fields.error {
            guard lat == nil, lon == nil, accuracy == nil else { throw .positionAndError }
            guard case .string(let text) = errorMember else {
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
        guard accuracy >= Self.minimumAccuracy, accuracy <= Self.maximumAccuracy else {
            throw .outOfRange(member: "accuracy_m", value: accuracy)
        }
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
                "the tap's accuracy \(value) m is not within \(PhoneTapRequest.minimumAccuracy) … \(Int(PhoneTapRequest.maximumAccuracy)) m"
            default: "the tap's timestamp \(value) ms is not a time between 2000 and 2100"
            }
        case .badURL(let why): "the tap's url is refused: \(why); open the tag's URL as the tag gives it"
        case .unknownError(let text): "the tap's error \"\(text)\" is not one of denied, unavailable, timeout"
        case .positionAndError: "the tap's body gives both a position and an error: it gives one or the other"
        }
    }
}
