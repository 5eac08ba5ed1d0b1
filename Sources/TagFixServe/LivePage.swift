import TagFixCore
import TagFixReport

/// `GET /`: one page that needs nothing but this server. The HTML report's site map (tags as
/// circles coloured by their last verdict) with the tech's position and accuracy, kept up to
/// date by the Server-Sent Events of `/events`. A phone's width is enough.
enum LivePage {
    static func html(state: ServeState, release: String) -> String {
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
            <script>
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
              last.textContent = key + ": " + v.verdict + " — " + v.message;
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
}
