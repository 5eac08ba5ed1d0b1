"""Phone taps in a real browser (test tooling): headless Chromium at a phone's viewport, through
chromedriver and Selenium, its position set through the DevTools protocol
(Emulation.setGeolocationOverride) and the geolocation permission granted or denied
(Browser.grantPermissions / Browser.setPermission).

Reads a JSON plan from the file PLAN:
  {"origin": "http://127.0.0.1:PORT", "token": "…", "shots": "DIR", "spki": null or "HASH",
   "live": true or false (the live page open in a tab of its own meanwhile: LIVE and its last verdict's line),
   "steps": [{"name": "…", "url": "…", "lat": 53.5, "lon": 9.9, "accuracy": 5,
              "permission": "granted" | "denied", "cookie": true | false,
              "other_site": "none" | "link" | "link with token"}]}
For each step: the cookie (the token's link, opened once) or none, the permission and the
position, then the tag's URL: opened by the phone itself, or (other_site) by a click on its link
on a page of another site (a data: page, whose origin is no site's), the token in the link or not;
waits (up to 60 s) for the page's verdict, or for the refusal page,
keeps a screenshot DIR/phone-NAME.png and prints one line:
  STEP NAME VERDICT-CLASS | SHOWN | MESSAGE | SUN COUNTER SHOWN
  FEED the live page's newest "Last verdicts" line (with "live")
(VERDICT-CLASS is `refused` for the page without a token). Exits 1 if a page never answers.

usage: python phone_tap.py PLAN"""
import html, json, sys, time, urllib.parse
# A line in one write, even under PYTHONUNBUFFERED=1 (which writes print's pieces one by one): the
# test reads the lines as they come, and a line read half-written was taken for the whole.
sys.stdout.reconfigure(line_buffering=True, write_through=False)
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

with open(sys.argv[1]) as file:
    plan = json.load(file)
origin = plan["origin"]
options = Options()
for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
    options.add_argument(flag)
if plan.get("spki"):
    # The test CA's server certificate is trusted by its key's hash: the page is a secure context.
    options.add_argument("--ignore-certificate-errors-spki-list=" + plan["spki"])
# A phone: its viewport, its pixel ratio, touch, and a phone's user agent.
options.add_experimental_option("mobileEmulation", {
    "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3, "touch": True},
    "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36",
})
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
text = lambda id: driver.execute_script("var e = document.getElementById(arguments[0]); return e ? e.textContent : null", id)


def open_link():
    """The tech's link, opened once: the server sets the cookie, and its page (a meta refresh, not a
    redirect) goes on to the live page without the token. Waits until it is there, so that the
    refresh does not land after, and in place of, the next page the plan opens."""
    driver.get(origin + "/?token=" + plan["token"])
    deadline = time.time() + 60
    while "token=" in driver.current_url or driver.execute_script("return document.readyState") != "complete":
        if time.time() > deadline:
            sys.exit("the link's page never went on: %s" % driver.current_url)
        time.sleep(0.05)

try:
    live = None
    if plan.get("live"):
        # The live page, open in a tab of its own while the phone taps: it shows each verdict's source.
        open_link()
        deadline = time.time() + 60
        while text("stream") != "live":
            if time.time() > deadline:
                sys.exit("the live page's event stream never went live: %r" % text("stream"))
            time.sleep(0.05)
        live = driver.current_window_handle
        driver.switch_to.new_window("tab")
    verdicts = 0
    for step in plan["steps"]:
        name = step["name"]
        driver.get(origin + "/healthz")
        driver.delete_all_cookies()
        if step.get("cookie", True):
            open_link()
        if step.get("permission", "granted") == "granted":
            driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": origin, "permissions": ["geolocation"]})
        else:
            driver.execute_cdp_cmd("Browser.setPermission",
                                   {"origin": origin, "permission": {"name": "geolocation"}, "setting": "denied"})
        driver.execute_cdp_cmd("Emulation.setGeolocationOverride",
                               {"latitude": step.get("lat", 0), "longitude": step.get("lon", 0), "accuracy": step.get("accuracy", 5)})
        other_site = step.get("other_site", "none")
        if other_site == "none":
            driver.get(step["url"])
        else:
            # A tech's mail or chat: a page of another site with the link on it, clicked.
            href = step["url"]
            if other_site == "link with token":
                href += ("&" if "?" in href else "?") + "token=" + plan["token"]
            page = '<!DOCTYPE html><a id="link" href="%s">the tag</a>' % html.escape(href)
            driver.get("data:text/html," + urllib.parse.quote(page))
            driver.find_element(By.ID, "link").click()
        deadline = time.time() + 60
        while True:
            heading = driver.execute_script("var h = document.querySelector('h1'); return h ? h.textContent : ''")
            if "may not tap" in heading:
                line = "refused | %s | %s" % (heading, driver.execute_script("return document.body.innerText").replace("\n", " "))
                break
            shown = text("verdict")
            if shown:
                verdict = driver.execute_script("return document.getElementById('verdict').className")
                line = "%s | %s | %s | %s" % (verdict, shown, text("message"), text("counter") or "")
                break
            if time.time() > deadline:
                driver.save_screenshot("%s/phone-%s.png" % (plan["shots"], name))
                sys.exit("step %s: the page never answered: %r" % (name, text("state")))
            time.sleep(0.05)
        driver.save_screenshot("%s/phone-%s.png" % (plan["shots"], name))
        print("STEP", name, line, flush=True)
        if not line.startswith("refused"):
            verdicts += 1
    if live:
        driver.switch_to.window(live)
        # A tap is answered once its log has it, and the live page is told after that: wait for
        # every verdict the phone was shown (its feed keeps the last 20).
        deadline = time.time() + 60
        shown = "return document.querySelectorAll('#feed li').length"
        while not text("last") or driver.execute_script(shown) < min(verdicts, 20):
            if time.time() > deadline:
                sys.exit("the live page showed %d of the %d verdicts" % (driver.execute_script(shown), verdicts))
            time.sleep(0.05)
        driver.save_screenshot("%s/phone-live-page.png" % plan["shots"])
        print("FEED", driver.execute_script("var li = document.querySelector('#feed li'); return li ? li.textContent : ''"), flush=True)
        print("LIVE", text("last"), flush=True)
    print("DONE", flush=True)
finally:
    driver.quit()
