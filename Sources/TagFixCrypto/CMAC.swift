import CCrypto
import Synchronization

/// AES-128 CMAC (NIST SP 800-38B, RFC 4493): the mode's chaining (§6.2) over OpenSSL's AES-128
/// block cipher, one context re-keyed for each MAC. OpenSSL 3's `EVP_MAC` "CMAC" did the same
/// work with two cipher initialisations a MAC and its parameters looked up by name: about 1 µs a
/// MAC on the benchmark VM against 0.3 µs this way, and a phone tap with SUN makes two.
public enum CMAC {
    /// The 16-byte CMAC of `message` (any length, empty included) under `key`.
    public static func aes128(key: AES128Key, _ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        let ok = message.withUnsafeBufferPointer { message in
            out.withUnsafeMutableBufferPointer { out in
                BlockCipher.withKey(key, encrypting: true) { cipher in mac(message, cipher: cipher, into: out) } ?? false
            }
        }
        guard ok else { throw CryptoError(operation: "AES-128 CMAC") }
        return out
    }

    /// SP 800-38B §6.2 with `cipher` keyed: subkeys from L = AES(K, 0), every block but the last
    /// chained through the cipher, the last one XORed with K1 (whole) or padded and XORed with K2.
    private static func mac(
        _ message: UnsafeBufferPointer<UInt8>, cipher: BlockCipher, into out: UnsafeMutableBufferPointer<UInt8>
    ) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { scratch in
            let subkey = UnsafeMutableBufferPointer(rebasing: scratch[0..<16])
            let chain = UnsafeMutableBufferPointer(rebasing: scratch[16..<32])
            chain.initialize(repeating: 0)
            guard cipher.run(UnsafeBufferPointer(chain), into: subkey) else { return false }
            double(subkey)
            let whole = !message.isEmpty && message.count % 16 == 0
            if !whole { double(subkey) }
            // The blocks before the last: X = AES(K, X ⊕ Mᵢ).
            let lastStart = message.isEmpty ? 0 : (message.count - 1) / 16 * 16
            var offset = 0
            while offset < lastStart {
                for i in 0..<16 { chain[i] ^= message[offset + i] }
                guard cipher.run(UnsafeBufferPointer(chain), into: chain) else { return false }
                offset += 16
            }
            // The last block: complete ⊕ K1, or padded 10…0 ⊕ K2.
            for i in 0..<16 {
                let index = lastStart + i
                let byte: UInt8 = index < message.count ? message[index] : (index == message.count ? 0x80 : 0)
                chain[i] ^= byte ^ subkey[i]
            }
            return cipher.run(UnsafeBufferPointer(chain), into: out)
        }
    }

    /// The CMAC subkeys K1 and K2 (SP 800-38B §6.1): L = AES(K, 0), K1 = L·x, K2 = K1·x in GF(2¹²⁸).
    public static func subkeys(key: AES128Key) throws(CryptoError) -> (k1: [UInt8], k2: [UInt8]) {
        var k1 = try AES128.encryptBlock(key: key, AES128.zeroBlock)
        k1.withUnsafeMutableBufferPointer { double($0) }
        var k2 = k1
        k2.withUnsafeMutableBufferPointer { double($0) }
        return (k1, k2)
    }

    /// `block` · x in GF(2¹²⁸) (a shift left, the carry folded back as 0x87), in place and
    /// without a branch on the key-derived carry.
    private static func double(_ block: UnsafeMutableBufferPointer<UInt8>) {
        let carry = block[0] >> 7
        for i in 0..<15 { block[i] = block[i] << 1 | block[i + 1] >> 7 }
        block[15] = block[15] << 1 ^ (0x87 & (0 &- carry))
    }
}
