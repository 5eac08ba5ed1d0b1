"""The report's Leaflet map in a real browser (test tooling): headless Chromium through
chromedriver and Selenium, with the network off. Opens the report FILE at a desktop, a tablet and
a phone viewport; at each, waits for the map, saves a screenshot to SHOT-<viewport>.png and
prints one JSON line: the script error if any, the legend's rows, the taps drawn by verdict, and
two pixels read from the screenshot: one inside a tag's circle where nothing else is drawn
("inside", with that circle's fill colour and opacity) and one where only the base map is
("outside"). Exits 1 if the map never draws.

usage: python report_map.py FILE SHOT"""
import json, os, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from png_pixels import pixels

path, shot = sys.argv[1:3]

# Finds, in the page, a point inside the biggest tag circle where that circle is the only thing
# drawn over the base map, and a point of the map where nothing is drawn at all.
SAMPLE = r"""
const site = window.tagfixSite, map = site.map, box = map.getContainer().getBoundingClientRect();
// Every path is hit-tested (Leaflet leaves its non-interactive ones, as the accuracy circle, out).
const style = document.createElement("style");
style.textContent = ".leaflet-pane > svg path { pointer-events: visiblePainted !important; }";
document.head.appendChild(style);
const drawn = (x, y) => document.elementsFromPoint(x, y).filter(e => e.closest(".leaflet-overlay-pane, .leaflet-marker-pane, .leaflet-tooltip-pane, .leaflet-control-container, .leaflet-popup-pane"));
let best = null;
for (const [key, entry] of site.tags) {
  const b = entry.circle.getBounds(), ne = map.latLngToContainerPoint(b.getNorthEast()), sw = map.latLngToContainerPoint(b.getSouthWest());
  const c = map.latLngToContainerPoint(entry.circle.getLatLng()), r = (ne.x - sw.x) / 2;
  if (!best || r > best.r) best = {key: key, c: c, r: r, entry: entry};
}
let inside = null;
if (best) for (let f = 0.2; f < 0.9 && !inside; f += 0.1) for (let a = 0; a < 6.28 && !inside; a += 0.39) {
  const x = box.left + best.c.x + Math.cos(a) * f * best.r, y = box.top + best.c.y + Math.sin(a) * f * best.r;
  if (x < box.left || y < box.top || x >= box.right || y >= box.bottom) continue;
  // Only this circle here and 10 pixels around (anti-aliased edges of other shapes stay clear).
  const alone = [[0, 0], [10, 0], [-10, 0], [0, 10], [0, -10], [7, 7], [-7, -7], [7, -7], [-7, 7]].every(([dx, dy]) => {
    const over = drawn(x + dx, y + dy);
    return over.length === 1 && over[0].getAttribute("data-tag") === best.key;
  });
  if (alone) inside = [Math.round(x), Math.round(y)];
}
let outside = null;
for (let y = box.top + 10; y < box.bottom - 10 && !outside; y += 17) for (let x = box.left + 10; x < box.right - 10 && !outside; x += 17) {
  if ([[0, 0], [10, 0], [-10, 0], [0, 10], [0, -10]].every(([dx, dy]) => drawn(x + dx, y + dy).length === 0)) outside = [Math.round(x), Math.round(y)];
}
const path = best && best.entry.circle.getElement();
return {key: best && best.key, inside: inside, outside: outside,
        fill: path && path.getAttribute("fill"), opacity: path && path.getAttribute("fill-opacity"),
        tiles: document.querySelectorAll("img.leaflet-tile-loaded").length};
"""

options = Options()
for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1"):
    options.add_argument(flag)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    driver.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
    for name, width, height in (("desktop", 1200, 900), ("tablet", 820, 1180), ("phone", 390, 844)):
        driver.set_window_size(width, height)
        driver.get("file://" + path)
        deadline = time.time() + 30
        state = lambda: driver.execute_script("const h = document.documentElement; return [h.getAttribute('data-map'), h.getAttribute('data-script-error')]")
        while state() == [None, None]:
            if time.time() > deadline:
                sys.exit("the map never drew at %s" % name)
            time.sleep(0.05)
        driver.execute_script("document.getElementById('map').scrollIntoView()")
        # Until the tiles the view needs have loaded (a page without tiles has none to wait for).
        while driver.execute_script("return [...document.querySelectorAll('img.leaflet-tile')].some(i => !i.complete)") and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        error = state()[1]
        sample = driver.execute_script(SAMPLE) if error is None else {}
        # Tiles counted as loaded may not be painted yet (Leaflet fades them in, and a busy
        # machine paints late): with tiles, look again for up to 3 s while the map's empty point
        # is still the plain background or bare white.
        for _ in range(30):
            png = driver.get_screenshot_as_png()
            rows = pixels(png)
            at = lambda p, rows=rows: list(rows[p[1]][p[0]]) if p and 0 <= p[1] < len(rows) and 0 <= p[0] < len(rows[0]) else None
            if not sample.get("tiles") or at(sample.get("outside")) not in ([248, 248, 244], [255, 255, 255]):
                break
            time.sleep(0.1)
        open("%s-%s.png" % (shot, name), "wb").write(png)
        legend = driver.execute_script("return [...document.querySelectorAll('#legend div')].map(d => d.textContent)")
        verdicts = driver.execute_script(
            "const n = {}; for (const e of document.querySelectorAll('path.scan')) { const v = e.getAttribute('data-verdict'); n[v] = (n[v] || 0) + 1; } return n;")
        # What a hostile name or attribution could have done: an attribute its script set, an
        # element it injected; and the text the page shows for the labels and the attribution.
        hostile = driver.execute_script(
            "return {pwned: document.documentElement.getAttribute('data-pwned'),"
            " injected: document.querySelectorAll('[onerror], img[src=\\'x\\'], .tagfix-map script').length,"
            " labels: [...document.querySelectorAll('.leaflet-tooltip')].map(e => e.textContent),"
            " attribution: (document.querySelector('.leaflet-control-attribution') || {}).textContent || null}")
        print(json.dumps({"viewport": name, "hostile": hostile, "error": error, "legend": legend, "verdicts": verdicts, "tag": sample.get("key"),
                          "fill": sample.get("fill"), "opacity": sample.get("opacity"), "tiles": sample.get("tiles"),
                          "inside": at(sample.get("inside")), "outside": at(sample.get("outside")), "at": sample.get("inside"), "size": [len(rows[0]), len(rows)], "inner": driver.execute_script("return [innerWidth, innerHeight, devicePixelRatio]")}), flush=True)
finally:
    driver.quit()
