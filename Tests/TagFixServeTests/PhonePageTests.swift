import Foundation
import TagFixCore
import TagFixServe
import Testing

@Suite("The tap page and which paths are tap pages")
struct PhonePageTests {
    static func verifier() throws -> Verifier {
        let region = try CircularRegion(center: Coordinate(latitude: 53.545, longitude: 9.966), radius: 25, identifier: "E1")
        return Verifier(registry: try InMemoryRegistry([RegistryEntry(id: "E1", uid: nil, region: region, name: nil)]))
    }

    @Test(
        "registry tags by their last segment or id=, URLs with a location; never the server's own paths",
        arguments: [
            ("/t/E1", true), ("/anything/E1", true), ("/t/E1?picc_data=00&cmac=11", true), ("/t?id=E1", true),
            ("/t/X9", false), ("/t/X9?lat=53.5&lon=9.9&r=30", true), ("/t/X9?lat=5x&lon=9", true),
            ("/", false), ("/events", false), ("/healthz", false), ("/metrics", false), ("/api/tags", false), ("/api/tap", false),
            ("/tiles/1/2/3.png", false), ("/leaflet/leaflet.js", false), ("/t/", false),
        ])
    func route(_ target: String, _ isTap: Bool) throws {
        #expect(PhoneTapRoute.isTapPage(target: target, host: "tags.example.org", secure: true, verifier: try Self.verifier()) == isTap)
    }

    @Test(
        "a tap's url is a page of the server it was posted to: the same origin (default ports as Origin takes them), none of the server's own paths",
        arguments: [
            ("https://tags.example.org/t/E1", "tags.example.org", true, true),
            ("HTTPS://Tags.Example.org/t/E1?picc_data=00&cmac=11", "tags.example.org", true, true),
            ("https://tags.example.org:443/t/E1", "tags.example.org", true, true),
            ("https://tags.example.org/t/E1", "tags.example.org:443", true, true),
            ("http://127.0.0.1:8080/anything/E1#top", "127.0.0.1:8080", false, true),
            ("http://127.0.0.1:8080/t?id=E1", "127.0.0.1:8080", false, true),
            ("http://tags.example.org/t/E1", "tags.example.org", true, false),
            ("https://tags.example.org/t/E1", "tags.example.org", false, false),
            ("https://evil.example/t/E1", "tags.example.org", true, false),
            ("https://tags.example.org.evil.example/t/E1", "tags.example.org", true, false),
            ("https://tags.example.org:8443/t/E1", "tags.example.org", true, false),
            ("https://x@tags.example.org/t/E1", "tags.example.org", true, false),
            ("https://tags.example.org", "tags.example.org", true, false),
            ("https://tags.example.org?id=E1", "tags.example.org", true, false),
            ("https://tags.example.org/", "tags.example.org", true, false),
            ("https://tags.example.org/api/tags", "tags.example.org", true, false),
            ("https://tags.example.org/events", "tags.example.org", true, false),
            ("ftp://tags.example.org/t/E1", "tags.example.org", true, false),
            // Bytes 0x20 apart that are not letters (` and @, { and [) are not the same in another case.
            ("https://x`y/t/E1", "x@y", true, false),
            ("https://x{y/t/E1", "x[y", true, false),
            ("/t/E1", "tags.example.org", true, false),
            ("", "tags.example.org", true, false),
        ])
    func tapURL(url: String, host: String, secure: Bool, taken: Bool) {
        #expect(PhoneTapRoute.mayBeTapURL(url, host: host, secure: secure) == taken)
    }

    @Test("a tap's url, with no Host to compare it with, is never taken")
    func tapURLWithoutHost() {
        #expect(!PhoneTapRoute.mayBeTapURL("https://tags.example.org/t/E1", host: nil, secure: true))
        #expect(!PhoneTapRoute.mayBeTapURL("https://tags.example.org/t/E1", host: "", secure: true))
    }

    @Test("the URL the verifier reads is the one the phone opened")
    func url() {
        #expect(
            PhoneTapRoute.tagURL(target: "/t/E1?x=1", host: "tags.example.org:8443", secure: true)
                == "https://tags.example.org:8443/t/E1?x=1")
        #expect(PhoneTapRoute.tagURL(target: "/t/E1", host: "10.0.0.2", secure: false) == "http://10.0.0.2/t/E1")
    }

    @Test("the page says what the position is for before it asks, asks for high accuracy, and loads nothing from elsewhere")
    func page() {
        let html = PhoneTapPage.html()
        let privacy = html.range(of: "is then dropped")
        let ask = html.range(of: "getCurrentPosition")
        #expect(privacy != nil && ask != nil && privacy!.lowerBound < ask!.lowerBound)
        #expect(html.contains("enableHighAccuracy: true") && html.contains("maximumAge: 0"))
        #expect(html.contains(#"fetch("/api/tap""#) && html.contains(#"credentials: "same-origin""#))
        #expect(html.contains(#"error.code === 1 ? "denied""#))
        #expect(!html.contains("src=") && !html.contains("href=") && !html.contains("innerHTML"))
        #expect(PhoneTapPage.html(keepPositions: true).contains("keeps it in its log"))
        #expect(PhoneTapPage.headers.contains { $0.0 == "Content-Security-Policy" && $0.1.contains("default-src 'none'") })
        #expect(PhoneTapPage.refused.contains("?token=") && PhoneTapPage.refused.contains("Nothing about this tap was recorded"))
    }
}
