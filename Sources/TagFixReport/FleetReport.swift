public import TagFixCore

/// A fleet's verdicts (`tagfix collect --db`) as a report: per site, its map and a table per
/// device; the CSV of every scan with its site and device. Pure: rows in, text out.
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

    public var rows: [Row]
    public var title: String

    public init(rows: [Row], title: String = "TagFix fleet report") {
        self.rows = rows
        self.title = title
    }

    /// The sites, in name order.
    public var sites: [String] { Array(Set(rows.map(\.site))).sorted() }

    /// The devices of `site`, in name order.
    public func devices(of site: String) -> [String] { Array(Set(rows.filter { $0.site == site }.map(\.device))).sorted() }

    /// The site's records as one site report (its map and tables), in time order.
    public func siteReport(_ site: String) -> SiteReport {
        SiteReport(records: rows.filter { $0.site == site }.map(\.record).sorted { $0.time < $1.time }, title: "\(title) — \(site)")
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

    /// A page that needs nothing else: the fleet's totals, then per site its map and a table of
    /// verdicts per device.
    public func html() -> String {
        var page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>\(SiteReport.x(title))</title>
            <style>
            body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
            td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#eee}
            </style></head><body>
            <h1>\(SiteReport.x(title))</h1>
            <p>\(rows.count) verdict\(rows.count == 1 ? "" : "s") from \(Set(rows.map(\.device)).count) device(s) on \(sites.count) site(s).</p>

            """
        let header = "<tr><th>device</th>" + SessionRecord.verdicts.map { "<th>\($0)</th>" }.joined() + "<th>total</th></tr>\n"
        for site in sites {
            let report = siteReport(site)
            page += "<section class=\"site\" data-site=\"\(SiteReport.x(site))\">\n<h2>\(SiteReport.x(site))</h2>\n"
            page += report.svg() + "\n<table class=\"devices\">" + header
            for device in devices(of: site) {
                let counts = self.counts(site: site, device: device)
                page += "<tr data-device=\"\(SiteReport.x(device))\"><td>\(SiteReport.x(device))</td>"
                page += SessionRecord.verdicts.map { "<td>\(counts[$0] ?? 0)</td>" }.joined()
                page += "<td>\(counts.values.reduce(0, +))</td></tr>\n"
            }
            page += "</table>\n</section>\n"
        }
        return page + "</body></html>\n"
    }
}
