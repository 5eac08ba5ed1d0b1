import Foundation
import TagFixCore
import TagFixReport
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

private let exampleRegistry =
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    + "/Examples/site/registry.csv"

/// The example site's placements (Examples/site/registry.csv), moved north by `shift` degrees.
private func examplePlacements(shift: Double = 0) throws -> [RegistryEntry] {
    try RegistryFile.parse(try String(contentsOfFile: exampleRegistry, encoding: .utf8)).entries.map { entry in
        var moved = entry
        moved.region = try CircularRegion(
            center: Coordinate(latitude: entry.region.center.latitude + shift, longitude: entry.region.center.longitude),
            radius: entry.region.radius, identifier: entry.id)
        return moved
    }
}

/// A verdict record as `verify --log` writes it, for `entry`'s tag, tapped `metres` north of its
/// centre (no fix when `nil`).
private func row(_ site: String, _ device: String, _ time: String, _ verdict: String, _ entry: RegistryEntry, north metres: Double?)
    throws -> FleetReport.Row
{
    let c = entry.region.center
    let fix = metres.map { #"{"time":"\#(time)","mode":"3d","lat":\#(c.latitude + $0 / 111_300),"lon":\#(c.longitude),"accuracy_m":3}"# }
    let line =
        #"{"time":"\#(time)","verdict":"\#(verdict)","reason":null,"message":"m","uid":null,"tag_type":"ntag213","tag_id":"\#(entry.id)","url":null,"reader":"r","distance_m":\#(metres.map { "\($0)" } ?? "null"),"accuracy_m":3,"bearing_deg":0,"region":{"id":"\#(entry.id)","name":"n","lat":\#(c.latitude),"lon":\#(c.longitude),"radius_m":\#(entry.region.radius),"source":"registry"},"fix_age_s":0,"interpolated":false,"fix":\#(fix ?? "null")}"#
    return FleetReport.Row(site: site, device: device, record: try SessionRecord(try JSONValue.parse(line), line: 1))
}

/// The SVG's elements with their attributes, in order; `nil` when it is not well-formed XML.
private final class Elements: NSObject, XMLParserDelegate {
    var all: [(name: String, attributes: [String: String])] = []
    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]
    ) {
        all.append((name, attributes))
    }
    static func parse(_ text: String) -> Elements? {
        let elements = Elements()
        let parser = XMLParser(data: Data(text.utf8))
        parser.delegate = elements
        return parser.parse() ? elements : nil
    }
}

/// Each tag group of the overview (`<g class="tag">`) with the fill of the circle that follows it.
private func overviewTags(_ svg: String) throws -> [(site: String, tag: String, status: String, fill: String, r: Double)] {
    let elements = try #require(Elements.parse(svg), "the overview is well-formed SVG").all
    var tags: [(String, String, String, String, Double)] = []
    for (index, element) in elements.enumerated() where element.name == "g" && element.attributes["class"] == "tag" {
        let circle = elements[index + 1]
        #expect(circle.name == "circle")
        tags.append(
            (
                element.attributes["data-site"] ?? "", element.attributes["data-tag"] ?? "", element.attributes["data-status"] ?? "",
                circle.attributes["fill"] ?? "", Double(circle.attributes["r"] ?? "") ?? 0
            ))
    }
    return tags
}

@Suite("The fleet report: the overview map, the sites, the devices")
struct FleetReportTests {
    /// Two sites with the example registry each (the depot's 20 km north, same tag ids), three
    /// devices. Harbour: T01 confirmed by van-1 then outside by van-2 (the last verdict counts,
    /// whichever device), T03 inconclusive without a fix. Depot: T02 confirmed.
    static func fleet() throws -> FleetReport {
        let harbour = try examplePlacements()
        let depot = try examplePlacements(shift: 0.18)
        let rows = [
            try row("harbour", "van-1", "2026-05-14T08:00:00.000Z", "confirmed", harbour[0], north: 2),
            try row("harbour", "van-2", "2026-05-14T09:00:00.000Z", "outside", harbour[0], north: 90),
            try row("harbour", "van-1", "2026-05-14T08:30:00.000Z", "inconclusive", harbour[2], north: nil),
            try row("depot", "pi-9", "2026-05-14T08:10:00.000Z", "confirmed", depot[1], north: 1),
        ]
        let placements =
            harbour.map { FleetReport.Placement(site: "harbour", entry: $0) }
            + depot.map { FleetReport.Placement(site: "depot", entry: $0) }
        return FleetReport(rows: rows, placements: placements)
    }

    @Test("the overview holds every site's tags, each coloured by its last verdict from any device, grey when never tapped")
    func overviewColours() throws {
        let report = try Self.fleet()
        let ids = try examplePlacements().map(\.id)
        let tags = try overviewTags(report.overviewSVG())
        #expect(tags.count == 2 * ids.count, "T01 of the depot and T01 of the harbour are two tags")
        for site in ["harbour", "depot"] { #expect(tags.filter { $0.site == site }.map(\.tag).sorted() == ids.sorted()) }
        let expected: [String: String] = ["harbour T01": "outside", "harbour T03": "inconclusive", "depot T02": "confirmed"]
        for tag in tags {
            let status = expected["\(tag.site) \(tag.tag)"] ?? "never_tapped"
            #expect(tag.status == status, "\(tag.site) \(tag.tag)")
            #expect(tag.fill == SiteReport.colour(status == "never_tapped" ? nil : status), "\(tag.site) \(tag.tag)")
            #expect(tag.r >= FleetReport.minimumRadius, "20 km apart, a 10 m region still shows")
        }
        let elements = try #require(Elements.parse(report.overviewSVG())).all
        let scans = elements.filter { $0.attributes["class"] == "scan" }
        #expect(
            scans.map { "\($0.attributes["data-site"] ?? "") \($0.attributes["data-tag"] ?? "") \($0.attributes["data-verdict"] ?? "")" }
                .sorted() == ["depot T02 confirmed", "harbour T01 outside"],
            "a dot where each tag's last verdict was given (T03's had no fix)")
        #expect(scans.allSatisfy { $0.attributes["fill"] == SiteReport.colour($0.attributes["data-verdict"]) })
        #expect(elements.filter { $0.attributes["class"] == "offset" }.count == 1, "a line to where the moved tag was tapped")
        #expect(elements.filter { $0.attributes["class"] == "site-label" }.count == 2)
    }

    @Test("the page: the overview first, then each site's map, its tags never tapped and its devices; nothing from the network")
    func page() throws {
        let report = try Self.fleet()
        let html = report.html()
        let overview = try #require(html.range(of: "<section id=\"overview\">"))
        let firstSite = try #require(html.range(of: "<section class=\"site\""))
        #expect(overview.lowerBound < firstSite.lowerBound)
        #expect(html.components(separatedBy: "<g class=\"tag\"").count - 1 == 4 * 10, "the overview's 20 tags and the two site maps' 20")
        // Harbour: T02, T04…T10 never tapped; the depot: all but T02.
        let lists = html.components(separatedBy: "<ul class=\"never-tapped\">").dropFirst().map { $0.components(separatedBy: "</ul>")[0] }
        #expect(lists.count == 2)
        #expect(lists.map { $0.components(separatedBy: "<li>").count - 1 } == [9, 8], "depot first (name order): 9, harbour: 8")
        for device in ["van-1", "van-2", "pi-9"] { #expect(html.contains("<tr data-device=\"\(device)\">")) }
        #expect(html.contains("<tr data-site=\"harbour\"><td>harbour</td><td>10</td><td>8</td>"), "the sites' table")
        for outside in ["src=", "href=", "<script", "url(", "@import"] { #expect(!html.contains(outside), "\(outside)") }
        #expect(html.components(separatedBy: "http").count - 1 == html.components(separatedBy: "http://www.w3.org/2000/svg").count - 1)
    }

    @Test("on Leaflet: Leaflet once, then each site its own map over its own base map, with its own tags and taps")
    func leafletSites() throws {
        let report = try Self.fleet()
        let leaflet = Leaflet(javascript: "window.L = {version: \"test\"};", css: ".leaflet-container{}")
        let served = BaseMap.served(minimumZoom: 15, maximumZoom: 17, attribution: "the depot's own")
        let html = report.html(map: .leaflet(leaflet, bases: ["depot": served]))
        #expect(html.components(separatedBy: leaflet.javascript).count - 1 == 1, "Leaflet inline once")
        #expect(html.components(separatedBy: "function tagfixMap").count - 1 == 1)
        #expect(html.contains("<section id=\"overview\">"), "the overview stays")
        var maps: [String: JSONValue] = [:]
        for (index, site) in report.sites.enumerated() {
            let section = try #require(html.components(separatedBy: "<section class=\"site\" data-site=\"\(site)\">").dropFirst().first)
            #expect(section.contains("<div id=\"map-\(index)\""), "\(site)")
            let data = try #require(
                section.components(separatedBy: "<script type=\"application/json\" id=\"site-data-\(index)\">").dropFirst().first?
                    .components(separatedBy: "</script>").first)
            maps[site] = try JSONValue.parse(data)
        }
        #expect(maps["depot"]?["base"]?["url"]?.string == "/tiles/{z}/{x}/{y}")
        #expect(maps["harbour"]?["base"]?["kind"]?.string == "plain", "a site without a base map gets the plain one")
        let harbourTaps = maps["harbour"]?["taps"]?.array?.compactMap { $0["verdict"]?.string }.sorted()
        #expect(harbourTaps == ["confirmed", "inconclusive", "outside"], "\(maps["harbour"].map { "\($0)" } ?? "")")
        #expect(maps["depot"]?["taps"]?.array?.count == 1)
        #expect(maps["depot"]?["tags"]?.array?.count == 10, "the depot's registry: every tag, tapped or not")
        #expect(html.contains("data-map\", \"ready\""))
    }

    @Test("with no placements stored the report is as before, plus the overview of the tags that were tapped")
    func withoutPlacements() throws {
        let report = FleetReport(rows: try Self.fleet().rows)
        let tags = try overviewTags(report.overviewSVG())
        #expect(
            tags.map { "\($0.site) \($0.tag) \($0.status)" }.sorted() == [
                "depot T02 confirmed", "harbour T01 outside", "harbour T03 inconclusive",
            ])
        #expect(!report.html().contains("never-tapped"))
        #expect(
            report.csv() == FleetReport(rows: report.rows, placements: try Self.fleet().placements).csv(), "the CSV is one row a verdict")
    }

    @Test("hostile site and tag names are escaped in the overview (the SVG stays well-formed)")
    func escaped() throws {
        let entry = try #require(try examplePlacements().first)
        var hostile = entry
        hostile.id = "<T&\"1'>"
        let report = FleetReport(rows: [], placements: [.init(site: "a<b>&\"c", entry: hostile)])
        let tags = try overviewTags(report.overviewSVG())
        #expect(tags.map(\.site) == ["a<b>&\"c"])
        #expect(tags.map(\.tag) == ["<T&\"1'>"])
    }
}
