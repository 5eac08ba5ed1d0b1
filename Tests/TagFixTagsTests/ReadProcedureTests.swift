import Foundation
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixTags
import TagFixTesting
import Testing

/// An emulated tag as a transport, so the read procedures run without a reader.
struct DirectTransport: TagTransport {
    let tag: any EmulatedTag
    var log: [[UInt8]] = []
    var failAfter: Int?
    var fastReadPages = Type2NDEFReader.fastReadPages

    init(_ tag: any EmulatedTag, failAfter: Int? = nil) {
        self.tag = tag
        self.failAfter = failAfter
    }

    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        log.append(command)
        if let failAfter, log.count > failAfter { throw TagError(.tagLost) }
        switch tag.transceive(command) {
        case .data(let bytes): return bytes
        case .ack: return []
        case .nak, .silent: throw TagError(.tagLost)
        case .authenticationFailed: throw TagError(.authenticationFailed)
        }
    }
}

/// An NTAG213 holding `url`.
func ntag213(url: String) -> EmulatedType2Tag {
    try! EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded())
}

private let sharedType2 = TestData.files(in: "nfc/tags", suffix: ".json").filter { !$0.contains("mifare_classic") }

@Suite("Type 2 read procedure")
struct Type2ProcedureTests {
    /// A transport whose frame holds fewer pages (a PC/SC transparent exchange: 56) gets its
    /// FAST_READs planned in pieces of that size, not planned in 60s and split after.
    @Test(
        "a long message is read in FAST_READs of the transport's size: each piece full but the last, none split",
        arguments: [Type2NDEFReader.fastReadPages, 56, 16])
    func transportSizedReads(pages: Int) throws {
        let records = (0..<5).map { NDEFRecord.uri("https://tags.example.org/t/\($0)?" + String(repeating: "x", count: 120)) }
        let message = NDEFMessage(records: records).encoded()
        var transport = DirectTransport(try EmulatedType2Tag.ntag(216, message: message))
        transport.fastReadPages = pages
        let result = try Type2NDEFReader.read(&transport, readSignature: false) { () throws(TagError) -> Void in }
        #expect(result.message == message)
        let reads = transport.log.dropFirst().map { Int($0[2]) - Int($0[1]) + 1 }
        #expect(reads.dropLast().allSatisfy { $0 == pages }, "\(reads)")
        #expect((reads.last ?? 0) <= pages && (reads.last ?? 0) > 0, "\(reads)")
        let rest = reads.reduce(0, +)
        #expect(reads.count == (rest + pages - 1) / pages, "as few pieces as the pages need: \(reads)")
    }

    @Test(
        "every shared Type 2 tag: the expected message, with FAST_READ of only the NDEF pages",
        .enabled(if: !sharedType2.isEmpty, Comment(rawValue: TestData.skipReason)), arguments: sharedType2)
    func shared(_ path: String) throws {
        let json = try JSONValue.parse(try TextFile.read(path))
        let image = try TagDump.load(Array(try TextFile.read(path).utf8))
        let tag = try image.emulatedTag()
        var transport = DirectTransport(tag)
        let result = try Type2NDEFReader.read(&transport) { () throws(TagError) -> Void in }
        #expect(result.message == json["expected_ndef_message_hex"]?.string.flatMap(Hex.decode))
        #expect(transport.log.first == [0x3A, 0x03, 0x0A], "FAST_READ of the CC and the first data bytes first")
        #expect(transport.log.last == [0x3C, 0x00], "READ_SIG last, for the originality check")
        #expect(transport.log.dropLast().allSatisfy { $0.first == 0x3A }, "FAST_READ only: no GET_VERSION, no READ")
        #expect(result.askedSignature)
        #expect(result.signature == (image.signature ?? [UInt8](repeating: 0, count: 32)), "the dump's signature, as the chip answers it")
        if let chip = json["chip"]?.string, ["NTAG213", "NTAG215", "NTAG216"].contains(chip) {
            #expect(result.chipName == chip, "the CC's data-area size names the NTAG")
        }
        // Far fewer bytes than a dump of the whole tag.
        guard case TagImage.Memory.type2(let pages) = image.memory else { return }
        #expect(result.bytesMoved - 34 < pages.count / 2, "besides READ_SIG's 2 + 32 bytes")
    }

    @Test("a tag without FAST_READ (MIFARE Ultralight C) is reselected and read with READ")
    func ultralight() throws {
        let full = ntag213(url: "https://example.org/" + String(repeating: "u", count: 40))
        let tag = EmulatedType2Tag(uid: full.uid, pages: full.pages, getVersion: nil, signature: nil)
        var transport = DirectTransport(tag)
        var reselected = 0
        let result = try Type2NDEFReader.read(&transport) { () throws(TagError) -> Void in reselected += 1 }
        #expect(reselected == 1)
        #expect(transport.log.first?.first == 0x3A, "FAST_READ is tried")
        #expect(transport.log.dropFirst().allSatisfy { $0.first == 0x30 })
        #expect(result.chipName == "MIFARE Ultralight C")
        let message = try NDEFMessage(bytes: try #require(result.message))
        #expect(message.firstURL == "https://example.org/" + String(repeating: "u", count: 40))
        #expect(result.tagType == .type2)
    }

    @Test("a tag pulled after any exchange of a read is an incomplete read, never a partial message")
    func pulled() throws {
        let url = "https://example.org/" + String(repeating: "p", count: 120)
        var whole = DirectTransport(ntag213(url: url))
        _ = try Type2NDEFReader.read(&whole, readSignature: false) { () throws(TagError) -> Void in }
        #expect(whole.log.count == 2, "a 140-byte message: two FAST_READs")
        for exchanges in 0..<whole.log.count {
            var transport = DirectTransport(ntag213(url: url), failAfter: exchanges)
            #expect {
                _ = try Type2NDEFReader.read(&transport, readSignature: false) { () throws(TagError) -> Void in }
            } throws: { error in
                if case .incompleteRead = error as? NDEFReadError { return true }
                return false
            }
        }
    }

    @Test("a tag pulled during READ_SIG keeps its message, without a signature, and is selected again")
    func pulledDuringReadSig() throws {
        let url = "https://example.org/" + String(repeating: "p", count: 120)
        var transport = DirectTransport(ntag213(url: url), failAfter: 2)
        var reselected = 0
        let result = try Type2NDEFReader.read(&transport) { () throws(TagError) -> Void in reselected += 1 }
        #expect(try NDEFMessage(bytes: try #require(result.message)).firstURL == url)
        #expect(result.askedSignature)
        #expect(result.signature == nil)
        #expect(reselected == 1)
        #expect(result.originality(uid: try TagUID(bytes: [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66])).status == .absent)
    }

    @Test("a tag without FAST_READ is never sent READ_SIG: it has no signature")
    func noSignatureWithoutFastRead() throws {
        let full = ntag213(url: "https://example.org/u")
        let tag = EmulatedType2Tag(uid: full.uid, pages: full.pages, getVersion: nil, signature: nil)
        var transport = DirectTransport(tag)
        let result = try Type2NDEFReader.read(&transport) { () throws(TagError) -> Void in }
        #expect(!transport.log.contains { $0.first == 0x3C })
        #expect(!result.askedSignature)
        #expect(result.originality(uid: try TagUID(bytes: full.uid)).status == .unsupported)
    }

    @Test("a long message is read in FAST_READ chunks that fit the PN53x frame")
    func chunks() throws {
        let url = "https://example.org/" + String(repeating: "c", count: 700)
        let message = NDEFMessage(records: [NDEFRecord.uri(url)]).encoded()
        var pages: [UInt8] = [0x04, 0x11, 0x22, 0x99, 0x33, 0x44, 0x55, 0x66, 0x00, 0x48, 0, 0, 0xE1, 0x10, 0x6D, 0x00]
        pages += [0x03, 0xFF, UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message + [0xFE]
        pages += [UInt8](repeating: 0, count: 231 * 4 - pages.count)
        let tag = EmulatedType2Tag(
            uid: [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66], pages: pages, getVersion: Hex.decode("0004040201001303"), signature: nil)
        var transport = DirectTransport(tag)
        let result = try Type2NDEFReader.read(&transport) { () throws(TagError) -> Void in }
        #expect(try NDEFMessage(bytes: try #require(result.message)).firstURL == url)
        for command in transport.log where command.first == 0x3A {
            #expect(Int(command[2]) - Int(command[1]) + 1 <= Type2NDEFReader.fastReadPages)
        }
    }
}

@Suite("Type 4 read procedure")
struct Type4ProcedureTests {
    @Test("SELECT, CC, NDEF file in MLe chunks")
    func read() throws {
        let message = NDEFMessage(records: [NDEFRecord.uri("https://type4.example/" + String(repeating: "x", count: 400))]).encoded()
        var transport = DirectTransport(EmulatedType4Tag(uid: [0x04, 1, 2, 3, 4, 5, 6], message: message))
        let result = try Type4NDEFReader.read(&transport)
        #expect(result.message == message)
        #expect(transport.log.first?.prefix(4) == [0x00, 0xA4, 0x04, 0x00])
    }

    /// The shared tags' real messages that fit an NTAG 424 DNA's 256-byte NDEF file.
    static let messages: [[UInt8]] = sharedType2.compactMap { path in
        (try? JSONValue.parse(try TextFile.read(path)))?["expected_ndef_message_hex"]?.string.flatMap(Hex.decode)
    }.filter { !$0.isEmpty && $0.count <= 254 }

    @Test(
        "NTAG 424 DNA, recognised by its ATS: the same message without the CC, three exchanges fewer",
        .enabled(if: !messages.isEmpty, Comment(rawValue: TestData.skipReason)), arguments: messages)
    func knownLayout(_ message: [UInt8]) throws {
        let file = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        let tag = try EmulatedNTAG424Tag(uid: [0x04, 0x5A, 0x11, 0x42, 0x9C, 0x3D, 0x80], ndefFile: file)
        let known = try #require(Type4CapabilityContainer.layout(answerToSelect: tag.ats ?? []))
        #expect(known == .ntag424DNA)
        var full = DirectTransport(tag)
        let procedure = try Type4NDEFReader.read(&full)
        tag.reset()
        var short = DirectTransport(tag)
        let fast = try Type4NDEFReader.read(&short, known: known)
        #expect(procedure.message == message)
        #expect(fast.message == message)
        #expect(fast.commands == procedure.commands - 3, "no SELECT of E103, no READ BINARY of its 23 bytes (15, then 8)")
        #expect(!short.log.contains([0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x03]))
        #expect(fast.bytesMoved < procedure.bytesMoved)
    }

    @Test(
        "an expected length (the last tap's) reads NLEN and the message in one READ BINARY; a wrong guess still reads the message",
        .enabled(if: !messages.isEmpty, Comment(rawValue: TestData.skipReason)), arguments: messages)
    func expectedLength(_ message: [UInt8]) throws {
        let file = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        let tag = try EmulatedNTAG424Tag(uid: [0x04, 0x5A, 0x11, 0x42, 0x9C, 0x3D, 0x80], ndefFile: file)
        var plain = DirectTransport(tag)
        let known = try Type4NDEFReader.read(&plain, known: .ntag424DNA)
        for guess in [message.count, 0, message.count / 2, message.count + 7, 1000] {
            tag.reset()
            var transport = DirectTransport(tag)
            let read = try Type4NDEFReader.read(&transport, known: .ntag424DNA, expectedLength: guess)
            #expect(read.message == message, "guess \(guess)")
            if guess == message.count, message.count <= 253 {
                #expect(read.commands == known.commands - 1, "NLEN and the message in one READ BINARY")
            }
        }
    }

    @Test(
        "a chip that answers like an NTAG 424 DNA but keeps its NDEF file elsewhere is read by the whole procedure",
        .enabled(if: !messages.isEmpty, Comment(rawValue: TestData.skipReason)), arguments: messages)
    func knownLayoutWrong(_ message: [UInt8]) throws {
        let cc: [UInt8] = [0x00, 0x0F, 0x20, 0x00, 0xFF, 0x00, 0xFF, 0x04, 0x06, 0xE1, 0x05, 0x04, 0x00, 0x00, 0x00]
        let file = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message + [UInt8](repeating: 0, count: 1024)
        var transport = DirectTransport(EmulatedType4Tag(uid: [0x04, 1, 2, 3, 4, 5, 6], ccFile: cc, ndefFile: file))
        let result = try Type4NDEFReader.read(&transport, known: .ntag424DNA)
        #expect(result.message == message)
        #expect(transport.log.contains([0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x03]), "the CC, once E104 was refused")
    }

    @Test("only NTAG 424 DNA's ATS (with or without TL) names a known layout; DESFire's does not")
    func layouts() {
        #expect(Type4CapabilityContainer.layout(answerToSelect: [0x06, 0x77, 0x77, 0x71, 0x02, 0x80]) == .ntag424DNA)
        #expect(Type4CapabilityContainer.layout(answerToSelect: [0x77, 0x77, 0x71, 0x02, 0x80]) == .ntag424DNA)
        #expect(Type4CapabilityContainer.layout(answerToSelect: [0x06, 0x75, 0x77, 0x81, 0x02, 0x80]) == nil)
        #expect(Type4CapabilityContainer.layout(answerToSelect: []) == nil)
        #expect(Type4CapabilityContainer.ntag424DNA.ndefFileID == 0xE104 && Type4CapabilityContainer.ntag424DNA.ndefFileMaxSize == 256)
    }

    @Test("no NDEF application: no message, with the reason")
    func noApplication() throws {
        let tag = EmulatedType4Tag(uid: [0x04, 1, 2, 3, 4, 5, 6], ccFile: [], ndefFile: [])
        final class Refusing: EmulatedTag, Sendable {
            let uid: [UInt8] = [1, 2, 3, 4]
            let sensRes: [UInt8] = [0, 4]
            let selRes: UInt8 = 0x20
            let ats: [UInt8]? = [0x05]
            func transceive(_ command: [UInt8]) -> TagAnswer { .data([0x6A, 0x82]) }
            func reset() {}
        }
        _ = tag
        var transport = DirectTransport(Refusing())
        let result = try Type4NDEFReader.read(&transport)
        #expect(result.message == nil)
        #expect(result.problem == "no NDEF application")
    }
}

@Suite("MIFARE Classic read procedure")
struct MifareClassicProcedureTests {
    static func adafruit() throws -> TagImage? {
        guard let path = TestData.path("nfc/tags/adafruit_mifare_classic_1k_mad_ndef.json") else { return nil }
        return try TagDump.load(Array(try TextFile.read(path).utf8))
    }

    @Test(
        "MAD with the public key, then only the NDEF blocks needed",
        .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)))
    func adafruitCard() throws {
        let image = try #require(try Self.adafruit())
        let tag = try image.emulatedTag()
        var transport = DirectTransport(tag)
        let result = try MifareClassicNDEFReader.read(&transport, uid: tag.uid, sectors: 16) { () throws(TagError) -> Void in }
        #expect(result.message == image.readNDEF().messageBytes)
        #expect(transport.log.first?.prefix(2) == [0x60, 0x03], "AUTH of sector 0 first")
        #expect(Array(transport.log.first?[2..<8] ?? []) == MifareClassicNDEFReader.madKey)
        #expect(transport.log.filter { $0.first == 0x30 }.count == 5, "MAD1 (2 blocks), the trailer, and the 2 blocks the message spans")
    }

    @Test(
        "a card whose sectors use private keys is not NDEF-readable, and says so",
        .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)))
    func privateKeys() throws {
        guard case .mifareClassic(var bytes, _) = try #require(try Self.adafruit()).memory else { return }
        bytes.replaceSubrange(48..<54, with: [1, 2, 3, 4, 5, 6])  // sector 0 key A
        let tag = EmulatedMifareClassicTag(uid: [0x3E, 0x39, 0xAB, 0x7F], memory: bytes)
        var transport = DirectTransport(tag)
        var reselected = 0
        let result = try MifareClassicNDEFReader.read(&transport, uid: tag.uid, sectors: 16) { () throws(TagError) -> Void in
            reselected += 1
        }
        #expect(result.message == nil)
        #expect(result.problem?.contains("public MAD key") == true)
        #expect(reselected == 1)
    }
}

/// A FeliCa Lite-S image holding `message`: the attribute block (Nbr 4, Nmaxb 13), then the data.
func felicaBlocks(_ message: [UInt8]) -> [UInt8] {
    var attribute: [UInt8] = [
        0x10, 0x04, 0x01, 0x00, 0x0D, 0, 0, 0, 0, 0x00, 0x01, 0x00, UInt8(message.count >> 8), UInt8(message.count & 0xFF),
    ]
    let sum = attribute.reduce(0) { $0 + Int($1) }
    attribute += [UInt8(sum >> 8), UInt8(sum & 0xFF)]
    let blocks = attribute + message
    return blocks + [UInt8](repeating: 0, count: (16 - blocks.count % 16) % 16)
}

struct FeliCaTransport: TagTransport {
    let tag: EmulatedType3Tag
    var log: [[UInt8]] = []
    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        log.append(command)
        guard case .data(let bytes) = tag.transceive(command) else { throw TagError(.tagLost) }
        return bytes
    }
}

@Suite("Type 3 (FeliCa) read procedure")
struct Type3ProcedureTests {
    @Test("the attribute block, then the NDEF blocks, Nbr at a time")
    func read() throws {
        let message = NDEFMessage(records: [NDEFRecord.uri("https://felica.example/" + String(repeating: "f", count: 150))]).encoded()
        let idm: [UInt8] = [0x01, 0x2E, 0x4C, 0xD2, 0xA1, 0xB2, 0xC3, 0xD4]
        var transport = FeliCaTransport(tag: EmulatedType3Tag(idm: idm, blocks: felicaBlocks(message)))
        let result = try Type3NDEFReader.read(&transport, idm: idm)
        #expect(result.message == message)
        // 1 attribute read, then ceil(170/16) = 11 blocks in reads of at most Nbr = 4.
        #expect(transport.log.count == 1 + 3)
        #expect(transport.log.allSatisfy { $0[1] == 0x06 && Array($0[2..<10]) == idm })
    }

    @Test("a broken attribute block: no message, with the reason")
    func broken() throws {
        var blocks = felicaBlocks([0xD0, 0x00, 0x00])
        blocks[15] ^= 0xFF
        let idm: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        var transport = FeliCaTransport(tag: EmulatedType3Tag(idm: idm, blocks: blocks))
        let result = try Type3NDEFReader.read(&transport, idm: idm)
        #expect(result.message == nil)
        #expect(result.problem?.contains("checksum") == true)
    }
}
