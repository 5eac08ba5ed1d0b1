import CCrypto
public import TagFixCore

/// Ed25519 (RFC 8032) through libcrypto's EVP interface (`EVP_PKEY_ED25519`, one-shot
/// `EVP_DigestSign` / `EVP_DigestVerify`): the site keys that sign locations in tag URLs.
///
/// Keys live in PEM files as OpenSSL writes them (PKCS #8 `PRIVATE KEY`, SubjectPublicKeyInfo
/// `PUBLIC KEY`), so `openssl pkey` and `openssl pkeyutl` read them too.
public enum Ed25519 {
    /// Why a key or a signature could not be made or read. Never holds key bytes.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        case notAKey(String)
        case library(String)

        public var description: String {
            switch self {
            case .notAKey(let what): what
            case .library(let what): "libcrypto: \(what)"
            }
        }
    }
}

/// An Ed25519 private key (32 bytes). Its description never shows them.
public struct Ed25519PrivateKey: Sendable, CustomStringConvertible {
    private let seed: [UInt8]

    /// A new key from libcrypto's random generator.
    public static func generate() throws(Ed25519.Failure) -> Ed25519PrivateKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "ED25519", nil) else { throw .library("no Ed25519 key management") }
        defer { EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_generate(context, &pkey) == 1, let pkey else {
            ERR_clear_error()
            throw .library("Ed25519 key generation failed")
        }
        defer { EVP_PKEY_free(pkey) }
        return Ed25519PrivateKey(seed: try raw(pkey, private: true))
    }

    private init(seed: [UInt8]) { self.seed = seed }

    /// Reads a PEM `PRIVATE KEY` block holding an Ed25519 key.
    public init(pem: String) throws(Ed25519.Failure) {
        let pkey = try readPEM(pem, private: true)
        defer { EVP_PKEY_free(pkey) }
        seed = try raw(pkey, private: true)
    }

    /// PKCS #8 PEM, as `openssl genpkey -algorithm ed25519` writes it.
    public func pem() throws(Ed25519.Failure) -> String {
        let pkey = try handle()
        defer { EVP_PKEY_free(pkey) }
        return try writePEM(pkey, private: true)
    }

    public var publicKey: Ed25519PublicKey {
        get throws(Ed25519.Failure) {
            let pkey = try handle()
            defer { EVP_PKEY_free(pkey) }
            return try Ed25519PublicKey(raw: raw(pkey, private: false))
        }
    }

    /// The 64-byte signature of `message` (pure Ed25519: the message itself, not a hash of it).
    public func sign(_ message: [UInt8]) throws(Ed25519.Failure) -> [UInt8] {
        let pkey = try handle()
        defer { EVP_PKEY_free(pkey) }
        guard let context = EVP_MD_CTX_new() else { throw .library("EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit_ex(context, nil, nil, nil, nil, pkey, nil) == 1 else {
            ERR_clear_error()
            throw .library("EVP_DigestSignInit_ex failed")
        }
        var signature = [UInt8](repeating: 0, count: SignedLocation.signatureLength)
        var length = signature.count
        let status = signature.withUnsafeMutableBufferPointer { sig in
            message.withUnsafeBufferPointer { EVP_DigestSign(context, sig.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard status == 1, length == SignedLocation.signatureLength else {
            ERR_clear_error()
            throw .library("EVP_DigestSign failed")
        }
        return signature
    }

    public var description: String { "Ed25519PrivateKey(redacted)" }

    private func handle() throws(Ed25519.Failure) -> OpaquePointer {
        guard let pkey = seed.withUnsafeBufferPointer({ EVP_PKEY_new_raw_private_key_ex(nil, "ED25519", nil, $0.baseAddress, $0.count) })
        else {
            ERR_clear_error()
            throw .library("EVP_PKEY_new_raw_private_key_ex failed")
        }
        return pkey
    }
}

/// An Ed25519 public key (32 bytes): a site key a verifier trusts.
public struct Ed25519PublicKey: Sendable, Hashable, CustomStringConvertible {
    public let raw: [UInt8]

    init(raw: [UInt8]) { self.raw = raw }

    /// Reads a PEM `PUBLIC KEY` block holding an Ed25519 key.
    public init(pem: String) throws(Ed25519.Failure) {
        let pkey = try readPEM(pem, private: false)
        defer { EVP_PKEY_free(pkey) }
        raw = try TagFixCrypto.raw(pkey, private: false)
    }

    /// SubjectPublicKeyInfo PEM, as `openssl pkey -pubout` writes it.
    public func pem() throws(Ed25519.Failure) -> String {
        let pkey = try handle()
        defer { EVP_PKEY_free(pkey) }
        return try writePEM(pkey, private: false)
    }

    /// Whether `signature` is this key's signature of `message`.
    public func verifies(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == SignedLocation.signatureLength, let pkey = try? handle() else { return false }
        defer { EVP_PKEY_free(pkey) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit_ex(context, nil, nil, nil, nil, pkey, nil) == 1 else {
            ERR_clear_error()
            return false
        }
        let status = signature.withUnsafeBufferPointer { sig in
            message.withUnsafeBufferPointer { EVP_DigestVerify(context, sig.baseAddress, sig.count, $0.baseAddress, $0.count) }
        }
        ERR_clear_error()
        return status == 1
    }

    /// A short fingerprint for messages: the first 8 bytes of the key in hex (public, not secret).
    public var description: String { "Ed25519PublicKey(\(Hex.encode(raw.prefix(8))))" }

    private func handle() throws(Ed25519.Failure) -> OpaquePointer {
        guard let pkey = raw.withUnsafeBufferPointer({ EVP_PKEY_new_raw_public_key_ex(nil, "ED25519", nil, $0.baseAddress, $0.count) })
        else {
            ERR_clear_error()
            throw .notAKey("not an Ed25519 public key")
        }
        return pkey
    }
}

/// The site keys `verify --trust-key` trusts: a location signature is good when any of them
/// verifies it.
public struct TrustedSiteKeys: LocationSignatureChecker {
    public var keys: [Ed25519PublicKey]

    public init(_ keys: [Ed25519PublicKey]) { self.keys = keys }

    /// Every `PUBLIC KEY` block in `text` (one file may hold several).
    public static func parse(_ text: String) throws(Ed25519.Failure) -> TrustedSiteKeys {
        var keys: [Ed25519PublicKey] = []
        var block: String?
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            if line == "-----BEGIN PUBLIC KEY-----" {
                block = String(line) + "\n"
            } else if let open = block {
                block = open + line + "\n"
                if line == "-----END PUBLIC KEY-----", let pem = block {
                    keys.append(try Ed25519PublicKey(pem: pem))
                    block = nil
                }
            }
        }
        guard block == nil else { throw .notAKey("a PUBLIC KEY block has no END line") }
        guard !keys.isEmpty else { throw .notAKey("no PEM PUBLIC KEY block (an Ed25519 site key from tagfix keys public)") }
        return TrustedSiteKeys(keys)
    }

    public func verifies(signature: [UInt8], message: [UInt8]) -> Bool {
        keys.contains { $0.verifies(signature: signature, message: message) }
    }
}

// MARK: - libcrypto helpers

private func raw(_ pkey: OpaquePointer, private: Bool) throws(Ed25519.Failure) -> [UInt8] {
    guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_ED25519 else {
        throw .notAKey(`private` ? "not an Ed25519 private key" : "not an Ed25519 public key")
    }
    var bytes = [UInt8](repeating: 0, count: 32)
    var length = bytes.count
    let status = bytes.withUnsafeMutableBufferPointer {
        `private`
            ? EVP_PKEY_get_raw_private_key(pkey, $0.baseAddress, &length) : EVP_PKEY_get_raw_public_key(pkey, $0.baseAddress, &length)
    }
    ERR_clear_error()
    guard status == 1, length == 32 else { throw .library("cannot read the raw Ed25519 key") }
    return bytes
}

private func readPEM(_ text: String, private: Bool) throws(Ed25519.Failure) -> OpaquePointer {
    let bytes = Array(text.utf8)
    let pkey: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
        guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
        defer { BIO_free(bio) }
        return `private` ? PEM_read_bio_PrivateKey(bio, nil, nil, nil) : PEM_read_bio_PUBKEY(bio, nil, nil, nil)
    }
    ERR_clear_error()
    guard let pkey else {
        throw .notAKey(`private` ? "not a PEM PRIVATE KEY (an Ed25519 site key from tagfix keys generate)" : "not a PEM PUBLIC KEY")
    }
    guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_ED25519 else {
        EVP_PKEY_free(pkey)
        throw .notAKey(`private` ? "the PEM key is not an Ed25519 key" : "the PEM public key is not an Ed25519 key")
    }
    return pkey
}

private func writePEM(_ pkey: OpaquePointer, private: Bool) throws(Ed25519.Failure) -> String {
    guard let bio = BIO_new(BIO_s_mem()) else { throw .library("BIO_new failed") }
    defer { BIO_free(bio) }
    let status =
        `private` ? PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil) : PEM_write_bio_PUBKEY(bio, pkey)
    guard status == 1 else {
        ERR_clear_error()
        throw .library("cannot write the key as PEM")
    }
    let length = Int(BIO_ctrl_pending(bio))
    var bytes = [UInt8](repeating: 0, count: length)
    let read = bytes.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(length)) }
    guard read == Int32(length) else { throw .library("cannot read the PEM text back") }
    return String(decoding: bytes, as: UTF8.self)
}
