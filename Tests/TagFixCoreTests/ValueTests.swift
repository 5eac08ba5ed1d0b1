import TagFixCore
import Testing

@Suite("Timestamps")
struct TimestampTests {
    @Test(
        "RFC 3339 parses to POSIX time",
        arguments: [
            ("1970-01-01T00:00:00Z", Int64(0)),
            ("2026-05-14T08:00:00Z", Int64(1_778_745_600_000_000_000)),
            ("2026-05-14T08:00:00.250Z", Int64(1_778_745_600_250_000_000)),
            ("2026-05-14T10:00:00+02:00", Int64(1_778_745_600_000_000_000)),
            ("2000-02-29T23:59:59.999999999Z", Int64(951_868_799_999_999_999)),
            ("1969-12-31T23:59:59Z", Int64(-1_000_000_000)),
        ])
    func parse(_ text: String, _ nanoseconds: Int64) throws {
        let timestamp = try #require(Timestamp(iso8601: text))
        #expect(timestamp.nanosecondsSinceEpoch == nanoseconds)
    }

    @Test(
        "malformed times are rejected",
        arguments: [
            "", "2026-05-14", "2026-05-14T08:00:00", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z",
            "2026-05-14T24:00:00Z", "2026-05-14T08:60:00Z", "2026-05-14T08:00:00.Z", "2026-05-14T08:00:00Zjunk",
            "2026-5-14T08:00:00Z", "2026-05-14T08:00:00+2:00", "２０２６-05-14T08:00:00Z",
            "2300-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z",  // beyond Int64 nanoseconds
        ])
    func reject(_ text: String) {
        #expect(Timestamp(iso8601: text) == nil)
    }

    @Test("formatting round-trips", arguments: [Int64(0), 1_778_745_600_250_000_000, -1_500_000_000, 4_102_444_800_123_000_000])
    func roundTrip(_ nanoseconds: Int64) throws {
        let timestamp = Timestamp(nanosecondsSinceEpoch: nanoseconds)
        #expect(Timestamp(iso8601: timestamp.formatted(fractionDigits: 9)) == timestamp)
    }

    @Test(
        "formatted as RFC 3339 in UTC",
        arguments: [
            (Int64(1_778_745_600_250_000_000), 3, "2026-05-14T08:00:00.250Z"), (0, 0, "1970-01-01T00:00:00Z"),
            (-1, 9, "1969-12-31T23:59:59.999999999Z"), (951_868_799_999_999_999, 1, "2000-02-29T23:59:59.9Z"),
            (.min, 9, "1677-09-21T00:12:43.145224192Z"), (.max, 9, "2262-04-11T23:47:16.854775807Z"),
            (4_102_444_800_123_000_000, 12, "2100-01-01T00:00:00.123000000Z"), (1_500_000_000, -2, "1970-01-01T00:00:01Z"),
        ])
    func formatted(_ nanoseconds: Int64, _ digits: Int, _ text: String) {
        #expect(Timestamp(nanosecondsSinceEpoch: nanoseconds).formatted(fractionDigits: digits) == text)
    }

    @Test("every instant's text parses back, and fewer digits are its fraction cut short")
    func formattedEverywhere() throws {
        var generator = SeededGenerator(seed: 0x7157_0034)
        for _ in 0..<5_000 {
            let timestamp = Timestamp(nanosecondsSinceEpoch: Int64.random(in: .min ... .max, using: &generator))
            let full = timestamp.formatted(fractionDigits: 9)
            #expect(Timestamp(iso8601: full) == timestamp, "\(full)")
            for digits in 0..<9 {
                let cut = String(full.prefix(digits == 0 ? 19 : 20 + digits)) + "Z"
                #expect(timestamp.formatted(fractionDigits: digits) == cut)
            }
        }
    }

    @Test("durations between timestamps")
    func arithmetic() {
        let t = Timestamp(nanosecondsSinceEpoch: 1_000_000_000)
        #expect(t.advanced(by: .milliseconds(1500)).duration(to: t) == .milliseconds(-1500))
        #expect(Duration.milliseconds(2500).seconds == 2.5)
        #expect(Duration.seconds(exactly: .nan) == nil)
    }
}

@Suite("Coordinates and regions")
struct CoordinateTests {
    @Test(
        "invalid coordinates give a clear error",
        arguments: [
            (Double.nan, 0.0, CoordinateError.latitudeNotFinite),
            (0, .infinity, .longitudeNotFinite),
            (90.000001, 0, .latitudeOutOfRange(90.000001)),
            (-91, 0, .latitudeOutOfRange(-91)),
            (0, 180.5, .longitudeOutOfRange(180.5)),
            (0, -200, .longitudeOutOfRange(-200)),
        ])
    func invalid(_ latitude: Double, _ longitude: Double, _ expected: CoordinateError) {
        #expect(throws: expected) { try Coordinate(latitude: latitude, longitude: longitude) }
    }

    @Test("the limits themselves are valid")
    func limits() throws {
        _ = try Coordinate(latitude: 90, longitude: 180)
        _ = try Coordinate(latitude: -90, longitude: -180)
    }

    @Test("region radius must be positive and within the cap", arguments: [0.0, -5, .nan, .infinity, 500.5])
    func badRadius(_ radius: Double) {
        let center = Coordinate(validLatitude: 1, longitude: 2)
        #expect(throws: RegionError.self) { try CircularRegion(center: center, radius: radius, identifier: "x") }
    }

    @Test("the cap is configurable")
    func cap() throws {
        let center = Coordinate(validLatitude: 1, longitude: 2)
        _ = try CircularRegion(center: center, radius: 500, identifier: "x")
        _ = try CircularRegion(center: center, radius: 900, identifier: "x", maximumRadius: 1000)
        #expect(throws: RegionError.radiusAboveCap(60, cap: 50)) {
            try CircularRegion(center: center, radius: 60, identifier: "x", maximumRadius: 50)
        }
    }

    @Test(
        "UIDs parse with or without separators",
        arguments: [
            ("04A1B2C3D4E5F6", "04A1B2C3D4E5F6"), ("04:a1:b2:c3:d4:e5:f6", "04A1B2C3D4E5F6"), ("de ad be ef", "DEADBEEF"),
        ])
    func uid(_ text: String, _ hex: String) throws {
        #expect(try TagUID(hex: text).hex == hex)
    }

    /// Every byte value, from an array (written straight into the string) and from a sequence
    /// without contiguous storage, long and short (a short one is a small string).
    @Test("hex is every byte's two upper-case digits, in order", arguments: [0, 1, 7, 8, 256])
    func hexEncoding(_ count: Int) {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let expected = bytes.map { byte in
            let digits = Array("0123456789ABCDEF")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
        }.joined()
        #expect(Hex.encode(bytes) == expected)
        #expect(Hex.encode(bytes.lazy.map { $0 }) == expected)
        #expect(SUNHex.encode(bytes) == expected)
        #expect(Hex.decode(Hex.encode(bytes)) == bytes)
    }

    @Test("bad UIDs are rejected", arguments: ["", "04A", "zz112233", "0102", "0102030405060708090A0B", "04::A1B2C3"])
    func badUID(_ text: String) {
        #expect(throws: TagUIDError.self) { try TagUID(hex: text) }
    }
}

@Suite("Location from a tag's URL")
struct URLLocationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var url: String
        var id: String?
        var lat: Double?
        var lon: Double?
        var radius: Double?
        var testDescription: String { url }
    }

    @Test(
        "URLs that carry a location or an id",
        arguments: [
            Case(url: "https://tags.example.org/t/A17?lat=52.52&lon=13.405&r=25", id: "A17", lat: 52.52, lon: 13.405, radius: 25),
            Case(
                url: "https://tags.example.org/t/A17?lon=13.405&lat=-52.52&radius=25.5", id: "A17", lat: -52.52, lon: 13.405, radius: 25.5),
            Case(url: "https://x.example/p?id=Z9&lat=0&lon=0&r=1", id: "Z9", lat: 0, lon: 0, radius: 1),
            Case(url: "https://x.example/p?tag=Q1", id: "Q1"),
            Case(url: "https://x.example/tags/caf%C3%A9/", id: "café"),
            Case(url: "https://x.example/", id: nil),
            Case(url: "geo:52.52,13.405;u=30", lat: 52.52, lon: 13.405, radius: 30),
            Case(url: "GEO:52.52,13.405,34.5;crs=WGS84;u=30", lat: 52.52, lon: 13.405, radius: 30),
            Case(url: "geo:90,123;u=10", lat: 90, lon: 0, radius: 10),
            Case(url: "geo:-33.9,151.2;u=12;foo=bar", lat: -33.9, lon: 151.2, radius: 12),
        ])
    func decodes(_ c: Case) throws {
        let location = try URLLocation(url: c.url)
        #expect(location.tagID == c.id)
        #expect(location.region?.center.latitude == c.lat)
        #expect(location.region?.center.longitude == c.lon)
        #expect(location.region?.radius == c.radius)
    }

    @Test(
        "malformed locations are errors, not guesses",
        arguments: [
            ("https://x.example/t/A?lat=52.5&r=20", URLLocationError.incomplete(missing: "lon")),
            ("https://x.example/t/A?lon=13&r=20", .incomplete(missing: "lat")),
            ("https://x.example/t/A?lat=52.5&lon=13", .missingRadius),
            ("https://x.example/t/A?lat=1e2&lon=13&r=20", .notANumber(field: "lat", text: "1e2")),
            ("https://x.example/t/A?lat=nan&lon=13&r=20", .notANumber(field: "lat", text: "nan")),
            ("https://x.example/t/A?lat=0x10&lon=13&r=20", .notANumber(field: "lat", text: "0x10")),
            ("https://x.example/t/A?lat=52&lat=53&lon=13&r=20", .duplicateParameter("lat")),
            ("https://x.example/t/A?lat=52&lon=13&r=20&radius=30", .duplicateParameter("r/radius")),
            ("https://x.example/t/A?lat=95&lon=13&r=20", .badCoordinate(.latitudeOutOfRange(95))),
            ("https://x.example/t/A?lat=52&lon=13&r=0", .badRadius(.radiusNotPositive(0))),
            ("https://x.example/t/A?lat=52&lon=13&r=800", .badRadius(.radiusAboveCap(800, cap: 500))),
            ("geo:52.52;u=30", .badGeoURI("expected lat,lon[,alt]")),
            ("geo:52.52,13.4", .missingRadius),
            ("geo:52.52,13.4;crs=nad27;u=5", .unsupportedCRS("nad27")),
            ("geo:52.52,13.4;u=5;u=6", .duplicateParameter("u")),
            ("geo:52.52,abc;u=5", .notANumber(field: "geo longitude", text: "abc")),
            ("not a url at all", .notAURL("not a url at all")),
        ])
    func rejects(_ url: String, _ expected: URLLocationError) {
        #expect(throws: expected) { try URLLocation(url: url) }
    }

    @Test("a default radius fills in when the policy sets one")
    func defaultRadius() throws {
        #expect(try URLLocation(url: "geo:1,2", defaultRadius: 40).region?.radius == 40)
        #expect(try URLLocation(url: "https://x.example/a?lat=1&lon=2", defaultRadius: 40).region?.radius == 40)
    }
}

@Suite("Registry files")
struct RegistryFileTests {
    @Test("CSV with header, comments, quotes and optional columns")
    func csv() throws {
        let text = #"""
            # site registry
            id,uid,lat,lon,radius_m,name
            T1,04A1B2C3D4E5F6,52.5,13.4,25,"Gate, north"
            T2,,52.6,13.5,30,
            "T3",04:11:22:33,-1,-2,5,"say ""hi"""
            """#
        let registry = try RegistryFile.parse(text)
        #expect(registry.count == 3)
        #expect(registry.entry(forID: "T1")?.name == "Gate, north")
        #expect(registry.entry(forUID: try TagUID(hex: "04A1B2C3D4E5F6"))?.id == "T1")
        #expect(registry.entry(forID: "T2")?.uid == nil)
        #expect(registry.entry(forID: "T3")?.name == "say \"hi\"")
        #expect(registry.entry(forID: "T3")?.region.radius == 5)
    }

    @Test(
        "JSON as an array or under \"tags\"",
        arguments: [
            #"[{"id":"A","lat":1,"lon":2,"radius_m":10},{"id":"B","uid":"04AABBCC","lat":-1,"lon":-2,"radius_m":20,"name":"b"}]"#,
            #"{"tags":[{"id":"A","lat":1,"lon":2,"radius_m":10},{"id":"B","uid":"04AABBCC","lat":-1,"lon":-2,"radius_m":20,"name":"b"}]}"#,
        ])
    func json(_ text: String) throws {
        let registry = try RegistryFile.parse(text)
        #expect(registry.count == 2)
        #expect(registry.entry(forUID: try TagUID(hex: "04AABBCC"))?.name == "b")
    }

    @Test(
        "each problem names its line",
        arguments: [
            ("id,lat,lon,radius_m\nA,1,2,10\nB,91,2,10\n", 3, "latitude 91"),
            ("id,lat,lon,radius_m\nA,1,2,10\nA,1,2,10\n", 3, "appears twice"),
            ("id,lat,lon\nA,1,2\n", 1, "missing column \"radius_m\""),
            ("id,lat,lon,radius_m\n\nA,1,2\n", 3, "3 fields"),
            ("id,lat,lon,radius_m\nA,1,2,600\n", 2, "500 m cap"),
            ("id,lat,lon,radius_m\nA,1,two,10\n", 2, "not a decimal"),
            ("id,uid,lat,lon,radius_m\nA,04ZZ,1,2,10\n", 2, "not hex"),
            ("id,lat,lon,radius_m\nA,\"1,2,10\n", 2, "unterminated"),
            ("[\n {\"id\":\"A\",\"lat\":1,\"lon\":2,\"radius_m\":10},\n {\"id\":\"B\",\"lat\":1,\"lon\":2}\n]", 3, "no radius_m"),
            ("[\n {\"id\":\"A\",\"lat\":1,\"lon\":2,\"radius_m\":10,\n  \"colour\":\"red\"}\n]", 3, "unknown member"),
            ("[\n {\"id\":\"A\",\"lat\":\"1\",\"lon\":2,\"radius_m\":10}\n]", 2, "must be a number"),
            ("[\n {\"id\":\"A\",\"lat\":1,\"lon\":2,\"radius_m\":10},\n]", 3, "invalid JSON"),
        ])
    func errors(_ text: String, _ line: Int, _ fragment: String) {
        do {
            _ = try RegistryFile.parse(text)
            Issue.record("accepted a malformed registry")
        } catch {
            #expect(error.line == line, "\(error)")
            #expect(error.message.contains(fragment), "\(error)")
        }
    }
}

@Suite("JSON reader")
struct JSONValueTests {
    @Test("values and lines")
    func values() throws {
        let value = try JSONValue.parse(#"{"# + "\n" + #""a": [1, -2.5e1, true, null],"# + "\n" + #""b": "x\u00e9\ud83d\ude00\n""# + "\n}")
        #expect(value["a"]?.array?.map(\.double) == [1, -25, nil, nil])
        #expect(value["b"]?.string == "xé😀\n")
        #expect(value["b"]?.line == 3)
    }

    @Test(
        "malformed JSON is rejected with a position",
        arguments: [
            "", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "[01]", "[1.]", "[.5]", "\"abc", #""\x""#, "[1] 2",
            "{\"a\":1,\"a\":2}", #""\ud800""#, "[1e999]", "nul", "[\"\u{01}\"]", String(repeating: "[", count: 300),
        ])
    func rejects(_ text: String) {
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(text) }
    }

    @Test(
        "an error names the line and the column where the reader stopped, for strings with and without escapes",
        arguments: [
            ("{\"a\":1,\"a\":2}", 1, 8, "duplicate member"), ("{\n  \"a\": 1,\n  \"a\": 2\n}", 3, 3, "duplicate member"),
            ("\"abc", 1, 5, "unterminated string"), ("[\"a\u{01}\"]", 1, 4, "control character"),
            (#""a\x""#, 1, 5, "invalid escape"), ("[\"ok\",\n \"b\\n\u{02}\"]", 2, 6, "control character"),
        ])
    func errorPositions(text: String, line: Int, column: Int, message: String) {
        do {
            _ = try JSONValue.parse(text)
            Issue.record("\(text) was read")
        } catch {
            #expect(error.line == line && error.column == column, "\(error)")
            #expect(error.message.contains(message), "\(error)")
        }
    }

    @Test("invalid UTF-8 in a string is rejected")
    func invalidUTF8() {
        do {
            _ = try JSONValue.parse([0x22, 0xC3, 0x28, 0x22])
            Issue.record("invalid UTF-8 was read")
        } catch {
            #expect(error.line == 1 && error.column == 5 && error.message.contains("UTF-8"), "\(error)")
        }
    }

    @Test("writing strings and numbers")
    func writing() {
        #expect(JSONValue.quoted("a\"b\\c\n\u{01}") == #""a\"b\\c\n\u0001""#)
        #expect(JSONValue.number(25) == "25")
        #expect(JSONValue.number(2.123456, digits: 3) == "2.123")
        #expect(JSONValue.number(.nan) == "null")
    }
}
