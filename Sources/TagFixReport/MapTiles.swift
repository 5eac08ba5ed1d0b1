import Foundation
public import TagFixCore

/// One map tile, as a tile server names it (`{z}/{x}/{y}`, XYZ: y counted down from the north).
public struct MapTile: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var z: Int
    public var x: Int
    public var y: Int

    public init(z: Int, x: Int, y: Int) {
        self.z = z
        self.x = x
        self.y = y
    }

    public var description: String { "\(z)/\(x)/\(y)" }

    public static func < (a: MapTile, b: MapTile) -> Bool { (a.z, a.x, a.y) < (b.z, b.x, b.y) }

    /// Whether `x` and `y` are tiles of zoom `z` (0 to 2^z - 1 each) and `z` is in `zooms`.
    public static func isValid(z: Int, x: Int, y: Int, zooms: ClosedRange<Int>) -> Bool {
        guard zooms.contains(z), (0...30).contains(z) else { return false }
        let side = 1 << z
        return (0..<side).contains(x) && (0..<side).contains(y)
    }

    /// Parses a `/tiles/` path's rest, `Z/X/Y` with an optional image extension (`.png`,
    /// `.jpg`, `.webp`): decimal digits only, nothing else (no `..`, no signs, no spaces).
    public init?(path: Substring) {
        var rest = path
        for ext in [".png", ".jpg", ".jpeg", ".webp"] where rest.hasSuffix(ext) {
            rest = rest.dropLast(ext.count)
            break
        }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3,
            parts.allSatisfy({ !$0.isEmpty && $0.count <= 8 && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let z = Int(parts[0]), let x = Int(parts[1]), let y = Int(parts[2])
        else { return nil }
        self.init(z: z, x: x, y: y)
    }
}

/// A box in degrees (no box across the antimeridian).
public struct MapBounds: Sendable, Hashable {
    public var south: Double
    public var west: Double
    public var north: Double
    public var east: Double

    public init(south: Double, west: Double, north: Double, east: Double) {
        self.south = south
        self.west = west
        self.north = north
        self.east = east
    }

    /// The smallest box holding `points` (and circles of `radius` metres about them).
    public init?(_ points: [(Coordinate, Double)]) {
        guard !points.isEmpty else { return nil }
        var box = MapBounds(south: 90, west: 180, north: -90, east: -180)
        for (point, radius) in points {
            let dLat = radius / 111_132.954
            let dLon = radius / max(1, 111_412.84 * cos(point.latitude * .pi / 180))
            box.south = min(box.south, point.latitude - dLat)
            box.north = max(box.north, point.latitude + dLat)
            box.west = min(box.west, point.longitude - dLon)
            box.east = max(box.east, point.longitude + dLon)
        }
        box.south = max(-90, box.south)
        box.north = min(90, box.north)
        box.west = max(-180, box.west)
        box.east = min(180, box.east)
        self = box
    }
}

/// Web Mercator (EPSG:3857), as Leaflet and every XYZ tile server use it.
public enum WebMercator {
    public static let maximumLatitude = 85.051_128_78

    /// The world pixel of `latitude`, `longitude` at `zoom` (256 pixels a tile).
    public static func pixel(latitude: Double, longitude: Double, zoom: Int) -> (x: Double, y: Double) {
        let lat = min(maximumLatitude, max(-maximumLatitude, latitude)) * .pi / 180
        let size = 256 * pow(2, Double(zoom))
        let x = (longitude + 180) / 360 * size
        let y = (1 - log(tan(lat) + 1 / cos(lat)) / .pi) / 2 * size
        return (x, y)
    }

    /// The tiles at `zoom` that cover `box`, and `pad` tiles more on every side.
    public static func tiles(covering box: MapBounds, zoom: Int, pad: Int = 0) -> [MapTile] {
        let last = (1 << zoom) - 1
        let northWest = pixel(latitude: box.north, longitude: box.west, zoom: zoom)
        let southEast = pixel(latitude: box.south, longitude: box.east, zoom: zoom)
        let x0 = max(0, Int(northWest.x / 256) - pad), x1 = min(last, Int(southEast.x / 256) + pad)
        let y0 = max(0, Int(northWest.y / 256) - pad), y1 = min(last, Int(southEast.y / 256) + pad)
        guard x0 <= x1, y0 <= y1 else { return [] }
        var tiles: [MapTile] = []
        for x in x0...x1 { for y in y0...y1 { tiles.append(MapTile(z: zoom, x: x, y: y)) } }
        return tiles
    }

    /// The deepest zoom (0 to 22) at which `box` fits in `width` × `height` pixels.
    public static func fitZoom(_ box: MapBounds, width: Double, height: Double) -> Int {
        var zoom = 0
        for z in 0...22 {
            let a = pixel(latitude: box.north, longitude: box.west, zoom: z)
            let b = pixel(latitude: box.south, longitude: box.east, zoom: z)
            guard b.x - a.x <= width, b.y - a.y <= height else { break }
            zoom = z
        }
        return zoom
    }
}

/// Why a `--tiles` URL template cannot be used.
public struct TileTemplateError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// An XYZ tile server's URL template (`https://tile.example.org/{z}/{x}/{y}.png`): http or
/// https, a host, `{z}`, `{x}` and `{y}` once each, optionally `{s}` (a subdomain: a, b or c)
/// and `{r}` (`@2x` on a high-density screen); no other braces, no quotes, spaces or angle
/// brackets, nothing that is not printable ASCII.
public struct TileTemplate: Sendable, Hashable, CustomStringConvertible {
    public let text: String
    public var description: String { text }

    public init(_ text: String) throws(TileTemplateError) {
        func fail(_ why: String) -> TileTemplateError {
            TileTemplateError(
                message:
                    "--tiles \(text.debugDescription): \(why) (give a file.mbtiles, or a template such as https://tile.example.org/{z}/{x}/{y}.png)"
            )
        }
        guard text.count <= 2048 else { throw fail("longer than 2048 characters") }
        guard text.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) else {
            throw fail("only printable ASCII, without spaces, may be in a tile URL (percent-encode the rest)")
        }
        guard !text.contains(where: { "\"'<>\\`".contains($0) }) else {
            throw fail("quotes, backslashes and angle brackets are not allowed")
        }
        let lower = text.lowercased()
        guard lower.hasPrefix("https://") || lower.hasPrefix("http://") else { throw fail("it must start with https:// or http://") }
        var placeholders: [String] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else { throw fail("a { without its }") }
            placeholders.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        guard !rest.contains("}") else { throw fail("a } without its {") }
        for name in placeholders where !["z", "x", "y", "s", "r"].contains(name) {
            throw fail("{\(name)} is not a tile placeholder: {z}, {x}, {y}, {s} and {r} are")
        }
        for name in ["z", "x", "y"] where placeholders.filter({ $0 == name }).count != 1 {
            throw fail("it needs {\(name)} once")
        }
        let sample = text.replacing("{z}", with: "1").replacing("{x}", with: "1").replacing("{y}", with: "1")
            .replacing("{s}", with: "a").replacing("{r}", with: "")
        guard let url = URL(string: sample), let host = url.host, !host.isEmpty, url.user == nil, url.password == nil else {
            throw fail("not a URL with a host (and no user or password in it)")
        }
        self.text = text
    }

    /// Whether the template is one of OpenStreetMap's own tile servers.
    public var isOpenStreetMap: Bool {
        let sample = text.replacing("{s}", with: "a").replacing("{z}", with: "1").replacing("{x}", with: "1").replacing("{y}", with: "1")
            .replacing("{r}", with: "")
        guard let host = URL(string: sample)?.host?.lowercased() else { return false }
        return host == "openstreetmap.org" || host.hasSuffix(".openstreetmap.org")
    }

    /// OpenStreetMap's required attribution (https://www.openstreetmap.org/copyright).
    public static let openStreetMapAttribution = "© OpenStreetMap contributors"
}

/// What the map is drawn on.
public enum BaseMap: Sendable {
    /// A plain background: no tiles.
    case plain
    /// An XYZ tile server the browser reads (the network is needed).
    case server(TileTemplate, attribution: String?, maximumZoom: Int)
    /// Tiles in the page itself (from an MBTiles file): opens offline.
    case embedded(EmbeddedTiles)
    /// `tagfix serve`'s own `/tiles/{z}/{x}/{y}`, from its MBTiles file.
    case served(minimumZoom: Int, maximumZoom: Int, attribution: String?)
}

/// Tiles carried inside the report.
public struct EmbeddedTiles: Sendable {
    public var tiles: [MapTile: [UInt8]]
    /// `image/png`, `image/jpeg` or `image/webp`.
    public var mediaType: String
    /// The zooms embedded; the page does not zoom out beyond them, and scales the deepest up.
    public var zooms: ClosedRange<Int>
    public var attribution: String?

    public init(tiles: [MapTile: [UInt8]], mediaType: String, zooms: ClosedRange<Int>, attribution: String?) {
        self.tiles = tiles
        self.mediaType = mediaType
        self.zooms = zooms
        self.attribution = attribution
    }

    /// The tiles' bytes.
    public var byteCount: Int { tiles.values.reduce(0) { $0 + $1.count } }

    /// The zooms a page of `box` uses: from one out from where the site fits a phone's
    /// 320 × 400 pixels, to where it fits a wide screen's 1600 × 1000 and two deeper, within
    /// `available` (the file's zooms) and no deeper than `maximumZoom`. A `maximumZoom` shallower
    /// than all of them (a small report asked for) gives that one zoom, which the page scales up.
    public static func zooms(for box: MapBounds, available: ClosedRange<Int>, maximumZoom: Int) -> ClosedRange<Int>? {
        let low = max(available.lowerBound, min(WebMercator.fitZoom(box, width: 320, height: 400) - 1, maximumZoom))
        let high = min(available.upperBound, maximumZoom, max(low, WebMercator.fitZoom(box, width: 1600, height: 1000) + 2))
        guard low <= high else { return nil }
        return low...high
    }
}

extension EmbeddedTiles {
    /// The most tiles a report embeds, whatever `--max-zoom` allows (about 4096 × 10–40 KiB).
    public static let tileLimit = 4096

    /// The tiles a report of `box` embeds: at each of `zooms(for:available:maximumZoom:)`, those
    /// that cover the box and two more on every side (the page's margins), shallow zooms first,
    /// stopping before a zoom that would pass `limit` tiles.
    /// - Returns: the zooms kept and their tiles, or `nil` when no zoom is in range.
    public static func wanted(for box: MapBounds, available: ClosedRange<Int>, maximumZoom: Int, limit: Int = tileLimit)
        -> (zooms: ClosedRange<Int>, tiles: [MapTile], cut: Bool)?
    {
        guard let zooms = zooms(for: box, available: available, maximumZoom: maximumZoom) else { return nil }
        var tiles: [MapTile] = []
        var deepest: Int?
        for zoom in zooms {
            let more = WebMercator.tiles(covering: box, zoom: zoom, pad: 2)
            guard tiles.count + more.count <= limit else { break }
            tiles += more
            deepest = zoom
        }
        guard let deepest else { return nil }
        return (zooms.lowerBound...deepest, tiles, deepest < zooms.upperBound)
    }
}
