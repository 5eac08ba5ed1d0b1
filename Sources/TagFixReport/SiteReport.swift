import Foundation
public import TagFixCore

/// A site's session, for people: per tag, where it should be and what its scans said; rendered
/// as GeoJSON (QGIS, geojson.io), GPX, CSV, a self-contained SVG map, or an HTML page with the map
/// and a summary. Pure: no files, no network, no map tiles.
public struct SiteReport: Sendable {
    public var records: [SessionRecord]
    /// The registry's placements, when known: they add tags never scanned.
    public var placements: [RegistryEntry]
    public var title: String
    /// Placements refined from their confirmed taps (`PlacementRefiner`): the moved ones are listed.
    public var refinements: [PlacementRefiner.Estimate]
    /// The read health the registry kept from each tag's enrolment, by tag id (`weakReaders`).
    public var enrolledReadHealth: [String: EnrolledReadHealth] = [:]

    public init(
        records: [SessionRecord], placements: [RegistryEntry] = [], title: String = "TagFix site report",
        refinements: [PlacementRefiner.Estimate] = []
    ) {
        self.records = records.sorted { $0.time < $1.time }
        self.placements = placements.sorted { ExactID($0.id) < ExactID($1.id) }
        self.title = title
        self.refinements = refinements
    }

    /// Tags whose confirmed taps agree on a place away from their centre, beyond both accuracies.
    public var placementsMoved: [PlacementRefiner.Estimate] { refinements.filter(\.moved) }

    /// One tag: where it should be, and its scans.
    public struct Tag: Sendable, Hashable {
        public var key: String
        public var name: String?
        public var center: Coordinate?
        public var radius: Double?
        public var scans: [SessionRecord]
        /// The last scan's verdict, or `nil` when never scanned.
        public var status: String? { scans.last?.verdict }
    }

    /// Every tag: the registry's placements, then tags seen only in the log.
    public var tags: [Tag] {
        // Keyed by the id's bytes, as the registry keys its entries: two ids that only Unicode
        // calls equal are two tags, each with its own scans.
        var byKey: [ExactID: Tag] = [:]
        var order: [ExactID] = []
        for entry in placements {
            let key = ExactID(entry.id)
            byKey[key] = Tag(key: entry.id, name: entry.name, center: entry.region.center, radius: entry.region.radius, scans: [])
            order.append(key)
        }
        for record in records {
            let key = ExactID(record.tagKey)
            if byKey[key] == nil {
                byKey[key] = Tag(
                    key: record.tagKey, name: record.region?.name, center: record.region?.center, radius: record.region?.radius, scans: [])
                order.append(key)
            }
            byKey[key]?.scans.append(record)
            if byKey[key]?.center == nil, let region = record.region {
                byKey[key]?.center = region.center
                byKey[key]?.radius = region.radius
            }
        }
        return order.compactMap { byKey[$0] }
    }

    /// How many scans gave each verdict.
    public var counts: [String: Int] { Dictionary(grouping: records, by: \.verdict).mapValues(\.count) }
    public var neverScanned: [Tag] { tags.filter { $0.scans.isEmpty } }
    /// Tags whose last scan says they are outside their region.
    public var moved: [Tag] { tags.filter { $0.status == "outside" } }

    // MARK: - GeoJSON (RFC 7946)

    public func geoJSON() -> String {
        var features: [String] = []
        for tag in tags {
            guard let center = tag.center, let radius = tag.radius else { continue }
            let ring = Self.circle(center, radius: radius).map { "[\(Self.n($0.longitude)),\(Self.n($0.latitude))]" }
            features.append(
                Self.feature(
                    geometry: #"{"type":"Polygon","coordinates":[[\#(ring.joined(separator: ","))]]}"#,
                    properties: [
                        ("kind", Self.q("expected_region")), ("tag_id", Self.q(tag.key)), ("name", tag.name.map(Self.q) ?? "null"),
                        ("radius_m", Self.n(radius)), ("scans", String(tag.scans.count)),
                        ("status", tag.status.map(Self.q) ?? Self.q("never_scanned")),
                        ("colour", Self.q(Self.colour(tag.status))),
                    ]))
        }
        for record in records {
            guard let fix = record.fix else { continue }
            features.append(
                Self.feature(
                    geometry: #"{"type":"Point","coordinates":[\#(Self.n(fix.coordinate.longitude)),\#(Self.n(fix.coordinate.latitude))]}"#,
                    properties: [
                        ("kind", Self.q("scan")), ("tag_id", Self.q(record.tagKey)), ("time", Self.q(record.time.iso8601)),
                        ("verdict", Self.q(record.verdict)), ("reason", record.reason.map(Self.q) ?? "null"),
                        ("distance_m", record.distance.map(Self.n) ?? "null"),
                        ("accuracy_m", (record.accuracy ?? fix.accuracy).map(Self.n) ?? "null"),
                        ("message", Self.q(record.message)), ("colour", Self.q(Self.colour(record.verdict))),
                    ]))
            if let region = record.region {
                features.append(
                    Self.feature(
                        geometry:
                            #"{"type":"LineString","coordinates":[[\#(Self.n(region.center.longitude)),\#(Self.n(region.center.latitude))],[\#(Self.n(fix.coordinate.longitude)),\#(Self.n(fix.coordinate.latitude))]]}"#,
                        properties: [
                            ("kind", Self.q("offset")), ("tag_id", Self.q(record.tagKey)), ("time", Self.q(record.time.iso8601)),
                            ("verdict", Self.q(record.verdict)), ("distance_m", record.distance.map(Self.n) ?? "null"),
                            ("bearing_deg", record.bearing.map(Self.n) ?? "null"),
                        ]))
            }
        }
        return #"{"type":"FeatureCollection","features":["# + "\n" + features.joined(separator: ",\n") + "\n]}\n"
    }

    private static func feature(geometry: String, properties: [(String, String)]) -> String {
        let members = properties.map { "\(q($0.0)):\($0.1)" }.joined(separator: ",")
        return #"{"type":"Feature","geometry":\#(geometry),"properties":{\#(members)}}"#
    }

    /// A closed ring of `segments` points around `center` at `radius` metres, counter-clockwise
    /// (RFC 7946's right-hand rule for exterior rings). Spherical: exact to millimetres at 500 m.
    public static func circle(_ center: Coordinate, radius: Double, segments: Int = 64) -> [Coordinate] {
        let r = 6_371_008.8
        let angular = radius / r
        let lat1 = center.latitude * .pi / 180, lon1 = center.longitude * .pi / 180
        var ring: [Coordinate] = []
        for step in 0...segments {
            // Bearings decrease: north, then west, south, east — counter-clockwise on the map.
            let bearing = -2 * .pi * Double(step % segments) / Double(segments)
            let lat2 = asin(sin(lat1) * cos(angular) + cos(lat1) * sin(angular) * cos(bearing))
            var lon2 = lon1 + atan2(sin(bearing) * sin(angular) * cos(lat1), cos(angular) - sin(lat1) * sin(lat2))
            lon2 = (lon2 + 3 * .pi).truncatingRemainder(dividingBy: 2 * .pi) - .pi
            ring.append(Coordinate(validLatitude: min(90, max(-90, lat2 * 180 / .pi)), longitude: lon2 * 180 / .pi))
        }
        return ring
    }

    // MARK: - GPX 1.1

    public func gpx() -> String {
        var text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <gpx version="1.1" creator="tagfix" xmlns="http://www.topografix.com/GPX/1/1">
              <metadata><name>\(Self.x(title))</name></metadata>

            """
        for tag in tags {
            guard let center = tag.center else { continue }
            text += "  <wpt lat=\"\(Self.n(center.latitude))\" lon=\"\(Self.n(center.longitude))\">"
            text += "<name>\(Self.x(tag.key)) expected</name>"
            text +=
                "<desc>\(Self.x(tag.name ?? "")) radius \(Self.n(tag.radius ?? 0)) m, \(tag.status ?? "never scanned")</desc><type>expected</type></wpt>\n"
        }
        for record in records {
            guard let fix = record.fix else { continue }
            text += "  <wpt lat=\"\(Self.n(fix.coordinate.latitude))\" lon=\"\(Self.n(fix.coordinate.longitude))\">"
            text += "<time>\(record.time.formatted(fractionDigits: 3))</time><name>\(Self.x(record.tagKey)) \(record.verdict)</name>"
            text += "<desc>\(Self.x(record.message))</desc><type>scan</type></wpt>\n"
        }
        return text + "</gpx>\n"
    }

    // MARK: - CSV

    public static let csvColumns = [
        "time", "verdict", "reason", "tag_id", "uid", "name", "distance_m", "accuracy_m", "bearing_deg", "fix_lat", "fix_lon", "region_lat",
        "region_lon", "radius_m", "source", "message",
    ]

    public func csv() -> String {
        var text = Self.csvColumns.joined(separator: ",") + "\n"
        for r in records {
            // Text cells formula-safe (`CSV.formulaSafe`: a tag id "=cmd|…" read from a tag is
            // not run by a spreadsheet); the numbers as numbers, so -0.12 stays a longitude.
            let labels: [String?] = [r.time.iso8601, r.verdict, r.reason, r.tagKey, r.uid, r.region?.name]
            let numbers: [String?] = [
                r.distance.map(Self.n), r.accuracy.map(Self.n), r.bearing.map(Self.n), r.fix.map { Self.n($0.coordinate.latitude) },
                r.fix.map { Self.n($0.coordinate.longitude) }, r.region.map { Self.n($0.center.latitude) },
                r.region.map { Self.n($0.center.longitude) }, r.region.map { Self.n($0.radius) },
            ]
            let notes: [String?] = [r.region?.source, r.message]
            let fields = labels.map { $0.map(CSV.formulaSafe) } + numbers + notes.map { $0.map(CSV.formulaSafe) }
            text += fields.map { CSV.quoted($0 ?? "") }.joined(separator: ",") + "\n"
        }
        return text
    }

    // MARK: - SVG map

    /// The site drawn to scale: each tag's region coloured by its last verdict, each scan's fix,
    /// lines from where moved tags should be to where they were scanned, and a scale bar.
    public func svg(width: Double = 900, height: Double = 600) -> String {
        let frame = mapFrame(width: width, height: height)
        let (margin, scale) = (frame.margin, frame.scale)
        func screen(_ c: Coordinate) -> (x: Double, y: Double) { frame.screen(c) }
        var svg =
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Self.p(width))\" height=\"\(Self.p(height))\" viewBox=\"0 0 \(Self.p(width)) \(Self.p(height))\" font-family=\"sans-serif\" font-size=\"12\">\n"
        svg += "  <title>\(Self.x(title))</title>\n  <rect width=\"100%\" height=\"100%\" fill=\"#f8f8f4\"/>\n"
        for tag in tags {
            guard let center = tag.center, let radius = tag.radius else { continue }
            let s = screen(center)
            let colour = Self.colour(tag.status)
            svg += "  <g class=\"tag\" data-tag=\"\(Self.x(tag.key))\" data-status=\"\(tag.status ?? "never_scanned")\">"
            svg +=
                "<circle cx=\"\(Self.p(s.x))\" cy=\"\(Self.p(s.y))\" r=\"\(Self.p(max(2, radius * scale)))\" fill=\"\(colour)\" fill-opacity=\"0.25\" stroke=\"\(colour)\" stroke-width=\"2\"/>"
            svg +=
                "<text x=\"\(Self.p(s.x))\" y=\"\(Self.p(s.y - max(2, radius * scale) - 4))\" text-anchor=\"middle\">\(Self.x(tag.key))</text></g>\n"
        }
        for position in tapPositions {
            let record = position.record
            guard let coordinate = position.coordinate else { continue }
            let f = screen(coordinate)
            guard position.measured else {
                // Decided without a fix (disallowed, untrusted, not registered): drawn hollow at
                // its tag's place, or the tech's last position before it.
                svg +=
                    "  <circle class=\"scan\" data-verdict=\"\(record.verdict)\" data-measured=\"false\" cx=\"\(Self.p(f.x))\" cy=\"\(Self.p(f.y))\" r=\"5\" fill=\"\(Self.colour(record.verdict))\" fill-opacity=\"0.35\" stroke=\"\(Self.colour(record.verdict))\" stroke-width=\"2\" stroke-dasharray=\"2 2\"><title>\(Self.x("\(record.tagKey) \(record.verdict): \(record.message) (no fix)"))</title></circle>\n"
                continue
            }
            if record.verdict == "outside", let region = record.region {
                let c = screen(region.center)
                svg +=
                    "  <line class=\"offset\" x1=\"\(Self.p(c.x))\" y1=\"\(Self.p(c.y))\" x2=\"\(Self.p(f.x))\" y2=\"\(Self.p(f.y))\" stroke=\"\(Self.colour("outside"))\" stroke-dasharray=\"4 3\"/>\n"
            }
            svg +=
                "  <circle class=\"scan\" data-verdict=\"\(record.verdict)\" cx=\"\(Self.p(f.x))\" cy=\"\(Self.p(f.y))\" r=\"4\" fill=\"\(Self.colour(record.verdict))\" stroke=\"#222\"><title>\(Self.x("\(record.tagKey) \(record.verdict): \(record.message)"))</title></circle>\n"
        }
        // A scale bar of a round number of metres, about a fifth of the width.
        let target = (width / 5) / scale
        let bar = [1.0, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000].last { $0 <= target } ?? 1
        let y = height - 20
        svg +=
            "  <g class=\"scale\"><line x1=\"\(Self.p(margin))\" y1=\"\(Self.p(y))\" x2=\"\(Self.p(margin + bar * scale))\" y2=\"\(Self.p(y))\" stroke=\"#222\" stroke-width=\"3\"/>"
        svg += "<text x=\"\(Self.p(margin + bar * scale + 6))\" y=\"\(Self.p(y + 4))\">\(Self.n(bar)) m</text>"
        svg += "<text x=\"\(Self.p(width - margin))\" y=\"\(Self.p(y + 4))\" text-anchor=\"end\">N ↑</text></g>\n"
        return svg + "</svg>\n"
    }

    /// How the SVG map places a coordinate: a local equirectangular projection about the
    /// points' mean latitude, scaled so every region and fix fits `width` × `height`. The live
    /// page (tagfix serve) places new fixes with the same numbers.
    public struct MapFrame: Sendable, Hashable {
        public var latitude0: Double
        public var longitude0: Double
        public var metresPerDegreeLatitude: Double
        public var metresPerDegreeLongitude: Double
        public var minX: Double
        public var minY: Double
        public var scale: Double
        public var margin: Double
        public var height: Double

        /// Metres east and north of the frame's origin.
        public func local(_ c: Coordinate) -> (x: Double, y: Double) {
            var dLon = c.longitude - longitude0
            if dLon > 180 { dLon -= 360 }
            if dLon < -180 { dLon += 360 }
            return (dLon * metresPerDegreeLongitude, (c.latitude - latitude0) * metresPerDegreeLatitude)
        }

        /// Where `c` is drawn, in the SVG's coordinates.
        public func screen(_ c: Coordinate) -> (x: Double, y: Double) {
            let p = local(c)
            return (margin + (p.x - minX) * scale, height - margin - 30 - (p.y - minY) * scale)
        }
    }

    /// The frame `svg(width:height:)` draws in.
    public func mapFrame(width: Double = 900, height: Double = 600) -> MapFrame {
        Self.mapFrame(tags: tags, records: records, width: width, height: height)
    }

    /// A frame over `tags`' regions and `records`' fixes, to scale in `width` × `height` less the
    /// margins, `pad` pixels more on every side and `top` pixels above (for names).
    static func mapFrame(
        tags: [Tag], records: [SessionRecord], width: Double, height: Double, pad: Double = 0, top: Double = 30
    ) -> MapFrame {
        var points: [Coordinate] = tags.compactMap(\.center) + records.compactMap { $0.fix?.coordinate }
        if points.isEmpty { points = [Coordinate(validLatitude: 0, longitude: 0)] }
        let lat0 = points.map(\.latitude).reduce(0, +) / Double(points.count)
        var frame = MapFrame(
            latitude0: lat0, longitude0: points[0].longitude, metresPerDegreeLatitude: 111_132.954 - 559.822 * cos(2 * lat0 * .pi / 180),
            metresPerDegreeLongitude: max(1, 111_412.84 * cos(lat0 * .pi / 180)), minX: 0, minY: 0, scale: 1, margin: 40, height: height)
        // Bounds in metres, regions included.
        var (minX, maxX, minY, maxY) = (Double.infinity, -Double.infinity, Double.infinity, -Double.infinity)
        for tag in tags {
            guard let center = tag.center else { continue }
            let p = frame.local(center), r = tag.radius ?? 0
            (minX, maxX, minY, maxY) = (min(minX, p.x - r), max(maxX, p.x + r), min(minY, p.y - r), max(maxY, p.y + r))
        }
        for record in records {
            guard let fix = record.fix else { continue }
            let p = frame.local(fix.coordinate)
            (minX, maxX, minY, maxY) = (min(minX, p.x), max(maxX, p.x), min(minY, p.y), max(maxY, p.y))
        }
        if !minX.isFinite { (minX, maxX, minY, maxY) = (-50, 50, -50, 50) }
        frame.scale = min(
            (width - 2 * frame.margin - 2 * pad) / max(maxX - minX, 1), (height - 2 * frame.margin - top - 2 * pad) / max(maxY - minY, 1))
        frame.minX = minX - pad / frame.scale
        frame.minY = minY - pad / frame.scale
        return frame
    }

    // MARK: - HTML page

    /// A page that needs nothing else: the map (inline SVG), the counts, the tags never scanned,
    /// the tags that moved, and every scan.
    public func html() -> String { html(map: .svg) }

    /// How the HTML page draws its map.
    public enum MapStyle: Sendable {
        /// The inline SVG (`svg()`): no script at all.
        case svg
        /// Leaflet, inline, over `BaseMap` (`SiteMap`).
        case leaflet(Leaflet, BaseMap)
    }

    /// The page with its map drawn as `map` says.
    public func html(map: MapStyle) -> String {
        let counts = self.counts
        var mapHead = "", mapBody = svg()
        if case .leaflet(let leaflet, let base) = map {
            mapHead = SiteMap.head(leaflet: leaflet, inline: true)
            mapBody = leafletMap(leaflet: leaflet, base: base)
        }
        var page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>\(Self.x(title))</title>
            <style>
            body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
            @media (max-width:600px){body{margin:0.6em}}
            td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#eee}
            .confirmed{color:#1a7f37}.outside{color:#cf222e;font-weight:bold}.inconclusive{color:#9a6700}
            .notRegistered{color:#8250df}.disallowed{color:#0969da}.untrusted{color:#bc4c00;font-weight:bold}
            </style>
            \(mapHead)</head><body>
            <h1>\(Self.x(title))</h1>
            <p>\(records.count) scan\(records.count == 1 ? "" : "s") of \(tags.count) tag\(tags.count == 1 ? "" : "s")\(records.first.map { ", \($0.time.formatted(fractionDigits: 0)) to \(records.last?.time.formatted(fractionDigits: 0) ?? "")" } ?? "").</p>

            """
        page += mapBody + "\n<h2>Summary</h2>\n<table id=\"summary\"><tr><th>verdict</th><th>scans</th></tr>\n"
        for verdict in SessionRecord.verdicts {
            page += "<tr class=\"\(verdict)\"><td>\(verdict)</td><td>\(counts[verdict] ?? 0)</td></tr>\n"
        }
        page += "</table>\n<h2>Tags never scanned</h2>\n"
        let never = neverScanned
        page +=
            never.isEmpty
            ? "<p>None.</p>\n"
            : "<ul id=\"never-scanned\">" + never.map { "<li>\(Self.x($0.key))\($0.name.map { " — \(Self.x($0))" } ?? "")</li>" }.joined()
                + "</ul>\n"
        page += "<h2>Tags moved</h2>\n"
        let moved = self.moved
        if moved.isEmpty {
            page += "<p>None.</p>\n"
        } else {
            page += "<table id=\"moved\"><tr><th>tag</th><th>name</th><th>found</th><th>radius</th><th>when</th></tr>\n"
            for tag in moved {
                guard let last = tag.scans.last else { continue }
                let direction = last.bearing.map { " \(Geodesic.compassPoint(forAzimuth: $0))" } ?? ""
                page +=
                    "<tr><td>\(Self.x(tag.key))</td><td>\(Self.x(tag.name ?? ""))</td><td>\(Self.n1(last.distance)) m\(direction) of its place</td>"
                page += "<td>\(Self.n1(tag.radius)) m</td><td>\(last.time.formatted(fractionDigits: 0))</td></tr>\n"
            }
            page += "</table>\n"
        }
        page += placementMovedSection()
        page += weakReadersSection()
        page +=
            "<h2>Scans</h2>\n<table id=\"scans\"><tr><th>time</th><th>tag</th><th>verdict</th><th>distance</th><th>accuracy</th><th>message</th></tr>\n"
        for r in records {
            page +=
                "<tr class=\"\(r.verdict)\"><td>\(r.time.formatted(fractionDigits: 0))</td><td>\(Self.x(r.tagKey))</td><td>\(r.verdict)\(r.reason.map { " (\(Self.x($0)))" } ?? "")</td>"
            page +=
                "<td>\(r.distance.map { "\(Self.n1($0)) m" } ?? "")</td><td>\(r.accuracy.map { "±\(Self.n1($0)) m" } ?? "")</td><td>\(Self.x(r.message))</td></tr>\n"
        }
        return page + "</table>\n</body></html>\n"
    }

    /// The tags reported moved by their confirmed taps (every tap may still be confirmed).
    func placementMovedSection() -> String {
        var text = "<h2>Placements that moved (confirmed taps agree on another place)</h2>\n"
        let moved = placementsMoved
        guard !moved.isEmpty else {
            return text + (refinements.isEmpty ? "<p>No placement evidence (give --registry).</p>\n" : "<p>None.</p>\n")
        }
        text +=
            "<table id=\"placement-moved\"><tr><th>tag</th><th>name</th><th>the taps place it</th><th>beyond</th><th>visits</th><th>radius</th></tr>\n"
        for e in moved {
            let direction = e.shiftAzimuth.map { " \(Geodesic.compassPoint(forAzimuth: $0))" } ?? ""
            text +=
                "<tr><td>\(Self.x(e.tagID))</td><td>\(Self.x(e.name ?? ""))</td><td>\(Self.n1(e.shift)) m\(direction) of its centre</td>"
            text += "<td>±\(Self.n1(e.movedThreshold)) m</td><td>\(e.independentVisits)</td><td>\(Self.n1(e.radius)) m</td></tr>\n"
        }
        return text + "</table>\n"
    }

    // MARK: - Helpers

    /// The colour of a verdict (and grey for never scanned).
    public static func colour(_ verdict: String?) -> String {
        switch verdict {
        case "confirmed": "#1a7f37"
        case "outside": "#cf222e"
        case "inconclusive": "#bf8700"
        case "notRegistered": "#8250df"
        case "disallowed": "#0969da"
        case "untrusted": "#bc4c00"
        default: "#8c959f"
        }
    }

    static func q(_ text: String) -> String { JSONValue.quoted(text) }
    static func n(_ value: Double) -> String { JSONValue.number(value, digits: 7) }
    static func n1(_ value: Double?) -> String { value.map { Coordinate.format($0, 1) } ?? "?" }
    static func p(_ value: Double) -> String { Coordinate.format(value, 1) }

    /// Escapes text for XML and HTML (`htmlEscaped`).
    static func x(_ text: String) -> String {
        text.htmlEscaped
    }
}
