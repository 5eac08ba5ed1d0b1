public import TagFixCore

/// NXP originality signatures (issue 20, part 1): the 32-byte ECDSA signature on curve
/// secp128r1 that NXP writes into each NTAG21x and MIFARE Ultralight EV1 at the factory and
/// `READ_SIG` (`3C 00`) returns. It signs the 7-byte UID itself, unhashed: the UID is the
/// "digest" handed to ECDSA (NXP AN11350; the shared Flipper dumps verify this way, and the
/// tests check every one against an independent implementation).
public enum NXPOriginality {
    /// A public key NXP published for one chip family.
    public struct Key: Sendable, Hashable {
        /// The name reports show (`NXP NTAG21x`).
        public var name: String
        public var curve: String
        /// The uncompressed point, `04‖x‖y`.
        public var point: [UInt8]
        /// Where the key comes from.
        public var source: String
    }

    /// NTAG210, 212, 213, 215 and 216. Source: NXP application note AN11350, "NTAG21x
    /// Originality Signature Validation" (the public key in its section on the verification).
    public static let ntag21x = Key(
        name: "NXP NTAG21x", curve: "secp128r1",
        point: hex("04494E1A386D3D3CFE3DC10E5DE68A499B1C202DB5B132393E89ED19FE5BE8BC61"),
        source: "NXP AN11350, NTAG21x Originality Signature Validation")

    /// MIFARE Ultralight EV1 (MF0UL11, MF0UL21). Source: NXP's originality signature validation
    /// note for MIFARE Ultralight EV1 (the MF0ULx1 data sheet's READ_SIG section refers to it);
    /// the same key is the one public tools list as "NXP Ultralight Ev1" (Proxmark3 `hf mfu info`),
    /// and the shared Flipper dump Dave_and_Busters.nfc (an MF0UL11) verifies with it.
    public static let ultralightEV1 = Key(
        name: "NXP Ultralight EV1", curve: "secp128r1",
        point: hex("0490933BDCD6E99B4E255E3DA55389A827564E11718E017292FAF23226A96614B8"),
        source: "NXP MIFARE Ultralight EV1 originality signature validation (MF0ULx1)")

    /// Every key TagFix knows, in the order they are tried.
    public static let keys = [ntag21x, ultralightEV1]

    /// The `READ_SIG` command: address 00, 32 bytes back.
    public static let readSignatureCommand: [UInt8] = [0x3C, 0x00]
    public static let signatureLength = 32

    /// The key a chip of this type is signed with; `nil` for chips TagFix has no key for.
    public static func expectedKey(for type: TagType) -> Key? {
        switch type {
        case .ntag210, .ntag212, .ntag213, .ntag215, .ntag216: ntag21x
        case .mifareUltralightEV1: ultralightEV1
        default: nil
        }
    }

    /// Chip types that have no originality signature at all.
    static func hasNoSignature(_ type: TagType) -> Bool {
        switch type {
        case .mifareUltralight, .mifareUltralightC, .mifareClassic1K, .mifareClassic4K, .type4, .felica: true
        default: false
        }
    }

    /// What the signature says about the chip.
    /// - Parameters:
    ///   - uid: the UID the chip answered in anticollision (a dump's header UID).
    ///   - signature: `READ_SIG`'s answer; `nil` when the chip would not answer or the dump has
    ///     none.
    ///   - type: the chip as identified (GET_VERSION, the CC or the dump): picks the key. A
    ///     generic Type 2 chip is tried against every key.
    public static func check(uid: TagUID, signature: [UInt8]?, type: TagType) -> Originality {
        let expected = expectedKey(for: type)
        guard let signature, signature.contains(where: { $0 != 0 }) else {
            if expected != nil { return Originality(status: .absent, key: expected?.name) }
            // A chip of unknown type that answered 32 zero bytes did answer READ_SIG.
            return Originality(status: signature == nil || hasNoSignature(type) ? .unsupported : .absent)
        }
        if hasNoSignature(type) { return Originality(status: .unsupported) }
        let candidates = expected.map { [$0] + keys.filter { $0 != expected } } ?? keys
        for key in candidates where signature.count == signatureLength {
            let verified = (try? ECDSA.verify(curve: key.curve, publicKey: key.point, digest: uid.bytes, signature: signature)) ?? false
            if verified { return Originality(status: .genuine, key: key.name) }
        }
        return Originality(status: .invalid, key: expected?.name)
    }

    private static func hex(_ text: String) -> [UInt8] { Hex.decode(text) ?? [] }
}
