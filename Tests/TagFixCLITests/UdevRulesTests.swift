import Foundation
import Testing

/// The udev rules are data a test can hold to account: well-formed, and in step with hardware.md.
@Suite("udev rules and hardware.md")
struct UdevRulesTests {
    static let rules = (try? String(contentsOfFile: packageRoot + "/udev/60-tagfix.rules", encoding: .utf8)) ?? ""
    static let hardware = (try? String(contentsOfFile: packageRoot + "/hardware.md", encoding: .utf8)) ?? ""

    /// `KEY OP "VALUE"` tuples of one rule line.
    static func tuples(_ line: Substring) -> [(key: String, op: String, value: String)]? {
        var result: [(String, String, String)] = []
        for part in line.components(separatedBy: ", ") {
            guard let opRange = ["==", "!=", "+=", ":=", "="].lazy.compactMap({ part.range(of: $0) }).first else { return nil }
            let key = String(part[..<opRange.lowerBound]), op = String(part[opRange])
            let value = String(part[opRange.upperBound...])
            guard value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") else { return nil }
            result.append((key, op, String(value.dropFirst().dropLast())))
        }
        return result
    }

    static var ruleLines: [Substring] {
        rules.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty && !$0.hasPrefix("#") }
    }

    @Test("every rule is well formed: known keys, the right operators, valid values")
    func syntax() throws {
        #expect(Self.ruleLines.count == 20)
        for line in Self.ruleLines {
            let tuples = try #require(Self.tuples(line), "cannot parse: \(line)")
            for (key, op, value) in tuples {
                switch key {
                case "SUBSYSTEM":
                    #expect(op == "==" && ["usb", "tty"].contains(value), "\(line)")
                case "ATTRS{idVendor}", "ATTRS{idProduct}":
                    #expect(op == "==" && value.count == 4 && value.allSatisfy(\.isHexDigit) && value == value.lowercased(), "\(line)")
                case "MODE":
                    #expect(op == "=" && value.count == 4 && value.allSatisfy { ("0"..."7").contains($0) }, "\(line)")
                case "GROUP":
                    #expect(op == "=" && ["plugdev", "dialout"].contains(value), "\(line)")
                case "SYMLINK":
                    #expect(op == "+=" && (value.hasPrefix("nfc-") || value.hasPrefix("gps-")), "\(line)")
                default:
                    Issue.record("unknown key \(key) in \(line)")
                }
            }
            #expect(tuples.contains { $0.key == "ATTRS{idVendor}" } && tuples.contains { $0.key == "ATTRS{idProduct}" }, "\(line)")
        }
    }

    static func pairs(in text: some StringProtocol) -> Set<String> {
        var found = Set<String>()
        let pattern = try! NSRegularExpression(pattern: "\\b[0-9a-f]{4}:[0-9a-f]{4}\\b")
        let string = String(text)
        for match in pattern.matches(in: string, range: NSRange(string.startIndex..., in: string)) {
            if let range = Range(match.range, in: string) { found.insert(String(string[range])) }
        }
        return found
    }

    @Test("every VID:PID in the rules is in hardware.md's tables, and every one there is in the rules")
    func consistency() {
        let fromRules = Set(
            Self.ruleLines.compactMap { line -> String? in
                guard let tuples = Self.tuples(line),
                    let vendor = tuples.first(where: { $0.key == "ATTRS{idVendor}" })?.value,
                    let product = tuples.first(where: { $0.key == "ATTRS{idProduct}" })?.value
                else { return nil }
                return "\(vendor):\(product)"
            })
        let tableLines = Self.hardware.split(separator: "\n").filter { $0.hasPrefix("|") }
        let fromTables = tableLines.reduce(into: Set<String>()) { $0.formUnion(Self.pairs(in: $1)) }
        #expect(fromRules.count == 20)
        #expect(
            fromRules.subtracting(fromTables).isEmpty, "in the rules, not in hardware.md: \(fromRules.subtracting(fromTables).sorted())")
        #expect(
            fromTables.subtracting(fromRules).isEmpty, "in hardware.md, not in the rules: \(fromTables.subtracting(fromRules).sorted())")
    }

    @Test("the blacklist names the kernel's NFC modules, and install.sh installs both files")
    func blacklist() throws {
        let blacklist = try String(contentsOfFile: packageRoot + "/udev/blacklist-libnfc.conf", encoding: .utf8)
        let modules = blacklist.split(separator: "\n").filter { $0.hasPrefix("blacklist ") }.map { $0.dropFirst(10) }
        #expect(Set(modules) == ["pn533_usb", "pn533", "nfc"])
        let install = try String(contentsOfFile: packageRoot + "/udev/install.sh", encoding: .utf8)
        #expect(install.contains("60-tagfix.rules") && install.contains("blacklist-libnfc.conf"))
        #expect(FileManager.default.isExecutableFile(atPath: packageRoot + "/udev/install.sh"))
    }
}
