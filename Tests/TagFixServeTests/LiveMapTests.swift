import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixReport
import Testing

@testable import TagFixServe

/// Tiles at 3/1/2 and 4/0/0 only; every question it is asked is kept.
final class RecordingTiles: TileSource {
    let asked = Mutex<[MapTile]>([])
    var zooms: ClosedRange<Int> { 3...4 }
    var mediaType: String { "image/png" }
    var attribution: String? { "<b>tiles</b>" }
    func tileData(z: Int, x: Int, y: Int) throws -> [UInt8]? {
        asked.withLock { $0.append(MapTile(z: z, x: x, y: y)) }
        return [MapTile(z: 3, x: 1, y: 2), MapTile(z: 4, x: 0, y: 0)].contains(MapTile(z: z, x: x, y: y)) ? [0x89, 0x50, UInt8(z)] : nil
    }
}

private let leaflet = Leaflet(javascript: "window.L = {};", css: ".leaflet-container{}", images: ["layers.png": [1, 2, 3]])

private func get(_ path: String, _ map: LiveMap, state: ServeState = ServeState(readers: ["r"], gps: nil)) throws -> HTTPResponse {
    let responder = ServeHub.Responder(state: ServeHub.StateBox(state), clock: nil, release: "test", map: map)
    return responder.respond(to: try HTTPRequest(head: Array("GET \(path) HTTP/1.1\r\n\r\n".utf8)), stats: ServerStats())
}

@Suite("tagfix serve's map: /leaflet/, /tiles/ and the live page")
struct LiveMapTests {
    @Test("a tile in the file's range is served from it; the source is never asked for anything outside its zooms or 2^z")
    func tiles() throws {
        let source = RecordingTiles()
        let map = LiveMap(leaflet: leaflet, tiles: .source(source))
        let tile = try get("/tiles/3/1/2", map)
        #expect(tile.status == 200)
        #expect(tile.contentType == "image/png")
        #expect(tile.body == [0x89, 0x50, 3])
        #expect(try get("/tiles/4/0/0.png", map).status == 200)
        #expect(try get("/tiles/3/1/3", map).status == 404, "none there")
        #expect(source.asked.withLock { $0 } == [MapTile(z: 3, x: 1, y: 2), MapTile(z: 4, x: 0, y: 0), MapTile(z: 3, x: 1, y: 3)])
        for path in [
            "/tiles/2/0/0", "/tiles/5/0/0", "/tiles/3/8/0", "/tiles/3/0/8", "/tiles/3/-1/0", "/tiles/../../etc/passwd",
            "/tiles/3/1/2/../../x",
            "/tiles/3/1", "/tiles/3/1/2.txt", "/tiles/99999999999/0/0", "/tiles/%2e%2e/0/0",
        ] {
            let answer = try get(path, map)
            #expect(answer.status == 404, "\(path)")
        }
        #expect(source.asked.withLock { $0.count } == 3, "a path out of range reached the tile source")
        #expect(try get("/tiles/3/1/2", LiveMap(leaflet: leaflet)).status == 404, "no --tiles: no tiles")
    }

    @Test("Leaflet comes from memory: its script, its style sheet and its images, nothing else")
    func leafletFiles() throws {
        let map = LiveMap(leaflet: leaflet)
        let script = try get("/leaflet/leaflet.js", map)
        #expect(script.status == 200)
        #expect(script.contentType.hasPrefix("text/javascript"))
        #expect(String(decoding: script.body, as: UTF8.self) == "window.L = {};")
        #expect(try get("/leaflet/leaflet.css", map).contentType.hasPrefix("text/css"))
        #expect(try get("/leaflet/images/layers.png", map).body == [1, 2, 3])
        for path in [
            "/leaflet/../../etc/passwd", "/leaflet/images/../leaflet.js", "/leaflet/images/none.png", "/leaflet/leaflet.min.js.map",
        ] {
            #expect(try get(path, map).status == 404, "\(path)")
        }
        #expect(try get("/leaflet/leaflet.js", LiveMap()).status == 404)
    }

    @Test("the live page with Leaflet: its script from /leaflet/, the tiles from /tiles/, the walk panel, hostile names as text")
    func page() throws {
        var state = ServeState(
            readers: ["pcsc:Evil </script><script>alert(1)</script>"], gps: "gpsd://localhost:2947",
            placements: [
                RegistryEntry(
                    id: "</script><!--T1", uid: nil,
                    region: try CircularRegion(
                        center: Coordinate(latitude: 53.545, longitude: 9.966), radius: 20, identifier: "</script><!--T1"),
                    name: "<img src=x onerror=alert(1)>")
            ])
        _ = state.observe(
            ReaderEvent.failed(ReaderError(code: .io, message: "answer </script> <!-- ended")), reader: state.readers[0].path, now: nil)
        let page = String(
            decoding: try get("/", LiveMap(leaflet: leaflet, tiles: .source(RecordingTiles())), state: state).body, as: UTF8.self)
        #expect(page.contains(#"<script src="/leaflet/leaflet.js"></script>"#))
        #expect(page.contains(#"href="/leaflet/leaflet.css""#))
        #expect(page.contains("/tiles/{z}/{x}/{y}"))
        for id in ["progress", "left", "feed", "map", "legend"] where id != "legend" { #expect(page.contains("id=\"\(id)\""), "\(id)") }
        #expect(page.lowercased().components(separatedBy: "</script").count == page.components(separatedBy: "<script").count)
        #expect(!page.contains("<!--"))
        #expect(!page.contains("<img"))
        let data = try #require(
            page.components(separatedBy: #"id="site-data">"#).dropFirst().first?.components(separatedBy: "</script>").first)
        let parsed = try JSONValue.parse(data)
        #expect(parsed["tags"]?.array?.first?["key"]?.string == "</script><!--T1")
        #expect(parsed["tags"]?.array?.first?["name"]?.string == "<img src=x onerror=alert(1)>")
        #expect(parsed["base"]?["attribution"]?.string == "<b>tiles</b>", "kept as text: the script escapes it for Leaflet")
        #expect(!LivePage.walkScript.contains("innerHTML"))
    }
}

@Suite("The live page's token")
struct LivePageTokenTests {
    @Test("the page's ?token= goes again to /leaflet/ and /tiles/, percent-encoded so it cannot leave its attribute")
    func token() throws {
        let map = LiveMap(leaflet: Leaflet(javascript: "", css: ""), tiles: .source(RecordingTiles()))
        let page = LivePage.html(state: ServeState(readers: ["r"], gps: nil), release: "t", map: map, token: "a b\"<&>é")
        let query = "?token=a%20b%22%3C%26%3E%C3%A9"
        #expect(page.contains("<script src=\"/leaflet/leaflet.js\(query)\"></script>"))
        #expect(page.contains("href=\"/leaflet/leaflet.css\(query)\""))
        #expect(page.contains("data.base.url += \"\(query)\""))
        #expect(!LivePage.html(state: ServeState(readers: ["r"], gps: nil), release: "t", map: map).contains("?token="))
    }
}
