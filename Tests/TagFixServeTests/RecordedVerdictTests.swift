import Foundation
import TagFixCore
import TagFixDevices
import TagFixServe
import Testing

/// Each verdict's record is encoded once by the fan-out and the same line goes to the session
/// log and to `serve`'s live feed: the bytes of both stay those of encoding it for each.
@Suite("One encoding of a verdict's record for the log and the live feed")
struct RecordedVerdictTests {
    static let now = Timestamp(iso8601: "2026-06-01T09:14:03Z")!
    static let centre = Coordinate(validLatitude: 53.545, longitude: 9.966)
    static let hostile = [
        "", "plain", "\"quoted\"", "back\\slash", "\n\r\t", "\u{0}\u{1}\u{1F}\u{7F}", "\u{2028}\u{2029}", "🏳️‍🌈 e\u{301}",
        "</script><script>alert(1)</script>", "=cmd|' /C calc'!A0", "\u{FEFF}\u{FFFD}",
    ]

    static func at(north metres: Double, accuracy: Double = 8) -> PhonePosition {
        .fix(Coordinate(validLatitude: centre.latitude + metres / 111_320, longitude: centre.longitude), accuracy: accuracy, time: now)
    }

    /// Phone taps of all six kinds with hostile names, URLs and audit fields, and reader scans.
    static func verdicts() throws -> [Verdict] {
        var verdicts: [Verdict] = []
        for (index, text) in hostile.enumerated() {
            let region = try CircularRegion(center: centre, radius: 25, identifier: "E1")
            let verifier = Verifier(registry: try InMemoryRegistry([RegistryEntry(id: "E1", uid: nil, region: region, name: text)]))
            let audit = PhoneAudit(token: "tech \(text)", client: "203.0.113.\(index)", userAgent: "Mozilla/5.0 \(text)")
            let query = text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let taps: [(String, PhonePosition, Bool)] = [
                ("https://tags.example.org/t/E1?note=\(query)", at(north: 3), false),
                ("https://tags.example.org/t/E1", at(north: 200), false),
                ("https://tags.example.org/t/E1", at(north: 3, accuracy: 800), false),
                ("https://tags.example.org/t/E1", .timedOut, false),
                ("https://tags.example.org/t/E1", .denied, false),
                ("https://tags.example.org/t/E1", at(north: 3), true),
                ("https://tags.example.org/t/Z\(index)", at(north: 3), false),
                ("https://tags.example.org/t/E1\(text)", at(north: 3), false),
            ]
            for (url, position, requireSUN) in taps {
                verdicts.append(verifier.phoneVerdict(url: url, time: now, position: position, requireSUN: requireSUN, audit: audit))
            }
            let uid = try TagUID(bytes: [0x04, 0xA2, 0x24, 0xB2, 0xC5, 0x64, UInt8(index)])
            let scan = TagScan(readerID: "pn532 \(text)", uid: uid, tagType: .ntag213, url: "https://t.example/\(text)", time: now)
            if case .decided(let verdict) = verifier.expectation(for: scan) { verdicts.append(verdict) }
        }
        return verdicts
    }

    @Test("the log's bytes and the live feed's VERDICT lines are those of encoding the record for each")
    func sameBytes() throws {
        let verdicts = try Self.verdicts()
        #expect(
            Set(verdicts.map(\.kind.name)) == ["confirmed", "outside", "inconclusive", "notRegistered", "disallowed", "untrusted"],
            "all six kinds")
        let path = NSTemporaryDirectory() + "tagfix-recorded-\(UUID().uuidString).jsonl"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = try SessionLog(path: path)
        let hub = try ServeHub(ServeConfiguration(release: "t"), readers: [], gps: nil, placements: [], log: { _ in })
        let fanOut = VerdictFanOut([hub, SessionLogSink(log)])
        // One at a time (a reader's verdicts), then as a group (phone taps committed together).
        let half = verdicts.count / 2
        for verdict in verdicts[..<half] { fanOut.send(.verdict(verdict)) }
        #expect(fanOut.send(verdicts: Array(verdicts[half...])))

        let expected = verdicts.map { SessionRecord($0).encoded() }
        let logged = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(Array(logged) == Array(expected.map { $0 + "\n" }.joined().utf8))
        let feed = hub.snapshot.history.map(\.line)
        #expect(feed == expected.enumerated().map { ServeMessage.verdict(id: $0.offset + 1, record: $0.element) })
    }

    @Test("without a session log, the live feed's lines are those ServeState makes of each verdict")
    func withoutLog() throws {
        let verdicts = try Self.verdicts()
        let hub = try ServeHub(ServeConfiguration(release: "t"), readers: [], gps: nil, placements: [], log: { _ in })
        var state = ServeState(readers: [], gps: nil)
        let fanOut = VerdictFanOut([hub])
        #expect(fanOut.send(verdicts: verdicts))
        let feed = hub.snapshot.history.map(\.line)
        #expect(feed == verdicts.map { state.receive($0).line })
    }
}
