import Foundation
import TagFixTesting
import Testing

/// `tagfix serve --http` against what a hostile review tried, over the wire: each test fails
/// without its fix.
@Suite("tagfix serve: a hostile review's findings")
struct ServeHostileTests {
    static let runnable = RunningTagFix.isBuilt

    @Test(
        "a method a path never takes is 405 before any token is asked for: any but POST on /api/tap (Allow: POST), GET and HEAD too; DELETE and OPTIONS elsewhere",
        .enabled(if: runnable, "needs the built tagfix"))
    func methodBeforeToken() async throws {
        let rig = try await PhoneRig()
        // A stranger's review found GET and HEAD on /api/tap answered 404 (a list of pages without
        // it) and DELETE and OPTIONS 405 with `Allow: GET, HEAD`, against docs/protocol.md.
        for method in ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH"] {
            let body = method == "PUT" ? "Content-Length: 2\r\n\r\n{}" : "\r\n"
            let answer = try await HTTPExchange.send(
                port: rig.port, "\(method) /api/tap HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\nConnection: close\r\n\(body)")
            #expect(answer.status == 405 && answer.head.components(separatedBy: "\r\n").contains("Allow: POST"), "\(method): \(answer)")
        }
        for method in ["DELETE", "OPTIONS"] {
            let answer = try await HTTPExchange.send(
                port: rig.port, "\(method) /api/tags HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\nConnection: close\r\n\r\n")
            #expect(
                answer.status == 405 && answer.head.components(separatedBy: "\r\n").contains("Allow: GET, HEAD"), "\(method): \(answer)")
        }
        // The right method without a token is still refused for want of one.
        let get = try await HTTPExchange.send(port: rig.port, "GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\n\r\n")
        #expect(get.status == 401, "\(get)")
        #expect(rig.logLines.isEmpty)
        #expect(await rig.stop())
    }

    @Test(
        "a phone's cookie: a tag URL this site does not know is a 404 page (not a 401 about bearer tokens), and a POST with a stray ?token= is taken by its cookie",
        .enabled(if: runnable, "needs the built tagfix"))
    func phoneCookie() async throws {
        let rig = try await PhoneRig()
        let alice = PhoneRig.tokens["alice"]!
        let unknown = try await HTTPExchange.send(
            port: rig.port, "GET /t/NOSUCHTAG HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\nCookie: tagfix_token=\(alice)\r\n\r\n")
        #expect(unknown.status == 404 && unknown.body.contains("No tag of this site"), "\(unknown)")
        #expect(!unknown.body.contains("Bearer"), "\(unknown)")
        // Without a token the same path says nothing of the registry.
        let stranger = try await HTTPExchange.send(port: rig.port, "GET /t/NOSUCHTAG HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\n\r\n")
        #expect(stranger.status == 401, "\(stranger)")
        // A POST whose URL carries a ?token= (another one, or the same) is the cookie's.
        let body = rig.body()
        for query in ["?token=nonsense-0123456789abcdef", "?token=\(alice)"] {
            var head = "POST /api/tap\(query) HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\nContent-Type: application/json\r\n"
            head += "Content-Length: \(body.utf8.count)\r\nOrigin: \(rig.origin)\r\nCookie: tagfix_token=\(alice)\r\n\r\n"
            let tap = try await HTTPExchange.send(port: rig.port, head + body, from: "127.0.0.2")
            #expect(tap.status == 200 && tap.body.contains(#""verdict":"confirmed""#), "\(query): \(tap)")
        }
        #expect(rig.logLines.count == 2)
        #expect(await rig.stop())
    }

    @Test(
        "the live page's link: its ?token= becomes the cookie and its page goes on to the address without it; the page, its API and its stream take the cookie; the page has a CSP and no referrer",
        .enabled(if: runnable, "needs the built tagfix"))
    func livePageLink() async throws {
        let rig = try await PhoneRig()
        let bob = PhoneRig.tokens["bob"]!
        let link = try await HTTPExchange.send(port: rig.port, "GET /?token=\(bob) HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\n\r\n")
        #expect(link.status == 200 && link.body.contains(#"content="0; url=/""#), "\(link)")
        #expect(link.head.contains("Set-Cookie: tagfix_token=\(bob); Path=/;") && link.head.contains("HttpOnly"), "\(link)")
        let cookie = "Cookie: tagfix_token=\(bob)\r\n"
        let page = try await HTTPExchange.send(port: rig.port, "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\n\(cookie)\r\n")
        #expect(page.status == 200 && page.body.contains("TagFix live"), "\(page.head)")
        #expect(!page.body.contains(bob), "the token is in the page")
        let policy = page.head.split(separator: "\r\n").first { $0.hasPrefix("Content-Security-Policy: ") }.map(String.init) ?? ""
        #expect(
            policy.contains("default-src 'none'") && policy.contains("connect-src 'self'") && policy.contains("frame-ancestors 'none'"),
            "\(page.head)")
        #expect(page.head.contains("Referrer-Policy: no-referrer"), "\(page.head)")
        let verdicts = try await HTTPExchange.send(
            port: rig.port, "GET /api/verdicts?since=0 HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\n\(cookie)\r\n")
        #expect(verdicts.status == 200, "\(verdicts)")
        // A cookie of a token the file does not hold is no token.
        let stale = try await HTTPExchange.send(
            port: rig.port,
            "GET /api/verdicts?since=0 HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\nCookie: tagfix_token=revoked-0123456789abcdef\r\n\r\n")
        #expect(stale.status == 401, "\(stale)")
        #expect(await rig.stop())
    }
}
