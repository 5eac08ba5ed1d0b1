import Foundation
import TagFixCore
import TagFixDaemons
import TagFixEmulators
import TagFixNDEF
import Testing

/// A fresh folder for key files.
private func folder() throws -> String {
    (try temporaryFile("x", "") as NSString).deletingLastPathComponent
}

private func mode(_ path: String) throws -> Int {
    try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
}

/// The raw 32-byte secret inside a PKCS #8 Ed25519 PEM (the last 32 bytes of its DER).
private func secret(ofPEM pem: String) throws -> [UInt8] {
    let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    return Array(try #require(Data(base64Encoded: body)).suffix(32))
}

@Suite("tagfix keys and sign-url")
struct SiteKeyCommandTests {
    @Test("keys generate: a 0600 private key and a public key beside it; never over an existing file (exit 74)")
    func generate() async throws {
        let key = try folder() + "/site.key"
        let made = await run(["keys", "generate", "--out", key])
        #expect(made.code == 0, "\(made.err)")
        #expect(try mode(key) == 0o600)
        let publicPath = (key as NSString).deletingPathExtension + ".pub"
        #expect(FileManager.default.fileExists(atPath: publicPath))
        let before = try String(contentsOfFile: key, encoding: .utf8)
        #expect(before.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let again = await run(["keys", "generate", "--out", key])
        #expect(again.code == 74)
        #expect(again.err.count == 1 && again.err[0].contains("never overwrites"), "\(again.err)")
        #expect(try String(contentsOfFile: key, encoding: .utf8) == before, "the key is untouched")
        // keys public prints what generate wrote beside it.
        let shown = await run(["keys", "public", "--key", key])
        #expect(shown.code == 0)
        #expect(shown.out.joined(separator: "\n") + "\n" == (try String(contentsOfFile: publicPath, encoding: .utf8)))
        #expect(!shown.out.joined().contains(Data(try secret(ofPEM: before)).base64EncodedString()))
    }

    @Test("a private key file that group or others can read is refused: one line, exit 66", arguments: [0o640, 0o604, 0o644, 0o660])
    func permissive(_ permissions: Int) async throws {
        let key = try folder() + "/site.key"
        #expect(await run(["keys", "generate", "--out", key]).code == 0)
        try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: key)
        for arguments in [["sign-url", "https://x.example/t/V1?lat=1&lon=2&r=3", "--key", key], ["keys", "public", "--key", key]] {
            let refused = await run(arguments)
            #expect(refused.code == 66, "\(arguments)")
            #expect(refused.err.count == 1 && refused.err[0].contains("chmod 600"), "\(refused.err)")
            #expect(refused.out.isEmpty)
        }
    }

    @Test("sign-url refuses a URL without a radius, or one already signed (exit 65), and asks for --key (64)")
    func signRefusals() async throws {
        let key = try folder() + "/site.key"
        #expect(await run(["keys", "generate", "--out", key]).code == 0)
        #expect(await run(["sign-url", "https://x.example/t/V1?lat=1&lon=2", "--key", key]).code == 65)
        let signed = await run(["sign-url", "https://x.example/t/V1?lat=1&lon=2&r=3", "--key", key, "--uid", "04A1A2A3A4A5A6"])
        #expect(signed.code == 0)
        #expect(signed.out.first?.contains("&sig=u.") == true)
        #expect(await run(["sign-url", try #require(signed.out.first), "--key", key]).code == 65)
        #expect(await run(["sign-url", "https://x.example/t/V1?lat=1&lon=2&r=3"]).code == 64)
    }

    @Test(
        "verify --trust-key on a scenario: signed confirmed, unsigned and tampered untrusted; no key or signature bytes in the log or the reports"
    )
    func noKeyMaterialInLogs() async throws {
        let directory = try folder()
        let key = directory + "/site.key"
        #expect(await run(["keys", "generate", "--out", key]).code == 0)
        let url = "https://tags.example.org/t/V1?lat=53.545&lon=9.966&r=30"
        let signed = try #require(await run(["sign-url", url, "--key", key]).out.first)
        let signature = String(try #require(signed.split(separator: "=").last))
        let tampered = signed.replacingOccurrences(of: "r=30", with: "r=300")
        let scenario = directory + "/walk.json"
        try """
        {"name": "signed", "start": "2026-01-01T00:00:00Z",
         "gps": {"rate_hz": 5, "accuracy_m": 3, "noise_m": 0.5, "seed": 3,
                 "route": [{"t": 0, "lat": 53.545, "lon": 9.966}, {"t": 30, "lat": 53.545, "lon": 9.966}]},
         "taps": [{"t": 5, "uid": "04A1A2A3A4A5A6", "url": "\(signed)"},
                  {"t": 10, "uid": "04A1A2A3A4A5A7", "url": "\(url)"},
                  {"t": 15, "uid": "04A1A2A3A4A5A8", "url": "\(tampered)"}]}
        """.write(toFile: scenario, atomically: true, encoding: .utf8)
        let log = directory + "/session.jsonl"
        let verify = await run(["verify", "--scenario", scenario, "--trust-key", directory + "/site.pub", "--json", "--log", log])
        #expect(verify.code == 0, "\(verify.err)")
        let found = try verify.out.map { try JSONValue.parse($0) }
        #expect(found.map { $0["verdict"]?.string ?? "" } == ["confirmed", "untrusted", "untrusted"])
        #expect(found.map { $0["reason"]?.string ?? "-" } == ["-", "location_unsigned", "location_signature_invalid"])
        #expect(found[1]["message"]?.string?.contains("tagfix sign-url") == true)
        // Without --trust-key all three are believed (the tampered one's 300 m circle contains the fix).
        let plain = await run(["verify", "--scenario", scenario, "--json"])
        #expect(try plain.out.map { try JSONValue.parse($0)["verdict"]?.string ?? "" } == ["confirmed", "confirmed", "confirmed"])

        var outputs = [try String(contentsOfFile: log, encoding: .utf8)] + verify.out + verify.err
        for format in ["html", "csv", "geojson"] {
            let report = await run(["report", log, "--format", format])
            #expect(report.code == 0, "\(report.err)")
            outputs += report.out
        }
        let html = await run(["report", log, "--format", "html"]).out.joined(separator: "\n")
        #expect(html.contains("untrusted (location_unsigned)"), "the reason is in the HTML report")
        let secret = try secret(ofPEM: try String(contentsOfFile: key, encoding: .utf8))
        let forbidden = [
            Data(secret).base64EncodedString(), Hex.encode(secret), Hex.encode(secret).lowercased(), signature,
            String(signature.prefix(20)),
        ]
        for text in outputs {
            for secret in forbidden { #expect(!text.contains(secret), "key or signature bytes in output") }
        }
        #expect(outputs.joined().contains("sig=…"), "the URL is logged with its signature redacted")
    }
}

@Suite("enroll --sign-key: the written URL's location is signed", .timeLimit(.minutes(3)))
struct EnrollSignKeyTests {
    @Test(
        "enroll --write-url --sign-key writes a signed URL that verify --trust-key confirms; a copy without sig= is untrusted",
        .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
    func signedEnrolment() async throws {
        let directory = try folder()
        let key = directory + "/site.key"
        #expect(await run(["keys", "generate", "--out", key]).code == 0)
        try await AttackSuiteTests.Field.with(at: AttackSuiteTests.here) { field in
            // An NTAG215: the signature adds 91 bytes, more than an NTAG213's 144-byte area leaves this URL.
            let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [.uri("https://old.example/x")]).encoded())
            let reader = try PN532Emulator(tags: [tag])
            defer { reader.stop() }
            let enrolled = await run([
                "enroll", "--id", "S1", "--radius", "25", "--reader", "pn532_uart:\(reader.path)", "--gps", field.url, "--registry",
                directory + "/site.sqlite", "--average", "2", "--max-accuracy", "15", "--write-url",
                "https://tags.example.org/t/{id}?lat={lat}&lon={lon}&r={r}", "--sign-key", key, "--json",
            ])
            #expect(enrolled.code == 0, "\(enrolled.err)")
            let written = try #require(try Type2Memory.read(tag.pages).ndefMessage)
            let url = try #require(try NDEFMessage(bytes: written).firstURL)
            #expect(url.contains("&sig="), "\(url)")
            // No registry: the URL's own location, which must be signed.
            let trusted = try await AttackSuiteTests.tap(tag, field: field, ["--trust-key", directory + "/site.pub"])
            #expect(trusted == "confirmed")
            let unsigned = try AttackSuiteTests.tag(url.components(separatedBy: "&sig=")[0], uid: [4, 1, 2, 3, 4, 5, 6])
            #expect(
                try await AttackSuiteTests.tap(unsigned, field: field, ["--trust-key", directory + "/site.pub"])
                    == "untrusted:location_unsigned")
        }
    }

    @Test("--sign-key without --write-url (64), and a key others can read (66), fail before any waiting")
    func refusals() async throws {
        let directory = try folder()
        let key = directory + "/site.key"
        #expect(await run(["keys", "generate", "--out", key]).code == 0)
        let base = ["enroll", "--id", "S1", "--reader", "pn532_uart:/dev/null", "--registry", directory + "/r.sqlite"]
        #expect(await run(base + ["--sign-key", key]).code == 64)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key)
        let refused = await run(base + ["--write-url", "https://t.example/{id}?lat={lat}&lon={lon}&r={r}", "--sign-key", key])
        #expect(refused.code == 66)
        #expect(refused.err.count == 1 && refused.err[0].contains("chmod 600"), "\(refused.err)")
    }
}
