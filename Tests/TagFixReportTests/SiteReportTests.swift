import Foundation
import TagFixCore
import TagFixReport
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Records as `tagfix verify --log` writes them.
private func record(
    _ time: String, _ verdict: String, tag: String, lat: Double, lon: Double, radius: Double = 20, fix: (Double, Double)?,
    distance: Double? = nil, bearing: Double? = nil, message: String = "m", reason: String? = nil
) -> String {
    let fixJSON =
        fix.map { #"{"time":"\#(time)","mode":"3d","lat":\#($0.0),"lon":\#($0.1),"accuracy_m":3.5,"status":"gps","satellites_used":9}"# }
        ?? "null"
    return
        #"{"time":"\#(time)","verdict":"\#(verdict)","reason":\#(reason.map { "\"\($0)\"" } ?? "null"),"message":\#(JSONValue.quoted(message)),"uid":"04A224B2C56480","tag_type":"ntag213","tag_id":"\#(tag)","url":null,"reader":"r","distance_m":\#(distance.map { "\($0)" } ?? "null"),"accuracy_m":3.5,"bearing_deg":\#(bearing.map { "\($0)" } ?? "null"),"region":{"id":"\#(tag)","name":"Gate","lat":\#(lat),"lon":\#(lon),"radius_m":\#(radius),"source":"registry"},"fix_age_s":0,"interpolated":false,"fix":\#(fixJSON)}"#
}

private func records(_ lines: [String]) throws -> [SessionRecord] {
    try lines.enumerated().map { try SessionRecord(try JSONValue.parse($0.element), line: $0.offset + 1) }
}

private let sample: [String] = [
    record(
        "2026-05-14T08:00:33.000Z", "confirmed", tag: "T01", lat: 53.545, lon: 9.966, radius: 25, fix: (53.545_01, 9.966_01), distance: 1.3),
    record(
        "2026-05-14T08:03:19.000Z", "outside", tag: "T03", lat: 53.544_730_5, lon: 9.968_418_9, fix: (53.545_798_9, 9.968_431_8),
        distance: 118.9,
        bearing: 0.4, message: "the tag is 118.9 m N of where it should be <moved> & \"gone\""),
    record("2026-05-14T08:05:00.000Z", "inconclusive", tag: "T05", lat: 53.546_078, lon: 9.970_535_5, fix: nil, reason: "no_fix"),
    record(
        "2026-05-14T08:06:00.000Z", "confirmed", tag: "T03", lat: 53.544_730_5, lon: 9.968_418_9, fix: (53.544_73, 9.968_42), distance: 0.5),
]

private func placements() throws -> [RegistryEntry] {
    try [
        ("T01", 53.545, 9.966, 25.0), ("T03", 53.544_730_5, 9.968_418_9, 20), ("T05", 53.546_078, 9.970_535_5, 25),
        ("T08", 53.546_617, 9.966_604_7, 10),
    ]
    .map { id, lat, lon, r in
        RegistryEntry(
            id: id, uid: nil, region: try CircularRegion(center: Coordinate(latitude: lat, longitude: lon), radius: r, identifier: id),
            name: "n \(id)")
    }
}

/// Counts elements by name and checks the XML is well formed.
private final class ElementCounter: NSObject, XMLParserDelegate {
    var counts: [String: Int] = [:]
    var attributes: [[String: String]] = []
    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]
    ) {
        counts[name, default: 0] += 1
        self.attributes.append(attributes.merging(["_element": name]) { a, _ in a })
    }
    static func parse(_ text: String) -> ElementCounter? {
        let counter = ElementCounter()
        let parser = XMLParser(data: Data(text.utf8))
        parser.delegate = counter
        return parser.parse() ? counter : nil
    }
}

@Suite("Reports: GeoJSON, GPX, CSV, SVG, HTML")
struct SiteReportTests {
    @Test("GeoJSON: a closed counter-clockwise polygon per expected region at the right radius, points per fix, lines to them")
    func geoJSON() throws {
        let report = SiteReport(records: try records(sample), placements: try placements())
        let json = try JSONValue.parse(report.geoJSON())
        #expect(json["type"]?.string == "FeatureCollection")
        let features = try #require(json["features"]?.array)
        let regions = features.filter { $0["properties"]?["kind"]?.string == "expected_region" }
        #expect(regions.count == 4)
        for region in regions {
            let ring = try #require(region["geometry"]?["coordinates"]?.array?.first?.array)
            let points = ring.compactMap { p -> Coordinate? in
                guard let lon = p.array?.first?.double, let lat = p.array?.last?.double else { return nil }
                return Coordinate(validLatitude: lat, longitude: lon)
            }
            #expect(points.count == 65)
            #expect(points.first == points.last, "closed")
            // Shoelace over lon/lat: positive area is counter-clockwise.
            let area = zip(points, points.dropFirst()).map { $0.longitude * $1.latitude - $1.longitude * $0.latitude }.reduce(0, +)
            #expect(area > 0, "RFC 7946 wants exterior rings counter-clockwise")
            let id = region["properties"]?["tag_id"]?.string
            let entry = try #require(try placements().first { $0.id == id })
            for point in points {
                #expect(abs(Geodesic.distance(from: entry.region.center, to: point) - entry.region.radius) < 0.01 * entry.region.radius)
            }
        }
        #expect(regions.first { $0["properties"]?["tag_id"]?.string == "T08" }?["properties"]?["status"]?.string == "never_scanned")
        #expect(
            regions.first { $0["properties"]?["tag_id"]?.string == "T03" }?["properties"]?["status"]?.string == "confirmed",
            "the last scan counts")
        #expect(features.filter { $0["properties"]?["kind"]?.string == "scan" }.count == 3, "scans without a fix have no point")
        #expect(features.filter { $0["properties"]?["kind"]?.string == "offset" }.count == 3)
    }

    @Test("GPX, SVG and HTML are well-formed XML even when messages hold markup; the SVG colours each region by its last verdict")
    func xml() throws {
        let report = SiteReport(records: try records(sample), placements: try placements(), title: "Site <A> & B")
        let gpx = try #require(ElementCounter.parse(report.gpx()), "GPX is not well-formed")
        #expect(gpx.counts["wpt"] == 4 + 3)
        let svg = try #require(ElementCounter.parse(report.svg()), "SVG is not well-formed")
        let tagGroups = svg.attributes.filter { $0["_element"] == "g" && $0["class"] == "tag" }
        #expect(tagGroups.count == 4)
        #expect(tagGroups.first { $0["data-tag"] == "T08" }?["data-status"] == "never_scanned")
        // Three taps at their fixes, and the one without a fix (inconclusive, no_fix) hollow at its tag's place.
        #expect(svg.attributes.filter { $0["class"] == "scan" }.count == 4)
        #expect(
            svg.attributes.filter { $0["class"] == "scan" && $0["data-measured"] == "false" }.map { $0["data-verdict"] } == ["inconclusive"]
        )
        #expect(svg.attributes.filter { $0["class"] == "offset" }.count == 1, "a line for the moved tag")
        let html = report.html()
        #expect(!html.contains("<moved>"), "markup in messages is escaped")
        // XHTML-ish check: the page body parses as XML once the doctype is dropped.
        #expect(ElementCounter.parse(String(html.drop { $0 != "\n" })) != nil, "the HTML is not well-formed")
    }

    @Test("HTML: counts, tags never scanned, tags moved, every scan — and nothing fetched from anywhere")
    func html() throws {
        let report = SiteReport(records: try records(sample), placements: try placements())
        let html = report.html()
        #expect(html.contains("<tr class=\"confirmed\"><td>confirmed</td><td>2</td></tr>"))
        #expect(html.contains("<tr class=\"outside\"><td>outside</td><td>1</td></tr>"))
        #expect(html.contains("<ul id=\"never-scanned\"><li>T08 — n T08</li></ul>"))
        #expect(html.contains("<p>None.</p>"), "T03's last scan confirmed it, so no tag is listed as moved")
        #expect(
            html.components(separatedBy: "<tr class=").count - 1 == SessionRecord.verdicts.count + sample.count, "a summary row per kind")
        for external in ["src=", "href=", "<link", "<script", "url("] {
            #expect(!html.contains(external), "\(external) in a self-contained page")
        }
    }

    @Test("CSV: a header and one row per scan that reads back with the same fields")
    func csv() throws {
        let report = SiteReport(records: try records(sample))
        let rows = try CSV.parse(report.csv())
        #expect(rows.count == sample.count + 1)
        #expect(rows[0].fields == SiteReport.csvColumns)
        #expect(rows[2].fields[1] == "outside")
        #expect(rows[2].fields.last == "the tag is 118.9 m N of where it should be <moved> & \"gone\"")
        #expect(rows.dropFirst().allSatisfy { $0.fields.count == SiteReport.csvColumns.count })
    }

    @Test("CSV: text read from a tag or a registry is formula-safe; the numbers stay numbers")
    func csvFormulaSafe() throws {
        let hostile = record(
            "2026-05-14T08:00:33.000Z", "outside", tag: "=HYPERLINK(\\\"http://x\\\")", lat: -33.5, lon: -0.12,
            fix: (-33.500_1, -0.120_3), distance: 11.2, bearing: 181, message: "-1+2 m away")
        let report = SiteReport(records: try records([hostile]))
        let row = try #require(try CSV.parse(report.csv()).last)
        let cells = Dictionary(uniqueKeysWithValues: zip(SiteReport.csvColumns, row.fields))
        #expect(cells["tag_id"] == "'=HYPERLINK(\"http://x\")")
        #expect(cells["message"] == "'-1+2 m away")
        #expect(cells["fix_lon"]?.hasPrefix("-0.12") == true)
        #expect(cells["region_lat"] == "-33.5")
        #expect(cells["region_lon"] == "-0.12")
        #expect(CSV.formulaUnescaped(cells["tag_id"] ?? "") == "=HYPERLINK(\"http://x\")")
    }

    @Test(
        "a line that is not a verdict is an error naming it",
        arguments: [
            #"{"time":"x","verdict":"confirmed"}"#, #"{"time":"2026-05-14T08:00:00Z","verdict":"maybe"}"#,
            #"{"time":"2026-05-14T08:00:00Z","verdict":"confirmed","region":{"lat":91,"lon":0,"radius_m":5}}"#,
        ])
    func badRecord(_ line: String) throws {
        #expect(performing: { try SessionRecord(try JSONValue.parse(line), line: 7) }, throws: { ($0 as? DataFileError)?.line == 7 })
    }

    @Test("two ids that only Unicode calls equal are two tags, each with its own scans, as in the registry")
    func byteExactTags() throws {
        let (composed, decomposed) = ("Caf\u{E9}", "Cafe\u{301}")
        let entries = try [(composed, 53.545), (decomposed, 53.555)].map { id, lat in
            RegistryEntry(
                id: id, uid: nil,
                region: try CircularRegion(center: Coordinate(latitude: lat, longitude: 9.966), radius: 20, identifier: id),
                name: "n")
        }
        let report = SiteReport(
            records: try records([
                record("2026-05-14T08:00:00.000Z", "confirmed", tag: composed, lat: 53.545, lon: 9.966, fix: (53.545, 9.966)),
                record("2026-05-14T08:01:00.000Z", "outside", tag: decomposed, lat: 53.555, lon: 9.966, fix: (53.545, 9.966)),
            ]), placements: entries)
        let tags = report.tags
        #expect(tags.count == 2)
        for (id, verdict) in [(composed, "confirmed"), (decomposed, "outside")] {
            let found = tags.filter { ExactID($0.key) == ExactID(id) }
            #expect(found.count == 1 && found.first?.scans.map(\.verdict) == [verdict], "\(id.unicodeScalars.map(\.value))")
        }
        #expect(report.moved.count == 1 && report.neverScanned.isEmpty)
    }
}
