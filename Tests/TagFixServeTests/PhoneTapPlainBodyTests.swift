import Foundation
import TagFixCore
import Testing

@testable import TagFixServe

/// A tap's body as the page sends it is read straight from its bytes (`Fields.plain`), anything
/// else by the strict JSON reader (`Fields.parsed`): the two must never disagree, or a body would
/// mean one thing or another depending on how it was spelled.
@Suite("A phone tap's body read from its bytes")
struct PhoneTapPlainBodyTests {
    /// The fuzz target's seeds (Fuzz/corpus/phone-tap), the page's own bodies and spellings the
    /// page never sends but JSON allows.
    static let seeds: [String] = {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/corpus/phone-tap")
        let files = (try? FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)) ?? []
        let corpus = files.sorted { $0.path < $1.path }.compactMap { try? String(contentsOf: $0, encoding: .utf8) }
        return corpus + [
            #"{"url":"https://t.example/t/E1","error":"timeout","timestamp_ms":1780305243201}"#,
            " \r\n{ \"lat\" : -0.0 ,\t\"lon\":1E2, \"accuracy_m\":0.5e-1,\"url\":\"http://t.example/t/%C3%A9\" }\n",
            #"{"url":"https://t.example/t/Ü1","lat":1.5,"lon":2,"accuracy_m":3}"#,
            #"{"url":"https://t.example/t/E1","lat":"1","lon":2,"accuracy_m":3}"#,
            #"{"url":"https://t.example/t/E1","lat":null,"lon":2,"accuracy_m":3}"#,
            #"{"u\u0072l":"https://t.example/t/E1","error":"denied"}"#,
            #"{"url":"https:\/\/t.example\/t\/E1","error":"denied"}"#,
            #"{}"#,
        ]
    }()

    private static func plain(_ bytes: [UInt8]) -> PhoneTapRequest.Fields? {
        bytes.withUnsafeBufferPointer { PhoneTapRequest.Fields.plain($0) }
    }

    @Test("the page's own bodies are read from their bytes, as the strict reader reads them")
    func pageBodies() throws {
        let requests = [
            PhoneTapRequest(
                url: "https://t.example/t/S1?picc_data=EF963FF7828658A599F3041510E7D8B2&cmac=94EED9EE65337086",
                position: .fix(try Coordinate(latitude: -33.8567844, longitude: 151.2152967), accuracy: 12.5),
                timestamp: Timestamp(nanosecondsSinceEpoch: 1_780_305_243_201_000_000)),
            PhoneTapRequest(url: "https://t.example/t/E1", position: .unavailable(.denied)),
        ]
        for request in requests {
            let bytes = Array(request.body.utf8)
            let fields = try #require(Self.plain(bytes))
            #expect(fields == (try PhoneTapRequest.Fields.parsed(bytes)))
            #expect(try PhoneTapRequest(body: bytes) == request)
        }
    }

    @Test("the fuzz target's corpus is there to start from")
    func corpus() {
        #expect(Self.seeds.count >= 12, "Fuzz/corpus/phone-tap was not found beside the tests")
    }

    @Test("a body either reader takes means the same to both", arguments: 0..<8)
    func agree(_ round: Int) throws {
        // Each seed mutated byte by byte (JSON's own characters, whitespace, escapes, bytes of
        // UTF-8 and of none), so that many mutants stay readable to one reader or both.
        let alphabet = Array(#"{}[]",:\ .-+0123456789eEtrufalsnu/"#.utf8) + [0x09, 0x0A, 0x0D, 0x00, 0x7F, 0x80, 0xC3, 0xA9, 0xFF]
        var random = SeededGenerator(seed: 0x7A9_F1E1D + UInt64(round))
        var readPlainly = 0
        var both = 0
        for seed in Self.seeds {
            for _ in 0..<400 {
                var bytes = Array(seed.utf8)
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let at = Int.random(in: 0...bytes.count, using: &random)
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: bytes.insert(alphabet.randomElement(using: &random)!, at: at)
                    case 1 where at < bytes.count: bytes.remove(at: at)
                    case 2 where at < bytes.count: bytes[at] = alphabet.randomElement(using: &random)!
                    default:
                        // A digit changed: the same shape with another number.
                        if let digit = bytes.indices.filter({ bytes[$0] >= 0x30 && bytes[$0] <= 0x39 }).randomElement(using: &random) {
                            bytes[digit] = UInt8.random(in: 0x30...0x39, using: &random)
                        }
                    }
                }
                let parsed = try? PhoneTapRequest.Fields.parsed(bytes)
                if parsed != nil { both += 1 }
                guard let fields = Self.plain(bytes) else { continue }
                readPlainly += 1
                // Compared as values, and as text (which tells -0.0 from 0.0).
                #expect(
                    parsed == fields && "\(String(describing: parsed))" == "\(String(describing: fields as PhoneTapRequest.Fields?))",
                    "\(String(decoding: bytes, as: UTF8.self)) read from its bytes as \(fields)")
            }
        }
        // Enough mutants were read both ways for the comparison to mean something.
        #expect(readPlainly > 300)
        #expect(both > readPlainly)
    }
}
