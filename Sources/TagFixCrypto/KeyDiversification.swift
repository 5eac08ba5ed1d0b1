/// Per-tag keys from one master key, as NXP AN10922 ("Symmetric key diversifications") §2.2
/// describes for AES-128: the diversified key is the CMAC, under the master key, of
/// `0x01 ‖ M` where M (1–31 bytes, typically UID ‖ application id ‖ system identifier) is
/// padded to 32 bytes with `80 00 …` when shorter. The padding is AN10922's, not CMAC's own: a
/// short M is padded to two blocks (CMAC alone would pad to one), and the last block is masked
/// with K2 when padded, K1 when not.
public enum KeyDiversification {
    /// Why a key could not be diversified.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// M must be 1 to 31 bytes.
        case inputLength(Int)
        /// libcrypto failed (a bug, not bad input).
        case crypto(CryptoError)
        public var description: String {
            switch self {
            case .inputLength(let count): "the diversification input is \(count) bytes; AN10922 AES-128 takes 1 to 31"
            case .crypto(let error): "\(error)"
            }
        }
    }

    /// The AES-128 key diversified from `master` with the input `m` (AN10922 §2.2.1).
    public static func aes128(master: AES128Key, input m: [UInt8]) throws(Failure) -> AES128Key {
        guard (1...31).contains(m.count) else { throw .inputLength(m.count) }
        var d = [0x01] + m
        let padded = d.count < 32
        if padded { d += [0x80] + [UInt8](repeating: 0, count: 31 - d.count) }
        do throws(CryptoError) {
            let (k1, k2) = try CMAC.subkeys(key: master)
            let mask = padded ? k2 : k1
            for i in 0..<16 { d[16 + i] ^= mask[i] }
            // CBC with a zero IV over both blocks; the last cipher block is the CMAC.
            let chained = try AES128.cbcEncrypt(key: master, d)
            guard let key = AES128Key(Array(chained[16..<32])) else { throw CryptoError(operation: "AN10922 diversification") }
            return key
        } catch {
            throw .crypto(error)
        }
    }

    /// AN10922's usual input: UID ‖ application identifier ‖ system identifier.
    public static func aes128(master: AES128Key, uid: [UInt8], applicationID: [UInt8] = [], systemIdentifier: [UInt8] = []) throws
        -> AES128Key
    {
        try aes128(master: master, input: uid + applicationID + systemIdentifier)
    }
}
