import TagFixCore
import Testing

@testable import TagFixCrypto

private func hex(_ text: String) -> [UInt8] { SUNHex.decode(Array(text.utf8))! }
private func key(_ text: String) -> AES128Key { AES128Key(hex: text)! }

/// AN12196's worked examples of the NTAG 424 DNA command set ("NTAG 424 DNA and NTAG 424 DNA
/// TagTamper features and hints"). The bytes below were read from public implementations that cite
/// the note (table numbers differ between its revisions: rev. 2.0 numbering first, where known)
/// and every value was recomputed independently with Python's `cryptography`
/// (Tests/TagFixCryptoTests/ntag424_an12196.py), so none of them is taken on trust from one copy.
enum AN12196Commands {
    /// AuthenticateEV2First with key 0 (all zero), the example the note walks step by step
    /// (§5.6 in rev. 2.0; "Section 6.6, page 28" of earlier revisions).
    static let rndA = "13C5DB8A5930439FC3DEF9A4C675360F"
    static let rndB = "B9E2FC789B64BF237CCCAA20EC7E6E48"
    static let firstAnswer = "A04C124213C186F22399D33AC2A3021591AF"
    static let secondCommand = "90AF00002035C3E05A752E0144BAC0DE51C1F22C56B34408A23D8AEA266CAB947EA8E0118D00"
    static let secondAnswer = "3FA64DB5446D1F34CD6EA311167F5E4985B89690C04A05F17FA7AB2F081206639100"
    static let ti = "9D00C4DF"
    static let sesAuthENC = "1309C877509E5A215007FF0ED19CA564"
    static let sesAuthMAC = "4C6626F5E72EA694202139295C7A7FC7"

    /// ChangeFileSettings of file 02 in that session at CmdCtr 1, turning on SDM with encrypted
    /// PICC data at offset 0x20 and the MAC at 0x43 (Table 18 in rev. 2.0; some implementers cite
    /// it as Table 19). IVc, the command APDU and the answer's MACt.
    static let changeFileSettingsData = "4000E0C1F121200000430000430000"
    static let changeFileSettingsIV = "3E27082AB2ACC1EF55C57547934E9962"
    static let changeFileSettingsAPDU = "905F0000190261B6D97903566E84C3AE5274467E89EAD799B7C1A0EF7A0400"
    static let changeFileSettingsAnswer = "57BFF87B1241E93D9100"

    /// ChangeKey in another session (TI 7614281A): key 2 from zero to F384…B966, version 1, at
    /// CmdCtr 2 (Table 25, "case 1": not the authenticated key), then key 0 at CmdCtr 3 (Table 26,
    /// "case 2": the authenticated key).
    static let changeKeyTI = "7614281A"
    static let changeKeyENC = "4CF3CB41A22583A61E89B158D252FC53"
    static let changeKeyMAC = "5529860B2FC5FB6154B7F28361D30BF9"
    static let newKey2 = "F3847D627727ED3BC9C4CC050489B966"
    static let newKey2CRC = "789DFADC"
    static let changeKey2APDU = "90C4000029022CF362B7BF4311FF3BE1DAA295E8C68DE09050560D19B9E16C2393AE9CD1FAC75D0CE20BCD1D06E600"
    static let changeKey2Answer = "203BB55D1089D5879100"
    static let newKey0 = "5004BF991F408672B1EF00F08F9E8647"
    static let changeKey0IV = "01602D579423B2797BE8B478B0B4D27B"
    static let changeKey0APDU = "90C400002900C0EB4DEEFEDDF0B513A03A95A75491818580503190D4D05053FF75668A01D6FDA6610234BDED643200"

    /// GetFileSettings in CommMode.MAC (§5.3, "page 21" of earlier revisions): SesAuthMACKey
    /// 8248…6CB6, TI 7A21085E, CmdCtr 0; the answer states SDM with encrypted file data.
    static let getFileSettingsAPDU = "90F5000009026597A457C8CD442C00"
    static let getFileSettingsAnswer = "0040EEEE000100D1FE001F00004400004400002000006A00002A474282E7A479869100"
}

@Suite("NTAG 424 DNA: AN12196 vectors")
struct NTAG424VectorTests {
    @Test func authenticationReaderSide() throws {
        var reader = NTAG424ReaderAuthentication(keyNumber: 0, key: .zero, rndA: hex(AN12196Commands.rndA))
        #expect(reader.firstCommand == hex("9071000002000000"))
        #expect(try reader.secondCommand(answering: hex(AN12196Commands.firstAnswer)) == hex(AN12196Commands.secondCommand))
        let session = try reader.finish(answering: hex(AN12196Commands.secondAnswer))
        #expect(session.ti == hex(AN12196Commands.ti))
        #expect(session.encKey == key(AN12196Commands.sesAuthENC))
        #expect(session.macKey == key(AN12196Commands.sesAuthMAC))
        #expect(session.commandCounter == 0)
    }

    @Test func authenticationTagSide() throws {
        let tag = NTAG424TagAuthentication(keyNumber: 0, key: .zero, rndB: hex(AN12196Commands.rndB), ti: hex(AN12196Commands.ti))
        #expect(try tag.firstAnswer() == Array(hex(AN12196Commands.firstAnswer).dropLast(2)))
        let command = hex(AN12196Commands.secondCommand)
        let result = try #require(try tag.verify(Array(command[5..<37])))
        #expect(result.answer == Array(hex(AN12196Commands.secondAnswer).dropLast(2)))
        #expect(result.session.encKey == key(AN12196Commands.sesAuthENC) && result.session.macKey == key(AN12196Commands.sesAuthMAC))
    }

    @Test func sessionKeysFromRandoms() throws {
        let session = try NTAG424Session(key: .zero, rndA: hex(AN12196Commands.rndA), rndB: hex(AN12196Commands.rndB), ti: [0, 0, 0, 0])
        #expect(session.encKey.bytes == hex(AN12196Commands.sesAuthENC))
        #expect(session.macKey.bytes == hex(AN12196Commands.sesAuthMAC))
    }

    /// A reader holding the wrong key: the tag finds RndB′ wrong (it answers 91 AE).
    @Test func wrongKeyIsRefusedByTheTag() throws {
        let tag = NTAG424TagAuthentication(keyNumber: 0, key: .zero, rndB: hex(AN12196Commands.rndB), ti: hex(AN12196Commands.ti))
        var reader = NTAG424ReaderAuthentication(
            keyNumber: 0, key: key("00000000000000000000000000000001"), rndA: hex(AN12196Commands.rndA))
        let second = try reader.secondCommand(answering: try tag.firstAnswer() + [0x91, 0xAF])
        #expect(try tag.verify(Array(second[5..<37])) == nil)
    }

    @Test func changeFileSettings() throws {
        var session = NTAG424Session(
            encKey: key(AN12196Commands.sesAuthENC), macKey: key(AN12196Commands.sesAuthMAC), ti: hex(AN12196Commands.ti), commandCounter: 1
        )
        #expect(try session.commandIV() == hex(AN12196Commands.changeFileSettingsIV))
        let settings = try #require(NTAG424FileSettings(encoded: hex(AN12196Commands.changeFileSettingsData)))
        #expect(settings.sdm?.piccDataOffset == 0x20 && settings.sdm?.macInputOffset == 0x43 && settings.sdm?.macOffset == 0x43)
        #expect(settings.sdm?.metaRead == 2 && settings.sdm?.fileRead == 1 && settings.sdm?.counterRetrieval == 1)
        #expect(settings.encoded() == hex(AN12196Commands.changeFileSettingsData))
        #expect(
            try session.apdu(0x5F, header: [0x02], data: settings.encoded(), mode: .full) == hex(AN12196Commands.changeFileSettingsAPDU))
        #expect(try session.answer(to: 0x5F, hex(AN12196Commands.changeFileSettingsAnswer), mode: .mac) == [])
        #expect(session.commandCounter == 2)
    }

    @Test func changeKeyOfAnotherKey() throws {
        #expect(NTAG424ChangeKey.crc32(hex(AN12196Commands.newKey2)) == hex(AN12196Commands.newKey2CRC))
        var session = NTAG424Session(
            encKey: key(AN12196Commands.changeKeyENC), macKey: key(AN12196Commands.changeKeyMAC), ti: hex(AN12196Commands.changeKeyTI),
            commandCounter: 2)
        let data = NTAG424ChangeKey.keyData(
            keyNumber: 2, authenticatedKey: 0, newKey: key(AN12196Commands.newKey2), oldKey: .zero, version: 1)
        #expect(try session.apdu(0xC4, header: [0x02], data: data, mode: .full) == hex(AN12196Commands.changeKey2APDU))
        #expect(try session.answer(to: 0xC4, hex(AN12196Commands.changeKey2Answer), mode: .mac) == [])
        #expect(session.commandCounter == 3)
        // The same session goes on with key 0 (CmdCtr 3): its own key, sent without XOR or CRC.
        #expect(try session.commandIV() == hex(AN12196Commands.changeKey0IV))
        let data0 = NTAG424ChangeKey.keyData(
            keyNumber: 0, authenticatedKey: 0, newKey: key(AN12196Commands.newKey0), oldKey: .zero, version: 1)
        #expect(data0 == hex(AN12196Commands.newKey0) + [0x01])
        #expect(try session.apdu(0xC4, header: [0x00], data: data0, mode: .full) == hex(AN12196Commands.changeKey0APDU))
    }

    @Test func getFileSettingsInMACMode() throws {
        var session = NTAG424Session(encKey: .zero, macKey: key("8248134A386E86EB7FAF54A52E536CB6"), ti: hex("7A21085E"))
        #expect(try session.apdu(0xF5, header: [0x02], mode: .mac) == hex(AN12196Commands.getFileSettingsAPDU))
        let data = try session.answer(to: 0xF5, hex(AN12196Commands.getFileSettingsAnswer), mode: .mac)
        let settings = try #require(NTAG424FileSettings(getFileSettingsData: data))
        #expect(NTAG424FileSettings.fileSize(getFileSettingsData: data) == 256)
        let sdm = try #require(settings.sdm)
        #expect(
            sdm.encryptFileData && sdm.piccDataOffset == 0x1F && sdm.encOffset == 0x44 && sdm.encLength == 0x20 && sdm.macOffset == 0x6A)
        #expect(settings.getFileSettingsData(fileSize: 256) == data)
    }

    /// An answer whose MAC is one bit off is refused and the counter does not move.
    @Test func alteredAnswerMACIsRefused() throws {
        var session = NTAG424Session(
            encKey: key(AN12196Commands.sesAuthENC), macKey: key(AN12196Commands.sesAuthMAC), ti: hex(AN12196Commands.ti), commandCounter: 1
        )
        var answer = hex(AN12196Commands.changeFileSettingsAnswer)
        answer[7] ^= 0x01
        #expect(throws: NTAG424Error.responseMAC(command: 0x5F)) { try session.answer(to: 0x5F, answer, mode: .mac) }
        #expect(session.commandCounter == 1)
        #expect(throws: NTAG424Error.status(command: 0x5F, sw1: 0x91, sw2: 0x1E)) {
            try session.answer(to: 0x5F, [0x91, 0x1E], mode: .mac)
        }
    }

    /// SUN session keys from AN12196 §3.3 Table 1 (SV1 / SV2 for UID 04C767F2066180, SDMReadCtr 1,
    /// SDM file-read key 5ACE…205B).
    @Test func sunSessionKeysTable1() throws {
        let picc = PICCData(uid: hex("04C767F2066180"), counter: 1)
        let fileReadKey = key("5ACE7E50AB65D5D51FD5BF5A16B8205B")
        #expect(picc.sv1 == hex("C33C0001008004C767F2066180010000"))
        #expect(try CMAC.aes128(key: fileReadKey, picc.sv1) == hex("66DA61797E23DECA5D8ECA13BBADF7A9"))
        #expect(try CMAC.aes128(key: fileReadKey, picc.sv2) == hex("3A3E8110E05311F7A3FCF0D969BF2B48"))
    }

    @Test func paddingRoundTrips() {
        for count in 0..<40 {
            let data = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 1) }
            let padded = ISO9797Padding.pad(data)
            #expect(padded.count % 16 == 0 && padded.count > data.count)
            #expect(ISO9797Padding.unpad(padded) == data)
        }
        #expect(ISO9797Padding.unpad([UInt8](repeating: 0, count: 16)) == nil)
    }
}
