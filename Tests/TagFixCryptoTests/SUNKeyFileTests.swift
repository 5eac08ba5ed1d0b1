import TagFixCore
import TagFixCrypto
import Testing

/// A key file without `[NAME]` (`key = HEX`, optional `meta_key = HEX`, comments), the form
/// `sun verify --key-file` took before it read the `--sun-keys` format: its set is `default`;
/// errors name the line, never a key.
@Suite struct SUNKeyFileTests {
    @Test func parsesBothKeysAndComments() throws {
        let keyring = try SUNKeyring.parse(
            "# site keys\n\nkey = 000102030405060708090a0b0c0d0e0f  # file read\r\n  meta_key=F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF\n")
        let set = try #require(keyring.sets["default"])
        #expect(keyring.names == ["default"])
        #expect(set.fileReadKey == .fixed(try #require(AES128Key(hex: "000102030405060708090A0B0C0D0E0F"))))
        #expect(set.metaReadKey == AES128Key(hex: "F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF"))
        // Without meta_key, the file-read key is the meta-read key too.
        let alone = try #require(try SUNKeyring.parse("key = 000102030405060708090a0b0c0d0e0f").sets["default"])
        #expect(alone.metaReadKey == AES128Key(hex: "000102030405060708090A0B0C0D0E0F"))
    }

    @Test(arguments: [
        ("", nil, "no key = HEX line"),
        ("meta_key = 000102030405060708090a0b0c0d0e0f\n", 1, "[default] has no key = HEX line"),
        ("key 000102030405060708090a0b0c0d0e0f\n", 1, "expected key = HEX, meta_key = HEX, diversify = HEX or [NAME]"),
        ("\nsecret = 000102030405060708090a0b0c0d0e0f\n", 2, "expected key = HEX, meta_key = HEX, diversify = HEX or [NAME]"),
        ("key = 000102030405060708090a0b0c0d0e0\n", 1, "key is not 32 hex digits (an AES-128 key)"),
        ("key = 000102030405060708090a0b0c0d0e0f\nkey = 000102030405060708090a0b0c0d0e0f\n", 2, "key given twice in [default]"),
    ])
    func errorsNameTheLineNotTheKey(text: String, line: Int?, message: String) {
        #expect(throws: DataFileError(line: line, message: message)) { try SUNKeyring.parse(text) }
    }
}

/// The key sets `verify --sun-keys` reads: one per `[NAME]`, named by registry tags.
@Suite struct SUNKeyringTests {
    @Test func sectionsNameKeySets() throws {
        let keyring = try SUNKeyring.parse(
            """
            # site keys
            key = 00000000000000000000000000000000
            [north-2]
            key = 00112233445566778899AABBCCDDEEFF
            meta_key = FFEEDDCCBBAA99887766554433221100
            diversify = 3042F54E585020416275
            """)
        #expect(keyring.names == ["default", "north-2"])
        #expect(keyring.hasKeys(named: "default") && !keyring.hasKeys(named: "south"))
        let result = keyring.verify(url: AN12196.piccURL, settings: SUNSettings(names: AN12196.piccNames))
        #expect(result?.valid == true && result?.counter == 61)
        #expect(keyring.verify(url: AN12196.piccURL, settings: SUNSettings(keyName: "north-2", names: AN12196.piccNames))?.valid == false)
        #expect(keyring.verify(url: AN12196.piccURL, settings: SUNSettings(keyName: "south")) == nil)
    }

    @Test(arguments: [
        ("[a]\nmeta_key = 00000000000000000000000000000000\n", 1, "no key"),
        ("[a]\nkey = 00\n", 2, "32 hex digits"),
        ("[a]\nkey = 00000000000000000000000000000000\n[a]\nkey = 00000000000000000000000000000000\n", 3, "twice"),
        ("[bad name]\n", 1, "letters"),
        ("key = 00000000000000000000000000000000\ndiversify = 0g\n", 2, "diversify"),
        ("secret = 00000000000000000000000000000000\n", 1, "expected"),
    ])
    func errorsNameTheLine(text: String, line: Int, message: String) {
        do {
            _ = try SUNKeyring.parse(text)
            Issue.record("parsed \(text)")
        } catch {
            #expect(error.line == line, "\(error)")
            #expect(error.message.contains(message), "\(error)")
            #expect(!error.message.contains("00000000000000000000000000000000"))
        }
    }
}
