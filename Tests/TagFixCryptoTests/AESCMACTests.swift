import TagFixCore
import Testing

@testable import TagFixCrypto

private func hex(_ text: String) -> [UInt8] {
    SUNHex.decode(Array(text.filter { $0 != " " }.utf8))!
}

private func key(_ text: String) -> AES128Key { AES128Key(hex(text))! }

@Suite struct AESTests {
    /// FIPS-197 Appendix B (cipher example) and Appendix C.1 (AES-128 example vector).
    @Test(arguments: [
        ("2b7e151628aed2a6abf7158809cf4f3c", "3243f6a8885a308d313198a2e0370734", "3925841d02dc09fbdc118597196a0b32"),
        ("000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff", "69c4e0d86a7b0430d8cdb78070b4c55a"),
    ])
    func fips197(keyHex: String, plain: String, cipher: String) throws {
        #expect(try AES128.encryptBlock(key: key(keyHex), hex(plain)) == hex(cipher))
        #expect(try AES128.decryptBlock(key: key(keyHex), hex(cipher)) == hex(plain))
    }

    /// NIST SP 800-38A F.2.1 / F.2.2, CBC-AES128 (IV 000102…0F), all four blocks.
    @Test func sp800_38aCBC() throws {
        let k = key("2b7e151628aed2a6abf7158809cf4f3c")
        let iv = hex("000102030405060708090a0b0c0d0e0f")
        let plain = hex(
            "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51 30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710"
        )
        let cipher = hex(
            "7649abac8119b246cee98e9b12e9197d 5086cb9b507219ee95db113a917678b2 73bed6b8e3c1743b7116e69e22229516 3ff1caa1681fac09120eca307586e1a7"
        )
        #expect(try AES128.cbcEncrypt(key: k, iv: iv, plain) == cipher)
        #expect(try AES128.cbcDecrypt(key: k, iv: iv, cipher) == plain)
    }

    /// The block contexts are pooled and re-keyed only when the key changes: keys and directions
    /// interleaved, on several threads at once, still give FIPS-197's answers every time.
    @Test func pooledContextsFollowTheirKeys() async throws {
        let vectors = [
            (key("2b7e151628aed2a6abf7158809cf4f3c"), hex("3243f6a8885a308d313198a2e0370734"), hex("3925841d02dc09fbdc118597196a0b32")),
            (key("000102030405060708090a0b0c0d0e0f"), hex("00112233445566778899aabbccddeeff"), hex("69c4e0d86a7b0430d8cdb78070b4c55a")),
        ]
        let wrong = try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<200 {
                        let (k, plain, cipher) = vectors[(round + worker) % 2]
                        if try AES128.encryptBlock(key: k, plain) != cipher { wrong += 1 }
                        if try AES128.decryptBlock(key: k, cipher) != plain { wrong += 1 }
                        if try CMAC.aes128(key: k, plain) != CMAC.aes128(key: k, plain) { wrong += 1 }
                    }
                    return wrong
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(wrong == 0)
    }

    @Test func partialBlocksAreRefused() {
        #expect(throws: CryptoError.self) { try AES128.cbcEncrypt(key: .zero, [1, 2, 3]) }
        #expect(throws: CryptoError.self) { try AES128.encryptBlock(key: .zero, [UInt8](repeating: 0, count: 15)) }
    }

    @Test func keysNeverPrint() {
        let k = key("2b7e151628aed2a6abf7158809cf4f3c")
        #expect("\(k)" == "AES128Key(redacted)")
        #expect(String(reflecting: k) == "AES128Key(redacted)")
        #expect(AES128Key(hex: "00") == nil)
        #expect(AES128Key(hex: "zz000000000000000000000000000000") == nil)
    }
}

@Suite struct CMACTests {
    /// RFC 4493 §4 (= NIST SP 800-38B D.1) AES-128 examples 1–4: 0, 16, 40 and 64 bytes.
    @Test(arguments: [
        (0, "bb1d6929e95937287fa37d129b756746"),
        (16, "070a16b46b4d4144f79bdd9dd04a287c"),
        (40, "dfa66747de9ae63030ca32611497c827"),
        (64, "51f0bebf7e3b9d92fc49741779363cfe"),
    ])
    func rfc4493(length: Int, tag: String) throws {
        let message = hex(
            "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51 30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710"
        )
        #expect(try CMAC.aes128(key: key("2b7e151628aed2a6abf7158809cf4f3c"), Array(message.prefix(length))) == hex(tag))
    }

    /// RFC 4493 §4, subkey generation: K1 and K2.
    @Test func subkeys() throws {
        let (k1, k2) = try CMAC.subkeys(key: key("2b7e151628aed2a6abf7158809cf4f3c"))
        #expect(k1 == hex("fbeed618357133667c85e08f7236a8de"))
        #expect(k2 == hex("f7ddac306ae266ccf90bc11ee46d513b"))
    }
}

@Suite struct KeyDiversificationTests {
    /// AN10922 §2.2.1 (AES-128 key diversification example): master key 00112233…EEFF, UID
    /// 04782E21801D80, AID 3042F5, system identifier "NXP Abu" (4E585020416275); the input is
    /// padded (17 bytes), so K2 masks the last block.
    @Test func an10922Example() throws {
        let diversified = try KeyDiversification.aes128(
            master: key("00112233445566778899AABBCCDDEEFF"), uid: hex("04782E21801D80"), applicationID: hex("3042F5"),
            systemIdentifier: hex("4E585020416275"))
        #expect(diversified == key("A8DD63A3B89D54B37CA802473FDA9175"))
    }

    /// A 31-byte input is not padded: the result is then plain CMAC over 0x01 ‖ M (K1 path), and
    /// a padded one of 16–30 bytes equals plain CMAC too; only short inputs differ from CMAC.
    @Test func unpaddedAndPaddedPathsAgainstPlainCMAC() throws {
        let master = key("00112233445566778899AABBCCDDEEFF")
        for length in [16, 20, 30, 31] {
            let m = (0..<length).map { UInt8($0 &* 7 &+ 3) }
            #expect(try KeyDiversification.aes128(master: master, input: m).bytes == CMAC.aes128(key: master, [0x01] + m))
        }
        let short = hex("04782E21801D80")
        #expect(try KeyDiversification.aes128(master: master, input: short).bytes != CMAC.aes128(key: master, [0x01] + short))
    }

    @Test func inputLengthIsChecked() {
        #expect(throws: KeyDiversification.Failure.inputLength(0)) { try KeyDiversification.aes128(master: .zero, input: []) }
        #expect(throws: KeyDiversification.Failure.inputLength(32)) {
            try KeyDiversification.aes128(master: .zero, input: [UInt8](repeating: 1, count: 32))
        }
    }
}
