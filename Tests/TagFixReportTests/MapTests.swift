import CSQLite
import Foundation
import TagFixCore
import TagFixReport
import TagFixStore
import Testing

/// A small MBTiles file made here with SQLite: `tiles` as XYZ (z, x, y), written as TMS rows.
func makeMBTiles(
    _ name: String, tiles: [(Int, Int, Int, [UInt8])], metadata: [(String, String)] = [("name", "test"), ("format", "png")]
) throws -> String {
    let path = FileManager.default.temporaryDirectory.path + "/tagfix-maps-\(UUID().uuidString)-\(name)"
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK, let db else { throw CocoaError(.fileWriteUnknown) }
    defer { sqlite3_close(db) }
    func exec(_ sql: String) throws { guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw CocoaError(.fileWriteUnknown) } }
    try exec(
        "CREATE TABLE metadata (name text, value text); CREATE TABLE tiles (zoom_level integer, tile_column integer, tile_row integer, tile_data blob)"
    )
    for (key, value) in metadata {
        try exec("INSERT INTO metadata VALUES ('\(key)', '\(value.replacing("'", with: "''"))')")
    }
    var statement: OpaquePointer?
    guard sqlite3_prepare_v2(db, "INSERT INTO tiles VALUES (?, ?, ?, ?)", -1, &statement, nil) == SQLITE_OK, let statement else {
        throw CocoaError(.fileWriteUnknown)
    }
    defer { sqlite3_finalize(statement) }
    try exec("BEGIN")
    for (z, x, y, bytes) in tiles {
        sqlite3_bind_int64(statement, 1, Int64(z))
        sqlite3_bind_int64(statement, 2, Int64(x))
        sqlite3_bind_int64(statement, 3, Int64((1 << z) - 1 - y))
        _ = bytes.withUnsafeBytes { sqlite3_bind_blob(statement, 4, $0.baseAddress, Int32(bytes.count), nil) }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw CocoaError(.fileWriteUnknown) }
        sqlite3_reset(statement)
    }
    try exec("COMMIT")
    return path
}

@Suite("MBTiles files")
struct MBTilesTests {
    @Test("a tile is read at its XYZ address from its TMS row (y = 2^z - 1 - row); none outside the file's range")
    func readsTiles() throws {
        let path = try makeMBTiles(
            "a.mbtiles", tiles: [(3, 1, 2, [1, 2, 3]), (3, 1, 5, [4, 5]), (5, 17, 10, [9])],
            metadata: [("name", "t"), ("format", "png"), ("attribution", "© someone"), ("bounds", "9.9,53.5,10.0,53.6")])
        let file = try MBTiles(path: path)
        #expect(file.zooms == 3...5)
        #expect(file.mediaType == "image/png")
        #expect(file.metadata["attribution"] == "© someone")
        #expect(file.bounds?.south == 53.5)
        #expect(try file.tile(z: 3, x: 1, y: 2) == [1, 2, 3])
        #expect(try file.tile(z: 3, x: 1, y: 5) == [4, 5])
        #expect(try file.tile(z: 5, x: 17, y: 10) == [9])
        // Row 2 of zoom 3 is y 5: no tile there was written as y 5's row.
        #expect(try file.tile(z: 3, x: 1, y: 3) == nil)
        for (z, x, y) in [(2, 0, 0), (6, 0, 0), (3, 8, 0), (3, 0, 8), (3, -1, 0), (3, 0, -1)] {
            #expect(!file.inRange(z: z, x: x, y: y))
            #expect(try file.tile(z: z, x: x, y: y) == nil)
        }
    }

    @Test("a file that is not MBTiles is one clear error: not SQLite, no tiles table, vector tiles, empty, missing")
    func refused() throws {
        let garbage = FileManager.default.temporaryDirectory.path + "/tagfix-maps-\(UUID().uuidString).mbtiles"
        try Data("this is not a database, it only says it is one".utf8).write(to: URL(fileURLWithPath: garbage))
        #expect(throws: MBTilesError.self) { try MBTiles(path: garbage) }
        do {
            _ = try MBTiles(path: garbage)
        } catch {
            #expect(error.kind == .notMBTiles)
            #expect(error.message.hasPrefix("not an MBTiles file"), "\(error)")
            #expect(!error.description.contains("\n"))
        }
        let vector = try makeMBTiles("v.mbtiles", tiles: [(0, 0, 0, [1])], metadata: [("format", "pbf")])
        #expect(throws: MBTilesError.self) { try MBTiles(path: vector) }
        let empty = try makeMBTiles("e.mbtiles", tiles: [])
        #expect(throws: MBTilesError.self) { try MBTiles(path: empty) }
        do {
            _ = try MBTiles(path: "/nonexistent/site.mbtiles")
            Issue.record("a missing file was opened")
        } catch {
            #expect(error.kind == .missing)
        }
        // A SQLite file of another kind (a registry, say) has no tiles table.
        var db: OpaquePointer?
        let other = FileManager.default.temporaryDirectory.path + "/tagfix-maps-\(UUID().uuidString).sqlite"
        sqlite3_open(other, &db)
        sqlite3_exec(db, "CREATE TABLE tags (id text)", nil, nil, nil)
        sqlite3_close(db)
        do {
            _ = try MBTiles(path: other)
            Issue.record("a database without tiles was opened")
        } catch {
            #expect(error.message.contains("no tiles table"), "\(error)")
        }
    }
}

@Suite("Map tiles, templates and the report's map")
struct SiteMapTests {
    @Test("tile paths: Z/X/Y in decimal digits only, in range of the zooms and 2^Z")
    func tilePaths() {
        #expect(MapTile(path: "3/1/2") == MapTile(z: 3, x: 1, y: 2))
        #expect(MapTile(path: "3/1/2.png") == MapTile(z: 3, x: 1, y: 2))
        for bad in [
            "../../etc/passwd", "3/1", "3/1/2/4", "-1/0/0", "3/+1/2", "3/ 1/2", "3/1/2.exe", "3//2", "", "3/1/2%00", "a/b/c", "3/1/１",
        ] {
            #expect(MapTile(path: Substring(bad)) == nil, "\(bad)")
        }
        #expect(MapTile.isValid(z: 3, x: 7, y: 7, zooms: 0...5))
        #expect(!MapTile.isValid(z: 3, x: 8, y: 0, zooms: 0...5))
        #expect(!MapTile.isValid(z: 6, x: 0, y: 0, zooms: 0...5))
        #expect(!MapTile.isValid(z: 2, x: 0, y: 0, zooms: 3...5))
    }

    @Test("Web Mercator: the tiles over Hamburg's harbour, as every slippy map numbers them")
    func mercator() throws {
        let box = try #require(MapBounds([(Coordinate(latitude: 53.5458, longitude: 9.9665), 0)]))
        #expect(WebMercator.tiles(covering: box, zoom: 15) == [MapTile(z: 15, x: 17291, y: 10591)])
        #expect(WebMercator.tiles(covering: box, zoom: 18) == [MapTile(z: 18, x: 138_329, y: 84729)])
        #expect(WebMercator.tiles(covering: box, zoom: 15, pad: 1).count == 9)
        #expect(WebMercator.tiles(covering: box, zoom: 0, pad: 2) == [MapTile(z: 0, x: 0, y: 0)])
    }

    @Test("the tiles a report embeds: the site's zooms, no deeper than --max-zoom, and never more than the limit")
    func embeddedZooms() throws {
        let box = try #require(MapBounds([(Coordinate(latitude: 53.5458, longitude: 9.9665), 150)]))
        let all = try #require(EmbeddedTiles.wanted(for: box, available: 0...22, maximumZoom: 18))
        #expect(all.zooms.upperBound <= 18)
        #expect(all.zooms.lowerBound >= 12)
        #expect(Set(all.tiles.map(\.z)) == Set(all.zooms))
        let shallow = try #require(EmbeddedTiles.wanted(for: box, available: 0...22, maximumZoom: 16))
        #expect(shallow.zooms.upperBound == 16)
        #expect(shallow.tiles.count < all.tiles.count)
        let cut = try #require(EmbeddedTiles.wanted(for: box, available: 0...22, maximumZoom: 22, limit: 200))
        #expect(cut.cut)
        #expect(cut.tiles.count <= 200)
        #expect(EmbeddedTiles.wanted(for: box, available: 20...22, maximumZoom: 18) == nil)
        // --max-zoom shallower than the site's zooms: that one zoom (the page scales it up), not
        // none; below the file's zooms, none.
        let site = try #require(EmbeddedTiles.zooms(for: box, available: 0...22, maximumZoom: 22))
        let small = try #require(EmbeddedTiles.wanted(for: box, available: 10...20, maximumZoom: site.lowerBound - 3))
        #expect(small.zooms == site.lowerBound - 3...site.lowerBound - 3)
        #expect(!small.tiles.isEmpty && small.tiles.allSatisfy { $0.z == site.lowerBound - 3 })
        #expect(EmbeddedTiles.wanted(for: box, available: 10...20, maximumZoom: 9) == nil)
    }

    @Test(
        "tile server templates: https or http, {z} {x} {y} once each, nothing a page could be made to run",
        arguments: [
            ("https://tile.openstreetmap.org/{z}/{x}/{y}.png", true), ("http://tiles.site.local:8080/{z}/{x}/{y}{r}.png", true),
            ("https://{s}.tile.example.org/{z}/{x}/{y}.jpg?key=abc", true), ("https://t.example.org/{z}/{x}.png", false),
            ("javascript:alert(1)//{z}/{x}/{y}", false), ("https://t.example.org/{z}/{x}/{y}.png\"onerror=\"alert(1)", false),
            ("https://t.example.org/{z}/{x}/{y}<script>", false), ("https://t.example.org/{z}/{x}/{y}/{foo}", false),
            ("ftp://t.example.org/{z}/{x}/{y}", false), ("https://t.example.org/{z}/{x}/{y} .png", false),
            ("https://t.example.org/{z}/{z}/{x}/{y}", false), ("https://user:pw@t.example.org/{z}/{x}/{y}", false),
            ("https:///{z}/{x}/{y}", false), ("https://t.example.org/{z}/{x}/{y}/é", false),
        ])
    func templates(_ text: String, _ valid: Bool) {
        #expect(((try? TileTemplate(text)) != nil) == valid, "\(text)")
    }

    @Test("OpenStreetMap's servers get its attribution by default")
    func openStreetMap() throws {
        let template = try TileTemplate("https://tile.openstreetmap.org/{z}/{x}/{y}.png")
        #expect(template.isOpenStreetMap)
        #expect(SiteMap.baseJSON(.server(template, attribution: nil, maximumZoom: 19)).contains("OpenStreetMap contributors"))
        #expect(try !TileTemplate("https://openstreetmap.org.evil.example/{z}/{x}/{y}").isOpenStreetMap)
    }
}
