import Foundation
import TagFixCore
import TagFixEmulators
import TagFixNDEF
import TagFixPCSC
import TagFixTesting
import Testing

private let flipperDumps = TestData.files(in: "nfc/flipper", suffix: ".nfc")
private let skip = Comment(rawValue: TestData.skipReason)

private func image(_ path: String) throws -> TagImage {
    try TagDump.load(Array(try #require(FileManager.default.contents(atPath: path))))
}

@Suite("PC/SC Part 3: the ATR a reader makes up, read back")
struct PCSCCardKindTests {
    @Test(
        "every shared NTAG dump's ATR names a Type 2 storage card, with a right TCK", .enabled(if: !flipperDumps.isEmpty, skip),
        arguments: flipperDumps)
    func type2(_ path: String) throws {
        let tag = try image(path).emulatedTag()
        let atr = PCSCPart3Reader.atr(for: tag)
        #expect(atr.dropFirst().reduce(0, ^) == 0, "TCK: \(Hex.encode(atr))")
        let kind = PCSCCardKind(atr: atr)
        #expect(kind.isType2, "\(kind)")
        #expect(!kind.isISODEP)
        guard case .storage(let standard, _) = kind else { throw Unexpected.kind(kind) }
        #expect(standard == PCSCCardKind.Standard.iso14443APart3)
    }

    @Test("an ISO-DEP tag's ATR carries its ATS' historical bytes and is read as ISO 14443-4")
    func isoDEP() throws {
        let tag = EmulatedType4Tag(uid: [0x04, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06], message: [0xD0, 0x00, 0x00])
        let atr = PCSCPart3Reader.atr(for: tag)
        #expect(atr.dropFirst().reduce(0, ^) == 0)
        #expect(PCSCCardKind(atr: atr) == .isoDEP(historical: [0x80]))
    }

    @Test(
        "MIFARE Classic and foreign ATRs are not taken for Type 2",
        arguments: [
            "3B8F8001804F0CA000000306030001000000006A", "3B8F8001804F0CA000000306030002000000006A", "3B6800000073C84013009000", "",
        ])
    func notType2(_ hex: String) {
        let kind = PCSCCardKind(atr: Hex.decode(hex) ?? [])
        #expect(!kind.isType2)
    }

    @Test(
        "READ BINARY through the emulated reader gives the dump's pages; GET DATA its UID", .enabled(if: !flipperDumps.isEmpty, skip),
        arguments: flipperDumps)
    func readBinary(_ path: String) throws {
        let dump = try image(path)
        guard case .type2(let pages) = dump.memory else { return }
        let reader = PCSCPart3Reader(tag: try dump.emulatedTag())
        #expect(reader.answer([0xFF, 0xCA, 0x00, 0x00, 0x00]) == (dump.uid?.bytes ?? []) + [0x90, 0x00])
        for page in stride(from: 0, to: min(pages.count / 4, 16), by: 4) {
            let answer = reader.answer([0xFF, 0xB0, 0x00, UInt8(page), 0x10])
            #expect(answer.suffix(2) == [0x90, 0x00])
            #expect(Array(answer.dropLast(2)) == Array(pages[page * 4..<min(pages.count, page * 4 + 16)]))
        }
        let direct = reader.answer([0xFF, 0x00, 0x00, 0x00, 0x05, 0xD4, 0x42, 0x3A, 0x03, 0x04])
        #expect(Array(direct.prefix(3)) == [0xD5, 0x43, 0x00])
        #expect(Array(direct.dropFirst(3).dropLast(2)) == Array(pages[12..<20]))
    }

    enum Unexpected: Error { case kind(PCSCCardKind) }
}
