import Foundation
public import TagFixCore

/// A walked route for the NMEA emulator: the points of a GeoJSON LineString (bare, in a Feature, or
/// the first in a FeatureCollection; MultiLineString joined) or of a GPX track or route.
public struct Route: Sendable, Hashable {
    public var points: [Coordinate]
    /// Cumulative geodesic distance at each point, metres.
    public let distances: [Double]

    public init(points: [Coordinate]) throws(DataFileError) {
        guard points.count >= 2 else { throw DataFileError(line: nil, message: "a route needs at least 2 points, found \(points.count)") }
        self.points = points
        var total = 0.0
        var distances = [0.0]
        for (a, b) in zip(points, points.dropFirst()) {
            total += Geodesic.distance(from: a, to: b)
            distances.append(total)
        }
        self.distances = distances
    }

    public var length: Double { distances.last ?? 0 }

    /// Where a walker is after `metres` along the route (the last point once past the end).
    public func position(at metres: Double) -> Coordinate {
        guard metres > 0 else { return points[0] }
        guard metres < length else { return points[points.count - 1] }
        var low = 0, high = distances.count - 1
        while high - low > 1 {
            let middle = (low + high) / 2
            if distances[middle] <= metres { low = middle } else { high = middle }
        }
        let span = distances[high] - distances[low]
        let f = span > 0 ? (metres - distances[low]) / span : 0
        let a = points[low], b = points[high]
        return
            (try? Coordinate(latitude: a.latitude + (b.latitude - a.latitude) * f, longitude: a.longitude + (b.longitude - a.longitude) * f))
            ?? a
    }

    /// Reads GeoJSON or GPX, by content.
    public static func parse(_ text: String) throws(DataFileError) -> Route {
        let trimmed = text.drop { $0.isWhitespace || $0 == "\u{FEFF}" }
        if trimmed.hasPrefix("{") { return try geoJSON(text) }
        if trimmed.hasPrefix("<") { return try gpx(text) }
        throw DataFileError(line: 1, message: "a route is GeoJSON (a LineString) or GPX (a track)")
    }

    static func geoJSON(_ text: String) throws(DataFileError) -> Route {
        let root: JSONValue
        do {
            root = try JSONValue.parse(text)
        } catch {
            throw DataFileError(error)
        }
        func line(_ value: JSONValue) throws(DataFileError) -> [Coordinate]? {
            switch value["type"]?.string {
            case "LineString": return try positions(value["coordinates"], line: value.line)
            case "MultiLineString":
                var all: [Coordinate] = []
                for part in value["coordinates"]?.array ?? [] { all += try positions(part, line: part.line) }
                return all
            case "Feature": return try value["geometry"].flatMap { geometry throws(DataFileError) in try line(geometry) }
            case "FeatureCollection":
                for feature in value["features"]?.array ?? [] {
                    if let found = try line(feature) { return found }
                }
                return nil
            default: return nil
            }
        }
        guard let points = try line(root) else {
            throw DataFileError(
                line: root.line, message: "no LineString in the GeoJSON (a LineString, a Feature with one, or a FeatureCollection)")
        }
        return try Route(points: points)
    }

    /// GeoJSON positions are [longitude, latitude(, altitude)].
    static func positions(_ value: JSONValue?, line: Int) throws(DataFileError) -> [Coordinate] {
        guard let items = value?.array else { throw DataFileError(line: line, message: "\"coordinates\" must be an array of [lon, lat]") }
        var points: [Coordinate] = []
        for item in items {
            guard let pair = item.array, pair.count >= 2, let lon = pair[0].double, let lat = pair[1].double else {
                throw DataFileError(line: item.line, message: "a position is [longitude, latitude]")
            }
            do {
                points.append(try Coordinate(latitude: lat, longitude: lon))
            } catch {
                throw DataFileError(line: item.line, message: error.description)
            }
        }
        return points
    }

    /// `<trkpt lat=".." lon="..">` (or `rtept`) elements, in order.
    static func gpx(_ text: String) throws(DataFileError) -> Route {
        var points: [Coordinate] = []
        var line = 1
        var index = text.startIndex
        while index < text.endIndex {
            if text[index] == "\n" { line += 1 }
            if text[index] == "<", text[index...].hasPrefix("<trkpt") || text[index...].hasPrefix("<rtept") {
                let end = text[index...].firstIndex(of: ">") ?? text.endIndex
                let tag = String(text[index..<end])
                func attribute(_ name: String) -> Double? {
                    for quote in ["\"", "'"] {
                        guard let start = tag.range(of: " \(name)=\(quote)") else { continue }
                        let rest = tag[start.upperBound...]
                        guard let close = rest.firstIndex(of: Character(quote)) else { return nil }
                        return Double(rest[..<close])
                    }
                    return nil
                }
                guard let lat = attribute("lat"), let lon = attribute("lon") else {
                    throw DataFileError(line: line, message: "a track point needs lat and lon attributes")
                }
                do {
                    points.append(try Coordinate(latitude: lat, longitude: lon))
                } catch {
                    throw DataFileError(line: line, message: error.description)
                }
            }
            index = text.index(after: index)
        }
        guard !points.isEmpty else { throw DataFileError(line: nil, message: "no <trkpt> or <rtept> in the GPX") }
        return try Route(points: points)
    }
}
