import Glibc

/// The four top-level strings a collector needs from a verdict message (`id`, `device`, `time`,
/// `verdict`), found in one pass over the bytes without building the JSON tree. The pass checks
/// the whole document's syntax (and each string's UTF-8) as `JSONValue.parse` does, and answers
/// only when it is sure the parser would accept the message and give the same strings: no `\u`
/// escape, no escape in a member name or in one of the four values, no exponent, no duplicate
/// member name, at most 200 levels deep. Anything else (and every malformed message) gets `nil`, and the
/// caller asks the parser (`FleetMessageFields.parsed`), which decides as it always did.
package struct MessageScan {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private var found: [Range<Int>?] = [nil, nil, nil, nil]

    private static let names: [[UInt8]] = [Array("id".utf8), Array("device".utf8), Array("time".utf8), Array("verdict".utf8)]
    private static let maximumDepth = 200

    private init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// The fields, or nil when the scan is not sure (the parser decides then).
    package static func fields(_ bytes: UnsafeRawBufferPointer) -> FleetMessageFields? {
        guard bytes.baseAddress != nil else { return nil }
        var scan = MessageScan(bytes)
        scan.skipWhitespace()
        guard scan.index < bytes.count, bytes[scan.index] == UInt8(ascii: "{"), scan.object(depth: 0) else { return nil }
        scan.skipWhitespace()
        guard scan.index == bytes.count else { return nil }
        func text(_ range: Range<Int>?) -> String? {
            range.map { String(decoding: UnsafeRawBufferPointer(rebasing: bytes[$0]), as: UTF8.self) }
        }
        return FleetMessageFields(
            id: text(scan.found[0]), device: text(scan.found[1]), time: text(scan.found[2]), verdict: text(scan.found[3]))
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// A string from its opening quote; its content's range. `escapes`: whether `\"`-style
    /// escapes may be in it (never `\u`).
    private mutating func string(escapes: Bool) -> Range<Int>? {
        index += 1
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                defer { index += 1 }
                return start..<index
            case UInt8(ascii: "\\"):
                guard escapes, index + 1 < bytes.count else { return nil }
                switch bytes[index + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 2
                default: return nil
                }
            case 0x00..<0x20: return nil
            case 0x80...0xFF:
                guard let length = utf8Sequence(at: index) else { return nil }
                index += length
            default: index += 1
            }
        }
        return nil
    }

    /// The length of the well-formed UTF-8 sequence (Unicode, table 3-7) starting at `start`
    /// with a byte of 0x80 or more, or nil when it is not one (the parser refuses it).
    private func utf8Sequence(at start: Int) -> Int? {
        let lead = bytes[start]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            high = 0x9F
        case 0xF0:
            length = 4
            low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            high = 0x8F
        default: return nil
        }
        guard start + length <= bytes.count else { return nil }
        for offset in 1..<length {
            let byte = bytes[start + offset]
            guard offset == 1 ? (low...high).contains(byte) : (0x80...0xBF).contains(byte) else { return nil }
        }
        return length
    }

    private func isDigit(_ i: Int) -> Bool { i < bytes.count && bytes[i] >= 0x30 && bytes[i] <= 0x39 }

    /// A number without an exponent (so always finite), by JSON's grammar.
    private mutating func number() -> Bool {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard isDigit(index) else { return false }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if isDigit(index) { return false }
        } else {
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard isDigit(index) else { return false }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") { return false }
        // 300 digits and more could be beyond a Double: the parser decides.
        return index - start < 300
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count, memcmp(bytes.baseAddress! + index, word.utf8Start, count) == 0 else { return false }
        index += count
        return true
    }

    private mutating func value(depth: Int) -> Bool {
        guard depth < Self.maximumDepth, index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "\""): return string(escapes: true) != nil
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return false
        }
    }

    private mutating func array(depth: Int) -> Bool {
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return true
        }
        while true {
            skipWhitespace()
            guard value(depth: depth + 1) else { return false }
            guard let more = separator(closing: UInt8(ascii: "]")) else { return false }
            if !more { return true }
        }
    }

    /// After an element or a member: a comma (another follows: true), the container's `closing`
    /// bracket (its end: false), or anything else (not JSON: nil).
    private mutating func separator(closing: UInt8) -> Bool? {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ",") || bytes[index] == closing else { return nil }
        index += 1
        return bytes[index - 1] == UInt8(ascii: ",")
    }

    private func same(_ a: Range<Int>, _ b: Range<Int>) -> Bool {
        a.count == b.count && memcmp(bytes.baseAddress! + a.lowerBound, bytes.baseAddress! + b.lowerBound, a.count) == 0
    }

    private func named(_ key: Range<Int>) -> Int? {
        Self.names.firstIndex { name in
            name.count == key.count && name.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress! + key.lowerBound, key.count) == 0 }
        }
    }

    private mutating func object(depth: Int) -> Bool {
        guard depth < Self.maximumDepth else { return false }
        index += 1
        var keys: [Range<Int>] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return true
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string(escapes: false) else { return false }
            // Without escapes, the same bytes are the same name (as the parser compares them).
            guard keys.count < 64, !keys.contains(where: { same($0, key) }) else { return false }
            keys.append(key)
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
            index += 1
            skipWhitespace()
            if depth == 0, let field = named(key) {
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let range = string(escapes: false) else { return false }
                found[field] = range
            } else {
                guard value(depth: depth + 1) else { return false }
            }
            guard let more = separator(closing: UInt8(ascii: "}")) else { return false }
            if !more { return true }
        }
    }
}
