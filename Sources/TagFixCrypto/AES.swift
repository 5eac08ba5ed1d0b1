import CCrypto
import Synchronization
import TagFixCore

/// A 16-byte AES-128 key. Its description never shows the key, so it cannot reach a log line or
/// an error message by accident.
public struct AES128Key: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    public let bytes: [UInt8]

    /// nil unless `bytes` is 16 bytes long.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// 32 hex digits (either case); nil otherwise.
    public init?(hex: String) {
        guard let bytes = SUNHex.decode(Array(hex.utf8)) else { return nil }
        self.init(bytes)
    }

    public static let zero = AES128Key([UInt8](repeating: 0, count: 16))!

    public var description: String { "AES128Key(redacted)" }
    public var debugDescription: String { description }
}

/// A libcrypto failure: it should not happen with valid keys and lengths, and says which call.
public struct CryptoError: Error, Sendable, Hashable, CustomStringConvertible {
    public var operation: String
    public var description: String { "libcrypto: \(operation) failed" }
}

/// The algorithms, fetched from OpenSSL's default provider once: a fetch per call would cost more
/// than the AES itself. Fetched EVP_CIPHER objects are immutable and safe to share between
/// threads (OpenSSL 3 "Algorithm fetching"); they live as long as the process.
/// @unchecked Sendable: the EVP_CIPHER handles are OpaquePointers, immutable once fetched.
final class FetchedAlgorithms: @unchecked Sendable {
    let ecb: OpaquePointer?
    let cbc: OpaquePointer?

    static let shared = FetchedAlgorithms()

    private init() {
        ecb = EVP_CIPHER_fetch(nil, "AES-128-ECB", nil)
        cbc = EVP_CIPHER_fetch(nil, "AES-128-CBC", nil)
    }
}

/// AES-128 (FIPS-197) without padding: one block (ECB) and CBC with a given IV, the modes SUN,
/// CMAC subkeys and NTAG 424 DNA secure messaging use.
public enum AES128 {
    /// Encrypts one 16-byte block.
    public static func encryptBlock(key: AES128Key, _ block: [UInt8]) throws(CryptoError) -> [UInt8] {
        try oneBlock(key: key, block, encrypting: true, operation: "AES-128-ECB encrypt")
    }

    /// Decrypts one 16-byte block.
    public static func decryptBlock(key: AES128Key, _ block: [UInt8]) throws(CryptoError) -> [UInt8] {
        try oneBlock(key: key, block, encrypting: false, operation: "AES-128-ECB decrypt")
    }

    /// One block through a pooled context (`BlockCipher`): no context made or freed, and none
    /// re-keyed when the last key it had is this one (a site's SUN meta-read key, tap after tap).
    private static func oneBlock(key: AES128Key, _ block: [UInt8], encrypting: Bool, operation: String) throws(CryptoError) -> [UInt8] {
        guard block.count == 16 else { throw CryptoError(operation: operation) }
        var out = [UInt8](repeating: 0, count: 16)
        let ok = block.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                BlockCipher.withKey(key, encrypting: encrypting) { $0.run(input, into: output) } ?? false
            }
        }
        guard ok else { throw CryptoError(operation: operation) }
        return out
    }

    /// CBC encryption of whole blocks; `iv` defaults to zero (NXP's PICCData and MAC chains).
    public static func cbcEncrypt(key: AES128Key, iv: [UInt8] = zeroBlock, _ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try run(FetchedAlgorithms.shared.cbc, key: key, iv: iv, data: data, encrypt: true, operation: "AES-128-CBC encrypt")
    }

    /// CBC decryption of whole blocks; `iv` defaults to zero.
    public static func cbcDecrypt(key: AES128Key, iv: [UInt8] = zeroBlock, _ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try run(FetchedAlgorithms.shared.cbc, key: key, iv: iv, data: data, encrypt: false, operation: "AES-128-CBC decrypt")
    }

    public static let zeroBlock = [UInt8](repeating: 0, count: 16)

    private static func run(
        _ cipher: OpaquePointer?, key: AES128Key, iv: [UInt8]?, data: [UInt8], encrypt: Bool, operation: String
    ) throws(CryptoError) -> [UInt8] {
        guard let cipher, data.count % 16 == 0, iv == nil || iv?.count == 16 else { throw CryptoError(operation: operation) }
        guard !data.isEmpty else { return [] }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError(operation: operation) }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: data.count)
        var written: Int32 = 0
        let ok = key.bytes.withUnsafeBufferPointer { keyBytes in
            let initialised =
                if let iv {
                    iv.withUnsafeBufferPointer {
                        EVP_CipherInit_ex2(context, cipher, keyBytes.baseAddress, $0.baseAddress, encrypt ? 1 : 0, nil)
                    }
                } else {
                    EVP_CipherInit_ex2(context, cipher, keyBytes.baseAddress, nil, encrypt ? 1 : 0, nil)
                }
            guard initialised == 1, EVP_CIPHER_CTX_set_padding(context, 0) == 1 else { return false }
            return out.withUnsafeMutableBufferPointer { o in
                EVP_CipherUpdate(context, o.baseAddress, &written, data, Int32(data.count)) == 1
            }
        }
        guard ok, Int(written) == data.count else { throw CryptoError(operation: operation) }
        return out
    }
}

/// An AES-128-ECB context for one direction, its cipher set once and re-keyed only when a use
/// asks for another key than its last; a few of each direction are kept for the next use (one a
/// thread that uses them at once).
/// @unchecked Sendable: the EVP_CIPHER_CTX OpaquePointer is used by one caller at a time (pooled).
final class BlockCipher: @unchecked Sendable {
    private let context: OpaquePointer
    private var key: AES128Key?

    private init?(encrypting: Bool) {
        guard let cipher = FetchedAlgorithms.shared.ecb, let context = EVP_CIPHER_CTX_new() else { return nil }
        guard EVP_CipherInit_ex2(context, cipher, nil, nil, encrypting ? 1 : 0, nil) == 1, EVP_CIPHER_CTX_set_padding(context, 0) == 1
        else {
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// The contexts kept: `[encrypting]` and `[decrypting]`.
    private static let pools = Mutex<(encrypting: [BlockCipher], decrypting: [BlockCipher])>(([], []))

    /// `body` with a context of that direction keyed with `key`; nil when none could be made or keyed.
    static func withKey<T>(_ key: AES128Key, encrypting: Bool, _ body: (BlockCipher) -> T) -> T? {
        let kept = pools.withLock { encrypting ? $0.encrypting.popLast() : $0.decrypting.popLast() }
        guard let cipher = kept ?? BlockCipher(encrypting: encrypting) else { return nil }
        if cipher.key != key {
            cipher.key = nil
            let keyed = key.bytes.withUnsafeBufferPointer { EVP_CipherInit_ex2(cipher.context, nil, $0.baseAddress, nil, -1, nil) == 1 }
            // A context that could not be keyed is not kept (it is freed with its last reference).
            guard keyed else { return nil }
            cipher.key = key
        }
        let result = body(cipher)
        pools.withLock { pools in
            if encrypting, pools.encrypting.count < 8 { pools.encrypting.append(cipher) }
            if !encrypting, pools.decrypting.count < 8 { pools.decrypting.append(cipher) }
        }
        return result
    }

    /// One block: `input` (16 bytes) into `output` (16 bytes; may be `input`'s memory).
    func run(_ input: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        var written: Int32 = 0
        return EVP_CipherUpdate(context, output.baseAddress, &written, input.baseAddress, 16) == 1 && written == 16
    }
}
