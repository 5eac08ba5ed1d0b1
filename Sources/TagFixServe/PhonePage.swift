public import TagFixCore

// The page a phone gets when it opens a tag's URL (issue 34), and which paths are such pages.

// MARK: - Which paths are tap pages

/// Which requests are phone taps: a page is served on any path whose tag id the verifier would
/// read from the URL (its last path segment, or `id=`), for a tag in the registry or a URL that
/// carries its own location. The server's own paths are never tap pages.
public enum PhoneTapRoute {
    /// Where the tap page posts its tap.
    public static let postPath = "/api/tap"

    /// Paths `serve` answers itself (the live page, its events, the API, Leaflet, the tiles).
    static let ownPaths: Set<String> = ["/", "/events", "/healthz", "/metrics", "/favicon.ico", "/robots.txt"]
    static let ownPrefixes = ["/api/", "/leaflet/", "/tiles/"]

    /// The URL the phone opened, as the verifier reads it: `http(s)://HOST` and the request's
    /// target (path and query as sent).
    public static func tagURL(target: String, host: String, secure: Bool) -> String {
        (secure ? "https://" : "http://") + host + target
    }

    /// Whether a tap's `url` may be the address of a tap page of the server a POST with `host`
    /// reached: the same origin (as `SameOrigin` takes an `Origin`: scheme, host and port) and a
    /// path that is none of the server's own. The page posts its own address, so a tap from it
    /// always is; a URL of another server, or of the server's live page or API, is not. Read on
    /// the loop for every tap, so it reads no registry (an unknown tag's URL is the verdict's
    /// business).
    public static func mayBeTapURL(_ url: String, host: String?, secure: Bool) -> Bool {
        guard var host, !host.isEmpty else { return false }
        // Bytes compared in place: it runs for every tap, on the loop (made of `String`s, its
        // allocations cost 3 % of serve's CPU a tap).
        var url = url
        return url.withUTF8 { url in host.withUTF8 { host in mayBeTapURL(url, host: host, secure: secure) } }
    }

    private static func mayBeTapURL(_ url: UnsafeBufferPointer<UInt8>, host: UnsafeBufferPointer<UInt8>, secure: Bool) -> Bool {
        // "http://" or "https://" (any case), the scheme the server speaks.
        let scheme = secure ? "https://" : "http://"
        guard url.count > scheme.utf8.count, sameASCII(url[..<scheme.utf8.count], scheme.utf8) else { return false }
        let authorityStart = scheme.utf8.count
        let delimiters: (UInt8) -> Bool = { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
        guard let pathStart = url[authorityStart...].firstIndex(where: delimiters), url[pathStart] == UInt8(ascii: "/") else {
            return false
        }
        let authority = url[authorityStart..<pathStart]
        // The host as `SameOrigin` takes it: the same, or one of them with the scheme's default port.
        let port = secure ? ":443" : ":80"
        let sameHost =
            sameASCII(authority, host)
            || (authority.count == host.count + port.utf8.count && sameASCII(authority.prefix(host.count), host)
                && sameASCII(authority.suffix(port.utf8.count), port.utf8))
            || (host.count == authority.count + port.utf8.count && sameASCII(host.prefix(authority.count), authority)
                && sameASCII(host.suffix(port.utf8.count), port.utf8))
        guard sameHost else { return false }
        let path = url[pathStart..<(url[pathStart...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? url.endIndex)]
        return !ownPaths.contains { path.elementsEqual($0.utf8) } && !ownPrefixes.contains { path.starts(with: $0.utf8) }
    }

    /// ASCII bytes equal but for the case of letters.
    private static func sameASCII(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { x, y in x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= 0x61 && (x | 0x20) <= 0x7A) }
    }

    /// Whether `target` (a request's path and query, as sent) on `host` is a tap page: the URL's
    /// tag id names a registry tag, or the URL gives a location. A registry that cannot be read
    /// says no (the server answers 404 as for any unknown path, and the log says nothing).
    public static func isTapPage(target: String, host: String, secure: Bool, verifier: Verifier) -> Bool {
        let path = String(target.prefix { $0 != "?" && $0 != "#" })
        guard mayBeTapPage(path) else { return false }
        let url = tagURL(target: target, host: host, secure: secure)
        guard
            let location = try? URLLocation(
                url: url, defaultRadius: verifier.policy.defaultURLRadius, maximumRadius: verifier.policy.maximumRadius)
        else {
            // A broken location is still the tag's page: the verdict says what is wrong with it.
            return true
        }
        if location.region != nil { return true }
        guard let id = location.tagID else { return false }
        return (try? verifier.registry.entry(forID: id)) != nil
    }
}

// MARK: - The page

/// The tap page: one self-contained page (no script, style or font from elsewhere) that says
/// what the position is used for before it asks, asks the browser for it (high accuracy, no
/// cached position), posts it with the URL the phone opened, and shows the verdict in `verify`'s
/// words. Nothing from the request is written into it: it reads its own `location`.
public enum PhoneTapPage {
    /// The headers it is served with: nothing from elsewhere, no framing.
    public static let headers: [(String, String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'"
        ),
        ("Referrer-Policy", "no-referrer"),
    ]

    /// The page.
    /// - Parameter keepPositions: the server keeps positions (`--keep-phone-positions`): the page says so.
    public static func html(keepPositions: Bool = false) -> String {
        let privacy =
            keepPositions
            ? "Your phone's position decides whether you are at this tag. This server keeps it in its log with the verdict."
            : "Your phone's position decides whether you are at this tag, and is then dropped: the log keeps the verdict, the distance and the accuracy, not where you were."
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>TagFix tap</title>
            <style>
            body{font-family:sans-serif;margin:1em;color:#222;max-width:36em}
            #verdict{font-size:1.4em;font-weight:bold;margin:0.6em 0 0.2em}#message{margin:0 0 1em}
            .confirmed{color:#1a7f37}.outside{color:#c62828}.inconclusive{color:#b26a00}.notRegistered{color:#555}
            .disallowed{color:#555}.untrusted{color:#8e24aa}button{font-size:1.1em;padding:0.4em 1em}
            </style></head><body>
            <h1>TagFix</h1>
            <p id="privacy">\(privacy)</p>
            <p id="state">Asking your phone for its position…</p>
            <p id="verdict"></p><p id="tag"></p><p id="counter"></p><p id="message"></p>
            <button id="again" hidden>Check again</button>
            <script>
            "use strict";
            const el = (id) => document.getElementById(id);
            function show(answer) {
              el("state").textContent = "";
              el("verdict").className = answer.verdict;
              el("verdict").textContent = answer.symbol + " " + answer.words;
              el("tag").textContent = answer.tag;
              // A SUN tag's tap: the read counter the server accepted (each tap's is higher).
              el("counter").textContent = answer.sun_counter == null ? "" : "SUN counter " + answer.sun_counter;
              el("message").textContent = answer.message;
              el("again").hidden = false;
            }
            function fail(text) { el("state").textContent = text; el("again").hidden = false; }
            function post(body) {
              el("state").textContent = "Checking…";
              body.url = location.href.split("#")[0];
              fetch("\(PhoneTapRoute.postPath)", {method: "POST", credentials: "same-origin",
                    headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)})
                .then((response) => response.ok ? response.json().then(show)
                      : response.text().then((text) => fail(text || ("The server answered " + response.status))))
                .catch(() => fail("The server cannot be reached: check the phone's network, then check again."));
            }
            function ask() {
              el("again").hidden = true;
              ["verdict", "tag", "counter", "message"].forEach((id) => { el(id).textContent = ""; });
              if (!window.isSecureContext || !navigator.geolocation) {
                el("state").textContent = "This browser gives no position on this page (it needs HTTPS).";
                post({error: "unavailable"});
                return;
              }
              el("state").textContent = "Asking your phone for its position…";
              navigator.geolocation.getCurrentPosition(
                (position) => post({lat: position.coords.latitude, lon: position.coords.longitude,
                                    accuracy_m: position.coords.accuracy, timestamp_ms: Math.round(position.timestamp)}),
                (error) => post({error: error.code === 1 ? "denied" : error.code === 3 ? "timeout" : "unavailable"}),
                {enableHighAccuracy: true, timeout: 20000, maximumAge: 0});
            }
            el("again").addEventListener("click", ask);
            ask();
            </script>
            </body></html>

            """
    }

    /// The page for a tap without a token (401): what to do, and nothing logged.
    public static let refused = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>TagFix: no token</title><style>body{font-family:sans-serif;margin:1em;max-width:36em}</style></head><body>
        <h1>This phone may not tap here yet</h1>
        <p>This server confirms taps only from phones that have its link. Open the link your site lead gave you
        (it ends in <code>?token=…</code>) once in this browser: it sets a cookie on this phone that holds the token,
        and every tag you tap opens here from then on. Then tap the tag again.</p>
        <p>Did it work before? Then the cookie is gone (cleared, or another browser) or the token was revoked: open the
        link again, or ask your site lead for a new one.</p>
        <p>Nothing about this tap was recorded.</p>
        </body></html>

        """

    /// What a phone with a known token gets for a path that is no tag of this site (404).
    public static let unknownTag = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>TagFix: no such tag</title><style>body{font-family:sans-serif;margin:1em;max-width:36em}</style></head><body>
        <h1>No tag of this site here</h1>
        <p>This address names no tag this server knows: the tag's link may be mistyped, or the tag is not in the site's
        registry yet. Tap the tag again; if this page comes back, tell your site lead which tag it is.</p>
        <p>Nothing about this tap was recorded.</p>
        </body></html>

        """
}
