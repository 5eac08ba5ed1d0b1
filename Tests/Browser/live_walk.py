"""The live page as a tech walking a site sees it (test tooling): headless Chromium through
chromedriver and Selenium at a phone's viewport. Opens URL and prints a line STATE {json} each
time what the page shows changes: the stream's state, the progress, the tags left to tap (in the
page's order), how many verdicts the feed holds, the tiles loaded from /tiles/ and a pixel of
the map where nothing is drawn (read from a screenshot, saved as SHOT-phone-N.png). A STATE
waits for the tiles and a screenshot, which can take a busy machine seconds, so the page also
keeps its own text at every change while its stream is live (a script installed before the
page's own), printed at the end as lines SEEN {json} (stream, progress, left, feed, error), in
order. Once the progress reads "N of N tapped" (or the feed holds FEED verdicts, when given) it saves
SHOT-tablet.png at a tablet's viewport and exits; exits 1 after 90 s without.

usage: python live_walk.py URL SHOT [FEED]"""
import json, os, sys, time
# A line in one write, even under PYTHONUNBUFFERED=1 (which writes print's pieces one by one): the
# test reads the lines as they come, and a line read half-written was taken for the whole.
sys.stdout.reconfigure(line_buffering=True, write_through=False)
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from png_pixels import pixels

url, shot = sys.argv[1:3]
feed_wanted = int(sys.argv[3]) if len(sys.argv) > 3 else None
READ = r"""
const text = id => (document.getElementById(id) || {textContent: null}).textContent;
const box = document.getElementById("map").getBoundingClientRect();
const style = document.getElementById("hit-all") || document.head.appendChild(Object.assign(document.createElement("style"),
  {id: "hit-all", textContent: ".leaflet-pane > svg path { pointer-events: visiblePainted !important; }"}));
const drawn = (x, y) => document.elementsFromPoint(x, y).filter(e => e.closest(".leaflet-overlay-pane, .leaflet-marker-pane, .leaflet-tooltip-pane, .leaflet-control-container"));
let empty = null;
for (let y = box.top + 10; y < box.bottom - 10 && !empty; y += 17) for (let x = box.left + 10; x < box.right - 10 && !empty; x += 17)
  if ([[0, 0], [10, 0], [-10, 0], [0, 10], [0, -10]].every(([dx, dy]) => drawn(x + dx, y + dy).length === 0)) empty = [Math.round(x), Math.round(y)];
const tiles = [...document.querySelectorAll("img.leaflet-tile-loaded")];
return {stream: text("stream"), progress: text("progress"), error: document.documentElement.getAttribute("data-script-error"),
        left: [...document.querySelectorAll("#left li")].map(li => li.textContent),
        feed: [...document.querySelectorAll("#feed li")].map(li => li.textContent),
        tiles: tiles.length, tilesFromServer: tiles.every(i => new URL(i.src).pathname.startsWith("/tiles/")), empty: empty,
        box: [box.left, box.top, box.right, box.bottom].map(Math.round)};
"""
# Installed before the page's own scripts (DevTools: Page.addScriptToEvaluateOnNewDocument): the
# page's text at every change while its stream is live, kept by the page itself, so that no
# change is missed however late the polling below reads the page.
HISTORY = r"""
window.__tagfixSeen = [];
document.addEventListener("DOMContentLoaded", () => {
  const text = id => (document.getElementById(id) || {textContent: null}).textContent;
  const note = () => {
    const state = {stream: text("stream"), progress: text("progress"),
                   left: [...document.querySelectorAll("#left li")].map(li => li.textContent),
                   feed: [...document.querySelectorAll("#feed li")].map(li => li.textContent),
                   error: document.documentElement.getAttribute("data-script-error")};
    const seen = window.__tagfixSeen, last = seen[seen.length - 1];
    if (state.stream === "live" && JSON.stringify(state) !== JSON.stringify(last)) seen.push(state);
  };
  new MutationObserver(note).observe(document.documentElement, {subtree: true, childList: true, characterData: true, attributes: true});
  note();
});
"""

def print_seen():
    """Prints what the page kept: a line SEEN {json} for each of its states while live."""
    for state in driver.execute_script("return window.__tagfixSeen || []"):
        print("SEEN " + json.dumps(state), flush=True)

options = Options()
for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1"):
    options.add_argument(flag)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    driver.set_window_size(390, 844)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HISTORY})
    driver.get(url)
    deadline, last, count = time.time() + 90, None, 0
    while time.time() < deadline:
        state = driver.execute_script(READ)
        shown = {k: state[k] for k in ("stream", "progress", "left", "feed", "error")}
        if shown != last and state["stream"] == "live" and (state["tiles"] > 0 or state["error"]):
            time.sleep(0.3)  # the tiles of the moment finish drawing
            # The point is read from the page and the pixel from a screenshot: they agree only when
            # the page did not move between the two (a status line that wraps anew as the reader or
            # the GPS comes pushes the map down), so the page is read before and after the
            # screenshot and a shot taken while it moved is taken again. A tile counted as loaded
            # may also not be painted yet (Leaflet fades tiles in, and a busy machine paints
            # late): look again, for up to 3 s, while the empty point is still the page's white.
            for _ in range(30):
                state = driver.execute_script(READ)
                png = driver.get_screenshot_as_png()
                after = driver.execute_script(READ)
                rows, at = pixels(png), state["empty"]
                steady = after["box"] == state["box"] and after["empty"] == at
                state["pixel"] = list(rows[at[1]][at[0]]) if at and at[1] < len(rows) and at[0] < len(rows[0]) else None
                if steady and state["pixel"] != [255, 255, 255]:
                    break
                time.sleep(0.1)
            shown = {k: state[k] for k in ("stream", "progress", "left", "feed", "error")}
            open("%s-phone-%d.png" % (shot, count), "wb").write(png)
            print("STATE " + json.dumps(state), flush=True)
            last, count = shown, count + 1
            done = (state["progress"] or "").split(" ")
            finished = len(state["feed"]) >= feed_wanted if feed_wanted else len(done) >= 3 and done[0] == done[2] and done[0] != "0"
            if finished:
                driver.set_window_size(820, 1180)
                time.sleep(0.5)
                driver.save_screenshot("%s-tablet.png" % shot)
                print_seen()
                sys.exit(0)
        time.sleep(0.05)
    print_seen()
    sys.exit("the walk never finished: %r" % driver.execute_script(READ))
finally:
    driver.quit()
