import Foundation
import TagFixCore
import TagFixReport
import Testing

/// A log line: `fix` nil for a verdict decided without one (disallowed, untrusted…).
private func line(_ verdict: String, tag: String, fix: (Double, Double)?, region: (Double, Double)?, message: String = "m") -> String {
    let fixJSON =
        fix.map { #"{"time":"2026-05-14T08:00:00Z","mode":"3d","lat":\#($0.0),"lon":\#($0.1),"accuracy_m":4,"status":"gps"}"# } ?? "null"
    let regionJSON =
        region.map { #"{"id":\#(JSONValue.quoted(tag)),"name":"n","lat":\#($0.0),"lon":\#($0.1),"radius_m":20,"source":"registry"}"# }
        ?? "null"
    return
        #"{"time":"2026-05-14T08:00:00Z","verdict":"\#(verdict)","reason":null,"message":\#(JSONValue.quoted(message)),"uid":"04A224B2C56480","tag_id":\#(JSONValue.quoted(tag)),"region":\#(regionJSON),"interpolated":false,"fix":\#(fixJSON)}"#
}

private func report(_ lines: [String]) throws -> SiteReport {
    let records = try lines.enumerated().map { try SessionRecord(try JSONValue.parse($0.element), line: $0.offset + 1) }
    return SiteReport(records: records)
}

/// The map's data as the page embeds it, parsed back.
private func mapData(_ page: String) throws -> JSONValue {
    let start = try #require(page.range(of: #"<script type="application/json" id="site-data">"#))
    let end = try #require(page[start.upperBound...].range(of: "</script>"))
    return try JSONValue.parse(String(page[start.upperBound..<end.lowerBound]))
}

private let leaflet = Leaflet(javascript: "window.L = {version: \"test\"};", css: ".leaflet-container{}")

@Suite("The report's Leaflet map")
struct SiteMapReportTests {
    static let allSix = [
        line("confirmed", tag: "T01", fix: (53.545, 9.966), region: (53.545, 9.966)),
        line("outside", tag: "T02", fix: (53.546, 9.967), region: (53.545, 9.967)),
        line("inconclusive", tag: "T03", fix: (53.5452, 9.9662), region: (53.5451, 9.9661)),
        line("notRegistered", tag: "X9", fix: nil, region: nil),
        line("disallowed", tag: "T09", fix: nil, region: (53.5445, 9.9655)),
        line("untrusted", tag: "T07", fix: nil, region: (53.5447, 9.9671)),
    ]

    @Test("every verdict kind is on the map: a tap without a fix at its tag's place, else at the last position before it")
    func everyVerdictDrawn() throws {
        let site = try report(Self.allSix)
        let taps = try #require(try mapData(site.html(map: .leaflet(leaflet, .plain)))["taps"]?.array)
        #expect(Set(taps.compactMap { $0["verdict"]?.string }) == Set(SessionRecord.verdicts))
        #expect(taps.allSatisfy { $0["lat"]?.double != nil && $0["lon"]?.double != nil }, "a tap is off the map")
        let disallowed = try #require(taps.first { $0["verdict"]?.string == "disallowed" })
        #expect(disallowed["measured"]?.bool == false)
        #expect(disallowed["lat"]?.double == 53.5445)
        // notRegistered: no fix, no region: drawn where the tech last was (the inconclusive tap).
        let unknown = try #require(taps.first { $0["verdict"]?.string == "notRegistered" })
        #expect(unknown["lat"]?.double == 53.5452)
        // The plain SVG map draws them too.
        let svg = site.svg()
        for verdict in SessionRecord.verdicts { #expect(svg.contains("data-verdict=\"\(verdict)\""), "\(verdict) missing from the SVG") }
    }

    @Test("the page: Leaflet inline, the legend's six verdicts, a plain background without tiles, the last position")
    func page() throws {
        let site = try report(Self.allSix)
        let page = site.html(map: .leaflet(leaflet, .plain))
        #expect(page.contains("window.L = {version: \"test\"};"))
        #expect(!page.contains("<svg"), "the Leaflet page draws no SVG of its own")
        #expect(!page.contains("src=\"http"), "nothing is loaded from the network")
        let data = try mapData(page)
        #expect(data["base"]?["kind"]?.string == "plain")
        #expect(data["verdicts"]?.array?.compactMap(\.string) == SessionRecord.verdicts)
        #expect(data["labels"]?["notRegistered"]?.string == "not registered")
        #expect(data["position"]?["lat"]?.double == 53.5452)
        #expect(page.contains("L.control.scale"))
        let bounds = try #require(data["bounds"])
        #expect(try #require(bounds["south"]?.double) < 53.5445)
        #expect(try #require(bounds["north"]?.double) >= 53.546)
    }

    @Test(
        "hostile tag names and messages stay text: one end for each script, the data parses back to the same words",
        arguments: [
            "</script><script>alert(1)</script>", "<!--<script>", "T\u{2028}X", "<img src=x onerror=alert(1)>", "\"'&amp;", "</SCRIPT >",
        ])
    func hostile(_ name: String) throws {
        let site = try report([
            line("confirmed", tag: name, fix: (53.545, 9.966), region: (53.545, 9.966), message: "msg " + name),
            line("disallowed", tag: "T09", fix: nil, region: nil, message: name),
        ])
        let page = site.html(
            map: .leaflet(leaflet, .embedded(EmbeddedTiles(tiles: [:], mediaType: "image/png", zooms: 15...16, attribution: name))))
        let scripts = page.components(separatedBy: "<script").count - 1
        #expect(page.lowercased().components(separatedBy: "</script").count - 1 == scripts, "a script ended early")
        #expect(!page.contains("<!--"))
        #expect(!page.contains("<img"))
        let json = try #require(
            page.components(separatedBy: #"id="site-data">"#).dropFirst().first?.components(separatedBy: "</script>").first)
        #expect(!json.contains("\u{2028}"), "U+2028 ends a line in older JavaScript")
        let data = try mapData(page)
        #expect(data["tags"]?.array?.first?["key"]?.string == name)
        #expect(data["taps"]?.array?.first?["message"]?.string == "msg " + name)
        #expect(data["base"]?["attribution"]?.string == name)
        // The script hands names to the page as text only, and attributions escaped.
        #expect(!SiteMap.script.contains("innerHTML"))
        #expect(SiteMap.script.contains("attribution: escapeHTML("))
    }

    @Test("embedded tiles ride in the page as base64 at their z/x/y, with the zooms the page may use")
    func embedded() throws {
        let site = try report(Self.allSix)
        let tiles = EmbeddedTiles(
            tiles: [MapTile(z: 16, x: 34582, y: 21182): [1, 2, 3]], mediaType: "image/png", zooms: 15...17, attribution: "tiles © me")
        let data = try mapData(site.html(map: .leaflet(leaflet, .embedded(tiles))))
        let base = try #require(data["base"])
        #expect(base["kind"]?.string == "tiles")
        #expect(base["tiles"]?["16/34582/21182"]?.string == Data([1, 2, 3]).base64EncodedString())
        #expect(base["tileMinZoom"]?.double == 15)
        #expect(base["tileMaxZoom"]?.double == 17)
    }

    @Test(
        "the Leaflet from Debian's libjs-leaflet loads, its images inline in its style sheet",
        .enabled(if: FileManager.default.fileExists(atPath: Leaflet.debianDirectory + "/leaflet.css"), "needs libjs-leaflet"))
    func debianLeaflet() throws {
        let leaflet = try Leaflet.load()
        #expect(leaflet.version != nil)
        #expect(leaflet.javascript.contains("L"))
        #expect(!leaflet.inlineCSS.contains("url(images/"))
        #expect(throws: LeafletError.self) { try Leaflet.load(directory: "/nonexistent") }
        do {
            _ = try Leaflet.load(directory: "/nonexistent")
        } catch {
            #expect(error.message.contains("apt-get install libjs-leaflet"))
        }
    }
}
