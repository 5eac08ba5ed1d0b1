import Synchronization
import TagFixCore
import TagFixCrypto
import TagFixNDEF
import Testing

@testable import TagFixEmulators

private func hex(_ text: String) -> [UInt8] { SUNHex.decode(Array(text.utf8))! }

/// Random bytes from a fixed queue (RndB, TI, PICCData padding) so a test can replay AN12196.
private final class FixedRandom: Sendable {
    private let queue: Mutex<[[UInt8]]>
    init(_ values: [[UInt8]]) { queue = Mutex(values) }
    func next(_ count: Int) -> [UInt8] {
        queue.withLock { queue in
            guard let first = queue.first, first.count == count else { return [UInt8](repeating: 0x5A, count: count) }
            queue.removeFirst()
            return first
        }
    }
}

/// A SUN URL template and the NDEF file holding it, with the offsets of its placeholders as
/// ChangeFileSettings wants them (from the start of the file, NLEN included).
struct SUNTemplate {
    let file: [UInt8]
    let piccDataOffset: Int
    let macOffset: Int

    init(
        url: String = "https://tagfix.example/s?picc_data=" + String(repeating: "0", count: 32) + "&cmac="
            + String(repeating: "0", count: 16)
    ) {
        let message = NDEFMessage(records: [NDEFRecord.uri(url)]).encoded()
        let file = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        self.file = file
        piccDataOffset = Self.offset(in: file, after: "picc_data=")
        macOffset = Self.offset(in: file, after: "cmac=")
    }

    /// Where the value after `marker` starts in `file` (0 when absent).
    static func offset(in file: [UInt8], after marker: String) -> Int {
        let needle = Array(marker.utf8)
        guard file.count >= needle.count,
            let start = (0...(file.count - needle.count)).first(where: { Array(file[$0..<$0 + needle.count]) == needle })
        else { return 0 }
        return start + needle.count
    }

    /// SDM with encrypted PICC data (meta-read key 2), SDMMAC under file-read key 1 over an
    /// empty input, counter retrieval with key 1: the layout of AN12196's example.
    var settings: NTAG424FileSettings {
        NTAG424FileSettings(
            commMode: .plain, read: 0x0E, write: 0x00, readWrite: 0x00, change: 0x00,
            sdm: .init(
                counterRetrieval: 1, metaRead: 2, fileRead: 1, piccDataOffset: piccDataOffset, macInputOffset: macOffset,
                macOffset: macOffset))
    }
}

/// An in-process commander on an emulated tag.
private func commander(_ tag: EmulatedNTAG424Tag) -> NTAG424Commander {
    NTAG424Commander { apdu in
        guard case .data(let answer) = tag.transceive(apdu) else { throw NTAG424Error.transport("no answer") }
        return answer
    }
}

/// The URL a plain reader gets from the NDEF file.
private func readURL(_ commands: inout NTAG424Commander) throws -> String {
    // One selection (one tap), the whole file: one counter.
    let file = try commands.readBinary(fileID: 0xE104, count: 256)
    let length = Int(file[0]) << 8 | Int(file[1])
    return try #require(try NDEFMessage(bytes: Array(file[2..<2 + length])).firstURL)
}

@Suite("Emulated NTAG 424 DNA")
struct NTAG424EmulatorTests {
    let uid = hex("04DE5F1EACC040")

    /// Factory-fresh tag: write the template, authenticate with the factory key, turn SDM on,
    /// then three reads: each URL verifies with the SUN verifier and the counter rises.
    @Test func provisionThenThreeSUNReads() throws {
        let tag = try EmulatedNTAG424Tag(uid: uid)
        var commands = commander(tag)
        let template = SUNTemplate()
        try commands.selectApplication()
        try commands.updateBinary(fileID: 0xE104, template.file)
        try commands.selectApplication()
        try commands.authenticate(keyNumber: 0, key: .zero)
        try commands.changeFileSettings(file: 2, template.settings)
        #expect(try commands.getFileSettings(file: 2) == template.settings)
        #expect(tag.snapshot.ndefSettings == template.settings)

        let verifier = SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero))
        var counters: [UInt32] = []
        var urls: Set<String> = []
        for _ in 0..<3 {
            // Each read is a new selection of the file, as each tap is.
            let url = try readURL(&commands)
            let result = verifier.verify(url: url)
            #expect(result.valid, "\(url): \(String(describing: result.failure))")
            #expect(result.uid == uid)
            counters.append(result.counter ?? 0)
            urls.insert(url)
        }
        #expect(counters == [1, 2, 3])
        #expect(urls.count == 3)
        #expect(tag.snapshot.sdmReadCounter == 3)

        try commands.selectApplication()
        try commands.authenticate(keyNumber: 1, key: .zero)
        #expect(try commands.getFileCounters(file: 2) == 3)
    }

    /// Reads within one selection share a counter: the Type 4 read procedure reads NLEN, then
    /// the message in chunks, and must see one consistent mirror.
    @Test func oneSelectionOneCounter() throws {
        let template = SUNTemplate()
        let tag = try EmulatedNTAG424Tag(uid: uid, ndefFile: template.file, ndefSettings: template.settings)
        for tap in 1...3 {
            tag.reset()
            #expect(tag.transceive(NTAG424APDU.selectApplication) == .data([0x90, 0x00]))
            #expect(tag.transceive(NTAG424APDU.selectFile(0xE104)) == .data([0x90, 0x00]))
            var file: [UInt8] = []
            for offset in stride(from: 0, to: template.file.count, by: 16) {
                guard case .data(let answer) = tag.transceive([0x00, 0xB0, 0x00, UInt8(offset), 16]) else { return }
                file += answer.dropLast(2)
            }
            let url = try #require(try NDEFMessage(bytes: Array(file[2..<template.file.count])).firstURL)
            let result = SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero)).verify(url: url)
            #expect(result.valid && result.counter == UInt32(tap))
        }
    }

    @Test func wrongKeyFailsWith91AE() throws {
        let tag = try EmulatedNTAG424Tag(
            uid: uid, keys: [AES128Key(hex: "000102030405060708090A0B0C0D0E0F")!] + [AES128Key](repeating: .zero, count: 4))
        var commands = commander(tag)
        try commands.selectApplication()
        #expect(throws: NTAG424Error.status(command: 0xAF, sw1: 0x91, sw2: 0xAE)) { try commands.authenticate(keyNumber: 0, key: .zero) }
        #expect(commands.session == nil)
        // Key 1 is still the factory key.
        try commands.authenticate(keyNumber: 1, key: .zero)
        #expect(commands.session != nil)
        // No such key.
        #expect(throws: NTAG424Error.status(command: 0x71, sw1: 0x91, sw2: 0x40)) { try commands.authenticate(keyNumber: 7, key: .zero) }
    }

    /// A MAC'd command with one bit of its MAC flipped: 91 1E, and the session is gone (the next
    /// secure command is refused for want of authentication).
    @Test func badCommandMACIs911E() throws {
        let template = SUNTemplate()
        let tag = try EmulatedNTAG424Tag(uid: uid, ndefFile: template.file)
        var commands = commander(tag)
        try commands.selectApplication()
        try commands.authenticate(keyNumber: 0, key: .zero)
        let session = try #require(commands.session)
        var apdu = try session.apdu(0x5F, header: [0x02], data: template.settings.encoded(), mode: .full)
        apdu[apdu.count - 2] ^= 0x01
        #expect(tag.transceive(apdu) == .data([0x91, 0x1E]))
        #expect(tag.snapshot.ndefSettings == .factoryNDEF)
        let retry = try session.apdu(0x5F, header: [0x02], data: template.settings.encoded(), mode: .full)
        #expect(tag.transceive(retry) == .data([0x91, 0xAE]))
        #expect(tag.snapshot.ndefSettings == .factoryNDEF)
    }

    /// The emulator answers AN12196's authentication and ChangeFileSettings byte for byte when
    /// its RndB and TI are the example's (see TagFixCryptoTests' AN12196Commands).
    @Test func replaysAN12196() throws {
        let random = FixedRandom([hex("B9E2FC789B64BF237CCCAA20EC7E6E48"), hex("9D00C4DF")])
        let tag = try EmulatedNTAG424Tag(uid: uid, random: { random.next($0) })
        #expect(tag.transceive(NTAG424APDU.selectApplication) == .data([0x90, 0x00]))
        #expect(tag.transceive(hex("9071000002000000")) == .data(hex("A04C124213C186F22399D33AC2A3021591AF")))
        #expect(
            tag.transceive(hex("90AF00002035C3E05A752E0144BAC0DE51C1F22C56B34408A23D8AEA266CAB947EA8E0118D00"))
                == .data(hex("3FA64DB5446D1F34CD6EA311167F5E4985B89690C04A05F17FA7AB2F081206639100")))
        // One MAC'd command moves CmdCtr to 1, where the note's ChangeFileSettings runs.
        var session = NTAG424Session(
            encKey: AES128Key(hex: "1309C877509E5A215007FF0ED19CA564")!, macKey: AES128Key(hex: "4C6626F5E72EA694202139295C7A7FC7")!,
            ti: hex("9D00C4DF"))
        guard case .data(let settingsAnswer) = tag.transceive(try session.apdu(0xF5, header: [0x02], mode: .mac)) else { return }
        _ = try session.answer(to: 0xF5, settingsAnswer, mode: .mac)
        #expect(
            tag.transceive(hex("905F0000190261B6D97903566E84C3AE5274467E89EAD799B7C1A0EF7A0400")) == .data(hex("57BFF87B1241E93D9100")))
        let sdm = try #require(tag.snapshot.ndefSettings.sdm)
        #expect(sdm.piccDataOffset == 0x20 && sdm.macOffset == 0x43 && sdm.metaRead == 2 && sdm.fileRead == 1)
    }

    /// ChangeKey of key 2 (XOR with the old key, CRC32) and of key 0 (the session's own key: the
    /// session ends); the new key 0 authenticates, the factory key no longer does.
    @Test func changeKeys() throws {
        let tag = try EmulatedNTAG424Tag(uid: uid)
        var commands = commander(tag)
        let key0 = AES128Key(hex: "5004BF991F408672B1EF00F08F9E8647")!
        let key2 = AES128Key(hex: "F3847D627727ED3BC9C4CC050489B966")!
        try commands.selectApplication()
        try commands.authenticate(keyNumber: 0, key: .zero)
        try commands.changeKey(number: 2, to: key2, from: .zero, version: 1)
        try commands.changeKey(number: 0, to: key0, from: .zero, version: 1)
        #expect(commands.session == nil)
        #expect(tag.snapshot.keys[0] == key0 && tag.snapshot.keys[2] == key2 && tag.snapshot.keyVersions == [1, 0, 1, 0, 0])
        #expect(throws: NTAG424Error.status(command: 0xAF, sw1: 0x91, sw2: 0xAE)) { try commands.authenticate(keyNumber: 0, key: .zero) }
        try commands.authenticate(keyNumber: 0, key: key0)
        try commands.authenticate(keyNumber: 2, key: key2)
        // ChangeKey needs key 0's session.
        #expect(throws: NTAG424Error.status(command: 0xC4, sw1: 0x91, sw2: 0xAE)) {
            try commands.changeKey(number: 3, to: key2, from: .zero, version: 1)
        }
    }

    /// A wrong old key in ChangeKey of another key: the CRC of the XOR-recovered key fails (91 1E).
    @Test func changeKeyWithWrongOldKeyIsRefused() throws {
        let tag = try EmulatedNTAG424Tag(uid: uid)
        var commands = commander(tag)
        try commands.selectApplication()
        try commands.authenticate(keyNumber: 0, key: .zero)
        #expect(throws: NTAG424Error.status(command: 0xC4, sw1: 0x91, sw2: 0x1E)) {
            try commands.changeKey(
                number: 3, to: AES128Key(hex: "F3847D627727ED3BC9C4CC050489B966")!, from: AES128Key(hex: "01".padding(32))!, version: 1)
        }
        #expect(tag.snapshot.keys[3] == .zero)
    }

    /// Commands whose access condition is a key are refused without that key's session, with
    /// the datasheet's status words; nothing changes.
    @Test func refusedWithoutTheRightSession() throws {
        let template = SUNTemplate()
        let tag = try EmulatedNTAG424Tag(uid: uid, ndefFile: template.file)
        // Authentication needs the application selected.
        #expect(tag.transceive(hex("9071000002000000")) == .data([0x91, 0x9D]))
        #expect(tag.transceive(NTAG424APDU.selectApplication) == .data([0x90, 0x00]))
        // ChangeFileSettings (change: key 0) and ChangeKey without a session: 91 AE.
        #expect(tag.transceive(NTAG424APDU.native(0x5F, [0x02] + template.settings.encoded())) == .data([0x91, 0xAE]))
        #expect(tag.transceive(NTAG424APDU.native(0xC4, [0x01] + [UInt8](repeating: 0, count: 40))) == .data([0x91, 0xAE]))
        // GetFileCounters on a file without SDM: 91 9D.
        #expect(tag.transceive(NTAG424APDU.native(0xF6, [0x02])) == .data([0x91, 0x9D]))
        // The proprietary file (read: key 2) cannot be read in plain: 69 82.
        #expect(tag.transceive(NTAG424APDU.selectFile(0xE105)) == .data([0x90, 0x00]))
        #expect(tag.transceive([0x00, 0xB0, 0x00, 0x00, 0x10]) == .data([0x69, 0x82]))
        // A session with key 1 is not enough for ChangeFileSettings of file 2 (change: key 0).
        var commands = commander(tag)
        try commands.selectApplication()
        try commands.authenticate(keyNumber: 1, key: .zero)
        #expect(throws: NTAG424Error.status(command: 0x5F, sw1: 0x91, sw2: 0xAE)) {
            try commands.changeFileSettings(file: 2, template.settings)
        }
        #expect(tag.snapshot.ndefSettings == .factoryNDEF && tag.snapshot.keys == [AES128Key](repeating: .zero, count: 5))
    }

    @Test func getVersion() throws {
        let tag = try EmulatedNTAG424Tag(uid: uid)
        let version = try commander(tag).getVersion()
        #expect(version.count == 28)
        #expect(Array(version[0..<7]) == hex("04040230001105") && Array(version[14..<21]) == uid)
    }

    /// Plain mirroring (UID and counter in clear) with the MAC over the URL from the UID on.
    @Test func plainMirroringVerifies() throws {
        let url =
            "https://tagfix.example/p?uid=" + String(repeating: "0", count: 14) + "&ctr=000000&cmac=" + String(repeating: "0", count: 16)
        let template = SUNTemplate(url: url)
        func offset(_ marker: String) -> Int { SUNTemplate.offset(in: template.file, after: marker) }
        let settings = NTAG424FileSettings(
            commMode: .plain, read: 0x0E, write: 0x0E, readWrite: 0x0E, change: 0x00,
            sdm: .init(
                metaRead: 0x0E, fileRead: 0, uidOffset: offset("uid="), readCounterOffset: offset("ctr="), macInputOffset: offset("uid="),
                macOffset: template.macOffset))
        let tag = try EmulatedNTAG424Tag(uid: uid, ndefFile: template.file, ndefSettings: settings, sdmReadCounter: 41)
        var commands = commander(tag)
        try commands.selectApplication()
        let read = try readURL(&commands)
        #expect(read.contains("uid=04DE5F1EACC040&ctr=00002A&"), "\(read)")
        let result = SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero), names: SUNParameterNames(macInputFrom: "uid")).verify(
            url: read)
        #expect(result.valid && result.counter == 42)
    }

    /// AN12196's SDMENCFileData example (§3.4.4.2; the URL TagFixCryptoTests' SUN tests verify)
    /// reproduced byte for byte: UID 04958CAA5C5E80, SDMReadCtr 8, all-zero keys, file data
    /// "xxxxxxxxxxxxxxxx", the MAC over "enc" through "&cmac=", and the PICCData padding of the
    /// example (A243C86DFC, read by decrypting its PICC data) as the tag's random bytes.
    @Test func an12196EncryptedFileDataExampleReproduced() throws {
        let url =
            "https://www.my424dna.com/?picc_data=" + String(repeating: "0", count: 32) + "&enc=xxxxxxxxxxxxxxxx"
            + String(repeating: "0", count: 16)
            + "&cmac=" + String(repeating: "0", count: 16)
        let template = SUNTemplate(url: url)
        let enc = SUNTemplate.offset(in: template.file, after: "enc=")
        let settings = NTAG424FileSettings(
            commMode: .plain, read: 0x0E, write: 0x0E, readWrite: 0x0E, change: 0x00,
            sdm: .init(
                encryptFileData: true, metaRead: 0, fileRead: 0, piccDataOffset: template.piccDataOffset, macInputOffset: enc,
                macOffset: template.macOffset, encOffset: enc, encLength: 32))
        let random = FixedRandom([hex("A243C86DFC")])
        let tag = try EmulatedNTAG424Tag(
            uid: hex("04958CAA5C5E80"), ndefFile: template.file, ndefSettings: settings, sdmReadCounter: 7, random: { random.next($0) })
        var commands = commander(tag)
        try commands.selectApplication()
        #expect(
            try readURL(&commands)
                == "https://www.my424dna.com/?picc_data=FD91EC264309878BE6345CBE53BADF40&enc=CEE9A53E3E463EF1F459635736738962&cmac=ECC1E7F6C6C73BF6"
        )
    }

    /// A tag declared in TagFix tag JSON, provisioned with other keys: it reads a valid SUN under
    /// them, and not under the factory key.
    @Test func declaredInTagJSON() throws {
        let template = SUNTemplate()
        let metaKey = "00112233445566778899AABBCCDDEEFF", fileKey = "0F0E0D0C0B0A09080706050403020100"
        let json = """
            {"chip": "NTAG 424 DNA", "uid_hex": "04DE5F1EACC040", "ndef_file_hex": "\(SUNHex.encode(template.file))",
             "ntag424": {"keys_hex": ["\(String(repeating: "0", count: 32))", "\(fileKey)", "\(metaKey)", "\(String(repeating: "0", count: 32))",
              "\(String(repeating: "0", count: 32))"],
              "ndef_file_settings_hex": "\(SUNHex.encode(template.settings.encoded()))", "sdm_read_counter": 60}}
            """
        let image = try TagDump.load(Array(json.utf8))
        let tag = try #require(try image.emulatedTag() as? EmulatedNTAG424Tag)
        var commands = commander(tag)
        try commands.selectApplication()
        let url = try readURL(&commands)
        let good = SUNVerifier(metaReadKey: AES128Key(hex: metaKey)!, fileReadKey: .fixed(AES128Key(hex: fileKey)!)).verify(url: url)
        #expect(good.valid && good.counter == 61)
        #expect(!SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero)).verify(url: url).valid)
        #expect(throws: DataFileError.self) {
            try TagDump.load(Array(#"{"uid_hex": "04DE5F1EACC040", "ntag424": {"key_hex": []}}"#.utf8))
        }
    }
}

extension String {
    fileprivate func padding(_ count: Int) -> String { self + String(repeating: "0", count: max(0, count - self.count)) }
}
