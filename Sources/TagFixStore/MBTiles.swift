import CSQLite
import Foundation
import Synchronization

/// Why an MBTiles file cannot be used, said in one line a person can act on.
public struct MBTilesError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The file does not exist or cannot be read.
        case missing
        /// Not an MBTiles file: not SQLite, damaged, no `tiles` table, or vector tiles.
        case notMBTiles
    }

    public var kind: Kind
    public var path: String
    public var message: String

    public var description: String { "\(path): \(message)" }
}

/// An MBTiles file (MBTiles 1.3: SQLite with a `metadata` table of name/value pairs and a `tiles`
/// table or view of zoom_level, tile_column, tile_row, tile_data), opened read-only. Tiles are
/// asked for as XYZ (the `{z}/{x}/{y}` of a tile server, y down from the north); the file keeps
/// TMS rows (y up from the south), so `row = 2^z - 1 - y`. Raster tiles only (png, jpg, webp):
/// a vector-tile file (pbf) is refused, as a browser's plain tile layer cannot draw it.
///
/// Reads are short SQLite calls on the caller's thread (`tagfix serve` calls from its server
/// thread, `tagfix report` from the command's), serialised by a lock; nothing here waits on
/// another process (read-only, no busy timeout).
public final class MBTiles: Sendable {
    public let path: String
    /// The `metadata` table.
    public let metadata: [String: String]
    /// The zooms the file has tiles at.
    public let zooms: ClosedRange<Int>
    /// `png`, `jpg` or `webp`.
    public let format: String
    private let connection: Mutex<SQLiteConnection>

    /// The deepest zoom a file may claim (2^24 tiles a side: far finer than any survey).
    public static let deepestZoom = 24

    /// Opens `path` read-only and checks it is an MBTiles file of raster tiles.
    /// - Throws: `MBTilesError`: `.missing` for a file that cannot be read, `.notMBTiles` for
    ///   anything else (not SQLite, damaged, no tiles table, vector tiles, no tiles at all).
    public init(path: String) throws(MBTilesError) {
        self.path = path
        func fail(_ kind: MBTilesError.Kind, _ message: String) -> MBTilesError { MBTilesError(kind: kind, path: path, message: message) }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw fail(
                .missing, "no such MBTiles file, or it cannot be read (give --tiles an .mbtiles file QGIS, TileMill or mb-util made)")
        }
        let notMBTiles = "not an MBTiles file"
        do {
            let db = try SQLiteConnection(path: path, mode: .readOnly)
            var names: Set<String> = []
            try db.query("SELECT name FROM sqlite_master WHERE type IN ('table','view')") { row in
                if let name = row.text(0) { names.insert(name.lowercased()) }
            }
            guard names.contains("tiles") else {
                throw fail(.notMBTiles, "\(notMBTiles): it has no tiles table (export the map as MBTiles from QGIS or TileMill)")
            }
            var metadata: [String: String] = [:]
            if names.contains("metadata") {
                try db.query("SELECT name, value FROM metadata") { row in
                    if let name = row.text(0), let value = row.text(1) { metadata[name] = value }
                }
            }
            var range: ClosedRange<Int>?
            try db.query("SELECT MIN(zoom_level), MAX(zoom_level) FROM tiles") { row in
                guard !row.isNull(0), !row.isNull(1) else { return }
                let low = Int(clamping: row.integer(0)), high = Int(clamping: row.integer(1))
                if 0 <= low, low <= high, high <= Self.deepestZoom { range = low...high }
            }
            guard let range else {
                throw fail(.notMBTiles, "\(notMBTiles): its tiles table is empty or its zoom levels are not 0 to \(Self.deepestZoom)")
            }
            let format = (metadata["format"] ?? "png").lowercased()
            switch format {
            case "png", "jpg", "jpeg", "webp": break
            case "pbf", "mvt":
                throw fail(.notMBTiles, "vector tiles (format \(format)) cannot be drawn: export raster tiles (png or jpg) instead")
            default:
                throw fail(.notMBTiles, "\(notMBTiles): unknown tile format \"\(format)\" (png, jpg or webp)")
            }
            self.metadata = metadata
            self.zooms = range
            self.format = format == "jpeg" ? "jpg" : format
            connection = Mutex(db)
        } catch let error as MBTilesError {
            throw error
        } catch let error as SQLiteError {
            throw fail(.notMBTiles, "\(notMBTiles) (\(error.code)): SQLite says \(error.message)")
        } catch {
            throw fail(.notMBTiles, "\(notMBTiles): \(error)")
        }
    }

    /// The tile's media type.
    public var mediaType: String {
        switch format {
        case "jpg": "image/jpeg"
        case "webp": "image/webp"
        default: "image/png"
        }
    }

    /// `metadata`'s `bounds` (west, south, east, north in degrees), when it has valid ones.
    public var bounds: (west: Double, south: Double, east: Double, north: Double)? {
        guard let text = metadata["bounds"] else { return nil }
        let parts = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 4, parts.allSatisfy(\.isFinite), parts[1] <= parts[3], (-90...90).contains(parts[1]),
            (-90...90).contains(parts[3])
        else { return nil }
        return (parts[0], parts[1], parts[2], parts[3])
    }

    /// Whether `z/x/y` (XYZ) names a tile this file could have: `z` among its zooms, `x` and
    /// `y` from 0 to 2^z - 1.
    public func inRange(z: Int, x: Int, y: Int) -> Bool {
        guard zooms.contains(z) else { return false }
        let side = 1 << z
        return (0..<side).contains(x) && (0..<side).contains(y)
    }

    /// The tile at `z/x/y` (XYZ), or `nil` when the file has none there (or it is out of range).
    /// - Throws: `MBTilesError` when SQLite cannot read it (the file was damaged or replaced).
    public func tile(z: Int, x: Int, y: Int) throws(MBTilesError) -> [UInt8]? {
        guard inRange(z: z, x: x, y: y) else { return nil }
        let row = (1 << z) - 1 - y
        do {
            return try connection.withConnection { db throws(SQLiteError) in
                var data: [UInt8]?
                try db.query(
                    "SELECT tile_data FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3 LIMIT 1",
                    [.integer(Int64(z)), .integer(Int64(x)), .integer(Int64(row))]
                ) { result in data = result.blob(0) }
                return data
            }
        } catch {
            throw MBTilesError(kind: .notMBTiles, path: path, message: "reading tile \(z)/\(x)/\(y): SQLite says \(error.message)")
        }
    }
}

extension SQLiteRow {
    /// A BLOB (or text) column's bytes; `nil` for NULL.
    func blob(_ column: Int32) -> [UInt8]? {
        guard !isNull(column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}
