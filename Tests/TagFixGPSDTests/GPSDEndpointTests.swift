import Testing

@testable import TagFixGPSD

@Suite("gpsd:// addresses")
struct GPSDEndpointTests {
    @Test(
        "what a person writes, read with gpsd's defaults (localhost, 2947), an IPv6 host in brackets",
        arguments: [
            ("gpsd://", "localhost", 2947, nil),
            ("gpsd://pi.local", "pi.local", 2947, nil),
            ("gpsd://127.0.0.1:2948", "127.0.0.1", 2948, nil),
            ("gpsd://:2948", "localhost", 2948, nil),
            ("localhost:2947/dev/ttyACM0", "localhost", 2947, "/dev/ttyACM0"),
            ("gpsd://[::1]:2947", "::1", 2947, nil),
            ("gpsd://[::1]", "::1", 2947, nil),
            ("gpsd://[fe80::1%eth0]:2947/dev/gps0", "fe80::1%eth0", 2947, "/dev/gps0"),
        ] as [(String, String, Int, String?)])
    func reads(_ text: String, _ host: String, _ port: Int, _ device: String?) throws {
        let endpoint = try GPSDEndpoint(text)
        #expect(endpoint.host == host)
        #expect(endpoint.port == port)
        #expect(endpoint.device == device)
        // What it prints reads back as the same endpoint.
        #expect(try GPSDEndpoint(endpoint.description) == endpoint)
    }

    @Test(
        "what cannot be an address is refused with the reason",
        arguments: [
            "gpsd://::1:2947", "gpsd://[::1", "gpsd://[::1]2947", "gpsd://host:0", "gpsd://host:99999", "gpsd://host:+80", "http://host",
        ])
    func refuses(_ text: String) {
        #expect(throws: GPSDEndpointError.self) { try GPSDEndpoint(text) }
    }
}
