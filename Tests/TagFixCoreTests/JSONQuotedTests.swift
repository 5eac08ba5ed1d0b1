import TagFixCore
import Testing

/// `JSONValue.quoted` as it was before it worked on UTF-8 bytes (one Unicode scalar at a time):
/// the reference the fast one must match byte for byte.
private func quotedReference(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case let s where s.value < 0x20:
            out += "\\u00" + Hex.encode([UInt8(s.value)]).lowercased()
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

@Suite("JSON string escaping")
struct JSONQuotedTests {
    static let hostileStrings: [String] =
        [
            "", "plain", "\"", "\\", "\"\"\"", "\\\\\\", "a\"b\\c", "\\\"", "\"\\u0041\"", "\\u0000", "\\n",
            "\u{2028}", "\u{2029}", "line\u{2028}sep\u{2029}end", "\u{7F}", "\u{80}\u{9F}", "\u{FEFF}bom", "\u{FFFD}", "\u{FFFF}",
            "🏳️‍🌈", "e\u{301}", "👩🏽‍🔬\"\n", "日本語\t\u{1}", "\u{10FFFF}", "\0", "\0\0\0", "end\0",
            String(decoding: [0xFF, 0xFE, 0x22, 0xC0, 0x80, 0xED, 0xA0, 0x80, 0x5C], as: UTF8.self),
            "<script>alert(\"x\")</script>", "=cmd|' /C calc'!A0", String(repeating: "\"\\\n", count: 1_000),
            String(repeating: "a", count: 10_000) + "\"",
        ] + (0..<0x20).map { String(UnicodeScalar(UInt8($0))) } + (0..<0x20).map { "x\(UnicodeScalar(UInt8($0)))y" }

    @Test("hostile strings are escaped as the scalar-by-scalar escaper did", arguments: hostileStrings)
    func hostile(_ text: String) {
        #expect(Array(JSONValue.quoted(text).utf8) == Array(quotedReference(text).utf8))
    }

    @Test("every control character, quote and backslash has its escape")
    func escapes() {
        #expect(JSONValue.quoted("\u{0}\u{1F}\u{1B}\u{8}\u{C}") == #""\u0000\u001f\u001b\u0008\u000c""#)
        #expect(JSONValue.quoted("a\"b\\c\nd\re\tf") == #""a\"b\\c\nd\re\tf""#)
        #expect(JSONValue.quoted("\u{2028}\u{7F}😀") == "\"\u{2028}\u{7F}😀\"")
    }

    @Test("seeded random strings are escaped as the scalar-by-scalar escaper did")
    func random() throws {
        var generator = SeededGenerator(seed: 0x5EED_0034)
        // Weighted toward what needs escaping, and across every UTF-8 length.
        let pools: [ClosedRange<UInt32>] = [
            0x00...0x1F, 0x20...0x7F, 0x22...0x22, 0x5C...0x5C, 0x80...0x7FF, 0x800...0xD7FF, 0xE000...0xFFFF, 0x10000...0x10FFFF,
        ]
        for _ in 0..<5_000 {
            var text = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 0...40, using: &generator) {
                let pool = pools[Int.random(in: 0..<pools.count, using: &generator)]
                text.append(try #require(Unicode.Scalar(UInt32.random(in: pool, using: &generator))))
            }
            let string = String(text)
            #expect(Array(JSONValue.quoted(string).utf8) == Array(quotedReference(string).utf8), "\(Array(string.utf8))")
        }
    }

}
