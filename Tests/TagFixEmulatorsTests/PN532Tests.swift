import TagFixCore
import TagFixEmulators
import TagFixNDEF
import Testing

@Suite("PN532 frames")
struct PN532FrameTests {
    @Test("a frame libnfc sends decodes after its wake-up preamble")
    func wakeUp() {
        var decoder = PN532Frame.Decoder()
        let bytes: [UInt8] =
            [0x55, 0x55] + [UInt8](repeating: 0, count: 14) + [0x00, 0x00, 0xFF, 0x03, 0xFD, 0xD4, 0x14, 0x01, 0x17, 0x00]
        #expect(decoder.feed(bytes) == [.frame(tfi: 0xD4, data: [0x14, 0x01])])
    }

    @Test("frames arriving a byte at a time")
    func pieces() {
        var decoder = PN532Frame.Decoder()
        let frame = PN532Frame.encode(tfi: 0xD4, [0x4A, 0x01, 0x00])
        var events: [PN532Frame.Event] = []
        for byte in frame { events += decoder.feed([byte]) }
        #expect(events == [.frame(tfi: 0xD4, data: [0x4A, 0x01, 0x00])])
        #expect(decoder.pending <= 1, "at most a trailing 00 that may start the next preamble")
    }

    @Test("ACK, NACK and the encoder's checksums")
    func ackNack() {
        var decoder = PN532Frame.Decoder()
        #expect(decoder.feed(PN532Frame.ack + PN532Frame.nack) == [.ack, .nack])
        // libnfc's GetFirmwareVersion frame, byte for byte.
        #expect(PN532Frame.encode(tfi: 0xD4, [0x02]) == [0x00, 0x00, 0xFF, 0x02, 0xFE, 0xD4, 0x02, 0x2A, 0x00])
    }

    @Test("extended frames both ways")
    func extended() {
        let data = [UInt8](repeating: 0xAB, count: 300)
        let frame = PN532Frame.encode(tfi: 0xD5, [0x41, 0x00] + data)
        #expect(Array(frame[3...4]) == [0xFF, 0xFF])
        var decoder = PN532Frame.Decoder()
        #expect(decoder.feed(frame) == [.frame(tfi: 0xD5, data: [0x41, 0x00] + data)])
    }

    @Test(
        "corrupt frames are reported, not executed",
        arguments: [
            [0x00, 0x00, 0xFF, 0x03, 0xFC, 0xD4, 0x14, 0x01, 0x17, 0x00] as [UInt8],  // length checksum
            [0x00, 0x00, 0xFF, 0x03, 0xFD, 0xD4, 0x14, 0x01, 0x18, 0x00],  // data checksum
        ])
    func corrupt(_ bytes: [UInt8]) {
        var decoder = PN532Frame.Decoder()
        let events = decoder.feed(bytes)
        #expect(events.contains { if case .corrupt = $0 { return true } else { return false } })
        #expect(!events.contains { if case .frame = $0 { return true } else { return false } })
    }

    @Test("garbage never traps and never becomes a frame by accident", arguments: 1...20)
    func garbage(seed: UInt64) {
        var state = seed
        var decoder = PN532Frame.Decoder()
        for _ in 0..<200 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let bytes = (0..<Int(state >> 59)).map { UInt8(truncatingIfNeeded: state >> UInt64(8 * ($0 % 7))) }
            for event in decoder.feed(bytes) {
                if case .frame(_, let data) = event { #expect(data.count <= PN532Frame.Decoder.maximumLength) }
            }
        }
    }
}

/// An NTAG213 holding `url`.
func ntag213(url: String, uid: [UInt8] = [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66]) -> EmulatedType2Tag {
    try! EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded(), uid: uid)
}

@Suite("PN532 chip")
struct PN532ChipTests {
    func chip(_ tags: [any EmulatedTag]) -> PN532Chip {
        var chip = PN532Chip()
        chip.slots = tags.map { .init(tag: $0, present: true) }
        return chip
    }

    @Test("firmware, echo test and SAM configuration as libnfc expects")
    func basics() {
        var c = chip([])
        #expect(c.handle([0x02]) == .response([0x03, 0x32, 0x01, 0x06, 0x07]))
        #expect(c.handle([0x00, 0x00] + Array("libnfc".utf8)) == .response([0x01, 0x00] + Array("libnfc".utf8)))
        #expect(c.handle([0x14, 0x01]) == .response([0x15]))
        #expect(c.handle([0xEE]) == .error, "unknown commands get the error frame, never silence")
    }

    @Test("the register file keeps what libnfc writes")
    func registers() {
        var c = chip([])
        #expect(c.handle([0x06, 0x63, 0x02, 0x63, 0x03]) == .response([0x07, 0x80, 0x80]))
        #expect(c.handle([0x08, 0x63, 0x02, 0x03, 0x63, 0x3D, 0x07]) == .response([0x09]))
        #expect(c.handle([0x06, 0x63, 0x02, 0x63, 0x3D]) == .response([0x07, 0x03, 0x07]))
    }

    @Test("a lifted tag is gone for the selections its lift lasts, then answers again", arguments: [1, 4, 7])
    func lift(_ selections: Int) {
        let tag = ntag213(url: "https://a.example")
        var c = chip([tag])
        let found: [UInt8] = [0x4B, 0x01, 0x01, 0x00, 0x44, 0x00, 0x07] + tag.uid
        #expect(c.handle([0x4A, 0x01, 0x00]) == .response(found))
        c.lift(slot: 0, selections: selections)
        #expect(
            c.handle([0x40, 0x01, 0x30, 0x00]) != .response([0x41, 0x00] + Array(tag.pages[0..<16])), "the selected tag left the field")
        for _ in 0..<selections {
            #expect(c.handle([0x4A, 0x01, 0x00] + tag.uid) == .response([0x4B, 0x00]))
        }
        #expect(c.handle([0x4A, 0x01, 0x00]) == .response(found))
        // Put back by hand, a lift ends at once.
        c.lift(slot: 0, selections: selections)
        c.setPresent(true, slot: 0)
        #expect(c.handle([0x4A, 0x01, 0x00]) == .response(found))
    }

    @Test("InListPassiveTarget lists the tags, with and without a UID filter")
    func list() {
        let tag = ntag213(url: "https://a.example")
        var c = chip([tag])
        #expect(c.handle([0x4A, 0x01, 0x00]) == .response([0x4B, 0x01, 0x01, 0x00, 0x44, 0x00, 0x07] + tag.uid))
        #expect(c.handle([0x4A, 0x01, 0x00] + tag.uid) == .response([0x4B, 0x01, 0x01, 0x00, 0x44, 0x00, 0x07] + tag.uid))
        #expect(c.handle([0x4A, 0x01, 0x00, 0x88] + tag.uid) == .response([0x4B, 0x01, 0x01, 0x00, 0x44, 0x00, 0x07] + tag.uid))
        #expect(c.handle([0x4A, 0x01, 0x00, 0x04, 0x99]) == .response([0x4B, 0x00]))
        #expect(c.handle([0x4A, 0x01, 0x01, 0x00, 0xFF, 0xFF, 0x01, 0x00]) == .response([0x4B, 0x00]), "no FeliCa tag")
    }

    @Test("two tags in the field")
    func twoTags() {
        let a = ntag213(url: "https://a.example"), b = ntag213(url: "https://b.example", uid: [0x04, 1, 2, 3, 4, 5, 6])
        var c = chip([a, b])
        guard case .response(let answer) = c.handle([0x4A, 0x02, 0x00]) else {
            Issue.record("no answer")
            return
        }
        #expect(answer[1] == 2)
        #expect(c.handle([0x40, 0x02, 0x30, 0x00]) == .response([0x41, 0x00] + b.pages.prefix(16)))
    }

    @Test("InDataExchange: READ rolls over, FAST_READ, NAK and a tag that leaves")
    func exchange() {
        let tag = ntag213(url: "https://a.example")
        var c = chip([tag])
        _ = c.handle([0x4A, 0x01, 0x00])
        #expect(c.handle([0x40, 0x01, 0x30, 0x2C]) == .response([0x41, 0x00] + tag.pages.suffix(4) + tag.pages.prefix(12)))
        #expect(c.handle([0x40, 0x01, 0x3A, 0x04, 0x05]) == .response([0x41, 0x00] + tag.pages[16..<24]))
        #expect(c.handle([0x40, 0x01, 0x30, 0x2D]) == .response([0x41, 0x04]), "a NAK is an RF error")
        c.exchangesBeforeRemoval = 1
        #expect(c.handle([0x40, 0x01, 0x30, 0x00]) == .response([0x41, 0x00] + tag.pages.prefix(16)))
        #expect(c.handle([0x40, 0x01, 0x30, 0x00]) == .response([0x41, 0x01]), "then timeouts: the tag is gone")
        #expect(c.handle([0x4A, 0x01, 0x00]) == .response([0x4B, 0x00]))
    }

    @Test("WRITE keeps the page; the UID pages are read-only")
    func write() {
        let tag = ntag213(url: "https://a.example")
        var c = chip([tag])
        _ = c.handle([0x4A, 0x01, 0x00])
        #expect(c.handle([0x40, 0x01, 0xA2, 0x10, 1, 2, 3, 4]) == .response([0x41, 0x00]))
        #expect(Array(tag.pages[64..<68]) == [1, 2, 3, 4])
        #expect(c.handle([0x40, 0x01, 0xA2, 0x00, 1, 2, 3, 4]) == .response([0x41, 0x04]))
    }
}

@Suite("Emulator fault scripts")
struct FaultScriptTests {
    @Test("steps parse and sort by time")
    func parse() throws {
        let script = try FaultScript.parse(
            """
            # faults
            5   remove-after 2
            2.0 remove 0   # gone
            3.5 present 0
            6 hang
            7 resume
            8 corrupt
            9 hangup
            """, tagCount: 1)
        #expect(
            script.steps.map(\.action) == [
                .remove(tag: 0), .present(tag: 0), .removeAfter(exchanges: 2), .hang, .resume, .corrupt, .hangUp,
            ])
        #expect(script.steps.first?.line == 3)
        #expect(script.steps.first?.at == .seconds(2))
    }

    @Test("line endings: LF and CR LF give the same steps on the same lines", arguments: ["\n", "\r\n"])
    func lineEndings(_ newline: String) throws {
        let text = ["# faults", "2 remove 0  # gone", "", "3.5\tpresent 0", "6 hang"].joined(separator: newline) + newline
        let script = try FaultScript.parse(text, tagCount: 1)
        #expect(script.steps.map(\.action) == [.remove(tag: 0), .present(tag: 0), .hang])
        #expect(script.steps.map(\.line) == [2, 4, 5])
    }

    @Test(
        "mistakes name their line",
        arguments: [
            ("1 remove 3", 1, "no tag 3"), ("x remove 0", 1, "not a time"), ("\n1 explode", 2, "unknown action"),
            ("\r\n\r\n1 explode\r\n", 3, "unknown action"),
            ("1 hang now", 1, "no argument"), ("1 remove-after", 1, "needs"), ("-1 hang", 1, "not a time"),
        ])
    func mistakes(_ text: String, _ line: Int, _ fragment: String) {
        do {
            _ = try FaultScript.parse(text, tagCount: 1)
            Issue.record("accepted a bad script")
        } catch {
            #expect(error.line == line)
            #expect(error.message.contains(fragment), "\(error)")
        }
    }

    @Test("scripted faults act on the emulator")
    func apply() throws {
        let emulator = try PN532Emulator(tags: [ntag213(url: "https://s.example")])
        defer { emulator.stop() }
        #expect(emulator.apply(.hang))
        #expect(emulator.apply(.resume))
        #expect(!emulator.apply(.hangUp))
    }
}

@Suite("NMEA emulator")
struct NMEAEmulatorTests {
    @Test("sentences carry valid checksums and ddmm.mmmmm positions")
    func sentences() throws {
        var epoch = NMEA.Epoch(
            time: try #require(Timestamp(iso8601: "2026-05-14T08:09:10.25Z")),
            position: Coordinate(validLatitude: -33.86, longitude: 151.21))
        epoch.satellites = 9
        let sentences = NMEA.sentences(epoch)
        for sentence in sentences {
            let body = sentence.dropFirst().prefix { $0 != "*" }
            let checksum = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
            #expect(sentence.hasSuffix("*\(Hex.encode([checksum]))\r\n"), "\(sentence)")
        }
        let gga = try #require(sentences.first { $0.hasPrefix("$GPGGA") })
        #expect(gga.contains(",080910.25,3351.60000,S,15112.60000,E,1,09,"))
        let rmc = try #require(sentences.first { $0.hasPrefix("$GPRMC") })
        #expect(rmc.contains(",A,") && rmc.contains(",140526,"))
        #expect(sentences.filter { $0.hasPrefix("$GPGSV") }.count == 3, "nine satellites, four to a GSV")
    }

    @Test(
        "GSA's dilutions agree with GGA's HDOP: PDOP² = HDOP² + VDOP² (to a rounding), PDOP never below HDOP, the open sky's 1.6 / 1.2 kept",
        arguments: [0.6, 0.9, 1.5, 3.0, 7.5])
    func dilutions(hdop: Double) throws {
        var epoch = NMEA.Epoch(time: Timestamp(nanosecondsSinceEpoch: 0), position: Coordinate(validLatitude: 47.4, longitude: 8.5))
        epoch.hdop = hdop
        let gsa = try #require(NMEA.sentences(epoch).first { $0.hasPrefix("$GPGSA") })
        let fields = gsa.split(separator: "*")[0].split(separator: ",", omittingEmptySubsequences: false)
        let (p, h, v) = (try #require(Double(fields[15])), try #require(Double(fields[16])), try #require(Double(fields[17])))
        #expect(h == hdop)
        #expect(p >= h && v >= 1.2 && p >= 1.6, "\(gsa)")
        #expect(abs(p * p - (h * h + v * v)) <= 0.3 * p || (p == 1.6 && v == 1.2), "\(gsa)")
        if hdop <= 0.9 { #expect(p == 1.6 && v == 1.2, "the open sky's figures: \(gsa)") }
    }

    @Test("no fix: GGA quality 0, RMC status V, GSA mode 1")
    func noFix() throws {
        let sentences = NMEA.sentences(NMEA.Epoch(time: Timestamp(nanosecondsSinceEpoch: 0), position: nil))
        #expect(sentences.contains { $0.hasPrefix("$GPGGA") && $0.contains(",,,,,0,00,") })
        #expect(sentences.contains { $0.hasPrefix("$GPRMC") && $0.contains(",V,") })
        #expect(sentences.contains { $0.hasPrefix("$GPGSA,A,1,") })
    }

    @Test("log replay groups sentences into epochs by their timestamps")
    func epochs() {
        let epochs = NMEAEmulator.epochs([
            "# comment", "$GPGGA,000001.00,x*00", "$GPGSA,A,3*00", "$GPRMC,000001.00,A*00", "$GPGGA,000002.00,x*00", "junk",
            "$GPRMC,000002.00,A*00",
        ])
        #expect(epochs.count == 2)
        #expect(epochs.first?.count == 3)
    }

    @Test("fault scripts parse, and mistakes name their line")
    func script() throws {
        let script = try NMEAScript.parse(
            "5 no-fix\n9 fix # back\n12 degrade 40\n15 normal\n18 silent\n21 talk\n24 garbage 3\n27 jump 86400\n")
        #expect(
            script.steps.map(\.action) == [
                .fixLost(true), .fixLost(false), .degrade(sigma: 40), .degrade(sigma: nil), .silent(true), .silent(false),
                .garbage(lines: 3), .jump(seconds: 86400),
            ])
        #expect(throws: DataFileError.self) { try NMEAScript.parse("1 degrade -3") }
        #expect(throws: DataFileError.self) { try NMEAScript.parse("1 explode") }
    }

    @Test("a GPS that lies: jump METRESm [BEARING] moves the position, teleport LAT LON replaces it; jump SECONDS[s] is still the clock")
    func lyingGPSScript() throws {
        let script = try NMEAScript.parse("1 jump 800m\n2 jump 50m 180\n3 teleport 53.545 9.966\n4 jump 60s\n5 jump 30\n")
        #expect(
            script.steps.map(\.action) == [
                .displace(metres: 800, bearing: 90), .displace(metres: 50, bearing: 180),
                .teleport(Coordinate(validLatitude: 53.545, longitude: 9.966)), .jump(seconds: 60), .jump(seconds: 30),
            ])
        for bad in ["1 jump xm", "1 jump 800m 400", "1 jump 3e7m", "1 teleport 91 0", "1 teleport 53.5", "1 jump 800m 90 1"] {
            #expect(throws: DataFileError.self, "\(bad)") { try NMEAScript.parse(bad) }
        }
    }

    /// Found by the fuzzer (`Fuzz/regressions/emulator-scripts/`): a line count too large for an
    /// Int trapped instead of being refused.
    @Test(
        "out-of-range counts and jumps are refused, not trapped on",
        arguments: ["18 garbage 333333333333333333333333", "1 garbage 0", "1 garbage 2.5", "1 garbage -4", "1 jump 1e300", "1 jump -2e9"])
    func outOfRange(_ text: String) {
        #expect(throws: DataFileError.self) { try NMEAScript.parse(text) }
    }
}

@Suite("Routes for the NMEA emulator")
struct RouteTests {
    @Test("GeoJSON and GPX give the same walk")
    func formats() throws {
        let geojson = #"{"type":"Feature","geometry":{"type":"LineString","coordinates":[[9.966,53.545],[9.967,53.545],[9.967,53.546]]}}"#
        let gpx = """
            <?xml version="1.0"?>
            <gpx version="1.1"><trk><trkseg>
              <trkpt lat="53.545" lon="9.966"></trkpt>
              <trkpt lat='53.545' lon='9.967'/>
              <trkpt lat="53.546" lon="9.967"><ele>5</ele></trkpt>
            </trkseg></trk></gpx>
            """
        let a = try Route.parse(geojson), b = try Route.parse(gpx)
        #expect(a.points == b.points)
        #expect(abs(a.length - (66.2 + 111.3)) < 1, "\(a.length)")
        let halfway = a.position(at: a.distances[1] / 2)
        #expect(abs(halfway.longitude - 9.9665) < 1e-6)
        #expect(a.position(at: 1e9) == a.points.last)
    }

    @Test(
        "bad routes name the problem",
        arguments: [
            #"{"type":"Point","coordinates":[1,2]}"#, #"{"type":"LineString","coordinates":[[1,2]]}"#,
            #"{"type":"LineString","coordinates":[[1,95],[1,2]]}"#,
            "<gpx><trkpt lat=\"1\"/></gpx>", "hello",
        ])
    func bad(_ text: String) {
        #expect(throws: DataFileError.self) { try Route.parse(text) }
    }
}
