import Foundation
import TagFixCore
import Testing

@testable import TagFixCrypto

private func hex(_ text: String) -> [UInt8] { SUNHex.decode(Array(text.utf8))! }

/// The URLs of NXP AN12196's worked SUN examples (Rev. 1.x, §3.4 "Secure Dynamic Messaging" —
/// the PICCData example the note's readers cite as "page 12", the SDMENCFileData example as
/// "page 18"); every key in them is the factory key, all zero.
enum AN12196 {
    /// §3.4.2.2, SUN with encrypted PICC data and an SDMMAC over an empty input:
    /// e = PICCData, c = SDMMAC.
    static let piccURL = "https://ntag.nxp.com/424?e=EF963FF7828658A599F3041510671E88&c=94EED9EE65337086"
    static let piccNames = SUNParameterNames(piccData: "e", cmac: "c")
    /// Its decrypted PICCData: tag C7, UID 04DE5F1EACC040, SDMReadCtr 3D0000 (61), random padding.
    static let piccPlain = "C704DE5F1EACC0403D0000DA5CF60941"
    /// Its SV2 and the session MAC key KSesSDMFileReadMAC = CMAC(KSDMFileRead, SV2).
    static let sv2 = "3CC30001008004DE5F1EACC0403D0000"
    static let sessionMACKey = "3FB5F6E3A807A03D5E3570ACE393776F"

    /// §3.4.4.2, SUN with encrypted PICC data and SDMENCFileData; the MAC input runs from the
    /// file data to the CMAC value (SDMMACInputOffset ≠ SDMMACOffset): "CEE9…8962&cmac=".
    static let fileURL =
        "https://www.my424dna.com/?picc_data=FD91EC264309878BE6345CBE53BADF40&enc=CEE9A53E3E463EF1F459635736738962&cmac=ECC1E7F6C6C73BF6"
    static let fileNames = SUNParameterNames(encryptedFileData: "enc", macInputFrom: "enc")
    /// The step-17 session MAC key of that example.
    static let fileSessionMACKey = "3ED0920E5E6A0320D823D5987FEAFBB1"
}

/// Plain mirroring (UID and counter in clear): the vector NXP-community SUN back ends test
/// against (nfc-developer/sdm-backend, `test_plain_sdm`), factory key; not one of AN12196's tables.
private let plainURL = "https://example.com/t?uid=041E3C8A2D6B80&ctr=000006&cmac=4B00064004B0B3D3"

@Suite struct SUNVerifierTests {
    let factory = SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero), names: AN12196.piccNames)

    @Test func an12196PICCDataExampleVerifies() {
        let result = factory.verify(url: AN12196.piccURL)
        #expect(result == .verified(uid: hex("04DE5F1EACC040"), counter: 61))
        #expect(result.json == #"{"valid":true,"uid":"04DE5F1EACC040","counter":61}"#)
    }

    /// The intermediate values of the same example: decryption, SV2, session key.
    @Test func an12196IntermediateValues() throws {
        let decrypted = try AES128.cbcDecrypt(key: .zero, hex("EF963FF7828658A599F3041510671E88"))
        #expect(decrypted == hex(AN12196.piccPlain))
        let picc = try PICCData(decrypted: decrypted)
        #expect(picc.tag == 0xC7 && picc.uid == hex("04DE5F1EACC040") && picc.counter == 61)
        #expect(picc.sv2 == hex(AN12196.sv2))
        #expect(try CMAC.aes128(key: .zero, picc.sv2) == hex(AN12196.sessionMACKey))
        #expect(factory.sdmMAC(picc, input: []) == hex("94EED9EE65337086"))
    }

    /// Every single-bit flip of the PICC data or the CMAC makes the URL invalid.
    @Test(arguments: 0..<(16 + 8) * 8)
    func anyFlippedBitIsInvalid(bit: Int) throws {
        var picc = hex("EF963FF7828658A599F3041510671E88")
        var mac = hex("94EED9EE65337086")
        if bit < 128 { picc[bit / 8] ^= 1 << (bit % 8) } else { mac[(bit - 128) / 8] ^= 1 << (bit % 8) }
        let url = "https://ntag.nxp.com/424?e=\(SUNHex.encode(picc))&c=\(SUNHex.encode(mac))"
        let result = factory.verify(url: url)
        #expect(!result.valid)
        #expect(result.uid == nil && result.counter == nil)
        if bit >= 128 { #expect(result.failure == .macMismatch) }
        #expect([SUNError.macMismatch, .unknownPICCDataTag(0)].map(\.code).contains(result.failure?.code ?? ""))
    }

    @Test func wrongKeysAreInvalid() {
        let other = AES128Key(hex: "00000000000000000000000000000001")!
        // A wrong file-read key: the PICC data decrypts, the MAC fails.
        #expect(
            SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(other), names: AN12196.piccNames).verify(url: AN12196.piccURL).failure
                == .macMismatch)
        // A wrong meta-read key: the PICC data decrypts to noise.
        let noise = SUNVerifier(metaReadKey: other, fileReadKey: .fixed(.zero), names: AN12196.piccNames).verify(url: AN12196.piccURL)
        #expect(!noise.valid)
        #expect(noise.failure?.code == "unknown_picc_tag" || noise.failure == .macMismatch)
    }

    @Test func an12196EncryptedFileDataExampleVerifies() throws {
        let verifier = SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero), names: AN12196.fileNames)
        let result = verifier.verify(url: AN12196.fileURL)
        #expect(result.valid)
        #expect(result.uid == hex("04958CAA5C5E80"))
        #expect(result.counter == 8)
        #expect(result.fileData == Array("xxxxxxxxxxxxxxxx".utf8))
        let picc = try PICCData(decrypted: AES128.cbcDecrypt(key: .zero, hex("FD91EC264309878BE6345CBE53BADF40")))
        #expect(try CMAC.aes128(key: .zero, picc.sv2) == hex(AN12196.fileSessionMACKey))
    }

    /// The same URL checked with an empty MAC input (the wrong file settings) fails: the input
    /// the settings define is part of what the MAC covers.
    @Test func theMACInputMatters() {
        var names = AN12196.fileNames
        names.macInputFrom = nil
        #expect(
            SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero), names: names).verify(url: AN12196.fileURL).failure == .macMismatch)
        let edited = AN12196.fileURL.replacingOccurrences(of: "enc=CEE9", with: "enc=CEE8")
        #expect(
            SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero), names: AN12196.fileNames).verify(url: edited).failure
                == .macMismatch)
    }

    @Test func plainMirroringVerifies() {
        let verifier = SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero))
        #expect(verifier.verify(url: plainURL) == .verified(uid: hex("041E3C8A2D6B80"), counter: 6))
        // The counter in clear is most significant byte first: 000007 is a replayed MAC with a new counter.
        #expect(verifier.verify(url: plainURL.replacingOccurrences(of: "ctr=000006", with: "ctr=000007")).failure == .macMismatch)
        #expect(verifier.verify(url: plainURL.replacingOccurrences(of: "cmac=4B", with: "cmac=4C")).failure == .macMismatch)
    }

    /// Per-tag keys: a tag whose file-read key is AN10922-diversified from a master key verifies
    /// with the master key and the same suffix, and not with another suffix.
    @Test func diversifiedFileReadKey() throws {
        let master = AES128Key(hex: "00112233445566778899AABBCCDDEEFF")!
        let suffix = hex("3042F54E585020416275")
        let uid = hex("04DE5F1EACC040")
        let tagKey = try KeyDiversification.aes128(master: master, input: uid + suffix)
        // Build the URL the tag would write: encrypted PICC data and its MAC under the tag's key.
        let picc = PICCData(uid: uid, counter: 62)
        let plain = [picc.tag] + picc.sessionContext + [0, 0, 0, 0, 0]
        let encrypted = try AES128.cbcEncrypt(key: .zero, plain)
        let mac = try #require(SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(tagKey)).sdmMAC(picc, input: []))
        let url = "https://x.example/?picc_data=\(SUNHex.encode(encrypted))&cmac=\(SUNHex.encode(mac))"
        #expect(SUNVerifier(metaReadKey: .zero, fileReadKey: .diversified(master: master, suffix: suffix)).verify(url: url).counter == 62)
        #expect(
            SUNVerifier(metaReadKey: .zero, fileReadKey: .diversified(master: master, suffix: [1])).verify(url: url).failure == .macMismatch
        )
        #expect(SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(master)).verify(url: url).failure == .macMismatch)
    }

    @Test func malformedURLsSayWhy() {
        let verifier = SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero))
        #expect(verifier.verify(url: "https://x.example/?cmac=94EED9EE65337086").failure == .missingParameter("picc_data"))
        #expect(verifier.verify(url: "https://x.example/?picc_data=EF96").failure == .missingParameter("cmac"))
        #expect(
            verifier.verify(url: "https://x.example/?picc_data=EF963FF7828658A599F3041510671E8G&cmac=94EED9EE65337086").failure
                == .badHex(parameter: "picc_data"))
        #expect(
            verifier.verify(url: "https://x.example/?picc_data=EF963FF7828658A599F3041510671E&cmac=94EED9EE65337086").failure
                == .wrongLength(parameter: "picc_data", expected: "32 (AES; LRP is not supported)", found: 30))
    }
}
