/// A JSON value that remembers the line it started on, so loaders can say
/// "registry.json:14: latitude 91 is outside -90…90 degrees" instead of a coding path.
///
/// A strict RFC 8259 reader: no comments, no trailing commas, no duplicate keys, nesting at most
/// 256 deep, numbers kept as their text as well as a `Double`.
public struct JSONValue: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case null
        case bool(Bool)
        /// The number as written and as a `Double`.
        case number(String, Double)
        case string(String)
        case array([JSONValue])
        /// Members in file order.
        case object([(key: String, value: JSONValue)])

        public static func == (lhs: Kind, rhs: Kind) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): true
            case (.bool(let a), .bool(let b)): a == b
            case (.number(let a, _), .number(let b, _)): a == b
            case (.string(let a), .string(let b)): a == b
            case (.array(let a), .array(let b)): a == b
            case (.object(let a), .object(let b)):
                a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
            default: false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .null: hasher.combine(0)
            case .bool(let b): hasher.combine(b)
            case .number(let text, _): hasher.combine(text)
            case .string(let s): hasher.combine(s)
            case .array(let a): hasher.combine(a)
            case .object(let members):
                for member in members {
                    hasher.combine(member.key)
                    hasher.combine(member.value)
                }
            }
        }
    }

    public var kind: Kind
    /// 1-based line of the value's first character.
    public var line: Int

    public init(_ kind: Kind, line: Int) {
        self.kind = kind
        self.line = line
    }

    /// Parses one JSON document (surrounding whitespace allowed).
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONSyntaxError) -> JSONValue {
        var reader = Reader(Array(bytes))
        reader.skipWhitespace()
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.atEnd else { throw reader.error("unexpected text after the JSON value") }
        return value
    }

    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    // MARK: - Accessors

    public var string: String? {
        if case .string(let s) = kind { return s }
        return nil
    }

    public var double: Double? {
        if case .number(_, let d) = kind { return d }
        return nil
    }

    public var bool: Bool? {
        if case .bool(let b) = kind { return b }
        return nil
    }

    public var array: [JSONValue]? {
        if case .array(let a) = kind { return a }
        return nil
    }

    public var members: [(key: String, value: JSONValue)]? {
        if case .object(let m) = kind { return m }
        return nil
    }

    public var isNull: Bool { kind == .null }

    /// The member named `key` of an object.
    public subscript(key: String) -> JSONValue? {
        members?.first(where: { ExactID($0.key) == ExactID(key) })?.value
    }

    /// A short name of the kind for error messages: "a string", "an object"…
    public var kindName: String {
        switch kind {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON syntax error with its position.
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var message: String

    public var description: String { "line \(line), column \(column): \(message)" }
}

// MARK: - Reader

private struct Reader {
    let bytes: [UInt8]
    var index = 0
    var line = 1
    var lineStart = 0
    static let maximumDepth = 256

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index >= bytes.count }

    func error(_ message: String) -> JSONSyntaxError {
        JSONSyntaxError(line: line, column: index - lineStart + 1, message: message)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0D: index += 1
            case 0x0A:
                index += 1
                line += 1
                lineStart = index
            default: return
            }
        }
    }

    mutating func value(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        guard depth < Self.maximumDepth else { throw error("nested deeper than \(Self.maximumDepth) levels") }
        guard index < bytes.count else { throw error("unexpected end of input, expected a value") }
        let startLine = line
        switch bytes[index] {
        case UInt8(ascii: "{"): return JSONValue(try object(depth: depth), line: startLine)
        case UInt8(ascii: "["): return JSONValue(try array(depth: depth), line: startLine)
        case UInt8(ascii: "\""): return JSONValue(.string(try string()), line: startLine)
        case UInt8(ascii: "t"):
            try literal("true")
            return JSONValue(.bool(true), line: startLine)
        case UInt8(ascii: "f"):
            try literal("false")
            return JSONValue(.bool(false), line: startLine)
        case UInt8(ascii: "n"):
            try literal("null")
            return JSONValue(.null, line: startLine)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return JSONValue(try number(), line: startLine)
        default:
            throw error("unexpected character \(describe(bytes[index])), expected a value")
        }
    }

    func describe(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(Hex.encode([byte]))"
    }

    mutating func literal(_ word: String) throws(JSONSyntaxError) {
        for byte in word.utf8 {
            guard index < bytes.count, bytes[index] == byte else { throw error("invalid literal, expected \(word)") }
            index += 1
        }
    }

    mutating func object(depth: Int) throws(JSONSyntaxError) -> JSONValue.Kind {
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        // Names are the same when their bytes are (RFC 8259 compares code units), not when
        // Unicode calls them equivalent: "caf\u{E9}" and "cafe\u{301}" are two names.
        var seen = Set<ExactID>()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("expected a member name in double quotes")
            }
            let (keyLine, keyColumn) = (line, index - lineStart + 1)
            let key = try string()
            guard seen.insert(ExactID(key)).inserted else {
                throw JSONSyntaxError(line: keyLine, column: keyColumn, message: "duplicate member \"\(key.excerpt())\"")
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after member name") }
            index += 1
            skipWhitespace()
            members.append((key, try value(depth: depth + 1)))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            throw error("expected ',' or '}' in an object")
        }
    }

    mutating func array(depth: Int) throws(JSONSyntaxError) -> JSONValue.Kind {
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth + 1))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            throw error("expected ',' or ']' in an array")
        }
    }

    mutating func string() throws(JSONSyntaxError) -> String {
        index += 1
        // Most strings have no escape: up to the closing quote at once, byte by byte only
        // otherwise (from the start again).
        var end = index
        while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\"), bytes[end] >= 0x20 { end += 1 }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            let start = index
            index = end + 1
            guard let text = String(validating: bytes[start..<end], as: UTF8.self) else { throw error("string is not valid UTF-8") }
            return text
        }
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: out, as: UTF8.self) else { throw error("string is not valid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("unpaired surrogate in \\u escape") }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate in \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("unpaired surrogate in \\u escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    throw error("invalid escape \\\(describe(escape))")
                }
            case 0x00..<0x20:
                throw error("control character in a string (escape it)")
            default:
                out.append(byte)
                index += 1
            }
        }
    }

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < bytes.count, let nibble = Hex.nibble(bytes[index]) else { throw error("invalid \\u escape") }
            value = value << 4 | UInt32(nibble)
            index += 1
        }
        return value
    }

    mutating func number() throws(JSONSyntaxError) -> JSONValue.Kind {
        let start = index
        let (end, fault) = bytes.withUnsafeBufferPointer { JSONValue.scanNumber($0, from: start) }
        index = end
        if let fault { throw error(fault) }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw error("number \(text.excerpt()) is out of range") }
        return .number(text, value)
    }

}

extension JSONValue {
    /// Where the number that starts at `start` in `bytes` ends, by RFC 8259's grammar, or where
    /// and why it is not one (`fault`: `end` is then the byte at fault). The strict reader and
    /// `serve`'s reader of a phone tap's body read numbers by this one grammar.
    public static func scanNumber(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> (end: Int, fault: String?) {
        var index = start
        func isDigit(_ i: Int) -> Bool { i < bytes.count && bytes[i] >= 0x30 && bytes[i] <= 0x39 }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard isDigit(index) else { return (index, "invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if isDigit(index) { return (index, "invalid number: leading zero") }
        } else {
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard isDigit(index) else { return (index, "invalid number: digits must follow '.'") }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard isDigit(index) else { return (index, "invalid number: digits must follow the exponent") }
            while isDigit(index) { index += 1 }
        }
        return (index, nil)
    }
}

// MARK: - Writing

extension JSONValue {
    /// Encodes a string as a JSON string literal (with quotes): a quote and a backslash escaped
    /// (`\"`, `\\`), a newline, return and tab as `\n`, `\r`, `\t`, any other control character
    /// below U+0020 as `\u00xx` (lower-case hex); everything else (U+2028, U+2029, DEL, emoji)
    /// as it is.
    ///
    /// Works on the UTF-8 bytes: a byte of a multi-byte character is never below 0x80, so only
    /// ASCII bytes are looked at, and the runs between escapes are copied whole.
    public static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 2)
        appendQuoted(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `quoted(text)`'s bytes appended to `output`, the runs between escapes copied whole.
    public static func appendQuoted(_ text: String, to output: inout [UInt8]) {
        var text = text
        output.append(UInt8(ascii: "\""))
        text.withUTF8 { bytes in
            var run = 0
            for index in bytes.indices where needsEscape(bytes[index]) {
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index]))
                run = index + 1
                output.append(UInt8(ascii: "\\"))
                switch bytes[index] {
                case UInt8(ascii: "\""): output.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\"))
                case 0x0A: output.append(UInt8(ascii: "n"))
                case 0x0D: output.append(UInt8(ascii: "r"))
                case 0x09: output.append(UInt8(ascii: "t"))
                case let control:
                    output.append(contentsOf: [
                        UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hexDigit(control >> 4), hexDigit(control & 0x0F),
                    ])
                }
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
        }
        output.append(UInt8(ascii: "\""))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// A number as JSON: integers without a fraction, others with up to `digits` decimals;
    /// `null` when not finite.
    public static func number(_ value: Double, digits: Int = 9) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return Coordinate.format(value, digits)
    }
}
