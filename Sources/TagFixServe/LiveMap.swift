public import TagFixReport

/// A source of map tiles `tagfix serve` answers `/tiles/{z}/{x}/{y}` from (the CLI gives it an
/// MBTiles file). Called on the server's thread: a short local read, never the network.
public protocol TileSource: Sendable {
    /// The zooms it has tiles at; any other is refused before it is asked.
    var zooms: ClosedRange<Int> { get }
    /// `image/png`, `image/jpeg` or `image/webp`.
    var mediaType: String { get }
    /// The base map's credit, shown on the page.
    var attribution: String? { get }
    /// The tile at `z/x/y` (XYZ), `nil` when it has none there.
    func tileData(z: Int, x: Int, y: Int) throws -> [UInt8]?
}

/// The live page's map: Leaflet (served from memory under `/leaflet/`) and its base map.
public struct LiveMap: Sendable {
    public enum Tiles: Sendable {
        /// A tile server the browser reads.
        case server(TileTemplate, attribution: String?)
        /// `/tiles/{z}/{x}/{y}` from the source.
        case source(any TileSource)
    }

    /// `nil`: Leaflet is not installed, and the page draws the plain SVG map.
    public var leaflet: Leaflet?
    public var tiles: Tiles?

    public init(leaflet: Leaflet? = nil, tiles: Tiles? = nil) {
        self.leaflet = leaflet
        self.tiles = tiles
    }

    /// What the page's map is drawn on.
    public var base: BaseMap {
        switch tiles {
        case nil: .plain
        case .server(let template, let attribution): .server(template, attribution: attribution, maximumZoom: 19)
        case .source(let source):
            .served(minimumZoom: source.zooms.lowerBound, maximumZoom: source.zooms.upperBound, attribution: source.attribution)
        }
    }

    /// The answer to `/leaflet/…` and `/tiles/…`, or `nil` for any other path. Leaflet's files
    /// come from memory (read once at start); a tile only from the tile source, after its path
    /// is checked: `Z/X/Y` in decimal, `Z` among the source's zooms, `X` and `Y` from 0 to 2^Z - 1.
    public func respond(to path: String) -> HTTPResponse? {
        if path.hasPrefix("/leaflet/") {
            guard let leaflet else {
                return HTTPResponse(status: 404, body: "Leaflet is not installed on this server: apt-get install libjs-leaflet\n")
            }
            let name = path.dropFirst("/leaflet/".count)
            switch name {
            case "leaflet.js": return HTTPResponse(status: 200, contentType: "text/javascript; charset=utf-8", body: leaflet.javascript)
            case "leaflet.css": return HTTPResponse(status: 200, contentType: "text/css; charset=utf-8", body: leaflet.css)
            default:
                if name.hasPrefix("images/"), let bytes = leaflet.images[String(name.dropFirst("images/".count))] {
                    return HTTPResponse(status: 200, contentType: "image/png", bytes: bytes)
                }
                return HTTPResponse(
                    status: 404, body: "no such file of Leaflet's: /leaflet/leaflet.js, /leaflet/leaflet.css, /leaflet/images/…\n")
            }
        }
        guard path.hasPrefix("/tiles/") else { return nil }
        guard case .source(let source) = tiles else {
            return HTTPResponse(status: 404, body: "this server has no tiles (tagfix serve --tiles FILE.mbtiles)\n")
        }
        guard let tile = MapTile(path: path.dropFirst("/tiles/".count)) else {
            return HTTPResponse(status: 404, body: "not a tile: /tiles/Z/X/Y (decimal numbers)\n")
        }
        guard MapTile.isValid(z: tile.z, x: tile.x, y: tile.y, zooms: source.zooms) else {
            return HTTPResponse(
                status: 404,
                body:
                    "tile \(tile) is outside the tiles' range: zooms \(source.zooms.lowerBound) to \(source.zooms.upperBound), X and Y 0 to 2^Z - 1\n"
            )
        }
        do {
            guard let bytes = try source.tileData(z: tile.z, x: tile.x, y: tile.y) else {
                return HTTPResponse(status: 404, body: "no tile \(tile) in the tiles file\n")
            }
            return HTTPResponse(status: 200, contentType: source.mediaType, bytes: bytes)
        } catch {
            return HTTPResponse(status: 503, body: "tile \(tile) could not be read: \(error)\n")
        }
    }
}
