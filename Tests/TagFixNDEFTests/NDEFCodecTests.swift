import Foundation
import TagFixCore
import TagFixDevices
import TagFixNDEF
import TagFixTesting
import Testing

/// ndeflib's test vectors (nfcpy/ndeflib, ISC), read in place from the shared data.
struct NdeflibVector: Sendable, CustomTestStringConvertible {
    var index: Int
    var json: JSONValue
    var level: String { json["level"]?.string ?? "" }
    var valid: Bool { json["valid"]?.bool ?? false }
    var testDescription: String { "#\(index) \(json["source"]?["test"]?.string ?? "") \(level) \(bytesHex)" }
    var bytesHex: String { json["encoded_hex"]?.string ?? json["payload_hex"]?.string ?? "" }
    var bytes: [UInt8] { Hex.decode(bytesHex) ?? [] }

    static let all: [NdeflibVector] = {
        guard let path = TestData.path("ndef/ndeflib_vectors.json"), let text = try? TextFile.read(path),
            let array = (try? JSONValue.parse(text))?.array
        else { return [] }
        return array.enumerated().map { NdeflibVector(index: $0.offset, json: $0.element) }
    }()
}

private let vectors = NdeflibVector.all
private let skip = Comment(rawValue: TestData.skipReason)

@Suite("NDEF codec against ndeflib's vectors")
struct NdeflibVectorTests {
    @Test("the vectors are all there", .enabled(if: TestData.isAvailable, skip))
    func count() {
        #expect(vectors.count == 124)
    }

    @Test(
        "single records decode as ndeflib's Record._decode does", .enabled(if: !vectors.isEmpty, skip),
        arguments: vectors.filter { $0.level == "record" })
    func record(_ vector: NdeflibVector) throws {
        if vector.valid {
            let (record, _) = try NDEFWireRecord.decode(vector.bytes)
            if let args = vector.json["expected_record_args"]?.string {
                // ('urn:nfc:wkt:X', 'id', b'payload'): ndeflib's type names by TNF.
                let parts = args.split(separator: "'", omittingEmptySubsequences: false)
                let expectedType = parts[1]
                #expect(Self.ndeflibTypeName(record) == expectedType)
                let expectedID = parts[3]
                #expect(String(decoding: record.id, as: UTF8.self) == expectedID)
                if args.contains("b'payload'") { #expect(record.payload == Array("payload".utf8)) }
                if args.contains("b'ppp") { #expect(record.payload == Array(repeating: 0x70, count: 256)) }
            }
            if let flags = vector.json["expected_flags_mb_me_cf"]?.array?.compactMap(\.double) {
                #expect([record.messageBegin, record.messageEnd, record.chunked].map { $0 ? 1.0 : 0 } == flags)
            }
        } else {
            let expected = vector.json["expected_error_substring"]?.string ?? ""
            #expect {
                _ = try NDEFWireRecord.decode(vector.bytes)
            } throws: { error in
                guard let error = error as? NDEFError else { return false }
                return Self.matches(error, ndeflibError: expected)
            }
        }
    }

    @Test(
        "messages decode, or are refused, as ndeflib does", .enabled(if: !vectors.isEmpty, skip),
        arguments: vectors.filter { $0.level == "message" })
    func message(_ vector: NdeflibVector) throws {
        if vector.valid {
            let wire = try NDEFMessage.wireRecords(vector.bytes)
            let expected = vector.json["expected_records"]?.string ?? ""
            let names = expected.components(separatedBy: "Record('").dropFirst().map { String($0.prefix { $0 != "'" }) }
            #expect(wire.map(Self.ndeflibTypeName) == names)
            // Chunks reassembled: the message holds one logical record per chunk sequence.
            let message = try NDEFMessage(bytes: vector.bytes)
            #expect(message.records.count == wire.filter { !$0.chunked }.count)
            #expect(try NDEFMessage(bytes: message.encoded()) == message)
        } else {
            let expected = vector.json["expected_error_strict"]?.string ?? vector.json["expected_error_substring"]?.string ?? ""
            #expect {
                _ = try NDEFMessage(bytes: vector.bytes)
            } throws: { error in
                guard let error = error as? NDEFError else { return false }
                return Self.matches(error, ndeflibError: expected)
            }
        }
    }

    @Test(
        "URI, Text and Smart Poster payloads decode to ndeflib's values", .enabled(if: !vectors.isEmpty, skip),
        arguments: vectors.filter { $0.level == "payload" })
    func payload(_ vector: NdeflibVector) throws {
        let type = String((vector.json["record_type"]?.string ?? "").split(separator: ":").last ?? "")
        let record = try NDEFRecord(wellKnown: type, payload: vector.bytes)
        // Strict decoding only: ndeflib's "relax" results are not the spec's.
        guard vector.valid, let expected = vector.json["expected"] else {
            #expect(throws: NDEFError.self) { try record.decoded() }
            return
        }
        let decoded = try record.decoded()
        switch decoded {
        case .uri(let uri):
            #expect(uri.uri == expected["iri"]?.string)
            #expect(uri.payload == vector.bytes, "the shortest encoding is the one ndeflib wrote")
        case .text(let text):
            #expect(text.text == expected["text"]?.string)
            #expect(text.language == expected["language"]?.string)
            #expect(text.encoding.rawValue == expected["encoding"]?.string)
        case .smartPoster(let poster):
            #expect(poster.title == expected["title"]?.string)
            let titles = expected["titles"]?.members ?? []
            #expect(poster.titles.map(\.language) == titles.map(\.key))
            #expect(poster.titles.map(\.text) == titles.map { $0.value.string ?? "" })
            #expect(poster.action?.name == expected["action"]?.string)
            #expect(poster.resourceSize.map(Double.init) == expected["resource_size"]?.double)
            #expect(poster.resourceType == expected["resource_type"]?.string)
            #expect(poster.icons.first.map { Hex.encode($0.data).lowercased() } == expected["icon"]?.string)
        default:
            Issue.record("decoded as \(decoded)")
        }
    }

    /// ndeflib's names for a record's type: '' for empty, 'urn:nfc:wkt:X', 'text/plain', the URI,
    /// 'urn:nfc:ext:…', 'unknown', 'unchanged'.
    static func ndeflibTypeName(_ record: NDEFWireRecord) -> String {
        let type = String(decoding: record.type, as: UTF8.self)
        switch record.tnf {
        case .empty: return ""
        case .wellKnown: return "urn:nfc:wkt:" + type
        case .media, .absoluteURI: return type
        case .external: return "urn:nfc:ext:" + type
        case .unknown: return "unknown"
        case .unchanged: return "unchanged"
        }
    }

    /// Our typed error for ndeflib's message.
    static func matches(_ error: NDEFError, ndeflibError text: String) -> Bool {
        switch error {
        case .reservedTNF: text.contains("TNF field value must be between 0 and 6")
        case .truncated(let field, _):
            text.contains("buffer underflow")
                && (!text.contains("reading") || text.contains(field == .typeLength ? "length fields" : "\(field.rawValue) field"))
        case .typeLengthMustBeZero(let tnf, _):
            text.contains("must be") && (!text.contains("TYPE") || text.contains("TYPE_LENGTH must be 0 for TNF value \(tnf.rawValue)"))
        case .typeLengthMustNotBeZero(let tnf, _):
            text.contains("must be") && (!text.contains("TYPE") || text.contains("TYPE_LENGTH must be > 0 for TNF value \(tnf.rawValue)"))
        case .idLengthMustBeZero: text.contains("must be") && (!text.contains("_LENGTH") || text.contains("ID_LENGTH must be 0"))
        case .payloadLengthMustBeZero: text.contains("must be") && (!text.contains("_LENGTH") || text.contains("PAYLOAD_LENGTH must be 0"))
        case .missingMessageBegin: text == "MB flag not set in first record"
        case .messageBeginInMiddle: text == "MB flag set in middle record"
        case .missingMessageEnd: text == "ME flag not set in last record"
        case .chunkFlagOnLastRecord: text == "CF flag set in last record"
        default: false
        }
    }
}

@Suite("NDEF codec")
struct NDEFCodecTests {
    @Test("chunked records are reassembled")
    func chunks() throws {
        // text/plain in three chunks: "ab" + "cd" + "e".
        let bytes: [UInt8] =
            [0xB2, 0x0A, 0x02] + Array("text/plainab".utf8) + [0x36, 0x00, 0x02] + Array("cd".utf8) + [0x56, 0x00, 0x01, 0x65]
        let message = try NDEFMessage(bytes: bytes)
        #expect(message.records == [try NDEFRecord(tnf: .media, type: Array("text/plain".utf8), payload: Array("abcde".utf8))])
        #expect(try NDEFMessage.wireRecords(bytes).count == 3)
    }

    @Test(
        "chunk misuse is refused",
        arguments: [
            ([0xB2, 0x01, 0x00, 0x78, 0x52, 0x01, 0x00, 0x78] as [UInt8], ChunkProblem.followingChunkNotUnchanged),
            ([0xB2, 0x01, 0x00, 0x78, 0x5E, 0x00, 0x00, 0x01, 0x69], .followingChunkHasTypeOrID),
            ([0xB6, 0x00, 0x00, 0x56, 0x00, 0x00], .initialChunkUnchanged),
            ([0xD6, 0x00, 0x00], .unchangedOutsideChunk),
        ])
    func chunkMisuse(_ bytes: [UInt8], _ problem: ChunkProblem) {
        #expect {
            _ = try NDEFMessage(bytes: bytes)
        } throws: { error in
            if case .chunk(let found, _) = error as? NDEFError { return found == problem }
            return false
        }
    }

    @Test("trailing bytes after ME are refused, with their offset")
    func trailing() {
        #expect(throws: NDEFError.trailingBytes(offset: 3)) { try NDEFMessage(bytes: [0xD0, 0x00, 0x00, 0x00]) }
    }

    @Test("long records: a 4-byte payload length")
    func longRecord() throws {
        let payload = [UInt8](repeating: 7, count: 300)
        let message = NDEFMessage(records: [try NDEFRecord(tnf: .unknown, payload: payload)])
        let bytes = message.encoded()
        #expect(bytes[0] == 0xC5)  // MB|ME|TNF 5, no SR
        #expect(Array(bytes[2..<6]) == [0, 0, 1, 0x2C])
        #expect(try NDEFMessage(bytes: bytes) == message)
        #expect(throws: NDEFError.truncated(.payload, offset: 6)) { try NDEFMessage(bytes: Array(bytes.dropLast())) }
    }

    @Test(
        "the record initialiser enforces the TNF rules",
        arguments: [
            (TypeNameFormat.empty, "x", NDEFError.typeLengthMustBeZero(.empty, offset: 0)),
            (.wellKnown, "", .typeLengthMustNotBeZero(.wellKnown, offset: 0)),
            (.unknown, "x", .typeLengthMustBeZero(.unknown, offset: 0)),
            (.unchanged, "", .chunk(.unchangedOutsideChunk, offset: 0)),
        ])
    func rules(_ tnf: TypeNameFormat, _ type: String, _ error: NDEFError) {
        #expect(throws: error) { try NDEFRecord(tnf: tnf, type: Array(type.utf8)) }
    }

    @Test(
        "URIs are written with the longest abbreviation",
        arguments: [
            ("https://www.example.org/a", UInt8(0x02), "example.org/a"), ("http://x", 0x03, "x"), ("tel:+4930123", 0x05, "+4930123"),
            ("urn:epc:id:sgtin:1", 0x1E, "sgtin:1"), ("urn:epc:x", 0x22, "x"), ("urn:x", 0x13, "x"), ("geo:1,2", 0x00, "geo:1,2"),
            ("HTTPS://www.x", 0x00, "HTTPS://www.x"),
        ])
    func abbreviation(_ uri: String, _ code: UInt8, _ rest: String) throws {
        let record = URIRecord(uri)
        #expect(record.code == code)
        #expect(record.rest == rest)
        #expect(try URIRecord(payload: record.payload).uri == uri)
    }

    @Test("Android application records and MIME records are typed")
    func typed() throws {
        #expect(try NDEFRecord.androidApplication("com.example").decoded() == .androidApplication(package: "com.example"))
        #expect(try NDEFRecord.mime("text/plain", data: [1]).decoded() == .mime(type: "text/plain", data: [1]))
        let absolute = try NDEFRecord(tnf: .absoluteURI, type: Array("http://a.b/c".utf8))
        #expect(try absolute.decoded() == .absoluteURI("http://a.b/c", data: []))
    }

    @Test("Text in UTF-16 without a byte-order mark is big-endian; the reserved bit is refused")
    func textDetails() throws {
        let be = try TextRecord(payload: [0x82, 0x65, 0x6E, 0x00, 0x48, 0x00, 0x69])
        #expect(be.text == "Hi")
        #expect(throws: NDEFError.reservedTextStatusBit) { try TextRecord(payload: [0x42, 0x65, 0x6E]) }
        let round = TextRecord(text: "Grüße 😀", language: "de", encoding: .utf16)
        #expect(try TextRecord(payload: try round.payload()) == round)
    }

    /// Property: for random valid messages, parse(encode(x)) == x.
    @Test("round trip: parse(encode(message)) == message", arguments: 1...40)
    func roundTrip(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        func bytes(_ max: Int) -> [UInt8] {
            (0..<Int(random.next() % UInt64(max + 1))).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
        var records: [NDEFRecord] = []
        for _ in 0..<Int(random.next() % 6) {
            switch random.next() % 8 {
            case 0: records.append(try NDEFRecord(tnf: .empty))
            case 1: records.append(.uri(URIRecord.prefixes.randomElement(using: &random)! + "x\(random.next() % 1000)"))
            case 2: records.append(try .text("t\(random.next())", language: ["en", "de", "fr-CA"].randomElement(using: &random)!))
            case 3:
                records.append(
                    try NDEFRecord(tnf: .media, type: Array("application/x-\(random.next() % 9)".utf8), id: bytes(3), payload: bytes(600)))
            case 4: records.append(try NDEFRecord(tnf: .unknown, id: bytes(2), payload: bytes(300)))
            case 5: records.append(try .androidApplication("com.example.app\(random.next() % 10)"))
            case 6: records.append(try NDEFRecord(tnf: .external, type: Array("example.org:t".utf8), payload: bytes(20)))
            default:
                records.append(
                    try NDEFRecord(tnf: .absoluteURI, type: Array("https://a.example/\(random.next() % 99)".utf8), payload: bytes(4)))
            }
        }
        let message = NDEFMessage(records: records)
        let encoded = message.encoded()
        #expect(try NDEFMessage(bytes: encoded) == message)
        // Shortest form: SR exactly when the payload is under 256 bytes.
        let wire = try NDEFMessage.wireRecords(encoded)
        #expect(wire.map(\.shortRecord) == records.map { $0.payload.count < 256 })
        for record in records where record.tnf != .empty && record.tnf != .unknown {
            #expect(throws: Never.self) { try record.decoded() }
        }
    }
}

@Suite("NDEF inputs the fuzzer found")
struct NDEFFuzzRegressionTests {
    @Test("a chunked record whose first chunk is TNF empty yet whose chunks carry payload is refused")
    func emptyChunkWithPayload() {
        // A (TNF 1, type ")"), then an empty-TNF initial chunk and an unchanged terminating chunk of
        // 6 bytes, then a URI record. It used to decode to an empty record with payload, which
        // then did not decode once re-encoded.
        let bytes = Hex.decode("910100292000000000000600000000060000000000005101015" + "5FB")!
        #expect(throws: NDEFError.self) { try NDEFMessage(bytes: bytes) }
    }
}
