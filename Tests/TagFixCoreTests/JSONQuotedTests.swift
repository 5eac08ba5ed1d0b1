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
            var appended: [UInt8] = []
            JSONValue.appendQuoted(string, to: &appended)
            #expect(appended == Array(quotedReference(string).utf8), "\(Array(string.utf8))")
        }
    }

    @Test("a string appended in place is the same bytes as its quoted copy", arguments: hostileStrings)
    func appended(_ text: String) {
        var output = Array("prefix".utf8)
        JSONValue.appendQuoted(text, to: &output)
        #expect(output == Array(("prefix" + quotedReference(text)).utf8))
    }

    /// Numbers as `Coordinate.format` wrote them before it worked on bytes: `"\(rounded)"`
    /// without a trailing `.0`.
    private static func formatReference(_ value: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        var text = "\((value * scale).rounded() / scale)"
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }

    static let numbers: [Double] = [
        0, -0.0, 1, -1, 0.5, 2.9999, 2.99949, -2.0004, 1e15, 1e16, -1e300, 1e-7, 5e-8, 47.3977419, -122.0841239, 179.99999995,
        123_456.789_5, .nan, .infinity, -.infinity, .ulpOfOne, .leastNonzeroMagnitude, .greatestFiniteMagnitude,
    ]

    @Test("an object written member by member is its members quoted and joined", arguments: [0, 1, 3, 7])
    func writer(_ digits: Int) {
        var writer = JSONObjectWriter()
        var reference: [String] = []
        for (index, text) in Self.hostileStrings.enumerated() {
            writer.add(text, index % 3 == 0 ? nil : text)
            reference.append(quotedReference(text) + ":" + (index % 3 == 0 ? "null" : quotedReference(text)))
        }
        for value in Self.numbers {
            writer.add("n", value, digits: digits)
            let expected =
                !value.isFinite
                ? "null" : value == value.rounded() && abs(value) < 1e15 ? "\(Int64(value))" : Self.formatReference(value, digits)
            reference.append("\"n\":" + expected)
            #expect(Coordinate.format(value, digits) == Self.formatReference(value, digits), "\(value)")
        }
        writer.add("i", Int.min)
        writer.add("none", nil as Int?)
        writer.add("yes", true)
        writer.add("no", false)
        writer.add("raw", raw: "[1,2]")
        writer.add("missing", raw: nil)
        reference += ["\"i\":\(Int.min)", "\"none\":null", "\"yes\":true", "\"no\":false", "\"raw\":[1,2]", "\"missing\":null"]
        #expect(Array(writer.text.utf8) == Array(("{" + reference.joined(separator: ",") + "}").utf8))
        #expect(JSONObjectWriter().text == "{}")
    }

    @Test("an object written inside another is the same bytes as its text added raw", arguments: hostileStrings)
    func nested(_ text: String) {
        var inner = JSONObjectWriter()
        inner.add(text, text)
        inner.add("n", 2.5)
        var empty = JSONObjectWriter()
        var raw = JSONObjectWriter()
        raw.add("a", raw: inner.text)
        raw.add("none", raw: nil)
        raw.add("empty", raw: empty.text)
        raw.add(text, 1)
        var inPlace = JSONObjectWriter()
        inPlace.add("a") { object in
            object.add(text, text)
            object.add("n", 2.5)
        }
        inPlace.add("none", raw: nil)
        inPlace.add("empty") { _ in }
        inPlace.add(text, 1)
        #expect(Array(inPlace.text.utf8) == Array(raw.text.utf8))
        empty.add("x", 1)
        #expect(empty.text == #"{"x":1}"#)
    }

    @Test("an object followed by another's members is the two joined at a comma", arguments: hostileStrings)
    func followedBy(_ text: String) {
        var head = JSONObjectWriter()
        head.add("class", "VERDICT")
        head.add("id", 7)
        var record = JSONObjectWriter()
        record.add(text, text)
        record.add("n", 1.5)
        let object = record.text
        let joined = head.text(followedByMembersOf: object)
        #expect(Array(joined.utf8) == Array((String(head.text.dropLast()) + "," + object.dropFirst()).utf8))
        #expect((try? JSONValue.parse(joined))?.members?.map(\.key) == ["class", "id", text, "n"])
    }
}
