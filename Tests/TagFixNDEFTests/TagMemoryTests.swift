import Foundation
import TagFixCore
import TagFixDevices
import TagFixNDEF
import TagFixTesting
import Testing

private let skip = Comment(rawValue: TestData.skipReason)

/// A case from the shared JSON collections, by index.
struct SharedCase: Sendable, CustomTestStringConvertible {
    var file: String
    var index: Int
    var json: JSONValue
    var testDescription: String { "\(file)#\(index) \(json["notes"]?.string?.prefix(60) ?? "")" }

    static func load(_ relative: String) -> [SharedCase] {
        guard let path = TestData.path(relative), let text = try? TextFile.read(path), let items = (try? JSONValue.parse(text))?.array
        else {
            return []
        }
        return items.enumerated().map { SharedCase(file: (relative as NSString).lastPathComponent, index: $0.offset, json: $0.element) }
    }

    /// "None" and null both mean absent in these files.
    func hex(_ key: String) -> [UInt8]? {
        guard let text = json[key]?.string, text != "None" else { return nil }
        return Hex.decode(text)
    }
}

private let tt2Cases = SharedCase.load("nfc/tt2_edge_cases_nfcpy.json")
private let tt4Cases = SharedCase.load("nfc/tt4_cases_nfcpy.json")
private let tagFiles = TestData.files(in: "nfc/tags", suffix: ".json")

@Suite("Type 2 memory against nfcpy's edge cases")
struct Type2Tests {
    @Test("the NDEF bytes nfcpy expects (null: no NDEF)", .enabled(if: !tt2Cases.isEmpty, skip), arguments: tt2Cases)
    func nfcpy(_ c: SharedCase) throws {
        let memory = try #require(c.hex("memory_hex"))
        let expected = c.hex("expected_ndef_message_hex")
        let found: [UInt8]?
        do {
            found = try Type2Memory.read(memory).ndefMessage
        } catch {
            found = nil
        }
        #expect(found == expected)
    }

    @Test("the read planner moves only the pages up to the end of the NDEF TLV", .enabled(if: !tt2Cases.isEmpty, skip), arguments: tt2Cases)
    func planner(_ c: SharedCase) throws {
        let memory = try #require(c.hex("memory_hex"))
        try Self.checkPlanner(memory)
    }

    /// Simulates a reader: READ of page 0 (4 pages), then what the planner asks for.
    static func checkPlanner(_ memory: [UInt8]) throws {
        var known = Array(memory.prefix(16))
        var rounds = 0
        while true {
            rounds += 1
            #expect(rounds < 20, "the planner must converge")
            guard rounds < 20 else { return }
            switch Type2Memory.plan(known: known) {
            case .complete(let contents):
                let full = try Type2Memory.read(memory)
                #expect(contents.ndefMessage == full.ndefMessage)
                // Nothing past the page holding the NDEF TLV's last byte, beyond one READ's lookahead.
                let lastNeeded = ((full.ndefEnd ?? 16) - 1) / 4
                #expect(known.count / 4 <= max(lastNeeded + 1, 4 + 4), "read \(known.count / 4) pages, needed \(lastNeeded + 1)")
                return
            case .noNDEF:
                #expect((try? Type2Memory.read(memory))?.ndefMessage == nil)
                return
            case .read(let pages):
                #expect(pages.lowerBound == known.count / 4)
                guard pages.upperBound * 4 + 4 <= memory.count else {
                    // Asking beyond the image means the structure itself runs past it.
                    #expect(throws: TagMemoryError.self) { try Type2Memory.read(memory) }
                    return
                }
                known += memory[(pages.lowerBound * 4)..<((pages.upperBound + 1) * 4)]
            }
        }
    }

    @Test("a long message on an NTAG216 is planned, not dumped")
    func plannerLong() throws {
        let message = NDEFMessage(records: [NDEFRecord.uri("https://example.org/" + String(repeating: "a", count: 300))]).encoded()
        var memory: [UInt8] = [0x04, 0x11, 0x22, 0x99, 0x33, 0x44, 0x55, 0x66, 0x00, 0x48, 0x00, 0x00, 0xE1, 0x10, 0x6D, 0x00]
        memory += [0x03, 0xFF, UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message + [0xFE]
        memory += [UInt8](repeating: 0, count: 231 * 4 - memory.count)
        guard case .read(let pages) = Type2Memory.plan(known: Array(memory.prefix(16))) else {
            Issue.record("expected a read plan")
            return
        }
        #expect(pages == 4...7)
        let known = Array(memory.prefix(32))
        guard case .read(let rest) = Type2Memory.plan(known: known) else {
            Issue.record("expected a second read plan")
            return
        }
        let lastByte = 16 + 4 + message.count - 1
        #expect(rest == 8...(lastByte / 4), "exactly the pages holding the rest of the value")
        try Self.checkPlanner(memory)
    }

    @Test("reserved areas inside the NDEF value are skipped")
    func reservedInsideValue() throws {
        // Memory Control reserving bytes 27–28, inside the NDEF value.
        let memory = Hex.decode("010203040506070800000000e110020002036302020305d5000231ffff320000")!
        let contents = try Type2Memory.read(memory)
        #expect(contents.ndefMessage == [0xD5, 0x00, 0x02, 0x31, 0x32])
        #expect(contents.reservedAreas == [ReservedArea(start: 27, size: 2)])
        #expect(contents.tlvs.map(\.kind) == [.memoryControl, .ndef, .null, .null])
    }

    @Test(
        "bad capability containers",
        arguments: [
            ("00000000", "not NDEF formatted"), ("E1200100", "unsupported NDEF mapping version 2.0"), ("E0100100", "not NDEF formatted"),
        ])
    func badCC(_ cc: String, _ message: String) throws {
        let memory = [UInt8](repeating: 0, count: 12) + Hex.decode(cc)! + [UInt8](repeating: 0, count: 16)
        #expect {
            _ = try Type2Memory.read(memory)
        } throws: { error in
            (error as? TagMemoryError)?.description.hasPrefix(message) == true
        }
    }

    @Test(
        "GET_VERSION identifies the chip",
        arguments: [
            ("0004040201000F03", "ntag213", 45), ("0004040201001103", "ntag215", 135), ("0004040201001303", "ntag216", 231),
            ("0004030101000B03", "mifare_ultralight_ev1", 20), ("0004030101000E03", "mifare_ultralight_ev1", 41),
            ("0004040101000B03", "ntag210", 20), ("0004040502011303", "ntag_i2c_1k", 231),
        ])
    func identify(_ version: String, _ type: String, _ pages: Int) {
        let chip = Type2Identification.identify(getVersion: Hex.decode(version))
        #expect(chip.type.rawValue == type)
        #expect(chip.totalPages == pages)
    }

    @Test("unknown vendors and tags without GET_VERSION are generic Type 2")
    func unknownVendor() {
        #expect(Type2Identification.identify(getVersion: Hex.decode("0005040201000F03")).type == .type2)
        #expect(Type2Identification.identify(getVersion: nil).type == .type2)
        #expect(Type2Identification.identify(getVersion: [1, 2]).type == .type2)
    }
}

@Suite("Type 4 files against nfcpy's cases")
struct Type4Tests {
    @Test("CC file and NDEF file as nfcpy reads them", .enabled(if: !tt4Cases.isEmpty, skip), arguments: tt4Cases)
    func nfcpy(_ c: SharedCase) throws {
        let ccFile = try #require(c.hex("cc_file_hex"))
        let ndefFile = try #require(c.hex("ndef_file_hex"))
        let present = c.json["expected_ndef_present"]
        guard present?.bool == true || present?.string == "True" else {
            #expect(throws: TagMemoryError.self) { try Type4CapabilityContainer(ccFile) }
            return
        }
        let cc = try Type4CapabilityContainer(ccFile)
        #expect(try Type4Memory.ndefMessage(file: ndefFile, cc: cc) == c.hex("expected_ndef_message_hex"))
        let access = (cc.readable ? "r" : ".") + (cc.writable ? "w" : ".")
        #expect(access == c.json["expected_access"]?.string)
        if let capacity = c.json["expected_capacity_if_present"]?.double {
            #expect(Double(cc.capacity) == capacity)
        }
    }

    @Test("NLEN beyond the file or its capacity is refused")
    func badNLEN() throws {
        let cc = try Type4CapabilityContainer(Hex.decode("000f20003b00340406e10400400000")!)
        #expect(throws: TagMemoryError.self) { try Type4Memory.ndefMessage(file: [0x00, 0x10, 0xD0], cc: cc) }
        #expect(throws: TagMemoryError.self) { try Type4Memory.ndefMessage(file: [0x00, 0x40] + [UInt8](repeating: 0, count: 64), cc: cc) }
        #expect(try Type4Memory.ndefMessage(file: [0x00, 0x00], cc: cc) == [])
    }
}

@Suite("Type 3 and MIFARE Classic")
struct OtherTagTypeTests {
    static func attributeBlock(length: Int, writing: Bool = false) -> [UInt8] {
        var block: [UInt8] = [
            0x10, 0x04, 0x01, 0x00, 0x0D, 0, 0, 0, 0, writing ? 0x0F : 0x00, 0x01,
            UInt8(length >> 16), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF),
        ]
        let sum = block.reduce(0) { $0 + Int($1) }
        block += [UInt8(sum >> 8), UInt8(sum & 0xFF)]
        return block
    }

    @Test("a FeliCa Lite-S attribute block and its NDEF blocks")
    func type3() throws {
        let message = NDEFMessage(records: [NDEFRecord.uri("https://felica.example/x")]).encoded()
        var blocks = Self.attributeBlock(length: message.count) + message
        blocks += [UInt8](repeating: 0, count: (16 - blocks.count % 16) % 16)
        let (attributes, found) = try Type3Memory.read(blocks: blocks)
        #expect(found == message)
        #expect(attributes.maxBlocks == 13)
        #expect(!attributes.readOnly)
        var corrupt = blocks
        corrupt[15] ^= 1
        #expect(throws: TagMemoryError.self) { try Type3Memory.read(blocks: corrupt) }
        #expect(throws: TagMemoryError.self) {
            try Type3Memory.read(blocks: Self.attributeBlock(length: 5, writing: true) + blocks.dropFirst(16))
        }
        #expect(throws: TagMemoryError.self) { try Type3Memory.read(blocks: Self.attributeBlock(length: 300) + blocks.dropFirst(16)) }
    }

    /// A MIFARE Classic 4K image with MAD2, NDEF in sectors 17 and 18.
    @Test("MAD2 on a 4K card: NDEF sectors beyond 16, trailers skipped")
    func mad2() throws {
        var memory = [UInt8](repeating: 0, count: 4096)
        memory[3 * 16 + 9] = 0xC2  // GPB: MAD present, multi-application, version 2
        var mad1 = [UInt8](repeating: 0, count: 32)
        mad1[1] = 0x01
        mad1[0] = MifareClassicMemory.crc(mad1.dropFirst())
        memory.replaceSubrange(16..<48, with: mad1)
        var mad2 = [UInt8](repeating: 0, count: 48)
        mad2[2] = 0x03; mad2[3] = 0xE1  // sector 17
        mad2[4] = 0x03; mad2[5] = 0xE1  // sector 18
        mad2[0] = MifareClassicMemory.crc(mad2.dropFirst())
        memory.replaceSubrange(64 * 16..<64 * 16 + 48, with: mad2)
        let message = NDEFMessage(records: [NDEFRecord.uri("https://example.org/" + String(repeating: "m", count: 60))]).encoded()
        let tlv = [0x03, UInt8(message.count)] + message + [0xFE]
        // Sector 17 has 3 data blocks (48 bytes); the rest continues in sector 18, past the trailer.
        let sector17 = 17 * 4 * 16, sector18 = 18 * 4 * 16
        memory.replaceSubrange(sector17..<sector17 + 48, with: tlv.prefix(48))
        memory.replaceSubrange(sector18..<sector18 + tlv.count - 48, with: tlv.dropFirst(48))
        memory.replaceSubrange(sector17 + 48..<sector17 + 64, with: [UInt8](repeating: 0xAA, count: 16))  // a trailer
        let contents = try MifareClassicMemory.read(memory)
        #expect(contents.directory.ndefSectors == [17, 18])
        #expect(contents.ndefMessage == message)
        var corrupt = memory
        corrupt[64 * 16] ^= 0xFF
        #expect(throws: TagMemoryError.self) { try MifareClassicMemory.read(corrupt) }
        #expect(throws: TagMemoryError.self) { try MifareClassicMemory.read(Array(memory.prefix(1000))) }
    }
}

@Suite("Shared tag dumps: loading the original files gives the expected records")
struct TagDumpTests {
    /// The original dump a converted JSON came from, when it is in the shared data.
    static func original(_ json: JSONValue) -> String? {
        guard let path = json["source"]?["path"]?.string else { return nil }
        let name = (path as NSString).lastPathComponent
        for folder in ["nfc/flipper", "nfc/proxmark"] {
            if let full = TestData.path("\(folder)/\(name)"), FileManager.default.fileExists(atPath: full) { return full }
        }
        if name == "ntag216-empty.json" || path.contains("proxmark") { return TestData.path("nfc/proxmark/ntag216-empty.json") }
        return nil
    }

    @Test("every tag file: the original dump and the converted JSON", .enabled(if: !tagFiles.isEmpty, skip), arguments: tagFiles)
    func records(_ path: String) throws {
        let expected = try JSONValue.parse(try TextFile.read(path))
        var images = [try TagDump.load(Array(try TextFile.read(path).utf8))]
        #expect(images[0].format == .tagfixJSON)
        if let original = Self.original(expected) {
            let data = try #require(FileManager.default.contents(atPath: original))
            images.append(try TagDump.load(Array(data)))
        }
        let expectedUID = try #require(expected["uid_hex"]?.string)
        for image in images {
            #expect(image.uid?.hex == expectedUID.uppercased(), "\(image.format)")
            let readout = image.readNDEF()
            let expectedMessage = expected["expected_ndef_message_hex"]?.string.flatMap(Hex.decode)
            #expect(readout.messageBytes == expectedMessage, "\(image.format): \(readout.problem.map(String.init(describing:)) ?? "")")
            if expected["features"]?.array?.contains(where: { $0.string == "not_ndef_formatted" }) == true {
                #expect(!readout.formatted)
            }
            let records = (try? readout.message?.get().records) ?? []
            let expectedRecords = expected["expected_records"]?.array ?? []
            #expect(records.count == expectedRecords.count)
            for (record, want) in zip(records, expectedRecords) {
                #expect(Double(record.tnf.rawValue) == want["tnf"]?.double ?? want["tnf"]?.string.flatMap(Double.init))
                #expect(Hex.encode(record.type).lowercased() == want["type_hex"]?.string)
                #expect(Hex.encode(record.id).lowercased() == want["id_hex"]?.string)
                #expect(Hex.encode(record.payload).lowercased() == want["payload_hex"]?.string)
                if let uri = want["decoded"]?["uri"]?.string, case .uri(let decoded) = try record.decoded() {
                    #expect(decoded.uri == uri)
                }
            }
            if case .type2(let pages) = image.memory, readout.type2 != nil {
                try Type2Tests.checkPlanner(pages)
            }
        }
    }

    @Test("Flipper files name the chip; the Ultralight EV1 is identified from GET_VERSION", .enabled(if: TestData.isAvailable, skip))
    func flipperChips() throws {
        let files = TestData.files(in: "nfc/flipper", suffix: ".nfc")
        #expect(files.count == 7)
        for file in files {
            let image = try TagDump.load(Array(try #require(FileManager.default.contents(atPath: file))))
            #expect(image.format == .flipper)
            if file.hasSuffix("Dave_and_Busters.nfc") { #expect(image.chip.type == .mifareUltralightEV1) }
            if file.hasSuffix("Call_112.nfc") { #expect(image.chip.type == .ntag216) }
        }
    }

    @Test(
        "malformed dumps name the line",
        arguments: [
            (
                "Filetype: Flipper NFC device\nVersion: 2\nDevice type: NTAG213\nUID: 04 11 22 33 44 55 66\nPage 0: 04 11 ZZ 33\n", 5,
                "page 0"
            ),
            ("Filetype: Flipper NFC device\nVersion: 9\n", 2, "version"),
            ("Filetype: Flipper NFC device\nVersion: 2\nDevice type: Bank card\nUID: 04 11 22 33\n", 3, "holds no memory"),
            ("Filetype: Flipper NFC device\nVersion: 2\nDevice type: NTAG213\nUID: 04 11\n", 4, "4 to 10 bytes"),
            ("Filetype: Flipper NFC device\nVersion: 2\nthis line has no colon\n", 3, "Key: value"),
            ("{\n\"Created\": \"proxmark3\",\n\"blocks\": {\"0\": \"0411\", \"1\": \"zz\"}\n}", 3, "hex"),
            ("{\n\"uid_hex\": \"04112233\",\n\"memory_hex\": \"0102\"\n}", 3, "whole 4-byte pages"),
            ("{\"a\": 1}", 1, "neither"),
        ])
    func malformed(_ text: String, _ line: Int, _ fragment: String) {
        do {
            _ = try TagDump.load(Array(text.utf8))
            Issue.record("accepted a malformed dump")
        } catch {
            #expect(error.line == line, "\(error)")
            #expect(error.message.lowercased().contains(fragment.lowercased()), "\(error)")
        }
    }

    @Test("unknown content is refused, not guessed")
    func unknown() {
        #expect(throws: DataFileError.self) { try TagDump.load(Array("hello, world".utf8)) }
        #expect(throws: DataFileError.self) { try TagDump.load([0xFF, 0x00, 0x01]) }
    }

    @Test("libnfc binary dumps: Ultralight pages and Classic blocks, detected by size")
    func binaries() throws {
        var pages = [UInt8](repeating: 0, count: 180)
        pages.replaceSubrange(0..<16, with: Hex.decode("04112288334455660048000000E1101200")!.prefix(16))
        pages.replaceSubrange(12..<16, with: [0xE1, 0x10, 0x12, 0x00])
        pages.replaceSubrange(16..<21, with: [0x03, 0x03, 0xD0, 0x00, 0x00])
        let ultralight = try TagDump.load(pages)
        #expect(ultralight.format == .mfultralightBinary)
        #expect(ultralight.uid?.hex == "04112233445566")
        #expect(ultralight.readNDEF().messageBytes == [0xD0, 0x00, 0x00])
        if let classic = TestData.path("nfc/tags/adafruit_mifare_classic_1k_mad_ndef.json") {
            let json = try JSONValue.parse(try TextFile.read(classic))
            let bytes = try #require(json["memory_hex"]?.string.flatMap(Hex.decode))
            let image = try TagDump.load(bytes)
            #expect(image.format == .mfclassicBinary)
            #expect(image.uid?.hex == "3E39AB7F")
            #expect(image.readNDEF().messageBytes == json["expected_ndef_message_hex"]?.string.flatMap(Hex.decode))
        }
    }
}

@Suite("Flipper MIFARE Classic files")
struct FlipperClassicTests {
    /// A Flipper v2 MIFARE Classic 1K file built from the Adafruit dump, keys unread (`??`).
    static func file(unreadDataBlock: Bool = false) throws -> String? {
        guard let path = TestData.path("nfc/tags/adafruit_mifare_classic_1k_mad_ndef.json") else { return nil }
        let json = try JSONValue.parse(try TextFile.read(path))
        let memory = try #require(json["memory_hex"]?.string.flatMap(Hex.decode))
        var lines = [
            "Filetype: Flipper NFC device", "Version: 2", "Device type: Mifare Classic", "UID: 3E 39 AB 7F", "ATQA: 00 04", "SAK: 08",
            "Mifare Classic type: 1K",
        ]
        for block in 0..<64 {
            var parts = memory[block * 16..<block * 16 + 16].map { Hex.encode([$0]) }
            if block % 4 == 3 {
                for i in 0..<6 { parts[i] = "??" }
                for i in 10..<16 { parts[i] = "??" }
            }
            if unreadDataBlock, block == 4 { parts[5] = "??" }
            lines.append("Block \(block): " + parts.joined(separator: " "))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test("blocks with unread keys still give the NDEF message", .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)))
    func classic() throws {
        let text = try #require(try Self.file())
        let image = try TagDump.load(Array(text.utf8))
        #expect(image.chip.type == .mifareClassic1K)
        #expect(image.uid?.hex == "3E39AB7F")
        guard case .uri(let uri) = try #require(try image.readNDEF().message?.get().records.first).decodedOrNil else {
            Issue.record("no URI record")
            return
        }
        #expect(uri.uri == "http://www.adafruit.com")
    }

    @Test(
        "an unread byte inside the NDEF data is an error, not a zero",
        .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)))
    func unreadData() throws {
        let text = try #require(try Self.file(unreadDataBlock: true))
        let readout = try TagDump.load(Array(text.utf8)).readNDEF()
        #expect(readout.problem == .unreadableBytes(at: 4 * 16 + 5))
    }
}

extension NDEFRecord {
    var decodedOrNil: NDEFPayload? { try? decoded() }
}
