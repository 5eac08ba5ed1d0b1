import Foundation
import TagFixCore
import TagFixCrypto
import TagFixDevices
import TagFixTesting
import Testing

/// RFC 8032 §7.1 TEST 1 and TEST 2: secret key, public key, message, signature.
private let rfc8032: [(secret: String, public: String, message: String, signature: String)] = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
    ),
]

private func bytes(_ hex: String) -> [UInt8] { Hex.decode(hex)! }

/// A PKCS #8 PEM for a raw Ed25519 secret key (RFC 8410's fixed DER prefix).
private func pkcs8(_ secret: [UInt8]) -> String {
    let der = bytes("302e020100300506032b657004220420") + secret
    return "-----BEGIN PRIVATE KEY-----\n\(Data(der).base64EncodedString())\n-----END PRIVATE KEY-----\n"
}

private func scratch(_ name: String) throws -> String {
    let directory = NSTemporaryDirectory() + "tagfix-signed-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    return directory + "/" + name
}

/// `/usr/bin/openssl ARGUMENTS`: its status, or nil when it is not installed.
private func openssl(_ arguments: [String]) async throws -> Int32? {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else { return nil }
    return try await TestProgram.run("/usr/bin/openssl", arguments, standardOutput: .discard, standardError: .discard).status
}

@Suite("Ed25519 site keys through libcrypto")
struct Ed25519Tests {
    @Test("RFC 8032 §7.1 test vectors: the public key, the signature, and verification", arguments: rfc8032.indices)
    func rfc8032Vectors(index: Int) throws {
        let vector = rfc8032[index]
        let key = try Ed25519PrivateKey(pem: pkcs8(bytes(vector.secret)))
        #expect(try key.publicKey.raw == bytes(vector.public))
        #expect(try key.sign(bytes(vector.message)) == bytes(vector.signature))
        #expect(try key.publicKey.verifies(signature: bytes(vector.signature), message: bytes(vector.message)))
        var flipped = bytes(vector.signature)
        for bit in [0, 100, 511] {
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(try !key.publicKey.verifies(signature: flipped, message: bytes(vector.message)))
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
        }
        #expect("\(key)" == "Ed25519PrivateKey(redacted)")
    }

    @Test("a generated key round-trips through PEM, and openssl verifies its signature independently")
    func opensslInterop() async throws {
        let key = try Ed25519PrivateKey.generate()
        let again = try Ed25519PrivateKey(pem: try key.pem())
        #expect(try again.publicKey == key.publicKey)
        let message = Array("TAGFIX-LOCATION-V1\nlat=53.5450000".utf8)
        let signature = try key.sign(message)
        let publicPath = try scratch("site.pub")
        try key.publicKey.pem().write(toFile: publicPath, atomically: true, encoding: .utf8)
        let messagePath = publicPath + ".msg", signaturePath = publicPath + ".sig"
        try Data(message).write(to: URL(fileURLWithPath: messagePath))
        try Data(signature).write(to: URL(fileURLWithPath: signaturePath))
        let verify = ["pkeyutl", "-verify", "-pubin", "-inkey", publicPath, "-rawin", "-in", messagePath, "-sigfile", signaturePath]
        guard let status = try await openssl(verify) else { return }
        #expect(status == 0, "openssl pkeyutl -verify rejects TagFix's Ed25519 signature")
        // And a key openssl made is one TagFix reads.
        let opensslKey = try scratch("openssl.key")
        guard try await openssl(["genpkey", "-algorithm", "ed25519", "-out", opensslKey]) == 0 else { return }
        _ = try Ed25519PrivateKey(pem: try String(contentsOfFile: opensslKey, encoding: .utf8))
    }

    @Test("not a key: one clear error, no key bytes in it")
    func badKeys() throws {
        #expect(throws: Ed25519.Failure.self) { try Ed25519PrivateKey(pem: "hello") }
        #expect(throws: Ed25519.Failure.self) { try TrustedSiteKeys.parse("no key here") }
        let key = try Ed25519PrivateKey.generate()
        // A private key is not a public one.
        #expect(throws: Ed25519.Failure.self) { try TrustedSiteKeys.parse(try key.pem()) }
    }
}

@Suite("Signed locations: verify --trust-key")
struct SignedLocationVerifierTests {
    static let key = try! Ed25519PrivateKey.generate()
    static let other = try! Ed25519PrivateKey.generate()
    static let uid = try! TagUID(hex: "04A1A2A3A4A5A6")
    static let location = "https://tags.example.org/t/V1?lat=53.545&lon=9.966&r=25"
    /// A registry with one bound tag, A1.
    static let registryUID = try! TagUID(hex: "04A1B2C3D4E5F6")
    static func registry() -> InMemoryRegistry {
        let region = try! CircularRegion(center: Coordinate(validLatitude: 53.545, longitude: 9.966), radius: 20, identifier: "A1")
        return try! InMemoryRegistry([RegistryEntry(id: "A1", uid: registryUID, region: region, name: "Gate")])
    }

    func signed(_ url: String = location, key: Ed25519PrivateKey = key, uid: TagUID? = nil) throws -> String {
        let message = try SignedLocation.message(forURL: url, uid: uid)
        return SignedLocation.appending(SignedLocation.Signature(bytes: try key.sign(message), bindsUID: uid != nil), to: url)
    }

    func kind(_ url: String, uid: TagUID = uid, trust: Bool = true) throws -> String {
        let keys = TrustedSiteKeys([try Self.key.publicKey])
        let verifier = Verifier(registry: Self.registry(), locationTrust: trust ? keys : nil)
        let scan = TagScan(readerID: "t", uid: uid, tagType: .ntag213, url: url, time: Timestamp(iso8601: "2026-05-14T08:00:00Z")!)
        switch verifier.expectation(for: scan) {
        case .decided(let verdict): return verdict.kind.name + (verdict.kind.reasonCode.map { ":" + $0 } ?? "")
        case .region(_, let source, let id, _, _): return "\(source.rawValue):\(id ?? "-")"
        }
    }

    @Test("a signed location verifies; unsigned and tampered ones are untrusted with their reasons")
    func attacks() throws {
        let good = try signed()
        #expect(good.hasPrefix(Self.location + "&sig="))
        #expect(try kind(good) == "url:V1")
        #expect(try kind(Self.location) == "untrusted:location_unsigned")
        #expect(try kind(Self.location, trust: false) == "url:V1", "without --trust-key nothing changes")
        // Every field the signature covers, changed.
        for (from, to) in [("lat=53.545", "lat=53.546"), ("lon=9.966", "lon=9.967"), ("r=25", "r=250"), ("/t/V1", "/t/V2")] {
            #expect(try kind(good.replacingOccurrences(of: from, with: to)) == "untrusted:location_signature_invalid", "\(to)")
        }
        // What it does not cover: the spelling of the numbers, the order, the host.
        let respelled = try signed().replacingOccurrences(of: "lat=53.545", with: "lat=53.5450000")
        #expect(try kind(respelled) == "url:V1")
        #expect(try kind(try signed(key: Self.other)) == "untrusted:location_signature_invalid", "another site's key")
        #expect(try kind(Self.location + "&sig=notbase64!") == "untrusted:location_signature_invalid")
        #expect(try kind(Self.location + "&sig=" + String(repeating: "A", count: 86)) == "untrusted:location_signature_invalid")
        // A registry tag needs no signature.
        #expect(try kind("https://tags.example.org/t/A1", uid: Self.registryUID) == "registry:A1")
    }

    @Test("a UID-bound signature verifies on its tag only; stripping the u. does not help")
    func uidBound() throws {
        let bound = try signed(uid: Self.uid)
        #expect(bound.contains("&sig=u."))
        #expect(try kind(bound) == "url:V1")
        let copy = try TagUID(hex: "04FFEEDDCCBBAA")
        #expect(try kind(bound, uid: copy) == "untrusted:location_signature_invalid")
        #expect(try kind(bound.replacingOccurrences(of: "sig=u.", with: "sig=")) == "untrusted:location_signature_invalid")
    }

    @Test("what sign-url refuses: no location, no radius, already signed, a geo: URI")
    func refused() throws {
        #expect(throws: SignedLocation.SigningError.noLocation) { try SignedLocation.message(forURL: "https://x.example/t/A1", uid: nil) }
        #expect(throws: SignedLocation.SigningError.noRadius) {
            try SignedLocation.message(forURL: "https://x.example/t/A1?lat=1&lon=2", uid: nil)
        }
        let good = try signed()
        #expect(throws: SignedLocation.SigningError.alreadySigned) { try SignedLocation.message(forURL: good, uid: nil) }
        #expect(throws: SignedLocation.SigningError.noLocation) { try SignedLocation.message(forURL: "geo:53.5,9.9;u=20", uid: nil) }
    }
}
