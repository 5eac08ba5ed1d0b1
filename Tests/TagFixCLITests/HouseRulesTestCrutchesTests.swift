import Foundation
import Testing

/// The suite's crutches, held on Tests/ (issue 30): a time limit is one safety net on a suite,
/// never a test's; a suite or test is serialized only for a shared resource it names; a blocking
/// call goes off the pool alone, never a whole test body with its expectations.
extension HouseRulesTests {
    /// Which bytes of Swift source are code: not inside a comment or a string literal (plain,
    /// multi-line or raw). An interpolation counts as string.
    static func codeMask(_ bytes: [UInt8]) -> [Bool] {
        let (quote, hash, slash, star, newline, backslash) = (
            UInt8(ascii: "\""), UInt8(ascii: "#"), UInt8(ascii: "/"), UInt8(ascii: "*"), UInt8(ascii: "\n"), UInt8(ascii: "\\")
        )
        var mask = [Bool](repeating: true, count: bytes.count)
        func at(_ index: Int) -> UInt8 { index < bytes.count ? bytes[index] : 0 }
        var index = 0
        while index < bytes.count {
            let start = index
            if at(index) == slash && at(index + 1) == slash {
                while index < bytes.count && at(index) != newline { index += 1 }
            } else if at(index) == slash && at(index + 1) == star {
                index += 2
                while index < bytes.count && !(at(index) == star && at(index + 1) == slash) { index += 1 }
                index += 2
            } else if at(index) == quote || (at(index) == hash && (at(index + 1) == quote || at(index + 1) == hash)) {
                var hashes = 0
                while at(index) == hash {
                    hashes += 1
                    index += 1
                }
                guard at(index) == quote else { continue }
                let multiline = at(index + 1) == quote && at(index + 2) == quote
                index += multiline ? 3 : 1
                while index < bytes.count {
                    if hashes == 0 && at(index) == backslash {
                        index += 2
                        continue
                    }
                    let closes = multiline ? (at(index) == quote && at(index + 1) == quote && at(index + 2) == quote) : at(index) == quote
                    if closes {
                        let after = index + (multiline ? 3 : 1)
                        if (0..<hashes).allSatisfy({ at(after + $0) == hash }) {
                            index = after + hashes
                            break
                        }
                    }
                    if !multiline && at(index) == newline { break }
                    index += 1
                }
            } else {
                index += 1
                continue
            }
            for masked in start..<min(index, bytes.count) { mask[masked] = false }
        }
        return mask
    }

    /// The index just past the bracket that closes the one at `open` (code bytes only).
    static func closing(_ bytes: [UInt8], _ mask: [Bool], from open: Int) -> Int {
        let (opener, closer) = (bytes[open], bytes[open] == UInt8(ascii: "(") ? UInt8(ascii: ")") : UInt8(ascii: "}"))
        var depth = 0
        var index = open
        while index < bytes.count {
            if mask[index] && bytes[index] == opener { depth += 1 }
            if mask[index] && bytes[index] == closer {
                depth -= 1
                if depth == 0 { return index + 1 }
            }
            index += 1
        }
        return bytes.count
    }

    /// The code offsets where `needle` starts.
    static func occurrences(of needle: String, in bytes: [UInt8], _ mask: [Bool]) -> [Int] {
        let needle = Array(needle.utf8)
        guard bytes.count >= needle.count else { return [] }
        return (0...(bytes.count - needle.count)).filter { start in
            mask[start] && bytes[start] == needle[0] && bytes[start..<(start + needle.count)].elementsEqual(needle)
        }
    }

    /// The 1-based line of a byte offset.
    static func line(of offset: Int, in bytes: [UInt8]) -> Int { bytes[..<offset].count { $0 == UInt8(ascii: "\n") } + 1 }

    /// Every test attribute in Tests/: the file, the kind ("Suite" or "Test"), the attribute's
    /// first line, and its text from `@` to its closing parenthesis.
    static func testAttributes() throws -> [(path: String, kind: String, line: Int, text: String)] {
        var found: [(String, String, Int, String)] = []
        for file in try Self.swiftFiles("Tests") where file.path != Self.crutchesFile {
            let bytes = Array(file.lines.joined(separator: "\n").utf8)
            let mask = Self.codeMask(bytes)
            for kind in ["Suite", "Test"] {
                for start in Self.occurrences(of: "@" + kind, in: bytes, mask) {
                    var end = start + kind.count + 1
                    if end < bytes.count && bytes[end] == UInt8(ascii: "(") { end = Self.closing(bytes, mask, from: end) }
                    let text = String(decoding: bytes[start..<end], as: UTF8.self)
                    found.append((file.path, kind, Self.line(of: start, in: bytes), text))
                }
            }
        }
        return found
    }

    /// This file names what it looks for.
    static let crutchesFile = "Tests/TagFixCLITests/HouseRulesTestCrutchesTests.swift"

    @Test("a time limit is one safety net on a suite: never on a test, at most one a suite")
    func timeLimitsOnSuitesOnly() throws {
        let needle = ".time" + "Limit("
        var attributed = 0
        for attribute in try Self.testAttributes() {
            let count = attribute.text.components(separatedBy: needle).count - 1
            attributed += count
            if attribute.kind == "Test" && count > 0 {
                Issue.record(
                    "\(attribute.path):\(attribute.line): a test's own time limit: end the test by its own deadline on the clock it uses, or leave the suite's limit as the one safety net"
                )
            }
            if attribute.kind == "Suite" && count > 1 {
                Issue.record("\(attribute.path):\(attribute.line): \(count) time limits on one suite")
            }
        }
        // Every time limit in Tests/ is in a test attribute (none added as a trait elsewhere).
        var everywhere = 0
        for file in try Self.swiftFiles("Tests") where file.path != Self.crutchesFile {
            let bytes = Array(file.lines.joined(separator: "\n").utf8)
            everywhere += Self.occurrences(of: needle, in: bytes, Self.codeMask(bytes)).count
        }
        #expect(everywhere == attributed, "\(everywhere - attributed) time limits outside a @Suite attribute")
    }

    @Test("a suite or test is serialized only for a shared resource, named in a \"// Serialized:\" comment just above it")
    func serializedSaysWhy() throws {
        let needle = ".serial" + "ized"
        let files = Dictionary(uniqueKeysWithValues: try Self.swiftFiles("Tests").map { ($0.path, $0.lines) })
        for attribute in try Self.testAttributes() where attribute.text.contains(needle) {
            let lines = files[attribute.path] ?? []
            // The comments and attributes directly above the attribute's first line.
            var above = attribute.line - 2
            var reason = false
            while above >= 0 {
                let text = lines[above].drop { $0 == " " || $0 == "\t" }
                guard text.hasPrefix("//") || text.hasPrefix("@") else { break }
                if text.hasPrefix("// Serialized:") || text.hasPrefix("/// Serialized:") { reason = true }
                above -= 1
            }
            if !reason {
                Issue.record(
                    "\(attribute.path):\(attribute.line): \(needle) without a reason: name the shared resource in a \"// Serialized:\" comment above it, or let the tests run side by side"
                )
            }
        }
    }

    @Test("offThePool takes one blocking call, never a whole test: no #expect, #require or Issue.record inside its closure in Tests/")
    func noWholeTestOffThePool() throws {
        let needle = "offThe" + "Pool"
        for file in try Self.swiftFiles("Tests") where file.path != Self.crutchesFile {
            let bytes = Array(file.lines.joined(separator: "\n").utf8)
            let mask = Self.codeMask(bytes)
            for start in Self.occurrences(of: needle, in: bytes, mask) {
                // The trailing closure: the first code `{` after the name (and its arguments).
                var open = start + needle.count
                if open < bytes.count && bytes[open] == UInt8(ascii: "(") { open = Self.closing(bytes, mask, from: open) }
                while open < bytes.count && !(mask[open] && bytes[open] == UInt8(ascii: "{")) {
                    if mask[open] && bytes[open] == UInt8(ascii: "\n") { break }
                    open += 1
                }
                guard open < bytes.count, bytes[open] == UInt8(ascii: "{") else { continue }
                let body = String(decoding: bytes[open..<Self.closing(bytes, mask, from: open)], as: UTF8.self)
                if ["#expect", "#require", "Issue.record"].contains(where: body.contains) {
                    Issue.record(
                        "\(file.path):\(Self.line(of: start, in: bytes)): \(needle) wraps expectations: take only the blocking call off the pool and expect on the test's task"
                    )
                }
            }
        }
    }
}
