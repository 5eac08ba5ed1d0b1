import Foundation
import TagFixCore

extension FleetReport {
    /// The whole fleet on one map: every site's tags as circles coloured by each tag's last
    /// verdict from any device of the site (grey: in the site's registry, never tapped), where
    /// that last verdict was given as a dot of its colour (one a tag: the site maps below draw
    /// every verdict; a fleet's thousands would bury the overview), a dashed line from where a
    /// moved tag should be to where it was tapped, and each site's name. To scale, like the site maps, but a
    /// region stays at least `minimumRadius` pixels across so sites kilometres apart still show
    /// their tags. Pure SVG: no tiles, no script.
    public func overviewSVG(width: Double = 900, height: Double = 600) -> String {
        overviewSVG(Dictionary(uniqueKeysWithValues: sites.map { ($0, siteReport($0)) }), width: width, height: height)
    }

    /// The smallest radius a tag's region is drawn with on the overview, in pixels.
    public static let minimumRadius = 4.0

    func overviewSVG(_ reports: [String: SiteReport], width: Double = 900, height: Double = 600) -> String {
        let sites = self.sites
        let tagsBySite = reports.mapValues(\.tags)
        let frame = Self.overviewFrame(
            tagsBySite.values.flatMap { $0 }, tagsBySite.values.flatMap { $0.compactMap(\.scans.last) }, width: width, height: height)
        var svg =
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"overview\" width=\"\(SiteReport.p(width))\" height=\"\(SiteReport.p(height))\" viewBox=\"0 0 \(SiteReport.p(width)) \(SiteReport.p(height))\" font-family=\"sans-serif\" font-size=\"12\">\n"
        svg += "  <title>\(SiteReport.x(title)): the fleet</title>\n  <rect width=\"100%\" height=\"100%\" fill=\"#f8f8f4\"/>\n"
        for site in sites {
            guard let tags = tagsBySite[site] else { continue }
            let name = SiteReport.x(site)
            svg += "  <g class=\"site\" data-site=\"\(name)\">\n"
            var top = (x: 0.0, y: Double.infinity)
            var (minX, maxX) = (Double.infinity, -Double.infinity)
            for tag in tags {
                guard let center = tag.center, let radius = tag.radius else { continue }
                let s = frame.screen(center)
                let r = max(Self.minimumRadius, radius * frame.scale)
                let status = tag.status ?? "never_tapped"
                let colour = SiteReport.colour(tag.status)
                let said =
                    tag.status.map { "last verdict \($0), \(tag.scans.count) verdict\(tag.scans.count == 1 ? "" : "s")" } ?? "never tapped"
                svg += "    <g class=\"tag\" data-site=\"\(name)\" data-tag=\"\(SiteReport.x(tag.key))\" data-status=\"\(status)\">"
                svg +=
                    "<circle cx=\"\(SiteReport.p(s.x))\" cy=\"\(SiteReport.p(s.y))\" r=\"\(SiteReport.p(r))\" fill=\"\(colour)\" fill-opacity=\"0.35\" stroke=\"\(colour)\" stroke-width=\"2\">"
                svg += "<title>\(SiteReport.x("\(site) · \(tag.key)\(tag.name.map { " (\($0))" } ?? ""): \(said)"))</title></circle></g>\n"
                if s.y - r < top.y { top = (s.x, s.y - r) }
                (minX, maxX) = (min(minX, s.x - r), max(maxX, s.x + r))
            }
            for record in tags.compactMap(\.scans.last) {
                guard let fix = record.fix else { continue }
                let f = frame.screen(fix.coordinate)
                if record.verdict == "outside", let region = record.region {
                    let c = frame.screen(region.center)
                    svg +=
                        "    <line class=\"offset\" x1=\"\(SiteReport.p(c.x))\" y1=\"\(SiteReport.p(c.y))\" x2=\"\(SiteReport.p(f.x))\" y2=\"\(SiteReport.p(f.y))\" stroke=\"\(SiteReport.colour("outside"))\" stroke-dasharray=\"4 3\"/>\n"
                }
                svg +=
                    "    <circle class=\"scan\" data-site=\"\(name)\" data-tag=\"\(SiteReport.x(record.tagKey))\" data-verdict=\"\(record.verdict)\" cx=\"\(SiteReport.p(f.x))\" cy=\"\(SiteReport.p(f.y))\" r=\"2.5\" fill=\"\(SiteReport.colour(record.verdict))\" stroke=\"#222\" stroke-width=\"0.5\"><title>\(SiteReport.x("\(site) · \(record.tagKey) \(record.verdict): \(record.message)"))</title></circle>\n"
                if f.y < top.y { top = (f.x, f.y) }
                (minX, maxX) = (min(minX, f.x), max(maxX, f.x))
            }
            if top.y.isFinite {
                let x = min(max((minX + maxX) / 2, frame.margin), width - frame.margin)
                svg +=
                    "    <text class=\"site-label\" x=\"\(SiteReport.p(x))\" y=\"\(SiteReport.p(max(14, top.y - 6)))\" text-anchor=\"middle\" font-weight=\"bold\">\(name)</text>\n"
            }
            svg += "  </g>\n"
        }
        let target = (width / 5) / frame.scale
        let steps: [Double] = [1, 2, 5].flatMap { unit in (0...6).map { unit * pow(10, Double($0)) } }.sorted()
        let bar = steps.last { $0 <= target } ?? 1
        let y = height - 20
        let label = bar >= 1000 ? "\(SiteReport.n(bar / 1000)) km" : "\(SiteReport.n(bar)) m"
        svg +=
            "  <g class=\"scale\"><line x1=\"\(SiteReport.p(frame.margin))\" y1=\"\(SiteReport.p(y))\" x2=\"\(SiteReport.p(frame.margin + bar * frame.scale))\" y2=\"\(SiteReport.p(y))\" stroke=\"#222\" stroke-width=\"3\"/>"
        svg += "<text x=\"\(SiteReport.p(frame.margin + bar * frame.scale + 6))\" y=\"\(SiteReport.p(y + 4))\">\(label)</text>"
        svg += "<text x=\"\(SiteReport.p(width - frame.margin))\" y=\"\(SiteReport.p(y + 4))\" text-anchor=\"end\">N ↑</text></g>\n"
        return svg + "</svg>\n"
    }

    /// The overview's frame: the site maps' projection (`SiteReport.MapFrame`) over every site's
    /// regions and the fixes drawn, at once. Tags of two sites are never merged by id here, so the frame is
    /// built from the sites' tags rather than from one site report of everything.
    static func overviewFrame(_ tags: [SiteReport.Tag], _ records: [SessionRecord], width: Double, height: Double) -> SiteReport.MapFrame {
        // Room above for the sites' names, and around for the smallest circles.
        SiteReport.mapFrame(tags: tags, records: records, width: width, height: height, pad: 2 * Self.minimumRadius, top: 46)
    }
}
