import Foundation
import TagFixCore
import TagFixCrypto
import TagFixDevices
import TagFixNDEF
import TagFixTesting
import Testing

/// The independent check: nxp_originality.py, ECDSA on secp128r1 in plain Python integers (no
/// OpenSSL, no TagFix code). Prints the name of the key that verifies, "zero" or "none".
func independentVerdict(uid: [UInt8], signature: [UInt8]) async throws -> String {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("nxp_originality.py").path
    let process = try await TestProgram.run("/usr/bin/env", ["python3", script, Hex.encode(uid), Hex.encode(signature)])
    return process.output.trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite("NXP originality signatures (secp128r1 ECDSA over the UID)")
struct OriginalityTests {
    static let flipperDumps = TestData.files(in: "nfc/flipper", suffix: ".nfc")
    static let dumpsWithSignatures = flipperDumps + TestData.files(in: "nfc/proxmark", suffix: ".json")

    @Test(
        "every shared Flipper (and Proxmark) dump: TagFix's status is the independent verification's",
        arguments: dumpsWithSignatures)
    func flipperDump(_ path: String) async throws {
        let image = try TagDump.load(Array(FileManager.default.contents(atPath: path) ?? Data()))
        let uid = try #require(image.uid)
        let signature = try #require(image.signature, "every shared Flipper and Proxmark dump has a signature")
        let originality = NXPOriginality.check(uid: uid, signature: signature, type: image.chip.type)
        let independent = try await independentVerdict(uid: uid.bytes, signature: signature)
        switch independent {
        case "zero": #expect(originality == Originality(status: .absent, key: "NXP NTAG21x"))
        case "none": #expect(originality.status == .invalid)
        default: #expect(originality == Originality(status: .genuine, key: independent))
        }
    }

    @Test("the shared dumps hold both genuine and not genuine tags, and both keys verify one")
    func bothOutcomes() throws {
        try #require(!Self.flipperDumps.isEmpty, "\(TestData.skipReason)")
        var statuses: [Originality] = []
        for path in Self.flipperDumps {
            let image = try TagDump.load(Array(FileManager.default.contents(atPath: path) ?? Data()))
            statuses.append(NXPOriginality.check(uid: try #require(image.uid), signature: image.signature, type: image.chip.type))
        }
        #expect(statuses.contains(Originality(status: .genuine, key: "NXP NTAG21x")))
        #expect(statuses.contains(Originality(status: .genuine, key: "NXP Ultralight EV1")))
        #expect(statuses.contains { $0.status != .genuine })
    }

    /// Tampering: one bit of the UID or of the signature, checked by both implementations.
    @Test("a changed UID bit or signature bit no longer verifies", arguments: 0..<8)
    func tampered(_ bit: Int) async throws {
        let uid = try TagUID(hex: "04B8313A307380")
        let signature = try #require(Hex.decode("31B5998B1D1C6AF2C6C7AEC2E14429952FA9E757292BFB39E16DDC43E2CEC580"))
        #expect(NXPOriginality.check(uid: uid, signature: signature, type: .ntag216).status == .genuine)
        var otherUID = uid.bytes
        otherUID[6] ^= UInt8(1 << bit)
        let copied = NXPOriginality.check(uid: try TagUID(bytes: otherUID), signature: signature, type: .ntag216)
        #expect(copied == Originality(status: .invalid, key: "NXP NTAG21x"))
        #expect(try await independentVerdict(uid: otherUID, signature: signature) == "none")
        var otherSignature = signature
        otherSignature[bit * 4] ^= 0x01
        #expect(NXPOriginality.check(uid: uid, signature: otherSignature, type: .ntag216).status == .invalid)
        #expect(try await independentVerdict(uid: uid.bytes, signature: otherSignature) == "none")
    }

    @Test("absent and unsupported: no answer, zeros, and chips without a signature")
    func absentAndUnsupported() throws {
        let uid = try TagUID(hex: "04B8313A307380")
        #expect(NXPOriginality.check(uid: uid, signature: nil, type: .ntag213) == Originality(status: .absent, key: "NXP NTAG21x"))
        #expect(NXPOriginality.check(uid: uid, signature: Array(repeating: 0, count: 32), type: .mifareUltralightEV1).status == .absent)
        #expect(NXPOriginality.check(uid: uid, signature: nil, type: .type2).status == .unsupported)  // NTAG203, Ultralight
        #expect(NXPOriginality.check(uid: uid, signature: nil, type: .mifareUltralightC).status == .unsupported)
        #expect(NXPOriginality.check(uid: uid, signature: nil, type: .mifareClassic1K).status == .unsupported)
        #expect(NXPOriginality.check(uid: uid, signature: nil, type: .type4).status == .unsupported)
        // A chip not identified (the live reader's CC-sized guess failed) is tried against every key.
        let ev1 = try TagUID(hex: "04A60AF2DD7584")
        let ev1Signature = try #require(Hex.decode("68D18E8A85F1B7FC1C079C9F8B9F4E6BB77C2348E0696C8935530FBCD800273B"))
        #expect(
            NXPOriginality.check(uid: ev1, signature: ev1Signature, type: .type2)
                == Originality(status: .genuine, key: "NXP Ultralight EV1"))
        // A short answer is not a signature that verifies.
        #expect(NXPOriginality.check(uid: uid, signature: [1, 2, 3], type: .ntag213).status == .invalid)
    }

    @Test("ECDSA.verify refuses a point that is not on the curve, and odd signatures")
    func malformed() throws {
        var point = NXPOriginality.ntag21x.point
        point[32] ^= 0x01
        #expect(throws: ECDSA.Failure.badPublicKey(curve: "secp128r1")) {
            try ECDSA.verify(curve: "secp128r1", publicKey: point, digest: [1], signature: [1, 1])
        }
        #expect(throws: ECDSA.Failure.badSignatureLength(3)) {
            try ECDSA.verify(curve: "secp128r1", publicKey: NXPOriginality.ntag21x.point, digest: [1], signature: [1, 2, 3])
        }
    }
}
