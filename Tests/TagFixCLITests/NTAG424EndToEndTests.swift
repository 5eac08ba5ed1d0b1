import Foundation
import TagFixCore
import TagFixCrypto
import TagFixEmulators
import TagFixNDEF
import TagFixNFC
import TagFixTags
import Testing

/// The SUN URL template: 32 zeros for the encrypted PICC data, 16 for the CMAC.
private let templateURL =
    "https://tagfix.example/s?picc_data=" + String(repeating: "0", count: 32) + "&cmac=" + String(repeating: "0", count: 16)

/// A factory-fresh emulated NTAG 424 DNA provisioned in-process as a field team would: the URL
/// template written, SDM on (encrypted PICC data under key 2, SDMMAC under key 1), then keys 1
/// and 2 changed to keys AN10922-diversified from `master`, and key 0 last.
private func provisionedTag(uid: [UInt8], master: AES128Key) throws -> EmulatedNTAG424Tag {
    let tag = try EmulatedNTAG424Tag(uid: uid)
    var commands = NTAG424Commander { apdu in
        guard case .data(let answer) = tag.transceive(apdu) else { throw NTAG424Error.transport("no answer") }
        return answer
    }
    let message = NDEFMessage(records: [NDEFRecord.uri(templateURL)]).encoded()
    let file = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
    func offset(after marker: String) throws -> Int {
        let needle = Array(marker.utf8)
        let start = try #require((0...(file.count - needle.count)).first { Array(file[$0..<$0 + needle.count]) == needle })
        return start + needle.count
    }
    let macOffset = try offset(after: "cmac=")
    let settings = NTAG424FileSettings(
        commMode: .plain, read: 0x0E, write: 0x00, readWrite: 0x00, change: 0x00,
        sdm: .init(
            counterRetrieval: 1, metaRead: 2, fileRead: 1, piccDataOffset: try offset(after: "picc_data="), macInputOffset: macOffset,
            macOffset: macOffset))
    try commands.selectApplication()
    try commands.updateBinary(fileID: 0xE104, file)
    try commands.selectApplication()
    try commands.authenticate(keyNumber: 0, key: .zero)
    try commands.changeFileSettings(file: 2, settings)
    for number: UInt8 in [1, 2] {
        let key = try KeyDiversification.aes128(master: master, input: uid + [number])
        try commands.changeKey(number: number, to: key, from: .zero, version: 1)
    }
    try commands.changeKey(number: 0, to: KeyDiversification.aes128(master: master, input: uid + [0]), from: .zero, version: 1)
    return tag
}

/// An emulated tag as a `TagTransport`, so the Type 4 read procedure runs without a reader.
private struct TagLink: TagTransport {
    let tag: any EmulatedTag
    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        guard case .data(let bytes) = tag.transceive(command) else { throw TagError(.tagLost, detail: "no answer") }
        return bytes
    }
}

@Suite("Emulated NTAG 424 DNA read as a Type 4 tag", .timeLimit(.minutes(2)))
struct NTAG424ReadTests {
    let uid: [UInt8] = [0x04, 0x42, 0x24, 0x9A, 0x3B, 0x6C, 0x80]
    let master = AES128Key(hex: "00112233445566778899AABBCCDDEEFF")!

    private func verifier() throws -> SUNVerifier {
        SUNVerifier(
            metaReadKey: try KeyDiversification.aes128(master: master, input: uid + [2]),
            fileReadKey: .diversified(master: master, suffix: [1]))
    }

    /// The Type 4 read procedure (SELECT, CC, NDEF file in MLe chunks) gets a SUN URL that
    /// verifies, with a counter one higher on each activation.
    @Test func type4ReaderGetsVerifiedSUNs() throws {
        let tag = try provisionedTag(uid: uid, master: master)
        for tap in 1...3 {
            tag.reset()
            var link = TagLink(tag: tag)
            let read = try Type4NDEFReader.read(&link)
            let message = try #require(read.message)
            let url = try #require(try NDEFMessage(bytes: message).firstURL)
            #expect(url.hasPrefix("https://tagfix.example/s?picc_data=") && url != templateURL)
            #expect(try verifier().verify(url: url) == .verified(uid: uid, counter: UInt32(tap)))
            #expect(!SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero)).verify(url: url).valid, "the factory keys are gone")
        }
    }

    /// Through the real libnfc and the PN532 emulator: three `tagfix scan` runs (three taps) read
    /// three different URLs, each verifying with a counter one higher: one read each. The runs
    /// share a process, as a lab's script or these tests do, so each has the reader to itself:
    /// a run's reader speaks only once the last one's has closed.
    /// A run that returned while its reader was still closing had the two interleave: the old
    /// run's RF-off reset the tag under the new run's read, and its retry counted one more. The
    /// line runs at 9600 baud, so a close (three commands) takes longer than the 50 ms libnfc
    /// waits at an open before it speaks: without the claim, the two overlap here.
    @Test func libnfcScansVerifiedSUNs() async throws {
        let tag = try provisionedTag(uid: uid, master: master)
        let emulator = try PN532Emulator(tags: [tag], options: .init(baud: 9600, logCommands: true))
        defer { emulator.stop() }
        var counters: [UInt32] = []
        for _ in 0..<3 {
            let result = await run(["scan", "--reader", "pn532_uart:\(emulator.path)", "--json", "--count", "1", "--timeout", "20"])
            #expect(result.code == 0, "\(result.err)")
            let object = try JSONValue.parse(try #require(result.out.first))
            #expect(object["tag_type"]?.string == "type4")
            let url = try #require(object["url"]?.string)
            let verified = try verifier().verify(url: url)
            #expect(verified.valid && verified.uid == uid, "\(url)")
            counters.append(verified.counter ?? 0)
        }
        #expect(counters == [1, 2, 3])
        // No run's reader spoke while another's was still closing: no close command (InRelease
        // 0x52, InDeselect 0x44, PowerDown 0x16) comes between an open (SAMConfiguration, 0x14)
        // and that reader's first poll (InListPassiveTarget, 0x4A), where the last run's close
        // lands when the two overlap (without the claim: 14, 52, 52, 32, 14, the PowerDown lost).
        // On a loaded machine a close can time out before its PowerDown, and a reader whose
        // set-up failed opens again, so opens and PowerDowns need not alternate.
        let commands = emulator.traffic.log.map(\.command)
        var openedNotPolled = false
        var overlaps: [Int] = []
        for (index, command) in commands.enumerated() {
            switch command {
            case 0x14: openedNotPolled = true
            case 0x4A: openedNotPolled = false
            case 0x52, 0x44, 0x16: if openedNotPolled { overlaps.append(index) }
            default: break
            }
        }
        #expect(
            commands.filter { $0 == 0x14 }.count >= 3 && overlaps.isEmpty,
            "a close among another reader's opening, at \(overlaps): \(commands.map { String($0, radix: 16) })")
    }

    /// The two NTAG 424 DNA examples in docs/tag-json.md: the factory-fresh tag reads an empty
    /// NDEF file; the provisioned one mirrors a SUN that verifies under its declared keys with the
    /// counter one above `sdm_read_counter`.
    @Test func tagJSONExamplesEmulateAsDocumented() throws {
        let text = try String(contentsOfFile: packageRoot + "/docs/tag-json.md", encoding: .utf8)
        let section = try #require(text.range(of: "## NTAG 424 DNA"))
        var blocks: [String] = []
        var rest = section.upperBound..<text.endIndex
        while let start = text.range(of: "```json\n", range: rest), let end = text.range(of: "```", range: start.upperBound..<text.endIndex)
        {
            blocks.append(String(text[start.upperBound..<end.lowerBound]))
            rest = end.upperBound..<text.endIndex
        }
        try #require(blocks.count == 2)
        let fresh = try #require(try TagDump.load(Array(blocks[0].utf8)).emulatedTag() as? EmulatedNTAG424Tag)
        #expect(fresh.snapshot.keys == [AES128Key](repeating: .zero, count: 5) && fresh.snapshot.ndefSettings == .factoryNDEF)
        let tag = try #require(try TagDump.load(Array(blocks[1].utf8)).emulatedTag() as? EmulatedNTAG424Tag)
        var link = TagLink(tag: tag)
        let read = try Type4NDEFReader.read(&link)
        let message = try #require(read.message)
        let url = try #require(try NDEFMessage(bytes: message).firstURL)
        let verifier = SUNVerifier(
            metaReadKey: AES128Key(hex: "00112233445566778899AABBCCDDEEFF")!,
            fileReadKey: .fixed(AES128Key(hex: "0F0E0D0C0B0A09080706050403020100")!),
            names: SUNParameterNames(piccData: "e", cmac: "c"))
        #expect(verifier.verify(url: url) == .verified(uid: [0x04, 0xDE, 0x5F, 0x1E, 0xAC, 0xC0, 0x40], counter: 61), "\(url)")
    }
}
