import TagFixCore
import Testing

@Suite("The signed location's canonical text")
struct SignedLocationTextTests {
    @Test(
        "fixed-point numbers: one spelling per value, no exponent, no negative zero",
        arguments: [
            (52.52, 7, "52.5200000"), (5.252e1, 7, "52.5200000"), (-0.00000001, 7, "0.0000000"),
            (-33.8688, 7, "-33.8688000"), (180, 7, "180.0000000"), (25, 2, "25.00"), (0.125, 2, "0.13"), (499.999, 2, "500.00"),
            (1e-9, 2, "0.00"),
        ])
    func fixed(value: Double, decimals: Int, expected: String) {
        #expect(SignedLocation.fixed(value, decimals: decimals) == expected)
    }

    @Test("the text: six lines, the UID only when bound, nothing for an id with a line break")
    func canonical() throws {
        let region = try CircularRegion(center: Coordinate(latitude: 53.545, longitude: 9.966), radius: 25, identifier: "V1")
        let uid = try TagUID(hex: "04:a1:a2:a3:a4:a5:a6")
        #expect(
            SignedLocation.canonical(region: region, tagID: "V1", uid: uid).map { String(decoding: $0, as: UTF8.self) }
                == "TAGFIX-LOCATION-V1\nlat=53.5450000\nlon=9.9660000\nr=25.00\nid=V1\nuid=04A1A2A3A4A5A6")
        #expect(
            SignedLocation.canonical(region: region, tagID: nil, uid: nil).map { String(decoding: $0, as: UTF8.self) }
                == "TAGFIX-LOCATION-V1\nlat=53.5450000\nlon=9.9660000\nr=25.00\nid=\nuid=")
        #expect(SignedLocation.canonical(region: region, tagID: "V1\nuid=04", uid: nil) == nil)
    }

    @Test("base64url round-trips every length, and refuses padding, other alphabets and stray bits", arguments: 0..<70)
    func base64url(length: Int) {
        let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let text = Base64URL.encode(bytes)
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        #expect(Base64URL.decode(Substring(text)) == bytes)
        #expect(Base64URL.decode(Substring(text + "=")) == nil)
        if length % 3 == 1 {
            // The last character carries 4 unused bits: any set one is a second spelling, refused.
            var changed = Array(text.utf8)
            changed[changed.count - 1] = UInt8(ascii: "B")
            #expect(Base64URL.decode(Substring(String(decoding: changed, as: UTF8.self))) == nil)
        }
    }

    @Test("redaction keeps the URL and drops the sig value")
    func redacted() {
        #expect(SignedLocation.redacted("https://x/t/V1?lat=1&lon=2&r=3&sig=u.AbC-_") == "https://x/t/V1?lat=1&lon=2&r=3&sig=…")
        #expect(SignedLocation.redacted("https://x/t/V1?sig=AbC#top") == "https://x/t/V1?sig=…#top")
        #expect(SignedLocation.redacted("https://x/t/V1?mysig=keep") == "https://x/t/V1?mysig=keep")
        #expect(SignedLocation.redacted("https://x/t/A1") == "https://x/t/A1")
    }
}
