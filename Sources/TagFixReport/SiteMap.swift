import Foundation
public import TagFixCore

/// The site on a Leaflet map (the HTML report's, and `tagfix serve`'s live page's): each tag's
/// region as a circle of its radius in metres coloured by its last verdict, each tap as a dot
/// (a tap decided without a fix — disallowed, untrusted, not registered — drawn hollow at its
/// tag's place, or at the tech's last position before it), lines from where moved tags should be
/// to where they were tapped, the tech's position with its accuracy circle, a legend of the six
/// verdicts and a scale bar, over a base map (`BaseMap`) or a plain background. Every text
/// reaches the page through `textContent` or Leaflet as escaped text, never as HTML.
public enum SiteMap {
    /// The legend's words for each verdict, and for a tag never scanned.
    public static let labels: [(String, String)] = [
        ("confirmed", "confirmed"), ("outside", "outside its region"), ("inconclusive", "inconclusive"),
        ("notRegistered", "not registered"), ("disallowed", "disallowed"), ("untrusted", "untrusted"),
        ("never_scanned", "never scanned"),
    ]

    /// JSON made safe inside a <script> element: no "<" (so no "</script" or "<!--") and no
    /// U+2028/U+2029.
    public static func scriptSafe(_ json: String) -> String {
        json.replacing("<", with: "\\u003c").replacing(">", with: "\\u003e").replacing("&", with: "\\u0026")
            .replacing("\u{2028}", with: "\\u2028").replacing("\u{2029}", with: "\\u2029")
    }

    /// The base map as the page's script reads it.
    public static func baseJSON(_ base: BaseMap) -> String {
        var object = JSONObjectWriter()
        switch base {
        case .plain:
            object.add("kind", "plain")
            object.add("maxZoom", 22)
        case .server(let template, let attribution, let maximumZoom):
            object.add("kind", "server")
            object.add("url", template.text)
            object.add("attribution", attribution ?? (template.isOpenStreetMap ? TileTemplate.openStreetMapAttribution : nil))
            object.add("tileMaxZoom", maximumZoom)
            object.add("maxZoom", max(maximumZoom, 19) + 2)
        case .embedded(let embedded):
            object.add("kind", "tiles")
            object.add("type", embedded.mediaType)
            object.add("attribution", embedded.attribution)
            object.add("tileMinZoom", embedded.zooms.lowerBound)
            object.add("tileMaxZoom", embedded.zooms.upperBound)
            object.add("maxZoom", embedded.zooms.upperBound + 2)
            var tiles: [String] = []
            for (tile, bytes) in embedded.tiles.sorted(by: { $0.key < $1.key }) {
                tiles.append("\(JSONValue.quoted(tile.description)):\"\(Data(bytes).base64EncodedString())\"")
            }
            object.add("tiles", raw: "{" + tiles.joined(separator: ",") + "}")
        case .served(let minimumZoom, let maximumZoom, let attribution):
            object.add("kind", "server")
            object.add("url", "/tiles/{z}/{x}/{y}")
            object.add("attribution", attribution)
            object.add("tileMinZoom", minimumZoom)
            object.add("tileMaxZoom", maximumZoom)
            object.add("maxZoom", maximumZoom + 2)
        }
        return object.text
    }

    static var coloursJSON: String {
        var colours = JSONObjectWriter()
        for verdict in SessionRecord.verdicts { colours.add(verdict, SiteReport.colour(verdict)) }
        colours.add("never_scanned", SiteReport.colour(nil))
        return colours.text
    }

    static var labelsJSON: String {
        var words = JSONObjectWriter()
        for (verdict, label) in labels { words.add(verdict, label) }
        return words.text
    }

    /// A tag as the script reads it.
    static func tagJSON(_ tag: SiteReport.Tag) -> String {
        var t = JSONObjectWriter()
        t.add("key", tag.key)
        t.add("name", tag.name)
        t.add("lat", tag.center?.latitude, digits: 7)
        t.add("lon", tag.center?.longitude, digits: 7)
        t.add("radius_m", tag.radius)
        t.add("status", tag.status)
        t.add("scans", tag.scans.count)
        return t.text
    }

    /// A tap as the script reads it: where it is drawn, and whether that is its own fix.
    static func tapJSON(_ record: SessionRecord, at coordinate: Coordinate?, measured: Bool) -> String {
        var t = JSONObjectWriter()
        t.add("tag", record.tagKey)
        t.add("verdict", record.verdict)
        t.add("time", record.time.iso8601)
        t.add("message", record.message)
        t.add("lat", coordinate?.latitude, digits: 7)
        t.add("lon", coordinate?.longitude, digits: 7)
        t.add("measured", measured)
        t.add("accuracy_m", record.accuracy ?? record.fix?.accuracy)
        t.add(
            "region",
            raw: record.region.map { region in
                var r = JSONObjectWriter()
                r.add("lat", region.center.latitude, digits: 7)
                r.add("lon", region.center.longitude, digits: 7)
                return r.text
            })
        return t.text
    }

    /// The style of the map's own parts (the legend, the labels).
    public static let css = """
        .leaflet-container{background:#f8f8f4;font:12px/1.4 sans-serif}
        .tagfix-legend{background:rgba(255,255,255,0.9);padding:4px 8px;border-radius:4px;box-shadow:0 1px 4px rgba(0,0,0,0.3)}
        .tagfix-legend div{white-space:nowrap}.tagfix-legend .swatch{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:5px;vertical-align:-1px;border:1px solid #222}
        .tag-label{padding:0 3px;font-size:11px}
        @media (max-width:600px){.tagfix-legend{font-size:10px;line-height:1.2;padding:2px 5px}.tagfix-legend .swatch{width:8px;height:8px}}
        """

    /// The script that draws a map: `tagfixMap(element, data)` (Leaflet must be loaded first).
    /// It returns what the live page updates: `setStatus`, `addTap`, `addTag`, `setPosition`.
    public static let script = #"""
        "use strict";
        function tagfixMap(element, data) {
          const colour = v => data.colours[v] || data.colours.never_scanned;
          const node = (name, text, className) => {
            const e = document.createElement(name);
            if (text != null) e.textContent = text;
            if (className) e.className = className;
            return e;
          };
          const escapeHTML = t => String(t).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})[c]);
          const base = data.base;
          const map = L.map(element, {maxZoom: base.maxZoom});
          map.attributionControl.setPrefix("Leaflet");
          const blank = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";
          const tileOptions = {maxZoom: base.maxZoom, maxNativeZoom: base.tileMaxZoom, errorTileUrl: blank,
                               attribution: escapeHTML(base.attribution || "")};
          if (base.tileMinZoom != null) tileOptions.minNativeZoom = base.tileMinZoom;
          if (base.kind === "tiles") {
            const Embedded = L.TileLayer.extend({getTileUrl(c) {
              const t = base.tiles[c.z + "/" + c.x + "/" + c.y];
              return t ? "data:" + base.type + ";base64," + t : blank;
            }});
            new Embedded("", tileOptions).addTo(map);
          } else if (base.kind === "server") {
            L.tileLayer(base.url, tileOptions).addTo(map);
          }
          const b = data.bounds;
          if (b) map.fitBounds([[b.south, b.west], [b.north, b.east]], {padding: [24, 24], maxZoom: 19});
          else map.setView([0, 0], 2);
          const layer = L.featureGroup().addTo(map);
          // Thousands of taps (a long session) are drawn on one canvas, not as as many SVG paths.
          const dots = data.taps.length > 1000 ? L.canvas({padding: 0.5}) : undefined;
          const tags = new Map();
          const permanent = data.tags.length <= 60;
          function mark(path, attributes) {
            const e = path.getElement && path.getElement();
            if (e) for (const k in attributes) e.setAttribute(k, attributes[k]);
          }
          function addTag(t) {
            if (tags.has(t.key)) return tags.get(t.key);
            if (t.lat == null || t.lon == null) return null;
            const circle = L.circle([t.lat, t.lon], {radius: Math.max(1, t.radius_m || 1), color: colour(t.status), weight: 2,
                                                     fillOpacity: 0.25, className: "tag"}).addTo(layer);
            circle.bindTooltip(node("span", t.key), {permanent: permanent, direction: "top", offset: [0, -7], className: "tag-label"});
            mark(circle, {"data-tag": t.key, "data-status": t.status || "never_scanned"});
            const entry = {tag: t, circle: circle};
            tags.set(t.key, entry);
            return entry;
          }
          function setStatus(key, verdict) {
            const entry = tags.get(key);
            if (!entry) return;
            entry.tag.status = verdict;
            entry.circle.setStyle({color: colour(verdict)});
            mark(entry.circle, {"data-status": verdict});
          }
          let position = null;
          const accuracy = L.circle([0, 0], {radius: 1, color: "#24292f", weight: 1, dashArray: "3 3", fillOpacity: 0.08, interactive: false,
                                             className: "accuracy"});
          const you = L.circleMarker([0, 0], {radius: 7, color: "#fff", weight: 3, fillColor: "#24292f", fillOpacity: 1, className: "position"});
          function setPosition(lat, lon, metres, label) {
            if (lat == null || lon == null) return;
            position = [lat, lon];
            accuracy.setLatLng(position).setRadius(Math.max(1, metres || 1));
            you.setLatLng(position);
            if (!map.hasLayer(you)) {
              accuracy.addTo(map); you.addTo(map); you.bringToFront();
              you.bindTooltip(node("span", label || "you are here"));
            }
          }
          function addTap(tap) {
            let at = tap.lat != null && tap.lon != null ? [tap.lat, tap.lon] : null;
            const measured = at != null && tap.measured !== false;
            let where = "";
            if (!at) {
              const entry = tags.get(tap.tag);
              if (entry) { at = [entry.tag.lat, entry.tag.lon]; where = "the tag's place"; }
              else if (position) { at = position; where = "the last position"; }
            } else if (!measured) where = tap.drawn_at || "the tag's place";
            if (!at) return null;
            if (measured && tap.verdict === "outside" && tap.region) {
              L.polyline([[tap.region.lat, tap.region.lon], at], {color: colour("outside"), weight: 1.5, dashArray: "4 3",
                                                                 interactive: false, className: "offset", renderer: dots}).addTo(layer);
            }
            const dot = L.circleMarker(at, {radius: 5, color: measured ? "#222" : colour(tap.verdict), weight: measured ? 1 : 2,
                                            dashArray: measured ? null : "2 2", fillColor: colour(tap.verdict),
                                            fillOpacity: measured ? 0.9 : 0.35, className: "scan", renderer: dots}).addTo(layer);
            dot.bindTooltip(node("span", tap.tag + " " + tap.verdict + ": " + tap.message + (measured ? "" : " (no fix: drawn at " + where + ")")));
            mark(dot, {"data-verdict": tap.verdict, "data-measured": String(measured)});
            if (map.hasLayer(you)) you.bringToFront();
            return dot;
          }
          const Legend = L.Control.extend({options: {position: "bottomright"}, onAdd() {
            const box = node("div", null, "tagfix-legend");
            box.id = "legend";
            for (const v of data.verdicts.concat(["never_scanned"])) {
              const row = node("div");
              const swatch = node("span", null, "swatch");
              swatch.style.background = colour(v);
              row.appendChild(swatch);
              row.appendChild(document.createTextNode(data.labels[v] || v));
              row.setAttribute("data-verdict", v);
              box.appendChild(row);
            }
            const row = node("div");
            const swatch = node("span", null, "swatch");
            swatch.style.background = "#24292f";
            row.appendChild(swatch);
            row.appendChild(document.createTextNode(data.positionLabel || "the tech's position (± accuracy)"));
            box.appendChild(row);
            return box;
          }});
          new Legend().addTo(map);
          L.control.scale({imperial: false}).addTo(map);
          for (const t of data.tags) addTag(t);
          for (const tap of data.taps) addTap(tap);
          if (data.position) setPosition(data.position.lat, data.position.lon, data.position.accuracy_m, data.position.label);
          return {map: map, tags: tags, addTag: addTag, setStatus: setStatus, addTap: addTap, setPosition: setPosition,
                  position: () => position};
        }
        """#

    /// The <head> part of a page with a Leaflet map: Leaflet's style sheet (its images inline),
    /// the map's, and a catch of any script error into `data-script-error` on <html> (what the
    /// browser tests read).
    /// - Parameter query: what follows `/leaflet/leaflet.css` when not inline (`?token=…`, already safe in an attribute).
    public static func head(leaflet: Leaflet, inline: Bool, query: String = "") -> String {
        let style =
            inline
            ? "<style>\n\(leaflet.inlineCSS)\n\(css)\n</style>\n"
            : "<link rel=\"stylesheet\" href=\"/leaflet/leaflet.css\(query)\">\n<style>\n\(css)\n</style>\n"
        return style + errorCatcher
    }

    static let errorCatcher = """
        <script>window.addEventListener("error", e => document.documentElement.setAttribute("data-script-error", String(e.message)));</script>

        """
}

extension SiteReport {
    /// Where the map draws a tap: its fix; else (a tap decided without one) its tag's place;
    /// else the tech's last position before it; `nil` when there is none of them.
    public struct TapPosition: Sendable, Hashable {
        public var record: SessionRecord
        public var coordinate: Coordinate?
        /// Whether `coordinate` is the tap's own fix.
        public var measured: Bool
    }

    /// Every tap with where the map draws it.
    public var tapPositions: [TapPosition] {
        var places: [ExactID: Coordinate] = [:]
        for tag in tags { if let center = tag.center { places[ExactID(tag.key)] = center } }
        var last: Coordinate?
        return records.map { record in
            if let fix = record.fix {
                last = fix.coordinate
                return TapPosition(record: record, coordinate: fix.coordinate, measured: true)
            }
            return TapPosition(record: record, coordinate: places[ExactID(record.tagKey)] ?? last, measured: false)
        }
    }

    /// The box the map opens on: every region and every tap.
    public var mapBounds: MapBounds? {
        MapBounds(
            tags.compactMap { tag in tag.center.map { ($0, tag.radius ?? 0) } } + tapPositions.compactMap { $0.coordinate.map { ($0, 0) } })
    }

    /// The tech's last position, from the last tap with a fix.
    public var lastPosition: SessionRecord.Position? { records.last { $0.fix != nil }?.fix }

    /// The map's data for `tagfixMap` (JSON, not yet script-safe).
    /// - Parameters:
    ///   - position: the tech's position and accuracy (the live page's fix); default the last tap's fix.
    ///   - positionLabel: what the legend and the position's tooltip call it.
    public func mapJSON(base: BaseMap, position: (coordinate: Coordinate, accuracy: Double?)? = nil, positionLabel: String? = nil)
        -> String
    {
        let shown: (coordinate: Coordinate, accuracy: Double?, time: Timestamp?)? =
            position.map { ($0.coordinate, $0.accuracy, nil) } ?? lastPosition.map { ($0.coordinate, $0.accuracy, $0.time) }
        var object = JSONObjectWriter()
        object.add("colours", raw: SiteMap.coloursJSON)
        object.add("labels", raw: SiteMap.labelsJSON)
        object.add("verdicts", raw: "[" + SessionRecord.verdicts.map(JSONValue.quoted).joined(separator: ",") + "]")
        object.add("base", raw: SiteMap.baseJSON(base))
        object.add(
            "bounds",
            raw: mapBounds.map { box in
                var b = JSONObjectWriter()
                b.add("south", box.south, digits: 7)
                b.add("west", box.west, digits: 7)
                b.add("north", box.north, digits: 7)
                b.add("east", box.east, digits: 7)
                return b.text
            })
        object.add("tags", raw: "[" + tags.map(SiteMap.tagJSON).joined(separator: ",") + "]")
        object.add(
            "taps",
            raw: "["
                + tapPositions.map { position in
                    SiteMap.tapJSON(position.record, at: position.coordinate, measured: position.measured)
                }.joined(separator: ",\n") + "]")
        object.add(
            "position",
            raw: shown.map { fix in
                var p = JSONObjectWriter()
                p.add("lat", fix.coordinate.latitude, digits: 7)
                p.add("lon", fix.coordinate.longitude, digits: 7)
                p.add("accuracy_m", fix.accuracy)
                p.add("label", positionLabel ?? "the last position, \(fix.time?.formatted(fractionDigits: 0) ?? "time unknown")")
                return p.text
            })
        object.add("positionLabel", positionLabel ?? "the tech's last position (± accuracy)")
        _ = position
        return object.text
    }

    /// The map as the report draws it: a <div id="map"> and the scripts (Leaflet inline).
    public func leafletMap(leaflet: Leaflet, base: BaseMap) -> String {
        SiteMap.library(leaflet) + leafletMap(base: base, id: "map", data: "site-data", global: "tagfixSite")
            + "<script>document.documentElement.setAttribute(\"data-map\", \"ready\");</script>\n"
    }

    /// One map of a page that holds several (a fleet report's sites): its <div id=`id`>, its data
    /// (`<script id=data>`) and the script that draws it, set as `window[global]`. The page
    /// carries `SiteMap.library` once, before the first.
    public func leafletMap(base: BaseMap, id: String, data: String, global: String) -> String {
        """
        <div id="\(id)" class="tagfix-map" style="height:70vh;min-height:360px;border:1px solid #ccc"></div>
        <script type="application/json" id="\(data)">\(SiteMap.scriptSafe(mapJSON(base: base)))</script>
        <script>
        window[\(JSONValue.quoted(global))] = tagfixMap(document.getElementById(\(JSONValue.quoted(id))), JSON.parse(document.getElementById(\(JSONValue.quoted(data))).textContent));
        </script>

        """
    }
}

extension SiteMap {
    /// Leaflet (inline) and the map's script (`tagfixMap`): once a page, before its maps.
    public static func library(_ leaflet: Leaflet) -> String {
        """
        <script>
        \(leaflet.javascript)
        </script>
        <script>
        \(script)
        </script>

        """
    }
}
