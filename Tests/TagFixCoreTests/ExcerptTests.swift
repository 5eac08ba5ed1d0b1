import Testing

@testable import TagFixCore

@Suite("Excerpts of what an input gave, quoted in an error message")
struct ExcerptTests {
    @Test(
        "at most the limit's Unicode scalars, control characters left out, … when cut",
        arguments: [
            ("ABC", 40, "ABC"),
            (String(repeating: "7", count: 40), 40, String(repeating: "7", count: 40)),
            (String(repeating: "7", count: 41), 40, String(repeating: "7", count: 40) + "…"),
            (String(repeating: "h", count: 4_000), 64, String(repeating: "h", count: 64) + "…"),
            ("evil\nERROR forged line", 40, "evilERROR forged line"),
            ("a\r\u{1B}[31mb\u{7F}c\u{85}d\u{0}", 40, "a[31mbcd"),
            // Scalars, not characters: a flag is two, an e with its accent two.
            ("🇩🇪🇩🇪", 3, "🇩🇪🇩…"),
            ("e\u{301}e\u{301}", 3, "e\u{301}e…"),
        ] as [(String, Int, String)])
    func excerpts(_ text: String, _ limit: Int, _ expected: String) {
        #expect(text.excerpt(limit) == expected)
        #expect(text[...].excerpt(limit) == expected)
    }

    @Test("the strict JSON reader's messages quote a duplicate name or a huge number by their excerpt, never a line break")
    func jsonMessages() {
        let duplicate = #"{"a\nb":1,"a\nb":2}"#
        #expect {
            _ = try JSONValue.parse(duplicate)
        } throws: { error in
            let text = "\(error)"
            return text.contains("duplicate member \"ab\"") && !text.contains("\n")
        }
        let huge = "[" + String(repeating: "9", count: 400) + "]"
        #expect {
            _ = try JSONValue.parse(huge)
        } throws: { error in "\(error)".contains(String(repeating: "9", count: 40) + "…") }
    }
}

@Suite("Text for HTML and XML")
struct HTMLTextTests {
    @Test(
        "markup characters as references, forbidden control characters as ?, the rest as it is",
        arguments: [
            ("plain É 🇩🇪", "plain É 🇩🇪"),
            (#"<script>alert("x")</script>"#, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"),
            ("/t/E1?a=1&b='2'", "/t/E1?a=1&amp;b=&#39;2&#39;"),
            ("tab\tline\nreturn\r", "tab\tline\nreturn\r"),
            ("nul\u{0}esc\u{1B}", "nul?esc?"),
        ] as [(String, String)])
    func escapes(_ text: String, _ expected: String) {
        #expect(text.htmlEscaped == expected)
    }
}

@Suite("HOST:PORT as people write it")
struct HostPortTests {
    @Test(
        "a host, a port, an IPv6 host in brackets",
        arguments: [
            ("localhost", "localhost", nil), ("127.0.0.1:8080", "127.0.0.1", 8080), ("[::1]:80", "::1", 80), ("[::1]", "::1", nil),
            (":2947", "", 2947), ("host:0", "host", 0), ("[2001:db8::1]:65535", "2001:db8::1", 65535),
        ] as [(String, String, Int?)])
    func reads(_ text: String, _ host: String, _ port: Int?) throws {
        let parsed = try HostPort(parsing: text)
        #expect(parsed == HostPort(host: host, port: port))
        if let port { #expect(try HostPort(parsing: HostPort.described(host, port)) == parsed) }
    }

    @Test(
        "refused rather than guessed",
        arguments: [
            ("::1:8080", HostPort.Problem.bareIPv6), ("2001:db8::1", .bareIPv6), ("[::1", .unclosedBracket),
            ("[::1]80", .afterBracket("80")), ("host:", .port("")), ("host:65536", .port("65536")), ("host:+80", .port("+80")),
            ("host:８０", .port("８０")),
        ] as [(String, HostPort.Problem)])
    func refuses(_ text: String, _ problem: HostPort.Problem) {
        #expect(throws: problem) { try HostPort(parsing: text) }
    }
}
