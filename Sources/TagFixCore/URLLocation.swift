import Foundation

/// What a tag's URL says about where the tag is and which tag it is.
///
/// Two encodings are understood:
/// - query parameters: `https://example.org/t/A17?lat=52.52&lon=13.405&r=25` (`radius` is accepted
///   for `r`);
/// - an RFC 5870 `geo:` URI: `geo:52.52,13.405;u=25` (only `crs=wgs84`; `u` is the radius).
///
/// The tag identifier is the `id` (or `tag`) query parameter, else the URL's last path component.
public struct URLLocation: Sendable, Hashable {
    /// The identifier the registry is searched for, if the URL names one.
    public var tagID: String?
    /// The region the URL encodes, if any.
    public var region: CircularRegion?
    /// The `sig` parameter's value, when the URL carries one (`SignedLocation`).
    public var signature: String?

    /// Decodes `text`. A URL with no location gives `region == nil`; a URL whose location is
    /// malformed (one of lat/lon missing, out of range, a bad radius, another CRS) throws, so a
    /// broken tag is reported instead of being treated as unregistered.
    ///
    /// - Parameters:
    ///   - defaultRadius: the radius for a location that gives none; `nil` makes that an error.
    ///   - maximumRadius: the cap for the radius (App Clips: 500 m).
    public init(
        url text: String, defaultRadius: Double? = nil,
        maximumRadius: Double = CircularRegion.defaultMaximumRadius
    ) throws(URLLocationError) {
        try self.init(url: text, defaultRadius: defaultRadius, maximumRadius: maximumRadius, viaURLComponents: false)
    }

    /// `viaURLComponents` skips the byte-level reader of plain http(s) URLs (tests compare the two).
    init(url text: String, defaultRadius: Double?, maximumRadius: Double, viaURLComponents: Bool) throws(URLLocationError) {
        // The common case first, straight from the text's bytes (a plain http(s) URL needs no
        // trimming and is no geo: URI): each String operation skipped is a retain and a release.
        if !viaURLComponents, let parsed = text.utf8.withContiguousStorageIfAvailable({ Self.plainHTTP($0) }), let (last, items) = parsed {
            // No query (a registry tag's URL names only the tag): nothing more to read.
            guard !items.isEmpty else {
                self.init(tagID: last, region: nil)
                return
            }
            var parameters = Parameters()
            for (name, value) in items { try parameters.set(name, value) }
            try self.init(
                parameters: parameters, lastPathComponent: last, text: text, defaultRadius: defaultRadius, maximumRadius: maximumRadius)
            return
        }
        let trimmed =
            text.utf8.first == 0x20 || text.utf8.last == 0x20 || text.utf8.first == 0x09 || text.utf8.last == 0x09
            ? text.trimmingSpaces() : text
        if Self.isGeoURI(trimmed) {
            self.init(
                tagID: nil,
                region: try Self.geoURI(String(trimmed.dropFirst(4)), defaultRadius: defaultRadius, maximumRadius: maximumRadius))
            return
        }
        var parameters = Parameters()
        let id: String?
        if !viaURLComponents, let plain = try Self.plainHTTP(trimmed, into: &parameters) {
            id = plain
        } else {
            guard let components = URLComponents(string: trimmed), components.scheme != nil else {
                throw .notAURL(text)
            }
            for item in components.queryItems ?? [] { try parameters.set(item.name.lowercased(), item.value ?? "") }
            id = Self.lastPathComponent(components.path)
        }
        try self.init(
            parameters: parameters, lastPathComponent: id, text: trimmed, defaultRadius: defaultRadius, maximumRadius: maximumRadius)
    }

    private init(tagID: String?, region: CircularRegion?) {
        self.tagID = tagID
        self.region = region
    }

    /// The tag id and region from a URL's parameters and path, however they were read.
    private init(
        parameters: Parameters, lastPathComponent id: String?, text trimmed: String, defaultRadius: Double?, maximumRadius: Double
    ) throws(URLLocationError) {
        self.tagID = (parameters.id ?? parameters.tag ?? id).flatMap { $0.isEmpty ? nil : $0 }
        self.signature = parameters.sig

        if parameters.r != nil, parameters.radius != nil { throw .duplicateParameter("r/radius") }
        let latText = parameters.lat, lonText = parameters.lon
        let radiusText = parameters.r ?? parameters.radius
        guard latText != nil || lonText != nil || radiusText != nil else {
            self.region = nil
            return
        }
        guard let latText else { throw .incomplete(missing: "lat") }
        guard let lonText else { throw .incomplete(missing: "lon") }
        let latitude = try Self.decimal(latText, field: "lat")
        let longitude = try Self.decimal(lonText, field: "lon")
        let radius: Double
        if let radiusText {
            radius = try Self.decimal(radiusText, field: "r")
        } else if let defaultRadius {
            radius = defaultRadius
        } else {
            throw .missingRadius
        }
        self.region = try Self.region(
            latitude: latitude, longitude: longitude, radius: radius, identifier: tagID ?? trimmed,
            maximumRadius: maximumRadius)
    }

    /// Whether `text` starts with "geo:" in any case (without making a lowercased copy).
    private static func isGeoURI(_ text: String) -> Bool {
        var bytes = text.utf8.makeIterator()
        for expected in "geo".utf8 {
            guard let b = bytes.next(), b | 0x20 == expected else { return false }
        }
        return bytes.next() == UInt8(ascii: ":")
    }

    /// The query parameters TagFix reads, each at most once.
    struct Parameters {
        // Six stored fields, not a dictionary: no allocation for a URL without a query.
        private(set) var lat, lon, r, radius, id, tag, sig: String?
        static let names = ["lat", "lon", "r", "radius", "id", "tag", "sig"]

        mutating func set(_ name: String, _ value: String) throws(URLLocationError) {
            func store(_ slot: inout String?) throws(URLLocationError) {
                guard slot == nil else { throw .duplicateParameter(name) }
                slot = value
            }
            switch name {
            case "lat": try store(&lat)
            case "lon": try store(&lon)
            case "r": try store(&r)
            case "radius": try store(&radius)
            case "id": try store(&id)
            case "tag": try store(&tag)
            case "sig": try store(&sig)
            default: return
            }
        }
    }

    /// The common tag URL, read byte by byte: `http(s)://host[:port]/path[?query][#fragment]` in
    /// plain ASCII, with no percent-escapes and nothing URLComponents would treat specially (user
    /// info, IP literals). Gives the last path component and fills `parameters`, exactly as the
    /// URLComponents path does for such URLs (a test holds the two to the same answers); `nil`
    /// hands anything else to URLComponents.
    static func plainHTTP(_ text: String, into parameters: inout Parameters) throws(URLLocationError) -> String?? {
        guard let parsed = text.utf8.withContiguousStorageIfAvailable({ plainHTTP($0) }), let (last, items) = parsed else { return nil }
        for (name, value) in items { try parameters.set(name, value) }
        return .some(last)
    }

    /// An ASCII capital letter in lower case; every other byte as it is.
    private static func asciiLowercased(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

    /// Checks that `bytes` are a plain http(s) URL (above) and finds its last non-empty path
    /// segment, up to any "?", and where its query starts, if it has one.
    private static func scanPlainHTTP(_ bytes: UnsafeBufferPointer<UInt8>) -> (last: Range<Int>?, queryStart: Int?)? {
        // Scheme: http:// or https://, any case. OR-ing 0x20 into a byte gives "h" only from "H"
        // and "h" (likewise "t", "p" and "s"), so one 32-bit compare checks "http".
        guard bytes.count > 8,
            UInt32(littleEndian: UnsafeRawBufferPointer(bytes).loadUnaligned(as: UInt32.self)) | 0x2020_2020 == 0x7074_7468
        else { return nil }
        var i = 4
        if bytes[i] | 0x20 == UInt8(ascii: "s") { i += 1 }
        guard i + 3 <= bytes.count, bytes[i] == 0x3A, bytes[i + 1] == 0x2F, bytes[i + 2] == 0x2F else { return nil }
        i += 3
        return plainURLByteClasses.withUnsafeBufferPointer { classes -> (last: Range<Int>?, queryStart: Int?)? in
            // Four bytes a step while they are all ordinary, then byte by byte; the index is the
            // closure's own, so it stays in a register.
            let count = bytes.count
            var i = i
            func classOf(_ k: Int) -> UInt8 { classes[Int(bytes[k])] }
            // Host [":" port]: letters, digits, "-" and ".", then at most one ":" and only digits;
            // at least one byte before the colon. The byte that ends it is "/", "?", "#" or the end.
            let hostStart = i
            while i + 4 <= count, classOf(i) & classOf(i + 1) & classOf(i + 2) & classOf(i + 3) & PlainURLByte.host != 0 { i += 4 }
            while i < count, classOf(i) & PlainURLByte.host != 0 { i += 1 }
            if i < count, bytes[i] == 0x3A {
                guard i > hostStart else { return nil }
                i += 1
                while i < count, bytes[i] &- 0x30 < 10 { i += 1 }
            }
            guard i > hostStart, i == count || bytes[i] == 0x2F || bytes[i] == 0x3F || bytes[i] == 0x23 else { return nil }
            // Everything else: printable ASCII without "%", spaces, quotes, backslashes or braces,
            // which URLComponents escapes or rejects, and without "#": a fragment is left to
            // URLComponents (rare on tags, and it has rules of its own). The path first, to its
            // last non-empty segment, up to any "?"; then the query.
            var segmentStart = i, lastStart = i, lastEnd = i
            var queryStart: Int?
            path: while true {
                while i + 4 <= count, (classOf(i) | classOf(i + 1) | classOf(i + 2) | classOf(i + 3)) & PlainURLByte.pathStop == 0 {
                    i += 4
                }
                while i < count, classOf(i) & PlainURLByte.pathStop == 0 { i += 1 }
                guard i < count else { break }
                // A separator, or a byte the fast path does not take.
                guard classOf(i) & PlainURLByte.allowed != 0 else { return nil }
                if i > segmentStart { (lastStart, lastEnd) = (segmentStart, i) }
                segmentStart = i + 1
                if bytes[i] == 0x3F {
                    queryStart = i
                    i += 1
                    break path
                }
                i += 1
            }
            if queryStart == nil, count > segmentStart { (lastStart, lastEnd) = (segmentStart, count) }
            while i < count {
                guard classOf(i) & PlainURLByte.allowed != 0 else { return nil }
                i += 1
            }
            return (lastStart < lastEnd ? lastStart..<lastEnd : nil, queryStart)
        }
    }

    /// The last path segment of a plain http(s) URL that has no query: a registry tag's URL
    /// (`https://tags.example.org/t/A17`), whose tag id is that segment and which carries no
    /// location. `nil` for any other URL, which `init(url:)` reads. Lets the verifier look the id
    /// up from the URL's own bytes, with no `String` built and no `URLLocation`.
    static func plainTagID(_ bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        guard let (last, queryStart) = scanPlainHTTP(bytes), queryStart == nil else { return nil }
        return last
    }

    private static func plainHTTP(_ bytes: UnsafeBufferPointer<UInt8>) -> (last: String?, items: [(String, String)])? {
        guard let (lastRange, queryStart) = scanPlainHTTP(bytes) else { return nil }
        func string(_ range: Range<Int>) -> String { String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) }
        let last = lastRange.map(string)
        var i = queryStart ?? bytes.count
        // Query: items split at "&", name and value at the first "=".
        var items: [(String, String)] = []
        if i < bytes.count, bytes[i] == 0x3F {
            i += 1
            let queryEnd = bytes.count
            while i <= queryEnd {
                var itemEnd = i
                while itemEnd < queryEnd, bytes[itemEnd] != 0x26 { itemEnd += 1 }
                let equals = bytes[i..<itemEnd].firstIndex(of: 0x3D)
                let nameEnd = equals ?? itemEnd
                if nameEnd - i <= 6 {
                    var name = ""
                    for k in i..<nameEnd { name.unicodeScalars.append(Unicode.Scalar(asciiLowercased(bytes[k]))) }
                    if Parameters.names.contains(name) { items.append((name, equals.map { string(($0 + 1)..<itemEnd) } ?? "")) }
                }
                i = itemEnd + 1
            }
        }
        return (last, items)
    }

    private static func lastPathComponent(_ path: String) -> String? {
        path.split(separator: "/").last.map(String.init)?.removingPercentEncoding
    }

    /// RFC 5870: `geo-path = coordinates *( ";" param )`, `coordinates = num "," num [ "," num ]`.
    private static func geoURI(
        _ body: String, defaultRadius: Double?, maximumRadius: Double
    ) throws(URLLocationError) -> CircularRegion {
        let withoutQuery = body.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let parts = withoutQuery.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
        let numbers = parts[0].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard numbers.count == 2 || numbers.count == 3 else { throw .badGeoURI("expected lat,lon[,alt]") }
        let latitude = try decimal(numbers[0], field: "geo latitude")
        var longitude = try decimal(numbers[1], field: "geo longitude")
        if numbers.count == 3 { _ = try decimal(numbers[2], field: "geo altitude") }
        var radius: Double?
        var seen = Set<ExactID>()  // by bytes: two names Unicode calls equivalent are two names
        for parameter in parts.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pair[0].lowercased()
            guard !name.isEmpty else { throw .badGeoURI("empty parameter") }
            guard seen.insert(ExactID(name)).inserted else { throw .duplicateParameter(name) }
            let value = pair.count == 2 ? String(pair[1]) : ""
            switch name {
            case "crs":
                guard value.lowercased() == "wgs84" else { throw .unsupportedCRS(value) }
            case "u":
                radius = try decimal(value, field: "u")
            default:
                continue  // other parameters do not change the position
            }
        }
        // RFC 5870 §3.4.2: at the poles the longitude is meaningless.
        if abs(latitude) == 90 { longitude = 0 }
        guard let chosen = radius ?? defaultRadius else { throw .missingRadius }
        return try region(
            latitude: latitude, longitude: longitude, radius: chosen, identifier: "geo:" + body,
            maximumRadius: maximumRadius)
    }

    private static func region(
        latitude: Double, longitude: Double, radius: Double, identifier: String, maximumRadius: Double
    ) throws(URLLocationError) -> CircularRegion {
        let center: Coordinate
        do {
            center = try Coordinate(latitude: latitude, longitude: longitude)
        } catch {
            throw .badCoordinate(error)
        }
        do {
            return try CircularRegion(center: center, radius: radius, identifier: identifier, maximumRadius: maximumRadius)
        } catch {
            throw .badRadius(error)
        }
    }

    /// A plain decimal number: optional sign, digits, optional fraction. No exponents, hex, `nan`
    /// or `inf`, which `Double(_:)` would accept.
    static func decimal(_ text: String, field: String) throws(URLLocationError) -> Double {
        guard let value = strictDecimal(text) else { throw .notANumber(field: field, text: text) }
        return value
    }
}

/// The classes of each byte value for the plain http(s) URL reader, one table lookup a byte.
enum PlainURLByte {
    /// A host byte: a letter, a digit, "-" or ".".
    static let host: UInt8 = 1
    /// Allowed after the host: printable ASCII except space, `"`, `#`, `%`, `<`, `>`, `\`, `^`,
    /// `` ` ``, `{`, `|` and `}`.
    static let allowed: UInt8 = 2
    /// Stops the path's fast loop: "/" or "?", which end a path segment, or a byte that is not
    /// `allowed`.
    static let pathStop: UInt8 = 4
}

let plainURLByteClasses: [UInt8] = (0...255).map { (b: Int) -> UInt8 in
    // One bit per byte value below 64, and from 64 to 127.
    let host: (UInt64, UInt64) = (0x03ff_6000_0000_0000, 0x07ff_fffe_07ff_fffe)
    let allowed: (UInt64, UInt64) = (0xafff_ffd2_0000_0000, 0x47ff_fffe_87ff_ffff)
    func has(_ set: (UInt64, UInt64)) -> Bool { b < 128 && (b < 64 ? set.0 : set.1) >> UInt64(b & 63) & 1 == 1 }
    return (has(host) ? PlainURLByte.host : 0) | (has(allowed) ? PlainURLByte.allowed : 0)
        | (b == 0x2F || b == 0x3F || !has(allowed) ? PlainURLByte.pathStop : 0)
}

/// Parses `[+-]digits[.digits]` (or `.digits`) exactly; `nil` for anything else.
func strictDecimal(_ text: String) -> Double? {
    let bytes = Array(text.utf8)
    var i = 0
    if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
    var digits = 0
    while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
        i += 1
        digits += 1
    }
    if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
        i += 1
        while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
            i += 1
            digits += 1
        }
    }
    guard digits > 0, i == bytes.count, bytes.count <= 64 else { return nil }
    return Double(text)
}

/// Why a URL's location cannot be used.
public enum URLLocationError: Error, Sendable, Hashable, CustomStringConvertible {
    case notAURL(String)
    case incomplete(missing: String)
    case missingRadius
    case notANumber(field: String, text: String)
    case duplicateParameter(String)
    case badCoordinate(CoordinateError)
    case badRadius(RegionError)
    case badGeoURI(String)
    case unsupportedCRS(String)

    public var description: String {
        switch self {
        case .notAURL(let text): "\"\(text)\" is not a URL"
        case .incomplete(let missing): "the URL's location has no \(missing)= parameter"
        case .missingRadius: "the URL's location gives no radius (add r=METRES, or u=METRES in a geo: URI)"
        case .notANumber(let field, let text): "\(field)=\"\(text)\" is not a decimal number"
        case .duplicateParameter(let name): "the URL gives \(name) more than once"
        case .badCoordinate(let error): "the URL's location is invalid: \(error)"
        case .badRadius(let error): "the URL's location is invalid: \(error)"
        case .badGeoURI(let detail): "malformed geo: URI (\(detail))"
        case .unsupportedCRS(let crs): "geo: URI uses crs=\(crs); only wgs84 is supported"
        }
    }
}
