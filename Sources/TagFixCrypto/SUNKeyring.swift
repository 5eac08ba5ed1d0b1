public import TagFixCore

/// The SUN keys of a site, read from a key file (0600: `SecretFile` refuses one that group or
/// others can read): one key set per `[NAME]` section, named by registry tags' `sun` column
/// (`SUNSettings.keyName`); lines before any section are the set `default`. In each set:
///
///     key = HEX        the SDM file-read key (32 hex digits), or the AN10922 master key with diversify
///     meta_key = HEX   the SDM meta-read key (default: key)
///     diversify = HEX  the tag's file-read key is AN10922-diversified from key with UID ‖ HEX
///
/// Blank lines and `#` comments are ignored. Errors name the line, never a key.
public struct SUNKeyring: SUNAuthenticator, Sendable {
    public private(set) var sets: [String: SUNVerifier] = [:]

    public init(sets: [String: SUNVerifier] = [:]) { self.sets = sets }

    public func hasKeys(named name: String) -> Bool { sets[name] != nil }

    public func verify(url: String, settings: SUNSettings) -> SUNResult? {
        guard var verifier = sets[settings.keyName] else { return nil }
        verifier.names = settings.names
        return verifier.verify(url: url)
    }

    /// The key set names, sorted (for messages: never the keys).
    public var names: [String] { sets.keys.sorted() }

    public static func parse(_ text: String) throws(DataFileError) -> SUNKeyring {
        struct Pending {
            var line: Int
            var values: [String: (line: Int, text: String)] = [:]
        }
        var sections: [(name: String, pending: Pending)] = [("default", Pending(line: 1))]
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let number = index + 1
            let line = String(raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "").trimmingBlanks
            guard !line.isEmpty else { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else { throw DataFileError(line: number, message: "expected [NAME]") }
                let name = String(line.dropFirst().dropLast())
                guard (try? SUNSettings(spec: name))?.keyName == name else {
                    throw DataFileError(line: number, message: "a key set's name is letters, digits, _ - . (up to 64)")
                }
                let used = sections.contains {
                    $0.name == name && (name != "default" || !$0.pending.values.isEmpty || $0.pending.line != 1)
                }
                guard !used else { throw DataFileError(line: number, message: "[\(name)] appears twice") }
                sections.append((name, Pending(line: number)))
                continue
            }
            let parts = line.split(separator: "=", maxSplits: 1).map { String($0).trimmingBlanks }
            guard parts.count == 2, ["key", "meta_key", "diversify"].contains(parts[0]) else {
                throw DataFileError(line: number, message: "expected key = HEX, meta_key = HEX, diversify = HEX or [NAME]")
            }
            guard sections[sections.count - 1].pending.values[parts[0]] == nil else {
                throw DataFileError(line: number, message: "\(parts[0]) given twice in [\(sections[sections.count - 1].name)]")
            }
            sections[sections.count - 1].pending.values[parts[0]] = (number, parts[1])
        }
        var keyring = SUNKeyring()
        for (name, pending) in sections {
            if name == "default", pending.values.isEmpty { continue }
            guard let key = pending.values["key"] else {
                throw DataFileError(line: pending.line, message: "[\(name)] has no key = HEX line")
            }
            func aes(_ value: (line: Int, text: String), _ field: String) throws(DataFileError) -> AES128Key {
                guard let parsed = AES128Key(hex: value.text) else {
                    throw DataFileError(line: value.line, message: "\(field) is not 32 hex digits (an AES-128 key)")
                }
                return parsed
            }
            let fileKey = try aes(key, "key")
            let metaKey = try pending.values["meta_key"].map { value throws(DataFileError) in try aes(value, "meta_key") } ?? fileKey
            var readKey = SUNVerifier.FileReadKey.fixed(fileKey)
            if let suffix = pending.values["diversify"] {
                guard let bytes = SUNHex.decode(Array(suffix.text.utf8)), bytes.count <= 24 else {
                    throw DataFileError(
                        line: suffix.line, message: "diversify is not hex of at most 24 bytes (UID ‖ it must fit AN10922's 31)")
                }
                readKey = .diversified(master: fileKey, suffix: bytes)
            }
            keyring.sets[name] = SUNVerifier(metaReadKey: metaKey, fileReadKey: readKey)
        }
        guard !keyring.sets.isEmpty else { throw DataFileError(line: nil, message: "no key = HEX line") }
        return keyring
    }
}

extension String {
    /// Without leading and trailing spaces, tabs and carriage returns (key files' lines).
    var trimmingBlanks: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" && $0 != "\r" }),
            let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" && $0 != "\r" })
        else { return "" }
        return String(scalars[first...last])
    }
}
