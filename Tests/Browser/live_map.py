"""The live page in a real browser (test tooling): headless Chromium through chromedriver and
Selenium. Opens URL, waits until its event stream is live, prints READY <fill>, then waits (up to
60 s) until the circle of tag TAG has the colour COLOUR, saves a screenshot to SHOT and prints
CHANGED <fill>. Then waits (up to 60 s more) until the page says the GPS is unavailable (the test
stops gpsd) and prints DEVICES with the page's three status texts: the stream's, the readers' and
the GPS's. Exits 1 with the page's state if any of these never comes.

usage: python live_map.py URL TAG COLOUR SHOT"""
import sys, time
# A line in one write, even under PYTHONUNBUFFERED=1 (which writes print's pieces one by one): the
# test reads the lines as they come, and a line read half-written was taken for the whole.
sys.stdout.reconfigure(line_buffering=True, write_through=False)
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

url, tag, colour, shot = sys.argv[1:5]
options = Options()
for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1000,800"):
    options.add_argument(flag)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    driver.get(url)
    # The tag's circle: Leaflet's path (libjs-leaflet installed), else the plain SVG map's circle.
    fill = ("return ([...document.querySelectorAll('path.tag, g.tag')].filter(e => e.getAttribute('data-tag') === arguments[0])"
            ".map(e => e.tagName === 'g' ? e.querySelector('circle') : e)[0] || {getAttribute: () => null}).getAttribute('fill')")
    deadline = time.time() + 60
    text = lambda id: driver.execute_script("return document.getElementById(arguments[0]).textContent", id)
    while text("stream") != "live":
        if time.time() > deadline:
            sys.exit("the page's event stream never went live: %r" % text("status"))
        time.sleep(0.05)
    print("READY", driver.execute_script(fill, tag), flush=True)
    while driver.execute_script(fill, tag) != colour:
        if time.time() > deadline:
            driver.save_screenshot(shot)
            sys.exit("the circle of %s is still %s" % (tag, driver.execute_script(fill, tag)))
        time.sleep(0.05)
    driver.save_screenshot(shot)
    print("CHANGED", driver.execute_script(fill, tag), flush=True)
    deadline = time.time() + 60
    while "unavailable" not in text("gps"):
        if time.time() > deadline:
            sys.exit("the page never said the GPS was unavailable: %r" % text("status"))
        time.sleep(0.05)
    print("DEVICES stream=%s; readers=%s; gps=%s" % (text("stream"), text("readers"), text("gps")), flush=True)
finally:
    driver.quit()
