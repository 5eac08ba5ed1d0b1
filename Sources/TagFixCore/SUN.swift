// The pure half of NTAG 424 DNA SUN (Secure Unique NFC, via Secure Dynamic Messaging) checking:
// finding the mirrored fields in a URL, the byte layouts NXP defines (PICCData, the session-key
// vectors SV1 / SV2, the truncated MAC), and the result and error types. No cryptography here:
// TagFixCrypto's SUNVerifier runs AES and CMAC over what this file lays out.
//
// References: NXP NT4H2421Gx datasheet §9.3 (Secure Dynamic Messaging) and application note
// AN12196 (NTAG 424 DNA and NTAG 424 DNA TagTamper features and hints), whose worked examples
// are the tests' vectors.

/// Where a SUN tag mirrors its data into its URL: the query parameters' names. Every deployment
/// chooses its own; the defaults are the names NXP's examples use.
public struct SUNParameterNames: Sendable, Hashable {
    /// The encrypted PICCData (`PICCDataTag ‖ UID ‖ SDMReadCtr ‖ padding`, 16 bytes as 32 hex digits).
    public var piccData: String
    /// The truncated SDMMAC (8 bytes as 16 hex digits).
    public var cmac: String
    /// Plain mirroring: the UID in clear (7 bytes as 14 hex digits).
    public var uid: String
    /// Plain mirroring: SDMReadCtr in clear (3 bytes as 6 hex digits, most significant first).
    public var counter: String
    /// SDMENCFileData, the encrypted part of the file (a multiple of 16 bytes), if the tag mirrors one.
    public var encryptedFileData: String?
    /// The parameter whose value starts the MAC input (SDMMACInputOffset). nil: the input is
    /// empty (SDMMACInputOffset = SDMMACOffset, the factory-style setting). Otherwise the input is
    /// the URL's ASCII from that value's first character up to the CMAC value's first (so it
    /// includes, for example, `&cmac=`).
    public var macInputFrom: String?

    public init(
        piccData: String = "picc_data", cmac: String = "cmac", uid: String = "uid", counter: String = "ctr",
        encryptedFileData: String? = nil, macInputFrom: String? = nil
    ) {
        self.piccData = piccData
        self.cmac = cmac
        self.uid = uid
        self.counter = counter
        self.encryptedFileData = encryptedFileData
        self.macInputFrom = macInputFrom
    }
}

/// Why a SUN URL did not verify. Malformed input (a parameter missing, not hex, the wrong
/// length) and a failed check (MAC mismatch, a PICCDataTag no NTAG 424 DNA writes) alike: a URL
/// that fails any of them proves nothing about the tag.
public enum SUNError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The URL has no such query parameter.
    case missingParameter(String)
    /// The parameter's value is not hexadecimal digits.
    case badHex(parameter: String)
    /// The parameter's value is hex of the wrong size (`expected` says which sizes fit).
    case wrongLength(parameter: String, expected: String, found: Int)
    /// The decrypted PICCDataTag is not one an NTAG 424 DNA writes with AES (UID mirrored, 7-byte
    /// UID, reserved bits clear): the meta-read key is wrong, or the data was altered.
    case unknownPICCDataTag(UInt8)
    /// Encrypted file data needs the read counter (its IV is derived from it), but the tag
    /// does not mirror one.
    case counterMissing
    /// The CMAC does not match: the file-read key is wrong, or the URL was altered or forged.
    case macMismatch

    /// A short machine-readable name (`--json` output, logs).
    public var code: String {
        switch self {
        case .missingParameter: "missing_parameter"
        case .badHex: "bad_hex"
        case .wrongLength: "wrong_length"
        case .unknownPICCDataTag: "unknown_picc_tag"
        case .counterMissing: "counter_missing"
        case .macMismatch: "mac_mismatch"
        }
    }

    public var description: String {
        switch self {
        case .missingParameter(let name):
            "the URL has no \(name)= parameter (name the tag's parameters with --picc-param / --cmac-param)"
        case .badHex(let name):
            "\(name) is not hexadecimal"
        case .wrongLength(let name, let expected, let found):
            "\(name) has \(found) hex digit\(found == 1 ? "" : "s"); expected \(expected)"
        case .unknownPICCDataTag(let tag):
            "the decrypted PICC data starts with tag 0x\(SUNHex.encode([tag])), not one an NTAG 424 DNA writes "
                + "(wrong meta-read key, or altered data)"
        case .counterMissing:
            "the tag mirrors encrypted file data but no read counter, which its decryption needs"
        case .macMismatch:
            "the CMAC does not match (wrong key, or an altered or forged URL)"
        }
    }
}

/// The outcome of checking one SUN URL. `uid` and `counter` are set only when `valid`: data that
/// failed its MAC is not reported as if it were the tag's.
public struct SUNResult: Sendable, Hashable {
    public var valid: Bool
    /// The tag's 7-byte UID.
    public var uid: [UInt8]?
    /// SDMReadCtr, when the tag mirrors it.
    public var counter: UInt32?
    /// The decrypted SDMENCFileData, when the URL carries it.
    public var fileData: [UInt8]?
    /// Why the URL did not verify (nil when valid).
    public var failure: SUNError?

    public static func verified(uid: [UInt8], counter: UInt32?, fileData: [UInt8]? = nil) -> SUNResult {
        SUNResult(valid: true, uid: uid, counter: counter, fileData: fileData, failure: nil)
    }

    public static func invalid(_ failure: SUNError) -> SUNResult {
        SUNResult(valid: false, uid: nil, counter: nil, fileData: nil, failure: failure)
    }

    /// One JSON object: `{"valid":true,"uid":"04DE5F1EACC040","counter":61}`, or
    /// `{"valid":false,"reason":"mac_mismatch"}`.
    public var json: String {
        guard valid, let uid else { return #"{"valid":false,"reason":""# + (failure?.code ?? "invalid") + #""}"# }
        var text = #"{"valid":true,"uid":""# + SUNHex.encode(uid) + #"""#
        if let counter { text += #","counter":\#(counter)"# }
        if let fileData { text += #","file_data":""# + SUNHex.encode(fileData) + #"""# }
        return text + "}"
    }
}

/// A SUN message as found in a URL, before any cryptography.
public enum SUNMessage: Sendable, Hashable {
    /// The PICC data mirrored encrypted (SDMMetaRead key), optionally with encrypted file data.
    case encrypted(piccData: [UInt8], encryptedFileData: [UInt8]?, mac: [UInt8], macInput: [UInt8])
    /// UID and counter mirrored in clear (the counter may be absent).
    case plain(uid: [UInt8], counter: UInt32?, mac: [UInt8], macInput: [UInt8])

    /// Finds the SUN fields in `url`'s query by `names`. Encrypted PICC data wins when the URL
    /// carries both; without it, a plain UID (and counter, if present) is expected.
    public static func parse(_ url: String, names: SUNParameterNames = SUNParameterNames()) throws(SUNError) -> SUNMessage {
        let bytes = Array(url.utf8)
        let query = QueryParameters(bytes)
        guard let macRange = query.range(of: names.cmac) else { throw .missingParameter(names.cmac) }
        let mac = try SUNHex.decode(bytes[macRange], parameter: names.cmac, lengths: [8], expected: "16")
        var macInput: [UInt8] = []
        if let from = names.macInputFrom {
            guard let start = query.range(of: from) else { throw .missingParameter(from) }
            guard start.lowerBound <= macRange.lowerBound else {
                throw .wrongLength(parameter: from, expected: "a parameter before \(names.cmac)", found: 0)
            }
            macInput = Array(bytes[start.lowerBound..<macRange.lowerBound])
        }
        if let piccRange = query.range(of: names.piccData) {
            let picc = try SUNHex.decode(
                bytes[piccRange], parameter: names.piccData, lengths: [16], expected: "32 (AES; LRP is not supported)")
            var file: [UInt8]?
            if let name = names.encryptedFileData {
                guard let range = query.range(of: name) else { throw .missingParameter(name) }
                let count = range.count / 2
                let lengths = count > 0 && count % 16 == 0 && range.count % 2 == 0 ? [count] : []
                file = try SUNHex.decode(bytes[range], parameter: name, lengths: lengths, expected: "a multiple of 32")
            }
            return .encrypted(piccData: picc, encryptedFileData: file, mac: mac, macInput: macInput)
        }
        guard let uidRange = query.range(of: names.uid) else { throw .missingParameter(names.piccData) }
        let uid = try SUNHex.decode(bytes[uidRange], parameter: names.uid, lengths: [7], expected: "14")
        var counter: UInt32?
        if let range = query.range(of: names.counter) {
            // In clear (ASCII) the counter is written most significant byte first (datasheet §9.3.3).
            let value = try SUNHex.decode(bytes[range], parameter: names.counter, lengths: [3], expected: "6")
            counter = UInt32(value[0]) << 16 | UInt32(value[1]) << 8 | UInt32(value[2])
        }
        return .plain(uid: uid, counter: counter, mac: mac, macInput: macInput)
    }
}

/// Decrypted PICCData: `PICCDataTag ‖ UID ‖ SDMReadCtr ‖ padding` (datasheet §9.3.4).
public struct PICCData: Sendable, Hashable {
    public var tag: UInt8
    public var uid: [UInt8]
    public var counter: UInt32?

    /// Reads the 16 decrypted bytes. The tag byte: bit 7 UID mirrored, bit 6 SDMReadCtr mirrored,
    /// bits 5–4 reserved (0), bits 3–0 the UID length (7). A tag without the UID is refused too:
    /// such a message cannot be tied to a tag.
    public init(decrypted bytes: [UInt8]) throws(SUNError) {
        guard bytes.count == 16 else { throw .wrongLength(parameter: "PICC data", expected: "32", found: bytes.count * 2) }
        let tag = bytes[0]
        guard tag & 0x80 != 0, tag & 0x30 == 0, tag & 0x0F == 7 else { throw .unknownPICCDataTag(tag) }
        self.tag = tag
        uid = Array(bytes[1...7])
        // SDMReadCtr is least significant byte first in binary form (datasheet §9.3.3).
        counter = tag & 0x40 != 0 ? UInt32(bytes[8]) | UInt32(bytes[9]) << 8 | UInt32(bytes[10]) << 16 : nil
    }

    public init(uid: [UInt8], counter: UInt32?) {
        tag = 0x87 | (counter == nil ? 0 : 0x40)
        self.uid = uid
        self.counter = counter
    }

    /// `UID ‖ SDMReadCtr` (counter least significant byte first), the variable part of SV1 / SV2.
    public var sessionContext: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(uid.count + 3)
        appendSessionContext(to: &bytes)
        return bytes
    }

    private func appendSessionContext(to bytes: inout [UInt8]) {
        bytes.append(contentsOf: uid)
        guard let counter else { return }
        bytes.append(UInt8(truncatingIfNeeded: counter))
        bytes.append(UInt8(truncatingIfNeeded: counter >> 8))
        bytes.append(UInt8(truncatingIfNeeded: counter >> 16))
    }

    /// SV2 = `3CC3 0001 0080 ‖ UID ‖ SDMReadCtr`, zero-padded to a multiple of 16 bytes: CMAC'd
    /// with the SDM file-read key it gives KSesSDMFileReadMAC (datasheet §9.3.9, AN12196 §3.4).
    public var sv2: [UInt8] { sessionVector(0x3C, 0xC3) }

    /// SV1 = `C33C 0001 0080 ‖ UID ‖ SDMReadCtr`, zero-padded: gives KSesSDMFileReadENC, the key
    /// of SDMENCFileData (datasheet §9.3.9).
    public var sv1: [UInt8] { sessionVector(0xC3, 0x3C) }

    private static let sessionVectorFixed: [UInt8] = [0x00, 0x01, 0x00, 0x80]

    /// `first second 0001 0080 ‖ UID ‖ SDMReadCtr`, zero-padded to whole blocks, made in one
    /// buffer (a phone tap makes one).
    private func sessionVector(_ first: UInt8, _ second: UInt8) -> [UInt8] {
        let length = 6 + uid.count + (counter == nil ? 0 : 3)
        var bytes: [UInt8] = []
        bytes.reserveCapacity((length + 15) / 16 * 16)
        bytes.append(first)
        bytes.append(second)
        bytes.append(contentsOf: Self.sessionVectorFixed)
        appendSessionContext(to: &bytes)
        bytes.append(contentsOf: repeatElement(0, count: (16 - length % 16) % 16))
        return bytes
    }

    /// The block whose encryption under KSesSDMFileReadENC is the file data's IV:
    /// `SDMReadCtr ‖ 13 zero bytes` (datasheet §9.3.6).
    public var fileDataIVInput: [UInt8] {
        let counter = counter ?? 0
        return [UInt8(truncatingIfNeeded: counter), UInt8(truncatingIfNeeded: counter >> 8), UInt8(truncatingIfNeeded: counter >> 16)]
            + [UInt8](repeating: 0, count: 13)
    }
}

/// SDMMAC is the full 16-byte CMAC with only its odd-indexed bytes kept (1, 3, …, 15): 8 bytes
/// (datasheet §9.3.9, "MACt").
public func truncatedMAC(_ full: [UInt8]) -> [UInt8] {
    stride(from: 1, to: full.count, by: 2).map { full[$0] }
}

/// Hexadecimal as the SUN fields are written: upper case out, either case in.
public enum SUNHex {
    public static func encode(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }

    /// Decodes hex digits; nil when any is not one or their count is odd.
    public static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 2)
        var high: UInt8?
        for character in text {
            guard let nibble = nibble(character) else { return nil }
            if let h = high {
                out.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return out
    }

    /// Decodes a parameter's value, which must be hex of one of `lengths` bytes.
    static func decode(_ text: ArraySlice<UInt8>, parameter: String, lengths: [Int], expected: String) throws(SUNError) -> [UInt8] {
        guard text.allSatisfy({ nibble($0) != nil }) else { throw .badHex(parameter: parameter) }
        guard text.count % 2 == 0, lengths.contains(text.count / 2), let bytes = decode(text) else {
            throw .wrongLength(parameter: parameter, expected: expected, found: text.count)
        }
        return bytes
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A URL's query parameters as byte ranges of their values (what the tag's offsets point at),
/// without percent-decoding: SUN values are hex, and the MAC input is the URL's bytes as written.
struct QueryParameters {
    private let url: [UInt8]
    private var values: [(name: Range<Int>, value: Range<Int>)] = []

    init(_ url: [UInt8]) {
        self.url = url
        guard let question = url.firstIndex(of: UInt8(ascii: "?")) else { return }
        let end = url.firstIndex(of: UInt8(ascii: "#")) ?? url.endIndex
        var start = question + 1
        while start <= end {
            let stop = url[start..<end].firstIndex(of: UInt8(ascii: "&")) ?? end
            if let equals = url[start..<stop].firstIndex(of: UInt8(ascii: "=")) {
                values.append((start..<equals, (equals + 1)..<stop))
            }
            start = stop + 1
        }
    }

    /// The value's range of the first parameter called `name` (compared byte by byte, without
    /// a copy of the name: a SUN check asks for three).
    func range(of name: String) -> Range<Int>? {
        values.first { url[$0.name].elementsEqual(name.utf8) }?.value
    }
}
