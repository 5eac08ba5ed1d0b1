import Testing

@testable import TagFixServe

@Suite("Who tapped behind a proxy: X-Forwarded-For and Forwarded, addresses only")
struct ForwardedClientTests {
    /// A tap's request from `peer` with these headers.
    static func request(from peer: String, _ headers: [(String, String)]) throws -> HTTPRequest {
        var head = "POST /api/tap HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        var request = try HTTPRequest(head: Array((head + "\r\n").utf8))
        request.clientAddress = peer
        return request
    }

    @Test(
        "from a proxy on this machine, the forwarded address when it is one, in its canonical form; anything else leaves the peer",
        arguments: [
            ([("X-Forwarded-For", "203.0.113.7")], "203.0.113.7"),
            ([("X-Forwarded-For", "10.0.0.1, 2001:DB8::0:1")], "2001:db8::1"),
            ([("X-Forwarded-For", "garbage<script>")], "127.0.0.1"),
            ([("X-Forwarded-For", "203.0.113.7, garbage<script>")], "127.0.0.1"),
            ([("X-Forwarded-For", "")], "127.0.0.1"),
            ([("X-Forwarded-For", "203.0.113.7:4711")], "127.0.0.1"),
            ([("X-Forwarded-For", "phone.example")], "127.0.0.1"),
            ([("Forwarded", #"for=192.0.2.60;proto=https;by=203.0.113.43"#)], "192.0.2.60"),
            ([("Forwarded", #"for=192.0.2.43:47011, for="[2001:db8:cafe::17]:4711""#)], "2001:db8:cafe::17"),
            ([("Forwarded", "for=unknown")], "127.0.0.1"),
            ([("Forwarded", "for=_hidden")], "127.0.0.1"),
            ([("Forwarded", #"for="<img src=x>""#)], "127.0.0.1"),
            // The proxy's own header first: Caddy and nginx set X-Forwarded-For.
            ([("X-Forwarded-For", "203.0.113.7"), ("Forwarded", "for=192.0.2.60")], "203.0.113.7"),
        ] as [([(String, String)], String)])
    func fromProxy(_ headers: [(String, String)], _ expected: String) throws {
        #expect(PhoneTaps.client(try Self.request(from: "127.0.0.1:40000", headers)) == expected)
    }

    /// A proxy on this machine as the peer of a socket listening on `[::]` (`--http [::]:PORT`):
    /// over IPv4 it is an IPv4-mapped address; over IPv6, `::1` however the kernel spells it.
    @Test(
        "a proxy on this machine is one however its address is spelled: the forwarded address and its HTTPS are taken",
        arguments: ["127.0.0.1:40000", "127.9.8.7:40000", "::1:40000", "::ffff:127.0.0.1:40000", "0:0:0:0:0:0:0:1:40000"])
    func proxySpellings(_ peer: String) throws {
        let request = try Self.request(from: peer, [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-Proto", "https")])
        #expect(PhoneTaps.client(request) == "203.0.113.7")
        #expect(PhoneTaps.proxySaysHTTPS(request))
    }

    @Test(
        "from any other peer, nothing it says of itself is believed",
        arguments: ["198.51.100.9:40000", "::ffff:198.51.100.9:40000", "::2:40000", "2001:db8::1:40000", "128.0.0.1:40000"])
    func notFromProxy(_ peer: String) throws {
        let request = try Self.request(
            from: peer, [("X-Forwarded-For", "203.0.113.7"), ("Forwarded", "for=192.0.2.60"), ("X-Forwarded-Proto", "https")])
        #expect(PhoneTaps.client(request) == Socket.host(ofPeer: peer))
        #expect(!PhoneTaps.proxySaysHTTPS(request))
    }

    /// A peer's address as `inet_ntop` writes it, and spellings that only look like one: a sign
    /// (`UInt8("+1")` is 1), a fifth number, a number past 255 or of four digits, an empty one.
    @Test(
        "a dotted quad is loopback only when it is one, in 127.0.0.0/8",
        arguments: [
            ("127.0.0.1", true), ("127.255.255.255", true), ("127.0.0.01", true), ("127.1.2.3", true),
            ("128.0.0.1", false), ("12.7.0.1", false), ("127.0.0", false), ("127.0.0.1.", false), ("127..0.1", false),
            (".127.0.0.1", false), ("127.0.0.256", false), ("127.0.0.1000", false), ("127.0.0.+1", false), ("127.-0.0.1", false),
            ("127.0.0.1.5", false), ("127.0.0.1 ", false), ("127.0.0.", false), ("", false), ("1127.0.0.1", false),
        ])
    func dottedQuad(_ host: String, _ isLoopback: Bool) {
        #expect(ListenAddress.isLoopbackIPv4(Substring(host)) == isLoopback)
        #expect(ListenAddress.isLoopback(host) == isLoopback)
        // Mapped into IPv6 it is read by the system (inet_pton refuses a leading zero).
        if !host.contains(".01") {
            #expect(ListenAddress.isLoopback("::ffff:" + host) == isLoopback)
        }
    }
}
