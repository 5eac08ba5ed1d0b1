import TagFixCore
import TagFixCrypto
import Testing

/// Key files: `key = HEX`, optional `meta_key = HEX`, comments; errors name the line, never a key.
@Suite struct SUNKeyFileTests {
    @Test func parsesBothKeysAndComments() throws {
        let file = try SUNKeyFile.parse(
            "# site keys\n\nkey = 000102030405060708090a0b0c0d0e0f  # file read\r\n  meta_key=F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF\n")
        #expect(file.key == AES128Key(hex: "000102030405060708090A0B0C0D0E0F"))
        #expect(file.metaKey == AES128Key(hex: "F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF"))
        #expect(try SUNKeyFile.parse("key = 000102030405060708090a0b0c0d0e0f").metaKey == nil)
    }

    @Test(arguments: [
        ("", nil, "no key = HEX line"),
        ("meta_key = 000102030405060708090a0b0c0d0e0f\n", nil, "no key = HEX line"),
        ("key 000102030405060708090a0b0c0d0e0f\n", 1, "expected key = HEX or meta_key = HEX"),
        ("\nsecret = 000102030405060708090a0b0c0d0e0f\n", 2, "expected key = HEX or meta_key = HEX"),
        ("key = 000102030405060708090a0b0c0d0e0\n", 1, "key is not 32 hex digits (an AES-128 key)"),
        ("key = 000102030405060708090a0b0c0d0e0f\nkey = 000102030405060708090a0b0c0d0e0f\n", 2, "key given twice"),
    ])
    func errorsNameTheLineNotTheKey(text: String, line: Int?, message: String) {
        #expect(throws: DataFileError(line: line, message: message)) { try SUNKeyFile.parse(text) }
    }
}
