import CCrypto

/// TagFixCrypto: the cryptography trust checks need (NXP originality signatures, NTAG 424 DNA
/// SUN messages, signed locations), over OpenSSL's libcrypto and nothing else. Every libcrypto
/// call goes through this target; no OpenSSL type crosses its public API.
public enum Crypto {
    /// Compares two byte strings in constant time (`CRYPTO_memcmp`): for MACs and signatures.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }
}
