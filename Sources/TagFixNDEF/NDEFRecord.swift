import TagFixCore

/// The Type Name Format of an NDEF record (NFC Forum NDEF 1.0 §3.2.6). Value 7 is reserved and
/// never decodes.
public enum TypeNameFormat: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case empty = 0
    case wellKnown = 1
    case media = 2
    case absoluteURI = 3
    case external = 4
    case unknown = 5
    case unchanged = 6

    /// The name used in JSON output: `empty`, `well_known`, `media`, `absolute_uri`, `external`,
    /// `unknown`, `unchanged`.
    public var name: String {
        switch self {
        case .empty: "empty"
        case .wellKnown: "well_known"
        case .media: "media"
        case .absoluteURI: "absolute_uri"
        case .external: "external"
        case .unknown: "unknown"
        case .unchanged: "unchanged"
        }
    }

    public var description: String { name }

    /// Whether the spec requires TYPE_LENGTH to be zero (empty, unknown, unchanged) or non-zero.
    var typeMustBeEmpty: Bool { self == .empty || self == .unknown || self == .unchanged }
}

/// One logical NDEF record: chunks already reassembled, flags not part of it (they belong to its
/// place in a message).
public struct NDEFRecord: Sendable, Hashable {
    public let tnf: TypeNameFormat
    public let type: [UInt8]
    public let id: [UInt8]
    public let payload: [UInt8]

    /// A record, checked against the spec's rules: TNF `empty` has no type, id or payload; `unknown`
    /// has no type; well-known, media, absolute-URI and external records have a type; `unchanged`
    /// exists only inside chunked records and is refused here. Type and id are at most 255 bytes.
    public init(tnf: TypeNameFormat, type: [UInt8] = [], id: [UInt8] = [], payload: [UInt8] = []) throws(NDEFError) {
        try Self.check(tnf: tnf, typeLength: type.count, idLength: id.count, payloadLength: payload.count, offset: 0)
        guard tnf != .unchanged else { throw .chunk(.unchangedOutsideChunk, offset: 0) }
        guard type.count <= 255 else { throw .fieldTooLong(.type, length: type.count) }
        guard id.count <= 255 else { throw .fieldTooLong(.id, length: id.count) }
        guard UInt64(payload.count) <= UInt64(UInt32.max) else { throw .fieldTooLong(.payload, length: payload.count) }
        self.tnf = tnf
        self.type = type
        self.id = id
        self.payload = payload
    }

    /// For records already validated by the parser.
    init(unchecked tnf: TypeNameFormat, type: [UInt8], id: [UInt8], payload: [UInt8]) {
        self.tnf = tnf
        self.type = type
        self.id = id
        self.payload = payload
    }

    /// A well-known record, e.g. `NDEFRecord(wellKnown: "U", payload: …)`.
    public init(wellKnown type: String, id: [UInt8] = [], payload: [UInt8]) throws(NDEFError) {
        try self.init(tnf: .wellKnown, type: Array(type.utf8), id: id, payload: payload)
    }

    /// The type as text (types are ASCII by the spec; other bytes are shown as U+FFFD).
    public var typeName: String { String(decoding: type, as: UTF8.self) }

    /// The TNF rules on lengths, in the order ndeflib checks them.
    static func check(tnf: TypeNameFormat, typeLength: Int, idLength: Int, payloadLength: Int, offset: Int) throws(NDEFError) {
        if tnf.typeMustBeEmpty {
            guard typeLength == 0 else { throw .typeLengthMustBeZero(tnf, offset: offset) }
        } else {
            guard typeLength > 0 else { throw .typeLengthMustNotBeZero(tnf, offset: offset) }
        }
        if tnf == .empty {
            guard idLength == 0 else { throw .idLengthMustBeZero(tnf, offset: offset) }
            guard payloadLength == 0 else { throw .payloadLengthMustBeZero(offset: offset) }
        }
    }
}

/// The fields of a record, as errors name them.
public enum NDEFField: String, Sendable, Hashable {
    case header = "header"
    case typeLength = "TYPE_LENGTH"
    case payloadLength = "PAYLOAD_LENGTH"
    case idLength = "ID_LENGTH"
    case type = "TYPE"
    case id = "ID"
    case payload = "PAYLOAD"
}

/// How chunked records (CF flag) were misused.
public enum ChunkProblem: Sendable, Hashable, CustomStringConvertible {
    /// A record with TNF `unchanged` that is not a middle or terminating chunk.
    case unchangedOutsideChunk
    /// The first chunk of a record has TNF `unchanged`.
    case initialChunkUnchanged
    /// A middle or terminating chunk whose TNF is not `unchanged`.
    case followingChunkNotUnchanged
    /// A middle or terminating chunk with a type or an id.
    case followingChunkHasTypeOrID
    /// The message ends inside a chunked record.
    case unterminated

    public var description: String {
        switch self {
        case .unchangedOutsideChunk: "a record with TNF 'unchanged' outside a chunked record"
        case .initialChunkUnchanged: "the first chunk of a record has TNF 'unchanged'"
        case .followingChunkNotUnchanged: "a middle or terminating chunk must have TNF 'unchanged'"
        case .followingChunkHasTypeOrID: "a middle or terminating chunk must have no type and no id"
        case .unterminated: "the message ends inside a chunked record"
        }
    }
}

/// Why bytes are not a valid NDEF message, record or payload: what, and where (byte offset in the
/// input that was parsed).
public enum NDEFError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The input ends inside a field ("buffer underflow").
    case truncated(NDEFField, offset: Int)
    /// TNF 7 is reserved.
    case reservedTNF(offset: Int)
    case typeLengthMustBeZero(TypeNameFormat, offset: Int)
    case typeLengthMustNotBeZero(TypeNameFormat, offset: Int)
    case idLengthMustBeZero(TypeNameFormat, offset: Int)
    case payloadLengthMustBeZero(offset: Int)
    /// A field longer than its length field can say (encoding).
    case fieldTooLong(NDEFField, length: Int)
    /// The first record has no MB flag.
    case missingMessageBegin(offset: Int)
    /// A record after the first has the MB flag.
    case messageBeginInMiddle(offset: Int)
    /// The input ends without a record carrying the ME flag.
    case missingMessageEnd(offset: Int)
    /// The last record (ME) has the CF flag.
    case chunkFlagOnLastRecord(offset: Int)
    /// Bytes follow the record with the ME flag.
    case trailingBytes(offset: Int)
    case chunk(ChunkProblem, offset: Int)
    /// A URI record's identifier code is 0x24 or above (reserved).
    case reservedURICode(UInt8)
    /// Text that must be UTF-8 is not.
    case invalidUTF8(String)
    /// Text that must be UTF-16 is not.
    case invalidUTF16
    /// A URI with control characters.
    case invalidURICharacters
    case emptyLanguageCode
    case languageCodeTooLong(Int, available: Int)
    case reservedTextStatusBit
    /// A Smart Poster must hold exactly one URI record.
    case smartPosterURICount(Int)
    case smartPosterAction(UInt8)
    case smartPosterSize(Int)
    case nestedTooDeep
    case invalidType(String)

    public var description: String {
        switch self {
        case .truncated(let field, let offset): "truncated \(field.rawValue) at byte \(offset) (buffer underflow)"
        case .reservedTNF(let offset): "TNF 7 is reserved at byte \(offset) (TNF field value must be between 0 and 6)"
        case .typeLengthMustBeZero(let tnf, let offset): "TYPE_LENGTH must be 0 for TNF value \(tnf.rawValue) (\(tnf)) at byte \(offset)"
        case .typeLengthMustNotBeZero(let tnf, let offset):
            "TYPE_LENGTH must be > 0 for TNF value \(tnf.rawValue) (\(tnf)) at byte \(offset)"
        case .idLengthMustBeZero(let tnf, let offset): "ID_LENGTH must be 0 for TNF value \(tnf.rawValue) (\(tnf)) at byte \(offset)"
        case .payloadLengthMustBeZero(let offset): "PAYLOAD_LENGTH must be 0 for TNF value 0 (empty) at byte \(offset)"
        case .fieldTooLong(let field, let length): "\(field.rawValue) of \(length) bytes does not fit its length field"
        case .missingMessageBegin(let offset): "MB flag not set in first record (byte \(offset))"
        case .messageBeginInMiddle(let offset): "MB flag set in middle record (byte \(offset))"
        case .missingMessageEnd(let offset): "ME flag not set in last record (message ends at byte \(offset))"
        case .chunkFlagOnLastRecord(let offset): "CF flag set in last record (byte \(offset))"
        case .trailingBytes(let offset): "bytes after the last record (ME) at byte \(offset)"
        case .chunk(let problem, let offset): "\(problem) (byte \(offset))"
        case .reservedURICode(let code):
            "URI identifier code 0x\(Hex.encode([code])) is reserved (decoding of URI identifier \(code) is not defined)"
        case .invalidUTF8(let what): "\(what) is not valid UTF-8"
        case .invalidUTF16: "text is not valid UTF-16"
        case .invalidURICharacters: "URI field contains invalid characters (control characters)"
        case .emptyLanguageCode: "Text record language code length can not be zero"
        case .languageCodeTooLong(let length, let available):
            "Text record language code length \(length) exceeds payload (\(available) bytes)"
        case .reservedTextStatusBit: "Text record status byte has the reserved bit 6 set"
        case .smartPosterURICount(let count): "Smart Poster payload must contain exactly one URI record, got \(count)"
        case .smartPosterAction(let value): "Smart Poster action 0x\(Hex.encode([value])) is not exec (0), save (1) or open (2)"
        case .smartPosterSize(let length): "Smart Poster size record must be 4 bytes, not \(length)"
        case .nestedTooDeep: "NDEF messages nested too deeply"
        case .invalidType(let detail): detail
        }
    }
}
