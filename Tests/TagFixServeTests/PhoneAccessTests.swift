import Foundation
import TagFixCore
import Testing

@testable import TagFixServe

@Suite("Who may tap: named tokens, the cookie, same origin, the rate limit")
struct PhoneAccessTests {
    static let anna = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    static let ben = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

    @Test("today's one-token file reads as one token named default")
    func legacy() throws {
        let file = try TokenFile(text: "  s3cret-token-of-old-1234\n")
        #expect(file.entries == [.init(name: "default", token: "s3cret-token-of-old-1234")])
        #expect(file.name(forToken: "s3cret-token-of-old-1234") == "default")
        #expect(file.name(forToken: "s3cret-token-of-old-123") == nil)
        // Whatever serve took before, it still takes: a short one, one with a ; in it.
        #expect(try TokenFile(text: "abc;1\n").name(forToken: "abc;1") == "default")
    }

    @Test("named tokens: comments, blank lines, lookups; and the text written reads back")
    func named() throws {
        let file = try TokenFile(text: "# techs\n\nanna \(Self.anna)\nben\t\(Self.ben)\n")
        #expect(file.entries.map(\.name) == ["anna", "ben"])
        #expect(file.name(forToken: Self.ben) == "ben")
        #expect(file.name(forToken: "x") == nil)
        #expect(try TokenFile(text: file.text) == file)
    }

    @Test(
        "a malformed file is refused with its line, never echoing a token",
        arguments: [
            ("anna \(anna) extra\n", 1), ("anna \(anna)\nanna \(ben)\n", 2), ("anna \(anna)\nben \(anna)\n", 2),
            ("anna short\n", 1), ("an/na \(anna)\n", 1),
        ])
    func refused(_ text: String, _ line: Int) {
        #expect {
            try TokenFile(text: text)
        } throws: { error in
            guard let error = error as? DataFileError else { return false }
            return error.line == line && !error.message.contains(Self.anna) && !error.message.contains(Self.ben)
        }
    }

    /// A tap's token is found by its digest (`TokenFile.name(forToken:)`), not by a walk over
    /// every entry: each of a site's hundred techs finds their own name, a near miss none, and
    /// the lookups follow the file through `add` and `revoke`.
    @Test("a hundred techs: each token its own name; near misses, prefixes and revoked tokens none")
    func manyTokens() throws {
        var file = TokenFile()
        // Tokens that differ only in their last character or in their length, beside fresh ones.
        let stem = String(repeating: "k", count: 42)
        let alike = ["\(stem)A", "\(stem)B", "\(stem)AB", stem]
        let tokens = alike + (0..<96).map { _ in TokenFile.generateToken() }
        for (index, token) in tokens.enumerated() { try file.add(name: "tech\(index)", token: token) }
        let read = try TokenFile(text: file.text)
        #expect(read == file)
        for (index, token) in tokens.enumerated() {
            #expect(file.name(forToken: token) == "tech\(index)")
            #expect(read.name(forToken: token) == "tech\(index)")
        }
        for miss in ["\(stem)C", "\(stem)a", String(stem.dropLast()), "\(stem)ABC", "", tokens[9].uppercased() + "x"] {
            #expect(file.name(forToken: miss) == nil, "\(miss) is no one's token")
        }
        // Revoked: no longer found, and every later entry still finds its own name.
        try file.revoke(name: "tech1")
        try file.revoke(name: "tech50")
        #expect(file.name(forToken: tokens[1]) == nil && file.name(forToken: tokens[50]) == nil)
        for (index, token) in tokens.enumerated() where index != 1 && index != 50 {
            #expect(file.name(forToken: token) == "tech\(index)")
        }
        // Added after: found; the same token under a new name once its old one is revoked.
        try file.add(name: "newcomer", token: tokens[1])
        #expect(file.name(forToken: tokens[1]) == "newcomer")
        #expect(file != read)
    }

    /// Two tokens whose digests meet (once in 2⁶⁴, so not made here by chance): the lookup
    /// compares the token with every entry the digest found, and only its own matches.
    @Test("entries whose digests meet: each token still finds its own name, a near miss none")
    func digestsMeet() {
        let tokens = ["\(Self.anna)", "\(Self.ben)", String(Self.anna.dropLast()) + "b", String(Self.anna.dropLast())]
        let entries = tokens.enumerated().map { TokenFile.Entry(name: "tech\($0.offset)", token: $0.element) }
        let all = Array(entries.indices)
        for (index, token) in tokens.enumerated() {
            #expect(TokenFile.name(forToken: token, among: all, of: entries) == "tech\(index)")
            #expect(TokenFile.name(forToken: token, among: all.filter { $0 != index }, of: entries) == nil)
        }
        #expect(TokenFile.name(forToken: Self.anna + "a", among: all, of: entries) == nil)
        #expect(TokenFile.name(forToken: "", among: all, of: entries) == nil)
        // The same token twice (a file written by hand): the last entry's name, as before.
        #expect(TokenFile.name(forToken: Self.ben, among: [1, 4], of: entries + [.init(name: "later", token: Self.ben)]) == "later")
    }

    @Test("add, revoke; fresh tokens are 43 base64url characters, each different")
    func edits() throws {
        var file = TokenFile()
        let token = TokenFile.generateToken()
        #expect(token.utf8.count == 43 && TokenFile.isToken(token))
        #expect(token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(TokenFile.generateToken() != token)
        try file.add(name: "anna", token: token)
        #expect(throws: TokenFileError.exists("anna")) { try file.add(name: "anna", token: Self.ben) }
        #expect(throws: TokenFileError.badName("a b")) { try file.add(name: "a b", token: Self.ben) }
        try file.revoke(name: "anna")
        #expect(throws: TokenFileError.unknown("anna")) { try file.revoke(name: "anna") }
        #expect(file.entries.isEmpty)
    }

    @Test("the file is replaced atomically with mode 0600 and read back; a readable one is refused")
    func fileOnDisk() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-tokens-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/tokens"
        var file = TokenFile()
        try file.add(name: "anna", token: Self.anna)
        try file.write(to: path)
        let mode = try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        try file.add(name: "ben", token: Self.ben)
        try file.write(to: path)
        #expect(try TokenFile.read(path) == file)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["tokens"], "no temporary file left")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        #expect(throws: DataFileError.self) { try TokenFile.read(path) }
    }

    /// A link's redirect stays on this server: a path that begins `//` or `/\` is a browser's
    /// link to another host, and was sent there with the token's cookie set (an open redirect).
    @Test(
        "the link's redirect never leaves this server",
        arguments: [
            ("//evil.example/t/E1", "/evil.example/t/E1"), ("/\\evil.example/t/E1", "/evil.example/t/E1"),
            ("///evil.example/t/E1", "/evil.example/t/E1"), ("/\\/\\evil.example/t/E1", "/evil.example/t/E1"),
            ("/t/E1", "/t/E1"), ("/site/t/E1", "/site/t/E1"),
        ])
    func redirectStaysHere(_ path: String, _ expected: String) throws {
        let tokens = try TokenFile(text: "anna \(Self.anna)\n")
        guard
            case .setCookie(_, _, let location) = PhoneCookie.access(
                tokens: tokens, path: path, query: [("token", Self.anna)], cookieHeader: nil, secure: false)
        else {
            Issue.record("a known link's token sets the cookie")
            return
        }
        #expect(location == expected)
        #expect(location.hasPrefix("/") && !location.dropFirst().hasPrefix("/") && !location.dropFirst().hasPrefix("\\"))
    }

    @Test("the cookie: HttpOnly, SameSite=Strict, Path=/; over HTTPS Secure and the __Host- name, no Domain")
    func cookie() {
        #expect(
            PhoneCookie.setCookie(token: Self.anna, secure: true)
                == "__Host-tagfix_token=\(Self.anna); Path=/; Max-Age=31536000; HttpOnly; SameSite=Strict; Secure")
        #expect(
            PhoneCookie.setCookie(token: Self.anna, secure: false)
                == "tagfix_token=\(Self.anna); Path=/; Max-Age=31536000; HttpOnly; SameSite=Strict")
        #expect(PhoneCookie.token(cookieHeader: "a=1; tagfix_token=\(Self.ben); b=2", secure: false) == Self.ben)
        #expect(PhoneCookie.token(cookieHeader: "xtagfix_token=1", secure: false) == nil)
        #expect(PhoneCookie.token(cookieHeader: nil, secure: false) == nil)
        #expect(PhoneCookie.token(cookieHeader: "a=1; __Host-tagfix_token=\(Self.ben)", secure: true) == Self.ben)
        #expect(PhoneCookie.token(cookieHeader: "__Host-tagfix_token=\(Self.ben)", secure: false) == nil)
        // The header read as bytes (it was split into Characters): spaces and tabs before a
        // name, empty pairs, an `=` in a value, a trailing `;`, the first of two, none at all.
        for (header, token) in [
            ("\ttagfix_token=abc", "abc"), ("a=1;;tagfix_token=abc;", "abc"), ("tagfix_token=a=b", "a=b"),
            ("tagfix_token=first; tagfix_token=second", "first"), ("tagfix_token=", ""), (" ; ;", nil), ("tagfix_token", nil),
            ("tagfix_tokens=abc", nil), ("a=tagfix_token=abc", nil), ("tagfix_token=é1", "é1"),
        ] as [(String, String?)] {
            #expect(PhoneCookie.token(cookieHeader: header, secure: false) == token, "\(header)")
            let hostOnly = header.replacingOccurrences(of: "tagfix_token", with: "__Host-tagfix_token")
            #expect(PhoneCookie.token(cookieHeader: hostOnly, secure: true) == token, "\(hostOnly)")
        }
    }

    /// The link's answer is a page of this server that goes on by itself, not a redirect (which a
    /// link from another site follows without the SameSite=Strict cookie); the address in it is
    /// the request's path, which may hold anything but a space.
    @Test("the link's page: the cookie, and a refresh and a link to the address without the token, escaped; no script, no referrer")
    func linkPage() throws {
        let answer = PhoneCookie.linkAnswer(
            setCookie: PhoneCookie.setCookie(token: Self.anna, secure: false), location: #"/t/"><script>x()</script>?a=1&b='2'"#,
            destination: "the tap page")
        let body = String(decoding: answer.body, as: UTF8.self)
        #expect(answer.status == 200 && answer.contentType == "text/html; charset=utf-8")
        let address = "/t/&quot;&gt;&lt;script&gt;x()&lt;/script&gt;?a=1&amp;b=&#39;2&#39;"
        #expect(body.contains(#"<meta http-equiv="refresh" content="0; url=\#(address)">"#), "\(body)")
        #expect(body.contains(#"<a href="\#(address)">on to the tap page</a>"#), "\(body)")
        #expect(!body.contains("<script") && !body.contains(Self.anna))
        let headers = Dictionary(answer.extraHeaders, uniquingKeysWith: { first, _ in first })
        #expect(headers["Set-Cookie"] == PhoneCookie.setCookie(token: Self.anna, secure: false))
        #expect(headers["Location"] == nil)
        #expect(headers["Referrer-Policy"] == "no-referrer")
        let policy = try #require(headers["Content-Security-Policy"])
        #expect(policy.contains("default-src 'none'") && !policy.contains("script-src") && policy.contains("frame-ancestors 'none'"))
    }

    @Test("?token= once (cookie set, the token taken out of the address), then the cookie; others refused")
    func access() throws {
        let tokens = try TokenFile(text: "anna \(Self.anna)\n")
        let first = PhoneCookie.access(
            tokens: tokens, path: "/t/E1", query: [("token", Self.anna), ("x", "a b")], cookieHeader: nil, secure: true)
        #expect(
            first
                == .setCookie(
                    name: "anna", setCookie: PhoneCookie.setCookie(token: Self.anna, secure: true), location: "/t/E1?x=a%20b"))
        #expect(
            PhoneCookie.access(tokens: tokens, path: "/t/E1", query: [], cookieHeader: "__Host-tagfix_token=\(Self.anna)", secure: true)
                == .allowed(name: "anna"))
        #expect(PhoneCookie.access(tokens: tokens, path: "/t/E1", query: [], cookieHeader: nil, secure: true) == .refused)
        #expect(
            PhoneCookie.access(tokens: tokens, path: "/t/E1", query: [("token", Self.ben)], cookieHeader: nil, secure: true) == .refused,
            "a token of another site")
        #expect(
            PhoneCookie.access(tokens: tokens, path: "/t/E1", query: [], cookieHeader: "__Host-tagfix_token=\(Self.ben)", secure: true)
                == .refused)
    }

    /// Cookie tossing: a page on another host of the same site (`evil.example.org` beside
    /// `tags.example.org`) sets `tagfix_token` for the whole domain, with a token of its own, so
    /// that this phone's taps would be recorded as that token's. Over HTTPS the server reads only
    /// the `__Host-` cookie, which a browser keeps only from this host itself.
    @Test("over HTTPS a plain tagfix_token cookie (another host of the site can set one) is not taken; the __Host- one is, first")
    func tossedCookie() throws {
        let tokens = try TokenFile(text: "anna \(Self.anna)\nmallory \(Self.ben)\n")
        #expect(
            PhoneCookie.access(tokens: tokens, path: "/t/E1", query: [], cookieHeader: "tagfix_token=\(Self.ben)", secure: true) == .refused
        )
        // A browser sends the cookies of the longer path, then the older ones first: the tossed
        // one may come before this host's own.
        #expect(
            PhoneCookie.access(
                tokens: tokens, path: "/t/E1", query: [], cookieHeader: "tagfix_token=\(Self.ben); __Host-tagfix_token=\(Self.anna)",
                secure: true) == .allowed(name: "anna"))
        // Over plain HTTP (no Secure cookies) the plain name is the phone's own.
        #expect(
            PhoneCookie.access(tokens: tokens, path: "/t/E1", query: [], cookieHeader: "tagfix_token=\(Self.anna)", secure: false)
                == .allowed(name: "anna"))
    }

    @Test("POSTs are same-origin only")
    func sameOrigin() {
        #expect(SameOrigin.allows(origin: "https://tags.example.org", host: "tags.example.org", secure: true))
        #expect(SameOrigin.allows(origin: "https://tags.example.org:8443", host: "tags.example.org:8443", secure: true))
        #expect(SameOrigin.allows(origin: "https://tags.example.org", host: "tags.example.org:443", secure: true))
        #expect(SameOrigin.allows(origin: "http://192.168.1.5:8080", host: "192.168.1.5:8080", secure: false))
        #expect(!SameOrigin.allows(origin: "http://tags.example.org", host: "tags.example.org", secure: true), "a scheme downgrade")
        #expect(!SameOrigin.allows(origin: "https://evil.example", host: "tags.example.org", secure: true))
        #expect(!SameOrigin.allows(origin: "null", host: "tags.example.org", secure: true))
        #expect(!SameOrigin.allows(origin: nil, host: "tags.example.org", secure: true))
        #expect(!SameOrigin.allows(origin: "https://tags.example.org", host: nil, secure: true))
    }

    @Test("the rate limit: a burst, then one a second, per client, on the given clock")
    func rateLimit() {
        var limiter = PhoneRateLimiter(burst: 3, interval: .seconds(1))
        let t0 = Timestamp(nanosecondsSinceEpoch: 1_000_000_000_000)
        var answers = (0..<5).map { _ in limiter.allow(client: "a", now: t0) }
        #expect(answers == [true, true, true, false, false])
        answers = [
            limiter.allow(client: "b", now: t0),  // another phone is unaffected
            limiter.allow(client: "a", now: t0.advanced(by: .milliseconds(900))),
            limiter.allow(client: "a", now: t0.advanced(by: .milliseconds(1900))),
            limiter.allow(client: "a", now: t0.advanced(by: .milliseconds(1900))),
            limiter.allow(client: "a", now: t0.advanced(by: .seconds(60))),
        ]
        #expect(answers == [true, false, true, false, true])
    }

    @Test("a flood of clients keeps memory bounded")
    func bounded() {
        var limiter = PhoneRateLimiter(burst: 2, interval: .seconds(1), maximumClients: 100)
        let t0 = Timestamp(nanosecondsSinceEpoch: 1_000_000_000_000)
        for index in 0..<10_000 { _ = limiter.allow(client: "10.0.\(index / 256).\(index % 256)", now: t0) }
        #expect(limiter.clientCount <= 100)
        // Idle buckets go first: later, a new client still gets in and the count stays bounded.
        let allowed = limiter.allow(client: "192.0.2.1", now: t0.advanced(by: .seconds(5)))
        #expect(allowed)
        #expect(limiter.clientCount <= 100)
    }
}
