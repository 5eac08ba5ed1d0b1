import CCrypto
import Synchronization

/// AES-128 CMAC (NIST SP 800-38B, RFC 4493) through OpenSSL 3's `EVP_MAC` "CMAC".
public enum CMAC {
    /// The 16-byte CMAC of `message` (any length, empty included) under `key`.
    public static func aes128(key: AES128Key, _ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let mac = contexts.withLock({ $0.popLast() }) ?? MACContext() else { throw CryptoError(operation: "CMAC context") }
        var out = [UInt8](repeating: 0, count: 16)
        var written = 0
        let ok = key.bytes.withUnsafeBufferPointer { k in
            guard EVP_MAC_init(mac.context, k.baseAddress, 16, nil) == 1 else { return false }
            guard message.isEmpty || EVP_MAC_update(mac.context, message, message.count) == 1 else { return false }
            return out.withUnsafeMutableBufferPointer { EVP_MAC_final(mac.context, $0.baseAddress, &written, 16) == 1 }
        }
        // A context that failed is not kept (it is freed with its last reference).
        guard ok, written == 16 else { throw CryptoError(operation: "AES-128 CMAC") }
        contexts.withLock { if $0.count < 8 { $0.append(mac) } }
        return out
    }

    /// Contexts made before, kept for the next MAC (a few: one a thread that makes MACs at once).
    private static let contexts = Mutex<[MACContext]>([])

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

/// A CMAC context with its cipher (AES-128-CBC) set once: set at each MAC, the cipher was fetched
/// by name each time, most of a phone tap's two MACs. Each MAC gives it a key of its own.
/// @unchecked Sendable: the EVP_MAC_CTX OpaquePointer is used by one MAC at a time (taken from the pool).
final class MACContext: @unchecked Sendable {
    let context: OpaquePointer

    init?() {
        guard let mac = FetchedAlgorithms.shared.cmac, let context = EVP_MAC_CTX_new(mac) else { return nil }
        let set = Self.cipherName.withUnsafeBufferPointer { name in
            var parameters = [
                OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, UnsafeMutablePointer(mutating: name.baseAddress), 0),
                OSSL_PARAM_construct_end(),
            ]
            return EVP_MAC_CTX_set_params(context, &parameters) == 1
        }
        guard set else {
            EVP_MAC_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit { EVP_MAC_CTX_free(context) }

    private static let cipherName = Array("AES-128-CBC".utf8CString)
}
