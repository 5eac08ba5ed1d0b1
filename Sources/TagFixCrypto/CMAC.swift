import CCrypto

/// AES-128 CMAC (NIST SP 800-38B, RFC 4493) through OpenSSL 3's `EVP_MAC` "CMAC".
public enum CMAC {
    /// The 16-byte CMAC of `message` (any length, empty included) under `key`.
    public static func aes128(key: AES128Key, _ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let mac = FetchedAlgorithms.shared.cmac, let context = EVP_MAC_CTX_new(mac) else {
            throw CryptoError(operation: "CMAC context")
        }
        defer { EVP_MAC_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: 16)
        var written = 0
        let ok = cipherName.withUnsafeBufferPointer { name in
            var parameters = [
                OSSL_PARAM_construct_utf8_string(
                    OSSL_MAC_PARAM_CIPHER, UnsafeMutablePointer(mutating: name.baseAddress), 0),
                OSSL_PARAM_construct_end(),
            ]
            return key.bytes.withUnsafeBufferPointer { k in
                guard EVP_MAC_init(context, k.baseAddress, 16, &parameters) == 1 else { return false }
                guard message.isEmpty || EVP_MAC_update(context, message, message.count) == 1 else { return false }
                return out.withUnsafeMutableBufferPointer { EVP_MAC_final(context, $0.baseAddress, &written, 16) == 1 }
            }
        }
        guard ok, written == 16 else { throw CryptoError(operation: "AES-128 CMAC") }
        return out
    }

    private static let cipherName = Array("AES-128-CBC".utf8CString)

    /// The CMAC subkeys K1 and K2 (SP 800-38B §6.1): L = AES(K, 0), K1 = L·x, K2 = K1·x in GF(2¹²⁸).
    public static func subkeys(key: AES128Key) throws(CryptoError) -> (k1: [UInt8], k2: [UInt8]) {
        let l = try AES128.encryptBlock(key: key, AES128.zeroBlock)
        let k1 = double(l)
        return (k1, double(k1))
    }

    private static func double(_ block: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        for i in 0..<16 {
            out[i] = block[i] << 1 | (i < 15 ? block[i + 1] >> 7 : 0)
        }
        if block[0] & 0x80 != 0 { out[15] ^= 0x87 }
        return out
    }
}
