import CCrypto

/// ECDSA signature verification through libcrypto's EVP interface, for raw `r‖s` signatures
/// over a message used directly as the digest (as NXP's originality signatures are: the UID,
/// unhashed).
public enum ECDSA {
    /// Why a verification could not even be attempted (a malformed key or signature, or a curve
    /// this libcrypto lacks); a signature that does not verify is `false`, not an error.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        case badPublicKey(curve: String)
        case badSignatureLength(Int)
        case library(String)

        public var description: String {
            switch self {
            case .badPublicKey(let curve): "the public key is not an uncompressed point on \(curve)"
            case .badSignatureLength(let count): "an r‖s signature has an even length of at least 2 bytes, not \(count)"
            case .library(let what): "libcrypto: \(what)"
            }
        }
    }

    /// Verifies `signature` (`r‖s`, big-endian, each half the same length) over `digest` with the
    /// public key `publicKey` (an uncompressed SEC1 point, `04‖x‖y`) on the named curve
    /// (`secp128r1`, `prime256v1`…). `digest` is taken as the already-hashed value: nothing is
    /// hashed here.
    /// - Returns: whether the signature verifies.
    /// - Throws: `Failure` when the key or signature cannot be used at all.
    public static func verify(curve: String, publicKey: [UInt8], digest: [UInt8], signature: [UInt8]) throws(Failure) -> Bool {
        guard signature.count >= 2, signature.count % 2 == 0 else { throw .badSignatureLength(signature.count) }
        let half = signature.count / 2
        let der = derSignature(r: Array(signature[..<half]), s: Array(signature[half...]))
        guard let pkey = try publicKeyHandle(curve: curve, point: publicKey) else { throw .badPublicKey(curve: curve) }
        defer { EVP_PKEY_free(pkey) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { throw .library("EVP_PKEY_CTX_new_from_pkey failed") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_verify_init(context) == 1 else { throw .library("EVP_PKEY_verify_init failed") }
        let result = der.withUnsafeBufferPointer { sig in
            digest.withUnsafeBufferPointer { tbs in
                EVP_PKEY_verify(context, sig.baseAddress, sig.count, tbs.baseAddress, tbs.count)
            }
        }
        // 1: verified; 0: does not verify; < 0: a malformed signature (also "does not verify").
        ERR_clear_error()
        return result == 1
    }

    /// An EVP_PKEY for a public point on a named curve (OSSL_PARAM + EVP_PKEY_fromdata), or
    /// `nil` when the point is not on the curve.
    private static func publicKeyHandle(curve: String, point: [UInt8]) throws(Failure) -> OpaquePointer? {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw .library("no EC key management") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else { throw .library("EVP_PKEY_fromdata_init failed") }
        var pkey: OpaquePointer?
        var curveName = Array(curve.utf8CString)
        var pointBytes = point
        let status = curveName.withUnsafeMutableBufferPointer { name in
            pointBytes.withUnsafeMutableBytes { bytes in
                var params = [
                    OSSL_PARAM_construct_utf8_string(cString(groupParameter), name.baseAddress, 0),
                    OSSL_PARAM_construct_octet_string(cString(publicKeyParameter), bytes.baseAddress, bytes.count),
                    OSSL_PARAM_construct_end(),
                ]
                return params.withUnsafeMutableBufferPointer { EVP_PKEY_fromdata(context, &pkey, publicKeySelection, $0.baseAddress) }
            }
        }
        ERR_clear_error()
        guard status == 1, let pkey else { return nil }
        return pkey
    }

    /// OSSL_PKEY_PARAM_GROUP_NAME and OSSL_PKEY_PARAM_PUB_KEY as static strings: an OSSL_PARAM
    /// keeps the pointer to its name, and the C string Swift makes from an imported macro lives
    /// only for the call that builds the parameter (every verification failed with those).
    private static let groupParameter: StaticString = "group"
    private static let publicKeyParameter: StaticString = "pub"

    private static func cString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// EVP_PKEY_PUBLIC_KEY (a macro Swift does not import): the public key and every domain
    /// parameter (OSSL_KEYMGMT_SELECT_PUBLIC_KEY | OSSL_KEYMGMT_SELECT_ALL_PARAMETERS).
    private static let publicKeySelection = Int32(OSSL_KEYMGMT_SELECT_PUBLIC_KEY | OSSL_KEYMGMT_SELECT_ALL_PARAMETERS)

    /// `SEQUENCE { INTEGER r, INTEGER s }` in DER, the form EVP_PKEY_verify takes: each integer
    /// without leading zeros, with a 00 in front when its top bit is set.
    static func derSignature(r: [UInt8], s: [UInt8]) -> [UInt8] {
        func integer(_ bytes: [UInt8]) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty || value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02] + length(value.count) + value
        }
        func length(_ count: Int) -> [UInt8] {
            count < 0x80 ? [UInt8(count)] : count <= 0xFF ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        }
        let body = integer(r) + integer(s)
        return [0x30] + length(body.count) + body
    }
}
