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
        let trimmed = text.trimmingSpaces()
        if trimmed.count >= 4, trimmed.prefix(4).lowercased() == "geo:" {
            self.tagID = nil
            self.region = try Self.geoURI(
                String(trimmed.dropFirst(4)), defaultRadius: defaultRadius, maximumRadius: maximumRadius)
            return
        }
        guard let components = URLComponents(string: trimmed), components.scheme != nil else {
            throw .notAURL(text)
        }
        var parameters: [String: String] = [:]
        for item in components.queryItems ?? [] {
            let name = item.name.lowercased()
            guard ["lat", "lon", "r", "radius", "id", "tag"].contains(name) else { continue }
            guard parameters[name] == nil else { throw .duplicateParameter(name) }
            parameters[name] = item.value ?? ""
        }
        let id = parameters["id"] ?? parameters["tag"] ?? Self.lastPathComponent(components.path)
        self.tagID = id.flatMap { $0.isEmpty ? nil : $0 }

        if parameters["r"] != nil, parameters["radius"] != nil { throw .duplicateParameter("r/radius") }
        let latText = parameters["lat"], lonText = parameters["lon"]
        let radiusText = parameters["r"] ?? parameters["radius"]
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
        var seen = Set<String>()
        for parameter in parts.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pair[0].lowercased()
            guard !name.isEmpty else { throw .badGeoURI("empty parameter") }
            guard seen.insert(name).inserted else { throw .duplicateParameter(name) }
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
