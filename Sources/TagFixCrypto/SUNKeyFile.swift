public import TagFixCore

/// The keys of a SUN check read from a key file rather than the command line (where they would
/// land in shell history and in `ps`). The text: `key = HEX` (the SDM file-read key, or the
/// AN10922 master key when diversifying) and optionally `meta_key = HEX` (the SDM meta-read
/// key), 32 hex digits each; blank lines and `#` comments are ignored; LF or CRLF line ends. Errors name the line,
/// never the key.
public struct SUNKeyFile: Sendable, Hashable {
    public var key: AES128Key
    public var metaKey: AES128Key?

    public init(key: AES128Key, metaKey: AES128Key? = nil) {
        self.key = key
        self.metaKey = metaKey
    }

    public static func parse(_ text: String) throws(DataFileError) -> SUNKeyFile {
        var keys: [String: AES128Key] = [:]
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let trimmed = line.trimmingBlanks
            guard !trimmed.isEmpty else { continue }
            let parts = trimmed.split(separator: "=", maxSplits: 1).map { String($0).trimmingBlanks }
            guard parts.count == 2, ["key", "meta_key"].contains(parts[0]) else {
                throw DataFileError(line: index + 1, message: "expected key = HEX or meta_key = HEX")
            }
            guard keys[parts[0]] == nil else { throw DataFileError(line: index + 1, message: "\(parts[0]) given twice") }
            guard let key = AES128Key(hex: parts[1]) else {
                throw DataFileError(line: index + 1, message: "\(parts[0]) is not 32 hex digits (an AES-128 key)")
            }
            keys[parts[0]] = key
        }
        guard let key = keys["key"] else { throw DataFileError(line: nil, message: "no key = HEX line") }
        return SUNKeyFile(key: key, metaKey: keys["meta_key"])
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
