/// A tag's unique identifier (ISO 14443 UID, FeliCa IDm…), 4 to 10 bytes.
public struct TagUID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(TagUIDError) {
        guard (4...10).contains(bytes.count) else { throw .badLength(bytes.count) }
        self.bytes = bytes
    }

    /// Bytes known to be a UID's (4 to 10 of them): unpacked from one that was checked.
    init(checkedBytes bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Parses hex with optional `:`, `-` or space separators, e.g. `04:A1:B2:C3:D4:E5:F6`.
    public init(hex text: String) throws(TagUIDError) {
        var bytes: [UInt8] = []
        var high: UInt8?
        var afterSeparator = true  // no separator at the start, none doubled
        for character in text.utf8 {
            if character == UInt8(ascii: ":") || character == UInt8(ascii: "-") || character == UInt8(ascii: " ") {
                guard high == nil, !afterSeparator else { throw .notHex(text) }
                afterSeparator = true
                continue
            }
            afterSeparator = false
            guard let nibble = Hex.nibble(character) else { throw .notHex(text) }
            if let h = high {
                bytes.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        guard high == nil, !afterSeparator || bytes.isEmpty else { throw .notHex(text) }
        try self.init(bytes: bytes)
    }

    /// The bytes hashed whole, not one by one with their count first as an array's are (a phone
    /// tap's counters look a UID up several times).
    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// Upper-case hex without separators, e.g. `04A1B2C3D4E5F6`.
    public var hex: String { Hex.encode(bytes) }
    public var description: String { hex }

    public static func < (lhs: TagUID, rhs: TagUID) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }
}

public enum TagUIDError: Error, Sendable, Hashable, CustomStringConvertible {
    case badLength(Int)
    case notHex(String)

    public var description: String {
        switch self {
        case .badLength(let count): "a tag UID has 4 to 10 bytes, not \(count)"
        case .notHex(let text): "tag UID \"\(text)\" is not hex bytes (e.g. 04A1B2C3D4E5F6)"
        }
    }
}

/// What kind of tag was read. Open-ended: backends may report types this list does not name.
public struct TagType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let ntag210 = TagType(rawValue: "ntag210")
    public static let ntag212 = TagType(rawValue: "ntag212")
    public static let ntag213 = TagType(rawValue: "ntag213")
    public static let ntag215 = TagType(rawValue: "ntag215")
    public static let ntag216 = TagType(rawValue: "ntag216")
    public static let mifareUltralight = TagType(rawValue: "mifare_ultralight")
    public static let mifareUltralightEV1 = TagType(rawValue: "mifare_ultralight_ev1")
    public static let mifareUltralightC = TagType(rawValue: "mifare_ultralight_c")
    public static let type2 = TagType(rawValue: "type2")
    public static let type4 = TagType(rawValue: "type4")
    public static let felica = TagType(rawValue: "felica")
    public static let mifareClassic1K = TagType(rawValue: "mifare_classic_1k")
    public static let mifareClassic4K = TagType(rawValue: "mifare_classic_4k")
    public static let unknown = TagType(rawValue: "unknown")

    public var description: String { rawValue }
}

/// How a scan reached us. App Clip location confirmation only applies to physical tags.
public enum ScanSource: String, Sendable, Hashable {
    /// Read from a physical tag by a reader.
    case nfc
    /// A URL that did not come from a tag (typed in, a link, a QR code): never confirmed.
    case link
    /// A URL a phone opened from a tag and posted with the browser's position, through `tagfix
    /// serve` (issue 34): decided by `Verifier.phoneVerdict`, which knows it has no UID; the
    /// reader path (`expectation(for:)`) takes it as it takes a link.
    case phone
}

/// One read of one tag: what the verifier gets from a reader.
///
/// A value in an immutable shared box (`ImmutableBox`): a scan travels through streams, sessions
/// and verdicts, and each copy costs one reference count instead of one per field.
public struct TagScan: Sendable, Hashable {
    struct Fields: Sendable, Hashable {
        var readerID: String
        var uid: TagUID
        var tagType: TagType
        var url: String?
        var time: Timestamp
        var source: ScanSource
        var ndefMessage: [UInt8]?
        var readDuration: Duration?
        var bytesMoved: Int?
        var ndefProblem: String?
        var ndefReadFailed = false
        var originality: Originality? = nil
        var readEffort: ReadEffort? = nil
        var phone: PhoneAudit? = nil
    }

    private var storage: ImmutableBox<Fields>

    public var readerID: String {
        get { storage.fields.readerID }
        set { storage.update { $0.readerID = newValue } }
    }
    public var uid: TagUID {
        get { storage.fields.uid }
        set { storage.update { $0.uid = newValue } }
    }
    public var tagType: TagType {
        get { storage.fields.tagType }
        set { storage.update { $0.tagType = newValue } }
    }
    /// The tag's first URI record, as text; `nil` when the tag holds none.
    public var url: String? {
        get { storage.fields.url }
        set { storage.update { $0.url = newValue } }
    }
    /// When the tag was read, on the injected clock.
    public var time: Timestamp {
        get { storage.fields.time }
        set { storage.update { $0.time = newValue } }
    }
    public var source: ScanSource {
        get { storage.fields.source }
        set { storage.update { $0.source = newValue } }
    }
    /// The NDEF message's bytes as read, when the reader has them (real readers do; a scenario's
    /// taps carry only a URL).
    public var ndefMessage: [UInt8]? {
        get { storage.fields.ndefMessage }
        set { storage.update { $0.ndefMessage = newValue } }
    }
    /// How long the read took, from tag found to message in hand.
    public var readDuration: Duration? {
        get { storage.fields.readDuration }
        set { storage.update { $0.readDuration = newValue } }
    }
    /// Application bytes the read moved (commands and answers).
    public var bytesMoved: Int? {
        get { storage.fields.bytesMoved }
        set { storage.update { $0.bytesMoved = newValue } }
    }
    /// Why a tag read by a reader has no NDEF message (not formatted, a broken CC…).
    public var ndefProblem: String? {
        get { storage.fields.ndefProblem }
        set { storage.update { $0.ndefProblem = newValue } }
    }
    /// Whether the tag's NDEF data is there but could not be read (a broken or unsupported
    /// capability container, a refused read; `ndefProblem` says which), as opposed to a tag that
    /// holds no NDEF message: the verifier then cannot know the tag and says so.
    public var ndefReadFailed: Bool {
        get { storage.fields.ndefReadFailed }
        set { storage.update { $0.ndefReadFailed = newValue } }
    }

    /// The NXP originality signature's verdict on the chip, when the reader or the dump checked
    /// one; `nil` when nothing was checked (scenario taps, readers that do not ask). Trust checks
    /// only look at it when it is there, so scans without it cost the verifier nothing.
    public var originality: Originality? {
        get { storage.fields.originality }
        set { storage.update { $0.originality = newValue } }
    }

    /// How the read went (attempts, RF errors, time), when the reader knows: libnfc's reader does.
    public var readEffort: ReadEffort? {
        get { storage.fields.readEffort }
        set { storage.update { $0.readEffort = newValue } }
    }

    /// Who tapped, for a phone's tap (`source == .phone`): its token's name, its address and its
    /// browser, kept for the audit; `nil` for a reader's scan.
    public var phone: PhoneAudit? {
        get { storage.fields.phone }
        set { storage.update { $0.phone = newValue } }
    }

    public init(
        readerID: String, uid: TagUID, tagType: TagType, url: String?, time: Timestamp,
        source: ScanSource = .nfc, ndefMessage: [UInt8]? = nil, readDuration: Duration? = nil, bytesMoved: Int? = nil
    ) {
        storage = ImmutableBox(
            Fields(
                readerID: readerID, uid: uid, tagType: tagType, url: url, time: time, source: source, ndefMessage: ndefMessage,
                readDuration: readDuration, bytesMoved: bytesMoved, ndefProblem: nil))
    }

}

/// Hex text for bytes, as dumps and tools write it.
public enum Hex {
    /// The value of one hex digit, or `nil`.
    public static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// Upper-case hex without separators. Written straight into the string's storage: a UID's
    /// 14 digits are a small string, so nothing is allocated (a digit table and a growing array
    /// were, two or three allocations each time, and a phone tap makes a UID's hex several times).
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        bytes.withContiguousStorageIfAvailable(encodeContiguous) ?? Array(bytes).withUnsafeBufferPointer(encodeContiguous)
    }

    private static func encodeContiguous(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = digit(byte >> 4)
                out[2 * index + 1] = digit(byte & 0x0F)
            }
            return bytes.count * 2
        }
    }

    private static func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x37 + nibble }

    /// Bytes from hex text; spaces, colons and dashes between bytes are allowed. `nil` for
    /// anything else (an odd digit count, a non-hex character).
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var bytes: [UInt8] = []
        var high: UInt8?
        for character in text.utf8 {
            if character == 0x20 || character == UInt8(ascii: ":") || character == UInt8(ascii: "-") {
                guard high == nil else { return nil }
                continue
            }
            guard let nibble = nibble(character) else { return nil }
            if let h = high {
                bytes.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return high == nil ? bytes : nil
    }
}
