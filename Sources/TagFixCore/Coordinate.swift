/// A WGS-84 position: latitude and longitude in degrees. Altitude is not part of it: the verifier
/// works in the horizontal plane.
///
/// The initialiser validates: both values finite, latitude in −90…90, longitude in −180…180.
public struct Coordinate: Sendable, Hashable, CustomStringConvertible {
    public let latitude: Double
    public let longitude: Double

    /// - Throws: `CoordinateError` naming the offending value.
    public init(latitude: Double, longitude: Double) throws(CoordinateError) {
        guard latitude.isFinite else { throw .latitudeNotFinite }
        guard longitude.isFinite else { throw .longitudeNotFinite }
        guard (-90.0...90.0).contains(latitude) else { throw .latitudeOutOfRange(latitude) }
        guard (-180.0...180.0).contains(longitude) else { throw .longitudeOutOfRange(longitude) }
        self.latitude = latitude
        self.longitude = longitude
    }

    /// For values already known to be valid (constants in code and tests). Traps otherwise.
    public init(validLatitude latitude: Double, longitude: Double) {
        do {
            try self.init(latitude: latitude, longitude: longitude)
        } catch {
            preconditionFailure("invalid coordinate literal: \(error)")
        }
    }

    public var description: String {
        "\(Self.format(latitude, 7)),\(Self.format(longitude, 7))"
    }

    /// `value` rounded to `digits` decimals, without a trailing `.0`: how numbers read in messages.
    public static func format(_ value: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let text = ((value * scale).rounded() / scale).description
        // The bytes, not the characters: this runs for every number of every record.
        let utf8 = text.utf8
        guard utf8.count > 2, utf8.last == UInt8(ascii: "0"), utf8.dropLast().last == UInt8(ascii: ".") else { return text }
        return String(decoding: utf8.dropLast(2), as: UTF8.self)
    }
}

/// Why a latitude/longitude pair is not a position.
public enum CoordinateError: Error, Sendable, Hashable, CustomStringConvertible {
    case latitudeNotFinite
    case longitudeNotFinite
    case latitudeOutOfRange(Double)
    case longitudeOutOfRange(Double)

    public var description: String {
        switch self {
        case .latitudeNotFinite: "latitude is not a finite number"
        case .longitudeNotFinite: "longitude is not a finite number"
        case .latitudeOutOfRange(let value): "latitude \(value) is outside -90…90 degrees"
        case .longitudeOutOfRange(let value): "longitude \(value) is outside -180…180 degrees"
        }
    }
}

/// A circle on the ellipsoid: where a tag is expected to be.
public struct CircularRegion: Sendable, Hashable {
    /// The App Clip limit for a location-confirmation region: 500 m.
    public static let defaultMaximumRadius = 500.0

    public let center: Coordinate
    /// Radius in metres, measured along the ellipsoid (geodesic distance).
    public let radius: Double
    public let identifier: String

    /// - Parameter maximumRadius: the cap for `radius`; App Clips use 500 m.
    /// - Throws: `RegionError` when the radius is not finite, not positive, or above the cap.
    public init(
        center: Coordinate, radius: Double, identifier: String,
        maximumRadius: Double = CircularRegion.defaultMaximumRadius
    ) throws(RegionError) {
        guard radius.isFinite, radius > 0 else { throw .radiusNotPositive(radius) }
        guard radius <= maximumRadius else { throw .radiusAboveCap(radius, cap: maximumRadius) }
        self.center = center
        self.radius = radius
        self.identifier = identifier
    }
}

/// Why a region cannot be made.
public enum RegionError: Error, Sendable, Hashable, CustomStringConvertible {
    case radiusNotPositive(Double)
    case radiusAboveCap(Double, cap: Double)

    public var description: String {
        switch self {
        case .radiusNotPositive(let radius):
            "radius \(radius) m must be a finite number above 0"
        case .radiusAboveCap(let radius, let cap):
            "radius \(radius) m is above the \(Coordinate.format(cap, 1)) m cap (raise it with --max-radius if the site really needs it)"
        }
    }
}
