/// Signed locations in a tag's URL (docs/trust.md, "Signed locations"): a site key signs the
/// location the URL gives, so a location written by anyone else, or edited, or (when the UID is
/// bound) copied onto another tag, does not verify.
///
/// The signature is the URL's `sig` query parameter: 64 bytes of Ed25519 signature in unpadded
/// base64url (86 characters), prefixed with `u.` when the signed text binds the tag's UID. What is
/// signed is `canonical(...)`, never the URL's own text, so the parameters' order, their spelling
/// (`52.52` or `52.520`) and the rest of the URL do not matter.
public enum SignedLocation {
    /// The query parameter that carries the signature.
    public static let parameter = "sig"
    /// The signature value's prefix when the signed text binds the UID.
    public static let uidPrefix = "u."
    /// Bytes of an Ed25519 signature.
    public static let signatureLength = 64

    /// The text a location signature covers, as UTF-8 bytes: six lines joined by LF (no final LF)
    ///
    ///     TAGFIX-LOCATION-V1
    ///     lat=53.5450000
    ///     lon=9.9660000
    ///     r=25.00
    ///     id=T01
    ///     uid=04A224B2C56480
    ///
    /// Latitude and longitude in degrees with exactly 7 decimals, the radius in metres with
    /// exactly 2 (`fixed(_:decimals:)`); `id` the tag id TagFix reads from the URL (empty when it
    /// names none); `uid` the UID in upper-case hex without separators, or empty when the
    /// signature does not bind one. `nil` when the tag id holds a line break (it could not be told
    /// from the next line).
    public static func canonical(region: CircularRegion, tagID: String?, uid: TagUID?) -> [UInt8]? {
        let id = tagID ?? ""
        guard !id.utf8.contains(0x0A), !id.utf8.contains(0x0D) else { return nil }
        let text =
            "TAGFIX-LOCATION-V1\nlat=\(fixed(region.center.latitude, decimals: 7))\nlon=\(fixed(region.center.longitude, decimals: 7))"
            + "\nr=\(fixed(region.radius, decimals: 2))\nid=\(id)\nuid=\(uid?.hex ?? "")"
        return Array(text.utf8)
    }

    /// `value` in fixed-point decimal with exactly `decimals` digits after the point: `value ×
    /// 10^decimals` (in IEEE double) rounded half away from zero to an integer, then written with
    /// a `-` only when that integer is negative, no `+`, no exponent, no grouping. So `52.52`,
    /// `52.520` and `5.252e1` all give `52.5200000`, and `-0.00000001` gives `0.0000000`.
    public static func fixed(_ value: Double, decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (value * scale).rounded(.toNearestOrAwayFromZero)
        guard scaled.isFinite, abs(scaled) < 9e18 else { return "nan" }
        let integer = Int64(scaled)
        let magnitude = integer.magnitude
        var digits = String(magnitude)
        if digits.count <= decimals { digits = String(repeating: "0", count: decimals + 1 - digits.count) + digits }
        let point = digits.index(digits.endIndex, offsetBy: -decimals)
        let text = decimals > 0 ? digits[..<point] + "." + digits[point...] : digits
        return (integer < 0 ? "-" : "") + text
    }

    /// A `sig` parameter's value, decoded.
    public struct Signature: Sendable, Hashable {
        public var bytes: [UInt8]
        /// Whether the signed text carries the tag's UID.
        public var bindsUID: Bool

        public init(bytes: [UInt8], bindsUID: Bool) {
            self.bytes = bytes
            self.bindsUID = bindsUID
        }

        /// `nil` when the value is not 64 bytes of unpadded base64url (with or without `u.`).
        public init?(parameter value: String) {
            var text = Substring(value)
            bindsUID = text.hasPrefix(SignedLocation.uidPrefix)
            if bindsUID { text = text.dropFirst(SignedLocation.uidPrefix.count) }
            guard let bytes = Base64URL.decode(text), bytes.count == SignedLocation.signatureLength else { return nil }
            self.bytes = bytes
        }

        /// The parameter's value.
        public var parameter: String { (bindsUID ? SignedLocation.uidPrefix : "") + Base64URL.encode(bytes) }
    }

    /// Why a URL cannot be signed.
    public enum SigningError: Error, Sendable, Hashable, CustomStringConvertible {
        case location(URLLocationError)
        case noLocation
        case noRadius
        case alreadySigned
        case lineBreakInID

        public var description: String {
            switch self {
            case .location(let error): "\(error)"
            case .noLocation: "the URL carries no location (lat=, lon=, r=) to sign; registry tags need no signature"
            case .noRadius: "the URL gives no radius: add r=METRES, so the signed region is the one every verifier reads"
            case .alreadySigned: "the URL already has a sig= parameter: sign the URL without it"
            case .lineBreakInID: "the URL's tag id holds a line break, which a signature cannot cover"
            }
        }
    }

    /// What `sign` must sign for `url`, and whether the URL can take a signature: its location
    /// (lat, lon and r, read as `tagfix verify` reads them), no `sig` yet.
    public static func message(forURL url: String, uid: TagUID?, maximumRadius: Double = CircularRegion.defaultMaximumRadius)
        throws(SigningError) -> [UInt8]
    {
        let location: URLLocation
        do {
            location = try URLLocation(url: url, defaultRadius: nil, maximumRadius: maximumRadius)
        } catch {
            if case .missingRadius = error { throw .noRadius }
            throw .location(error)
        }
        guard location.signature == nil else { throw .alreadySigned }
        guard let region = location.region else { throw .noLocation }
        guard !url.lowercased().hasPrefix("geo:") else { throw .noLocation }
        guard let message = canonical(region: region, tagID: location.tagID, uid: uid) else { throw .lineBreakInID }
        return message
    }

    /// `url` with the signature appended as its last query parameter (before any `#fragment`).
    public static func appending(_ signature: Signature, to url: String) -> String {
        let hash = url.firstIndex(of: "#") ?? url.endIndex
        let base = url[..<hash]
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return String(base) + separator + parameter + "=" + signature.parameter + String(url[hash...])
    }

    /// `text` with the value of every `sig=` query parameter replaced by `…`: for output and logs,
    /// which carry no signature bytes.
    public static func redacted(_ text: String) -> String {
        let name = Array((parameter + "=").utf8)
        // Most URLs have no signature: they are given back as they are, without a copy.
        let signed =
            text.utf8.withContiguousStorageIfAvailable { bytes in
                bytes.indices.contains { index in
                    (bytes[index] == UInt8(ascii: "?") || bytes[index] == UInt8(ascii: "&"))
                        && UnsafeBufferPointer(rebasing: bytes[(index + 1)...]).starts(with: name)
                }
            } ?? true
        guard signed else { return text }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        var index = 0
        var changed = false
        while index < bytes.count {
            let byte = bytes[index]
            out.append(byte)
            index += 1
            guard byte == UInt8(ascii: "?") || byte == UInt8(ascii: "&"), bytes[index...].starts(with: name) else { continue }
            out += name
            index += name.count
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "&"), bytes[index] != UInt8(ascii: "#") { index += 1 }
            if index > start {
                out += Array("…".utf8)
                changed = true
            }
        }
        return changed ? String(decoding: out, as: UTF8.self) : text
    }
}

/// Checks location signatures: the site's public keys (`TagFixCrypto.Ed25519PublicKey`).
public protocol LocationSignatureChecker: Sendable {
    /// Whether `signature` over `message` verifies with any trusted key.
    func verifies(signature: [UInt8], message: [UInt8]) -> Bool
}

/// Unpadded base64url (RFC 4648 §5), as URLs carry binary.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var chunk = UInt32(bytes[index]) << 16
            if count > 1 { chunk |= UInt32(bytes[index + 1]) << 8 }
            if count > 2 { chunk |= UInt32(bytes[index + 2]) }
            for position in 0...count { out.append(alphabet[Int((chunk >> (18 - 6 * UInt32(position))) & 0x3F)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `nil` for any character outside the alphabet, padding, or a length no encoding has; also
    /// for non-zero bits left over in the last character (each byte string has one encoding).
    public static func decode(_ text: Substring) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in text.utf8 {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = character - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> UInt32(bits)) & 0xFF))
                buffer &= (1 << UInt32(bits)) - 1
            }
        }
        guard bits < 6, buffer == 0 else { return nil }
        return out
    }
}
