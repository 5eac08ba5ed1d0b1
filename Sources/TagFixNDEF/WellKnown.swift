import TagFixCore

/// What a record holds, decoded by its type. The record keeps its raw bytes; this is a view.
public enum NDEFPayload: Sendable, Hashable {
    case empty
    case uri(URIRecord)
    case text(TextRecord)
    case smartPoster(SmartPoster)
    /// A media-type record (RFC 2046 type such as `text/plain`, `application/vnd.wfa.wsc`).
    case mime(type: String, data: [UInt8])
    /// TNF 3: the type field is an absolute URI.
    case absoluteURI(String, data: [UInt8])
    /// An Android Application Record (`android.com:pkg`).
    case androidApplication(package: String)
    /// Another NFC Forum external type (`domain:type`).
    case external(type: String, data: [UInt8])
    /// A well-known type this codec does not interpret, or TNF unknown.
    case other
}

extension NDEFRecord {
    /// The record's payload decoded by its type.
    /// - Throws: `NDEFError` when a payload breaks its type's rules (a reserved URI code, a Text
    ///   record's bad language length, invalid UTF-8…).
    public func decoded() throws(NDEFError) -> NDEFPayload {
        try decoded(depth: 0)
    }

    func decoded(depth: Int) throws(NDEFError) -> NDEFPayload {
        switch tnf {
        case .empty: return .empty
        case .wellKnown:
            switch type {
            case [0x55]: return .uri(try URIRecord(payload: payload))
            case [0x54]: return .text(try TextRecord(payload: payload))
            case [0x53, 0x70]: return .smartPoster(try SmartPoster(payload: payload, depth: depth))
            default: return .other
            }
        case .media:
            return .mime(type: try Self.asciiType(type, what: "media type"), data: payload)
        case .absoluteURI:
            return .absoluteURI(try Self.asciiType(type, what: "absolute URI"), data: payload)
        case .external:
            let name = try Self.asciiType(type, what: "external type").lowercased()
            if name == "android.com:pkg" {
                guard let package = String(validating: payload, as: UTF8.self) else { throw .invalidUTF8("Android package name") }
                return .androidApplication(package: package)
            }
            return .external(type: name, data: payload)
        case .unknown, .unchanged:
            return .other
        }
    }

    /// Types are US-ASCII printable characters.
    static func asciiType(_ bytes: [UInt8], what: String) throws(NDEFError) -> String {
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { throw .invalidType("\(what) is not printable ASCII") }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: - Building records

    /// A URI record with the shortest form (the longest matching abbreviation).
    public static func uri(_ uri: String) -> NDEFRecord {
        NDEFRecord(unchecked: .wellKnown, type: [0x55], id: [], payload: URIRecord(uri).payload)
    }

    /// A Text record in UTF-8.
    public static func text(_ text: String, language: String = "en") throws(NDEFError) -> NDEFRecord {
        try NDEFRecord(wellKnown: "T", payload: TextRecord(text: text, language: language, encoding: .utf8).payload())
    }

    /// A media-type record.
    public static func mime(_ type: String, data: [UInt8]) throws(NDEFError) -> NDEFRecord {
        try NDEFRecord(tnf: .media, type: Array(type.utf8), payload: data)
    }

    /// An Android Application Record.
    public static func androidApplication(_ package: String) throws(NDEFError) -> NDEFRecord {
        try NDEFRecord(tnf: .external, type: Array("android.com:pkg".utf8), payload: Array(package.utf8))
    }
}

// MARK: - URI (NFC Forum URI RTD 1.0)

/// A URI record: an abbreviation code and the rest of the URI.
public struct URIRecord: Sendable, Hashable {
    /// The identifier-code table, 0x00–0x23. Codes from 0x24 are reserved.
    public static let prefixes: [String] = [
        "", "http://www.", "https://www.", "http://", "https://", "tel:", "mailto:", "ftp://anonymous:anonymous@",
        "ftp://ftp.", "ftps://", "sftp://", "smb://", "nfs://", "ftp://", "dav://", "news:", "telnet://", "imap:",
        "rtsp://", "urn:", "pop:", "sip:", "sips:", "tftp:", "btspp://", "btl2cap://", "btgoep://", "tcpobex://",
        "irdaobex://", "file://", "urn:epc:id:", "urn:epc:tag:", "urn:epc:pat:", "urn:epc:raw:", "urn:epc:", "urn:nfc:",
    ]

    public let code: UInt8
    public let rest: String

    /// The full URI (strictly, an IRI: non-ASCII characters are kept as they are).
    public var uri: String { Self.prefixes[Int(code)] + rest }

    /// Decodes a URI record's payload.
    public init(payload: [UInt8]) throws(NDEFError) {
        guard let code = payload.first else {
            self.code = 0
            self.rest = ""
            return
        }
        guard Int(code) < Self.prefixes.count else { throw .reservedURICode(code) }
        let tail = Array(payload.dropFirst())
        guard let rest = String(validating: tail, as: UTF8.self) else { throw .invalidUTF8("URI field") }
        guard !tail.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { throw .invalidURICharacters }
        self.code = code
        self.rest = rest
    }

    /// The shortest form of `uri`: the longest abbreviation it starts with.
    public init(_ uri: String) {
        var best = 0
        for (index, prefix) in Self.prefixes.enumerated() where index > 0 && uri.hasPrefix(prefix) {
            if prefix.utf8.count > Self.prefixes[best].utf8.count { best = index }
        }
        code = UInt8(best)
        rest = String(uri.dropFirst(Self.prefixes[best].count))
    }

    public var payload: [UInt8] { [code] + Array(rest.utf8) }
}

// MARK: - Text (NFC Forum Text RTD 1.0)

/// A Text record: language code and text, UTF-8 or UTF-16.
public struct TextRecord: Sendable, Hashable {
    public enum Encoding: String, Sendable, Hashable {
        case utf8 = "UTF-8"
        case utf16 = "UTF-16"
    }

    public var text: String
    /// IANA language code, e.g. `en`, `de-CH`.
    public var language: String
    public var encoding: Encoding

    public init(text: String, language: String, encoding: Encoding) {
        self.text = text
        self.language = language
        self.encoding = encoding
    }

    /// Decodes a Text record's payload: status byte (bit 7 UTF-16, bit 6 reserved, bits 0–5 the
    /// language code length), language code, text. UTF-16 follows its byte-order mark, big-endian
    /// without one.
    public init(payload: [UInt8]) throws(NDEFError) {
        guard let status = payload.first else { throw .truncated(.payload, offset: 0) }
        guard status & 0x40 == 0 else { throw .reservedTextStatusBit }
        let length = Int(status & 0x3F)
        guard length > 0 else { throw .emptyLanguageCode }
        guard length <= payload.count - 1 else { throw .languageCodeTooLong(length, available: payload.count - 1) }
        let languageBytes = payload[1...length]
        guard languageBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .invalidType("Text record language code is not ASCII") }
        language = String(decoding: languageBytes, as: UTF8.self)
        let body = Array(payload[(1 + length)...])
        if status & 0x80 == 0 {
            encoding = .utf8
            guard let decoded = String(validating: body, as: UTF8.self) else { throw .invalidUTF8("text") }
            text = decoded
        } else {
            encoding = .utf16
            text = try Self.utf16(body)
        }
    }

    static func utf16(_ bytes: [UInt8]) throws(NDEFError) -> String {
        guard bytes.count % 2 == 0 else { throw .invalidUTF16 }
        var littleEndian = false
        var start = 0
        if bytes.count >= 2 {
            if bytes[0] == 0xFF, bytes[1] == 0xFE {
                littleEndian = true
                start = 2
            } else if bytes[0] == 0xFE, bytes[1] == 0xFF {
                start = 2
            }
        }
        var units: [UInt16] = []
        var index = start
        while index + 1 < bytes.count {
            let a = UInt16(bytes[index]), b = UInt16(bytes[index + 1])
            units.append(littleEndian ? b << 8 | a : a << 8 | b)
            index += 2
        }
        guard let text = String(validating: units, as: UTF16.self) else { throw .invalidUTF16 }
        return text
    }

    /// The payload bytes (UTF-16 written big-endian with a byte-order mark).
    public func payload() throws(NDEFError) -> [UInt8] {
        let languageBytes = Array(language.utf8)
        guard !languageBytes.isEmpty else { throw .emptyLanguageCode }
        guard languageBytes.count <= 63 else { throw .languageCodeTooLong(languageBytes.count, available: 63) }
        switch encoding {
        case .utf8:
            return [UInt8(languageBytes.count)] + languageBytes + Array(text.utf8)
        case .utf16:
            var out: [UInt8] = [0x80 | UInt8(languageBytes.count)] + languageBytes + [0xFE, 0xFF]
            for unit in text.utf16 { out += [UInt8(unit >> 8), UInt8(unit & 0xFF)] }
            return out
        }
    }
}

// MARK: - Smart Poster (NFC Forum Smart Poster RTD 1.0)

/// A Smart Poster: one URI, optional titles, action, size, type and icons, as a nested message.
public struct SmartPoster: Sendable, Hashable {
    public enum Action: UInt8, Sendable, Hashable {
        case exec = 0
        case save = 1
        case open = 2

        public var name: String {
            switch self {
            case .exec: "exec"
            case .save: "save"
            case .open: "open"
            }
        }
    }

    public var uri: URIRecord
    /// Titles by language code, in record order.
    public var titles: [TextRecord]
    public var action: Action?
    /// The size of the referenced resource, bytes.
    public var resourceSize: UInt32?
    /// The MIME type of the referenced resource.
    public var resourceType: String?
    /// Icons: media-type records of type `image/*` or `video/*`.
    public var icons: [(type: String, data: [UInt8])]
    /// The nested message, as read.
    public var message: NDEFMessage

    /// The first title (a poster usually has one per language).
    public var title: String? { titles.first?.text }

    init(payload: [UInt8], depth: Int) throws(NDEFError) {
        guard depth < 4 else { throw .nestedTooDeep }
        message = try NDEFMessage(bytes: payload)
        var uris: [URIRecord] = []
        titles = []
        icons = []
        for record in message.records {
            switch (record.tnf, record.type) {
            case (.wellKnown, [0x55]): uris.append(try URIRecord(payload: record.payload))
            case (.wellKnown, [0x54]): titles.append(try TextRecord(payload: record.payload))
            case (.wellKnown, Array("act".utf8)):
                guard record.payload.count == 1, let action = Action(rawValue: record.payload[0]) else {
                    throw .smartPosterAction(record.payload.first ?? 0xFF)
                }
                self.action = action
            case (.wellKnown, [0x73]):
                guard record.payload.count == 4 else { throw .smartPosterSize(record.payload.count) }
                resourceSize = record.payload.reduce(0) { $0 << 8 | UInt32($1) }
            case (.wellKnown, [0x74]):
                guard let type = String(validating: record.payload, as: UTF8.self) else { throw .invalidUTF8("Smart Poster type") }
                resourceType = type
            case (.media, _):
                let type = try NDEFRecord.asciiType(record.type, what: "media type")
                if type.hasPrefix("image/") || type.hasPrefix("video/") { icons.append((type, record.payload)) }
            default:
                continue
            }
        }
        guard uris.count == 1, let uri = uris.first else { throw .smartPosterURICount(uris.count) }
        self.uri = uri
    }

    public static func == (lhs: SmartPoster, rhs: SmartPoster) -> Bool { lhs.message == rhs.message }
    public func hash(into hasher: inout Hasher) { hasher.combine(message) }
}

extension NDEFMessage {
    /// The URL a tag carries: its first URI record, or a Smart Poster's URI.
    public var firstURL: String? {
        for record in records {
            switch try? record.decoded() {
            case .uri(let uri): return uri.uri
            case .smartPoster(let poster): return poster.uri.uri
            default: continue
            }
        }
        return nil
    }
}
