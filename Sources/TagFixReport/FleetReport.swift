public import TagFixCore

/// A fleet's verdicts (`tagfix collect --db`) as a report: the whole fleet on one map, then per
/// site its map, its tags never tapped and a table per device; the CSV of every scan with its
/// site and device. Pure: rows and placements in, text out.
public struct FleetReport: Sendable {
    /// One stored verdict: where it came from and what it said.
    public struct Row: Sendable, Hashable {
        public var site: String
        public var device: String
        public var record: SessionRecord

        public init(site: String, device: String, record: SessionRecord) {
            self.site = site
            self.device = device
            self.record = record
        }
    }

    /// Where a tag of a site should be (`collect --registry`): a tag never tapped is known by it.
    public struct Placement: Sendable, Hashable {
        public var site: String
        public var entry: RegistryEntry

        public init(site: String, entry: RegistryEntry) {
            self.site = site
            self.entry = entry
        }
    }

    public var rows: [Row]
    public var placements: [Placement]
    public var title: String

    public init(rows: [Row], placements: [Placement] = [], title: String = "TagFix fleet report") {
        self.rows = rows
        self.placements = placements
        self.title = title
    }

    /// The sites, in name order: those with verdicts and those with only placements.
    public var sites: [String] { Array(Set(rows.map(\.site) + placements.map(\.site))).sorted() }

    /// The devices of `site`, in name order.
    public func devices(of site: String) -> [String] { Array(Set(rows.filter { $0.site == site }.map(\.device))).sorted() }

    /// The site's records and placements as one site report (its map and tables), in time order:
    /// each tag's status is its last verdict from any device of the site.
    public func siteReport(_ site: String) -> SiteReport {
        SiteReport(
            records: rows.filter { $0.site == site }.map(\.record).sorted { $0.time < $1.time },
            placements: placements.filter { $0.site == site }.map(\.entry), title: "\(title) — \(site)")
    }

    /// Verdict counts per (site, device).
    public func counts(site: String, device: String) -> [String: Int] {
        Dictionary(grouping: rows.filter { $0.site == site && $0.device == device }, by: \.record.verdict).mapValues(\.count)
    }

    /// Every scan, one row each: `site`, `device`, then `SiteReport.csvColumns`.
    public func csv() -> String {
        var lines = ["site,device," + SiteReport.csvColumns.joined(separator: ",")]
        for site in sites {
            for device in devices(of: site) {
                let records = rows.filter { $0.site == site && $0.device == device }.map(\.record)
                let body = SiteReport(records: records).csv().split(separator: "\n").dropFirst()
                let head = CSV.quoted(CSV.formulaSafe(site)) + "," + CSV.quoted(CSV.formulaSafe(device)) + ","
                lines += body.map { head + $0 }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// How the page draws each site's map: the inline SVG, or Leaflet (inline, once) over each
    /// site's base map (a site missing from `bases` gets the plain background).
    public enum MapStyle: Sendable {
        case svg
        case leaflet(Leaflet, bases: [String: BaseMap])
    }

    /// A page that needs nothing else: the fleet's totals and its overview map, then per site its
    /// map, its tags never tapped and a table of verdicts per device.
    public func html(map: MapStyle = .svg) -> String {
        let reports = Dictionary(uniqueKeysWithValues: sites.map { ($0, siteReport($0)) })
        var mapHead = ""
        if case .leaflet(let leaflet, _) = map { mapHead = SiteMap.head(leaflet: leaflet, inline: true) }
        var page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>\(SiteReport.x(title))</title>
            <style>
            body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
            td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#eee}
            .key{display:inline-block;width:.9em;height:.9em;border-radius:50%;margin:0 .3em 0 1em;vertical-align:middle}
            </style>
            \(mapHead)</head><body>
            <h1>\(SiteReport.x(title))</h1>
            <p>\(rows.count) verdict\(rows.count == 1 ? "" : "s") from \(Set(rows.map(\.device)).count) device(s) on \(sites.count) site(s).</p>

            """
        page += "<section id=\"overview\">\n<h2>The fleet</h2>\n" + overviewSVG(reports) + "\n<p class=\"legend\">"
        page += (SessionRecord.verdicts + ["never_tapped"]).map {
            "<span class=\"key\" style=\"background:\(SiteReport.colour($0))\"></span>\($0 == "never_tapped" ? "never tapped" : $0)"
        }.joined()
        page += "</p>\n<table id=\"sites\"><tr><th rowspan=\"2\">site</th><th rowspan=\"2\">tags</th><th rowspan=\"2\">never tapped</th>"
        page += "<th colspan=\"\(SessionRecord.verdicts.count)\">tags whose last verdict is</th><th rowspan=\"2\">verdicts</th></tr>\n<tr>"
        page += SessionRecord.verdicts.map { "<th>\($0)</th>" }.joined() + "</tr>\n"
        for site in sites {
            let tags = reports[site]?.tags ?? []
            let last = Dictionary(grouping: tags.compactMap(\.status), by: { $0 }).mapValues(\.count)
            page += "<tr data-site=\"\(SiteReport.x(site))\"><td>\(SiteReport.x(site))</td><td>\(tags.count)</td>"
            page += "<td>\(tags.filter { $0.scans.isEmpty }.count)</td>"
            page += SessionRecord.verdicts.map { "<td>\(last[$0] ?? 0)</td>" }.joined()
            page += "<td>\(reports[site]?.records.count ?? 0)</td></tr>\n"
        }
        page += "</table>\n</section>\n"
        let header = "<tr><th>device</th>" + SessionRecord.verdicts.map { "<th>\($0)</th>" }.joined() + "<th>total</th></tr>\n"
        if case .leaflet(let leaflet, _) = map { page += SiteMap.library(leaflet) }
        for (index, site) in sites.enumerated() {
            guard let report = reports[site] else { continue }
            page += "<section class=\"site\" data-site=\"\(SiteReport.x(site))\">\n<h2>\(SiteReport.x(site))</h2>\n"
            switch map {
            case .svg:
                page += report.svg() + "\n"
            case .leaflet(_, let bases):
                page += report.leafletMap(
                    base: bases[site] ?? .plain, id: "map-\(index)", data: "site-data-\(index)", global: "tagfixSite\(index)")
            }
            let never = report.neverScanned
            if !never.isEmpty {
                page += "<h3>Tags never tapped</h3>\n<ul class=\"never-tapped\">"
                page += never.map { "<li>\(SiteReport.x($0.key))\($0.name.map { " — \(SiteReport.x($0))" } ?? "")</li>" }.joined()
                page += "</ul>\n"
            }
            page += "<table class=\"devices\">" + header
            for device in devices(of: site) {
                let counts = self.counts(site: site, device: device)
                page += "<tr data-device=\"\(SiteReport.x(device))\"><td>\(SiteReport.x(device))</td>"
                page += SessionRecord.verdicts.map { "<td>\(counts[$0] ?? 0)</td>" }.joined()
                page += "<td>\(counts.values.reduce(0, +))</td></tr>\n"
            }
            page += "</table>\n</section>\n"
        }
        if case .leaflet = map { page += "<script>document.documentElement.setAttribute(\"data-map\", \"ready\");</script>\n" }
        return page + "</body></html>\n"
    }
}
