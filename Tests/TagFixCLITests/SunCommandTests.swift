import Foundation
import TagFixCore
import TagFixCrypto
import Testing

/// `tagfix sun verify`: AN12196's example through the command line, the exit codes, and keys kept
/// out of every output line.
@Suite struct SunCommandTests {
    /// AN12196 §3.4.2.2: factory keys (all zero), PICC data in e=, SDMMAC in c=.
    static let an12196 = "https://ntag.nxp.com/424?e=EF963FF7828658A599F3041510671E88&c=94EED9EE65337086"
    static let zero = "00000000000000000000000000000000"

    /// A SUN URL with encrypted PICC data (UID 04112233445580, counter 7) and its MAC, both
    /// under `keyHex` (the meta-read and the file-read key alike).
    static func encryptedURL(keyHex: String) throws -> String {
        let key = try #require(AES128Key(hex: keyHex))
        let picc = PICCData(uid: [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x80], counter: 7)
        let encrypted = try AES128.cbcEncrypt(key: key, [picc.tag] + picc.sessionContext + [0, 0, 0, 0, 0])
        let mac = try #require(SUNVerifier(metaReadKey: key, fileReadKey: .fixed(key)).sdmMAC(picc, input: []))
        return "https://x.example/t?picc_data=\(SUNHex.encode(encrypted))&cmac=\(SUNHex.encode(mac))"
    }

    @Test func an12196ExampleIsValid() async {
        let result = await run(["sun", "verify", Self.an12196, "--key", Self.zero, "--picc-param", "e", "--cmac-param", "c", "--json"])
        #expect(result.code == 0)
        #expect(result.out == [#"{"valid":true,"uid":"04DE5F1EACC040","counter":61}"#])
        let text = await run(["sun", "verify", Self.an12196, "--key", Self.zero, "--picc-param", "e", "--cmac-param", "c"])
        #expect(text.out == ["valid: UID 04DE5F1EACC040, read counter 61"])
    }

    @Test(arguments: ["e=EF963FF7828658A599F3041510671E89", "c=94EED9EE65337087"])
    func aFlippedBitIsInvalid(edit: String) async {
        let url = Self.an12196.replacingOccurrences(of: String(edit.dropLast()) + (edit.hasPrefix("e") ? "8" : "6"), with: edit)
        #expect(url != Self.an12196)
        let result = await run(["sun", "verify", url, "--key", Self.zero, "--picc-param", "e", "--cmac-param", "c", "--json"])
        #expect(result.code == 65)
        #expect(result.out.count == 1 && result.out[0].hasPrefix(#"{"valid":false,"reason":""#))
        #expect(result.err.first?.hasPrefix("error: URL: ") == true)
    }

    /// A deployment's own key: valid with it, invalid with another, and the key is in no line of
    /// output, stderr included, whatever the outcome.
    @Test func keysNeverAppearInOutput() async throws {
        let keyHex = "5A1B2C3D4E5F60718293A4B5C6D7E8F9"
        let url = try Self.encryptedURL(keyHex: keyHex)
        let file = try temporaryFile("sun.keys", "# site keys\nkey = \(keyHex.lowercased())\n")
        chmod(file, 0o600)
        var lines: [String] = []
        let cases: [([String], Int32)] = [
            (["--key", keyHex], 0), (["--key-file", file], 0), (["--key", keyHex, "--json"], 0),
            (["--key", Self.zero, "--meta-key", keyHex], 65), (["--key", Self.zero, "--meta-key", keyHex, "--json"], 65),
            (["--key", String(keyHex.dropLast())], 64), (["--key", keyHex, "--meta-key", "zz"], 64),
        ]
        for (arguments, code) in cases {
            let result = await run(["sun", "verify", url] + arguments)
            lines += result.out + result.err
            #expect(result.code == code, "\(arguments.dropFirst(2))")
        }
        #expect(!lines.isEmpty)
        for line in lines {
            #expect(!line.uppercased().contains(keyHex), "a key in output: \(line)")
            #expect(!line.uppercased().contains(String(keyHex.dropLast())))
        }
    }

    @Test func keyFileMustBeTheOwnersAlone() async throws {
        let file = try temporaryFile("sun.keys", "key = \(Self.zero)\n")
        let arguments = ["sun", "verify", Self.an12196, "--key-file", file, "--picc-param", "e", "--cmac-param", "c"]
        chmod(file, 0o644)
        let open = await run(arguments)
        #expect(open.code == 66)
        #expect(open.err.first?.contains("chmod 600") == true)
        chmod(file, 0o600)
        #expect(await run(arguments).code == 0)
        chmod(file, 0o400)
        #expect(await run(arguments).code == 0)
        let missing = await run(["sun", "verify", Self.an12196, "--key-file", file + ".none"])
        #expect(missing.code == 66)
    }

    @Test func aMalformedKeyFileNamesTheLineNotTheKey() async throws {
        let file = try temporaryFile("sun.keys", "key = 0123456789ABCDEF0123456789ABCDE\n")
        chmod(file, 0o600)
        let result = await run(["sun", "verify", Self.an12196, "--key-file", file])
        #expect(result.code == 65)
        #expect(result.err.first == "error: \(file):1: key is not 32 hex digits (an AES-128 key)")
    }

    @Test(arguments: [
        ["sun"], ["sun", "check", an12196, "--key", zero], ["sun", "verify", "--key", zero], ["sun", "verify", an12196],
        ["sun", "verify", an12196, "--key", zero, "--key-file", "/dev/null"], ["sun", "verify", an12196, "--key", "00"],
        ["sun", "verify", an12196, "--key", zero, "--diversify", "0G"],
    ])
    func usageErrors(arguments: [String]) async {
        let result = await run(arguments)
        #expect(result.code == 64)
        #expect(result.out.isEmpty)
    }

    /// --diversify: the tag's key is AN10922-diversified from the master key with UID ‖ HEX.
    @Test func diversifiedKeys() async throws {
        let master = try #require(AES128Key(hex: "00112233445566778899AABBCCDDEEFF"))
        let uid: [UInt8] = [0x04, 0x78, 0x2E, 0x21, 0x80, 0x1D, 0x80]
        let tagKey = try KeyDiversification.aes128(master: master, input: uid + [0x30, 0x42, 0xF5])
        let picc = PICCData(uid: uid, counter: 3)
        let mac = try #require(SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(tagKey)).sdmMAC(picc, input: []))
        let url = "https://x.example/?uid=\(SUNHex.encode(uid))&ctr=000003&cmac=\(SUNHex.encode(mac))"
        let master16 = "00112233445566778899AABBCCDDEEFF"
        #expect(
            await run(["sun", "verify", url, "--key", master16, "--diversify", "3042F5", "--json"]).out == [
                #"{"valid":true,"uid":"04782E21801D80","counter":3}"#
            ])
        #expect(await run(["sun", "verify", url, "--key", master16, "--json"]).code == 65)
    }

    /// The key file `verify --sun-keys` and `serve --sun-keys` read ([NAME] sections, diversify =
    /// HEX) is read by `sun verify --key-file` too; --key-set chooses among several sets.
    @Test func siteKeyFile() async throws {
        let keyHex = "5A1B2C3D4E5F60718293A4B5C6D7E8F9"
        let url = try Self.encryptedURL(keyHex: keyHex)
        func keyFile(_ text: String) throws -> String {
            let file = try temporaryFile("site.keys", text)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
            return file
        }
        let one = try keyFile("# serve --sun-keys\n[site]\nkey = \(keyHex)\n")
        let single = await run(["sun", "verify", url, "--key-file", one, "--json"])
        #expect(single.code == 0 && single.out == [#"{"valid":true,"uid":"04112233445580","counter":7}"#], "\(single)")
        let two = try keyFile("[gate]\nkey = \(Self.zero)\n\n[site]\nkey = \(keyHex)\nmeta_key = \(keyHex)\n")
        let unchosen = await run(["sun", "verify", url, "--key-file", two])
        #expect(unchosen.code == 64 && unchosen.err.joined().contains("--key-set NAME") && unchosen.err.joined().contains("gate, site"))
        #expect(await run(["sun", "verify", url, "--key-file", two, "--key-set", "site"]).code == 0)
        #expect(await run(["sun", "verify", url, "--key-file", two, "--key-set", "gate"]).code == 65)
        #expect(await run(["sun", "verify", url, "--key-file", two, "--key-set", "nope"]).code == 64)
        // A set that diversifies: the tag's key comes from the master with UID ‖ HEX.
        let master = try #require(AES128Key(hex: "00112233445566778899AABBCCDDEEFF"))
        let uid: [UInt8] = [0x04, 0x78, 0x2E, 0x21, 0x80, 0x1D, 0x80]
        let tagKey = try KeyDiversification.aes128(master: master, input: uid + [0x30, 0x42, 0xF5])
        let tagMAC = try #require(
            SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(tagKey)).sdmMAC(PICCData(uid: uid, counter: 3), input: []))
        let plain = "https://x.example/?uid=\(SUNHex.encode(uid))&ctr=000003&cmac=\(SUNHex.encode(tagMAC))"
        let diversified = try keyFile("[lobby]\nkey = 00112233445566778899AABBCCDDEEFF\ndiversify = 3042F5\n")
        #expect(
            await run(["sun", "verify", plain, "--key-file", diversified, "--json"]).out == [
                #"{"valid":true,"uid":"04782E21801D80","counter":3}"#
            ])
    }
}
