import TagFixCore
import TagFixReport

/// `GET /`: one page that needs nothing but this server. The HTML report's site map (tags as
/// circles coloured by their last verdict) with the tech's position and accuracy, kept up to
/// date by the Server-Sent Events of `/events`. A phone's width is enough.
enum LivePage {
    /// The headers the page is served with: a Content-Security-Policy that lets it load only
    /// this server's scripts, styles and images (and the tile server's images with
    /// `--tiles URL`), connect only here, and be framed nowhere; and no `Referer` sent on.
    static func headers(map: LiveMap) -> [(String, String)] {
        var images = "'self' data: blob:"
        if case .server(let template, _) = map.tiles { images += " " + tileOrigin(template.text) }
        return [
            (
                "Content-Security-Policy",
                "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src \(images); "
                    + "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
            ),
            ("Referrer-Policy", "no-referrer"),
        ]
    }

    /// A tile server's origin for the policy: `https://tile.example.org`, `https://*.tile.example.org`
    /// for a `{s}` subdomain; just the scheme (`https:`) for a host the policy cannot name.
    static func tileOrigin(_ template: String) -> String {
        let secure = template.lowercased().hasPrefix("https://")
        let scheme = secure ? "https:" : "http:"
        var host = String(template.dropFirst(secure ? 8 : 7).prefix { $0 != "/" && $0 != "?" && $0 != "#" })
        if host.hasPrefix("{s}.") { host = "*." + host.dropFirst(4) }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.:*")
        guard !host.isEmpty, host.allSatisfy({ allowed.contains($0) }), !host.dropFirst().contains("*") else { return scheme }
        return scheme + "//" + host
    }

    /// - Parameter token: the request's `?token=`, given again to what the page loads from
    ///   this server (Leaflet, the tiles): a <script src> cannot send an Authorization header.
    static func html(state: ServeState, release: String, map: LiveMap = LiveMap(), token: String? = nil) -> String {
        guard let leaflet = map.leaflet else { return plain(state: state, release: release) }
        return leafletPage(state: state, release: release, leaflet: leaflet, base: map.base, token: token)
    }

    /// `?token=…` percent-encoded (only unreserved characters stay), or nothing.
    static func tokenQuery(_ token: String?) -> String {
        guard let token, !token.isEmpty else { return "" }
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        return "?token="
            + token.utf8.map { byte in
                guard !unreserved.contains(byte) else { return String(UnicodeScalar(byte)) }
                let hex = String(byte, radix: 16, uppercase: true)
                return "%" + (hex.count == 1 ? "0" + hex : hex)
            }.joined()
    }

    /// The page without Leaflet (libjs-leaflet not installed): the report's SVG map.
    static func plain(state: ServeState, release: String) -> String {
        let site = state.site
        let frame = site.mapFrame()
        var colours = JSONObjectWriter()
        for verdict in SessionRecord.verdicts { colours.add(verdict, SiteReport.colour(verdict)) }
        var projection = JSONObjectWriter()
        projection.add("lat0", frame.latitude0, digits: 9)
        projection.add("lon0", frame.longitude0, digits: 9)
        projection.add("mLat", frame.metresPerDegreeLatitude, digits: 6)
        projection.add("mLon", frame.metresPerDegreeLongitude, digits: 6)
        projection.add("minX", frame.minX, digits: 6)
        projection.add("minY", frame.minY, digits: 6)
        projection.add("scale", frame.scale, digits: 9)
        projection.add("margin", frame.margin)
        projection.add("height", frame.height)
        let fix = state.fix.flatMap { fix in fix.coordinate.map { ($0, fix.horizontalAccuracy) } }
        var initialFix = JSONObjectWriter()
        initialFix.add("lat", fix?.0.latitude, digits: 9)
        initialFix.add("lon", fix?.0.longitude, digits: 9)
        initialFix.add("accuracy_m", fix?.1)
        // The devices as they are now (`/events` says them again as it opens). Inside <script>:
        // a reader's name or error text is not ours, so no "<" may reach the HTML parser ("</",
        // or "<!--" then "<script", would end or swallow the script), and U+2028/U+2029 are
        // escaped for older JavaScript.
        let devices = ServeMessage.devices(readers: state.readers, gps: state.gps).replacing("<", with: "\\u003c")
            .replacing("\u{2028}", with: "\\u2028").replacing("\u{2029}", with: "\\u2029")
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>TagFix live</title>
            <style>
            body{font-family:sans-serif;margin:0.5em;color:#222}svg{max-width:100%;height:auto;border:1px solid #ccc}
            #status{font-size:0.9em;margin:0.3em 0}#status span:not(:empty)~span:not(:empty)::before{content:" · "}#last{font-weight:bold;min-height:1.3em}
            .confirmed{color:#1a7f37}.outside{color:#cf222e}.inconclusive{color:#9a6700}
            .notRegistered{color:#8250df}.disallowed{color:#0969da}.untrusted{color:#bc4c00}
            </style></head><body>
            <h1 style="font-size:1.2em;margin:0.2em 0">TagFix live <small>(tagfix \(release))</small></h1>
            <div id="status"><span id="stream">connecting…</span><span id="readers"></span><span id="gps"></span></div>
            <div id="last"></div>
            \(site.svg())
            \(panelHTML)
            <script type="application/json" id="site-data">\(SiteMap.scriptSafe(site.mapJSON(base: .plain, position: state.position)))</script>
            <script>
            \(walkScript)
            const walk = walkPanel(JSON.parse(document.getElementById("site-data").textContent));
            "use strict";
            const colours = \(colours.text);
            const frame = \(projection.text);
            let lastID = \(state.lastID);
            const svg = document.querySelector("svg");
            const ns = "http://www.w3.org/2000/svg";
            function screen(lat, lon) {
              let dLon = lon - frame.lon0; if (dLon > 180) dLon -= 360; if (dLon < -180) dLon += 360;
              const x = dLon * frame.mLon, y = (lat - frame.lat0) * frame.mLat;
              return [frame.margin + (x - frame.minX) * frame.scale, frame.height - frame.margin - 30 - (y - frame.minY) * frame.scale];
            }
            function make(name, attributes) {
              const element = document.createElementNS(ns, name);
              for (const key in attributes) element.setAttribute(key, attributes[key]);
              return element;
            }
            const accuracy = make("circle", {id: "accuracy", r: 0, fill: "#0969da", "fill-opacity": 0.15, stroke: "#0969da", visibility: "hidden"});
            const you = make("circle", {id: "position", r: 5, fill: "#0969da", stroke: "#fff", "stroke-width": 2, visibility: "hidden"});
            svg.appendChild(accuracy); svg.appendChild(you);
            function position(lat, lon, metres) {
              if (lat == null || lon == null) return;
              const [x, y] = screen(lat, lon);
              for (const c of [accuracy, you]) { c.setAttribute("cx", x); c.setAttribute("cy", y); c.setAttribute("visibility", "visible"); }
              accuracy.setAttribute("r", Math.max(2, (metres || 0) * frame.scale));
              walk.position(lat, lon);
            }
            const first = \(initialFix.text);
            position(first.lat, first.lon, first.accuracy_m);
            function tagGroup(key, region) {
              for (const g of svg.querySelectorAll("g.tag")) if (g.getAttribute("data-tag") === key) return g;
              if (!region) return null;
              const [x, y] = screen(region.lat, region.lon);
              const g = make("g", {"class": "tag", "data-tag": key, "data-status": "never_scanned"});
              g.appendChild(make("circle", {cx: x, cy: y, r: Math.max(2, region.radius_m * frame.scale), "fill-opacity": 0.25, "stroke-width": 2}));
              const label = make("text", {x: x, y: y - Math.max(2, region.radius_m * frame.scale) - 4, "text-anchor": "middle"});
              label.textContent = key; g.appendChild(label);
              svg.insertBefore(g, accuracy);
              return g;
            }
            function verdict(v) {
              if (v.id <= lastID) return;
              lastID = v.id;
              const key = v.tag_id || (v.region && v.region.id) || v.uid || "?";
              const colour = colours[v.verdict] || "#8c959f";
              const g = tagGroup(key, v.region);
              if (g) {
                g.setAttribute("data-status", v.verdict);
                const circle = g.querySelector("circle");
                circle.setAttribute("fill", colour); circle.setAttribute("stroke", colour);
              }
              if (v.fix && v.fix.lat != null) {
                const [x, y] = screen(v.fix.lat, v.fix.lon);
                const dot = make("circle", {"class": "scan", "data-verdict": v.verdict, cx: x, cy: y, r: 4, fill: colour, stroke: "#222"});
                svg.insertBefore(dot, accuracy);
              }
              const last = document.getElementById("last");
              last.className = v.verdict;
              // Which source the verdict came from: a phone says so, with its token's name.
              const via = v.source === "phone" ? " (phone" + (v.phone && v.phone.token ? " " + v.phone.token : "") + ")" : "";
              last.textContent = key + via + ": " + v.verdict + " — " + v.message;
              walk.verdict(key, v);
            }
            // The event stream's state and the devices' each have their own place: a device's
            // news never hides whether the page is live.
            const readers = new Map();
            function device(d) {
              // A failed read leaves the reader attached: said as a passing problem.
              const text = d.status === "error" ? "attached, a read failed" + (d.message ? ": " + d.message : "")
                : d.status + (d.message ? ": " + d.message : "");
              if (d.class === "GPS" || d.kind === "gps") { document.getElementById("gps").textContent = "GPS " + text; return; }
              readers.set(d.path, text);
              const several = readers.size > 1;
              document.getElementById("readers").textContent =
                [...readers].map(([path, t]) => "reader " + (several ? path + " " : "") + t).join("; ");
            }
            for (const d of \(devices).devices) device(d);
            function connect() {
              const token = new URLSearchParams(location.search).get("token");
              const query = "?since=" + lastID + (token ? "&token=" + encodeURIComponent(token) : "");
              const events = new EventSource("/events" + query);
              const stream = document.getElementById("stream");
              events.onopen = () => { stream.textContent = "live"; };
              events.onerror = () => { stream.textContent = "reconnecting…"; };
              events.addEventListener("verdict", e => verdict(JSON.parse(e.data)));
              events.addEventListener("fix", e => { const f = JSON.parse(e.data); position(f.lat, f.lon, f.accuracy_m); });
              events.addEventListener("reader", e => device(JSON.parse(e.data)));
              events.addEventListener("gps", e => device(JSON.parse(e.data)));
              events.addEventListener("shutdown", () => { stream.textContent = "the server stopped"; events.close(); });
            }
            connect();
            </script>
            </body></html>

            """
    }

    /// The page with Leaflet (served by this server under /leaflet/) over the base map.
    static func leafletPage(state: ServeState, release: String, leaflet: Leaflet, base: BaseMap, token: String?) -> String {
        let site = state.site
        let query = tokenQuery(token)
        let devices = SiteMap.scriptSafe(ServeMessage.devices(readers: state.readers, gps: state.gps))
        let data = site.mapJSON(base: base, position: state.position, positionLabel: "you (± the GPS's accuracy)")
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>TagFix live</title>
            \(SiteMap.head(leaflet: leaflet, inline: false, query: query))<style>
            body{font-family:sans-serif;margin:0;color:#222}header{padding:0.3em 0.5em}
            h1{font-size:1.1em;margin:0.1em 0}#status{font-size:0.9em}#status span:not(:empty)~span:not(:empty)::before{content:" · "}
            #last{font-weight:bold;min-height:1.3em}main{display:grid;grid-template-columns:1fr}
            #map{height:55vh;min-height:260px}#panel{padding:0 0.6em 1em}
            @media (min-width:900px){main{grid-template-columns:1fr 340px}#map{height:calc(100vh - 5.5em)}#panel{overflow:auto;max-height:calc(100vh - 5.5em)}}
            \(panelCSS)
            .confirmed{color:#1a7f37}.outside{color:#cf222e}.inconclusive{color:#9a6700}
            .notRegistered{color:#8250df}.disallowed{color:#0969da}.untrusted{color:#bc4c00}
            </style></head><body>
            <header><h1>TagFix live <small>(tagfix \(release))</small></h1>
            <div id="status"><span id="stream">connecting…</span><span id="readers"></span><span id="gps"></span></div>
            <div id="last"></div></header>
            <main><div id="map"></div>
            \(panelHTML)</main>
            <script src="/leaflet/leaflet.js\(query)"></script>
            <script type="application/json" id="site-data">\(SiteMap.scriptSafe(data))</script>
            <script type="application/json" id="devices-data">\(devices)</script>
            <script>
            \(SiteMap.script)
            \(walkScript)
            const data = JSON.parse(document.getElementById("site-data").textContent);
            if (data.base.url && data.base.url.startsWith("/tiles/")) data.base.url += "\(query)";
            const site = tagfixMap(document.getElementById("map"), data);
            const walk = walkPanel(data);
            window.tagfixSite = site;
            let lastID = \(state.lastID);
            function position(lat, lon, metres) {
              if (lat == null || lon == null) return;
              site.setPosition(lat, lon, metres, "you (± the GPS's accuracy)");
              walk.position(lat, lon);
            }
            function verdict(v) {
              if (v.id <= lastID) return;
              lastID = v.id;
              const key = v.tag_id || (v.region && v.region.id) || v.uid || "?";
              if (v.region) site.addTag({key: key, name: v.region.name, lat: v.region.lat, lon: v.region.lon, radius_m: v.region.radius_m, status: null});
              site.setStatus(key, v.verdict);
              site.addTap({tag: key, verdict: v.verdict, message: v.message, lat: v.fix ? v.fix.lat : null, lon: v.fix ? v.fix.lon : null,
                           region: v.region || null});
              const last = document.getElementById("last");
              last.className = v.verdict;
              // Which source the verdict came from: a phone says so, with its token's name.
              const via = v.source === "phone" ? " (phone" + (v.phone && v.phone.token ? " " + v.phone.token : "") + ")" : "";
              last.textContent = key + via + ": " + v.verdict + " — " + v.message;
              walk.verdict(key, v);
            }
            const readers = new Map();
            function device(d) {
              const text = d.status === "error" ? "attached, a read failed" + (d.message ? ": " + d.message : "")
                : d.status + (d.message ? ": " + d.message : "");
              if (d.class === "GPS" || d.kind === "gps") { document.getElementById("gps").textContent = "GPS " + text; return; }
              readers.set(d.path, text);
              const several = readers.size > 1;
              document.getElementById("readers").textContent =
                [...readers].map(([path, t]) => "reader " + (several ? path + " " : "") + t).join("; ");
            }
            for (const d of JSON.parse(document.getElementById("devices-data").textContent).devices) device(d);
            function connect() {
              const token = new URLSearchParams(location.search).get("token");
              const query = "?since=" + lastID + (token ? "&token=" + encodeURIComponent(token) : "");
              const events = new EventSource("/events" + query);
              const stream = document.getElementById("stream");
              events.onopen = () => { stream.textContent = "live"; };
              events.onerror = () => { stream.textContent = "reconnecting…"; };
              events.addEventListener("verdict", e => verdict(JSON.parse(e.data)));
              events.addEventListener("fix", e => { const f = JSON.parse(e.data); position(f.lat, f.lon, f.accuracy_m); });
              events.addEventListener("reader", e => device(JSON.parse(e.data)));
              events.addEventListener("gps", e => device(JSON.parse(e.data)));
              events.addEventListener("shutdown", () => { stream.textContent = "the server stopped"; events.close(); });
            }
            connect();
            document.documentElement.setAttribute("data-map", "ready");
            </script>
            </body></html>

            """
    }

    /// The panel for walking the site: progress, the tags left to tap (nearest first, with
    /// distance and direction), the last verdicts.
    static let panelHTML = """
        <section id="panel"><p id="progress" aria-live="polite"></p><progress id="progress-bar" value="0" max="1"></progress>
        <h2>Left to tap</h2><ol id="left"></ol><h2>Last verdicts</h2><ol id="feed" reversed></ol></section>
        """

    static let panelCSS = """
        #panel h2{font-size:1em;margin:0.8em 0 0.2em}#progress{font-size:1.2em;font-weight:bold;margin:0.4em 0 0.1em}
        #progress-bar{width:100%;height:0.8em}#left,#feed{list-style:none;padding:0;margin:0}
        #left li,#feed li{padding:0.45em 0.2em;border-bottom:1px solid #eee;font-size:1.05em}#feed time{color:#57606a;margin-right:0.4em}
        """

    /// `walkPanel(data)`: keeps the panel up to date from the map's data, each verdict and each fix.
    static let walkScript = #"""
        function walkPanel(data) {
          const tags = new Map();
          for (const t of data.tags) tags.set(t.key, {key: t.key, name: t.name, lat: t.lat, lon: t.lon, tapped: t.status != null});
          let here = data.position ? [data.position.lat, data.position.lon] : null;
          const feed = [];
          for (const tap of data.taps.slice(-20)) feed.push(tap);
          const rad = d => d * Math.PI / 180;
          function distance(a, b) {
            const dLat = rad(b[0] - a[0]), dLon = rad(b[1] - a[1]);
            const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(a[0])) * Math.cos(rad(b[0])) * Math.sin(dLon / 2) ** 2;
            return 2 * 6371008.8 * Math.asin(Math.min(1, Math.sqrt(h)));
          }
          function direction(a, b) {
            const y = Math.sin(rad(b[1] - a[1])) * Math.cos(rad(b[0]));
            const x = Math.cos(rad(a[0])) * Math.sin(rad(b[0])) - Math.sin(rad(a[0])) * Math.cos(rad(b[0])) * Math.cos(rad(b[1] - a[1]));
            const azimuth = (Math.atan2(y, x) * 180 / Math.PI + 360) % 360;
            return ["N", "NE", "E", "SE", "S", "SW", "W", "NW"][Math.round(azimuth / 45) % 8];
          }
          const metres = m => m < 1000 ? Math.round(m) + " m" : (m / 1000).toFixed(1) + " km";
          function item(text, className) {
            const li = document.createElement("li");
            li.textContent = text;
            if (className) li.className = className;
            return li;
          }
          function render() {
            const all = [...tags.values()];
            const tapped = all.filter(t => t.tapped).length;
            document.getElementById("progress").textContent = tapped + " of " + all.length + " tapped";
            const bar = document.getElementById("progress-bar");
            bar.max = Math.max(1, all.length); bar.value = tapped;
            const left = all.filter(t => !t.tapped);
            const placed = left.filter(t => t.lat != null && here);
            for (const t of placed) t.metres = distance(here, [t.lat, t.lon]);
            left.sort((a, b) => (a.metres == null) - (b.metres == null) || (a.metres || 0) - (b.metres || 0) || (a.key < b.key ? -1 : 1));
            const list = document.getElementById("left");
            list.replaceChildren(...left.slice(0, 50).map(t => {
              const far = t.lat != null && here ? ", " + metres(t.metres) + " " + direction(here, [t.lat, t.lon]) : "";
              const li = item(t.key + far + (t.name ? " — " + t.name : ""));
              li.setAttribute("data-tag", t.key);
              return li;
            }));
            if (left.length > 50) list.appendChild(item("and " + (left.length - 50) + " more"));
            if (left.length === 0) list.appendChild(item(all.length ? "none: every tag is tapped" : "no tags known (give --registry)"));
            const shown = document.getElementById("feed");
            shown.replaceChildren(...feed.slice().reverse().map(tap => {
              const li = item("", tap.verdict);
              const time = document.createElement("time");
              time.textContent = (tap.time || "").slice(11, 19);
              li.appendChild(time);
              // Which source each verdict came from: a phone (with its token's name) or a reader.
              const via = tap.source ? " (" + tap.source + ")" : "";
              li.appendChild(document.createTextNode(tap.tag + via + " " + tap.verdict + " — " + tap.message));
              return li;
            }));
          }
          render();
          return {
            position(lat, lon) { here = [lat, lon]; render(); },
            verdict(key, v) {
              const known = tags.get(key);
              // A tag the site does not know (not registered, no location) is in the feed, not in
              // the progress: it is not one of the tags to tap.
              if (known) known.tapped = true;
              else if (v.region) tags.set(key, {key: key, name: v.region.name, lat: v.region.lat, lon: v.region.lon, tapped: true});
              const source = v.source === "phone" ? "phone" + (v.phone && v.phone.token ? " " + v.phone.token : "") : "reader";
              feed.push({tag: key, verdict: v.verdict, message: v.message, time: v.time, source: source});
              if (feed.length > 20) feed.shift();
              render();
            },
          };
        }
        """#
}

extension ServeState {
    /// The live fix's position and accuracy, when it has one.
    var position: (coordinate: Coordinate, accuracy: Double?)? {
        guard let fix, let coordinate = fix.coordinate else { return nil }
        return (coordinate, fix.horizontalAccuracy)
    }
}
