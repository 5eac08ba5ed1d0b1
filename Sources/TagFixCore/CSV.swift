import Foundation

/// A CSV reader (RFC 4180: quoted fields, doubled quotes, CRLF or LF) that keeps line numbers.
/// Lines starting with `#` and blank lines are skipped.
public enum CSV {
    /// One record and the line it started on.
    public struct Row: Sendable, Hashable {
        public var line: Int
        public var fields: [String]
    }

    public static func parse(_ text: String) throws(DataFileError) -> [Row] {
        var rows: [Row] = []
        try forEachRow(text) { row, _ in rows.append(row) }
        return rows
    }

    /// Hands each record to `body` as it is read, with the number of bytes of `text` read so far,
    /// holding no more than one record at a time (a large file's rows are not all kept).
    /// - Throws: `DataFileError` for malformed text, or what `body` throws; nothing after it is read.
    public static func forEachRow(_ text: String, _ body: (Row, _ bytesRead: Int) throws(DataFileError) -> Void) throws(DataFileError) {
        var fields: [String] = []
        var field: [UInt8] = []
        var inQuotes = false
        var line = 1
        var rowLine = 1
        var atRowStart = true
        var fieldWasQuoted = false
        // The text's own bytes, read in place (a copy of them was the size of the file again).
        var text = text
        text.makeContiguousUTF8()
        let bytes = text.utf8.span
        var i = 0

        func finishField() throws(DataFileError) {
            guard let value = String(validating: field, as: UTF8.self) else {
                throw DataFileError(line: rowLine, message: "field is not valid UTF-8")
            }
            fields.append(fieldWasQuoted ? value : value.trimmingSpaces())
            field = []
            fieldWasQuoted = false
        }

        while i < bytes.count {
            let byte = bytes[i]
            if atRowStart {
                rowLine = line
                if byte == UInt8(ascii: "#") {
                    while i < bytes.count, bytes[i] != 0x0A { i += 1 }
                    continue
                }
                if byte == 0x0A {
                    line += 1
                    i += 1
                    continue
                }
                if byte == 0x0D {
                    i += 1
                    continue
                }
                atRowStart = false
            }
            if inQuotes {
                if byte == UInt8(ascii: "\"") {
                    if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "\"") {
                        field.append(byte)
                        i += 2
                        continue
                    }
                    inQuotes = false
                    i += 1
                    continue
                }
                if byte == 0x0A { line += 1 }
                field.append(byte)
                i += 1
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                guard field.allSatisfy({ $0 == 0x20 }) else {
                    throw DataFileError(line: line, message: "a quote inside an unquoted field (quote the whole field)")
                }
                field = []
                inQuotes = true
                fieldWasQuoted = true
            case UInt8(ascii: ","):
                try finishField()
            case 0x0D:
                break
            case 0x0A:
                try finishField()
                try body(Row(line: rowLine, fields: fields), i + 1)
                fields = []
                line += 1
                atRowStart = true
            default:
                if fieldWasQuoted, byte != 0x20 {
                    throw DataFileError(line: line, message: "text after a closing quote")
                }
                if !fieldWasQuoted { field.append(byte) }
            }
            i += 1
        }
        if inQuotes { throw DataFileError(line: rowLine, message: "unterminated quoted field") }
        if !atRowStart {
            try finishField()
            try body(Row(line: rowLine, fields: fields), bytes.count)
        }
    }
}

extension CSV {
    /// A field as the parser reads it back: quoted when it holds a comma, a quote, a line break,
    /// or spaces at either end (which unquoted fields lose).
    public static func quoted(_ field: String) -> String {
        let special = field.contains { $0 == "," || $0 == "\"" || $0.isNewline }
        guard special || field.first == " " || field.last == " " || field.first == "\t" || field.last == "\t" || field.hasPrefix("#")
        else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

extension CSV {
    /// The first characters a spreadsheet reads as the start of a formula (OWASP "CSV injection").
    public static let formulaStarts: Set<Unicode.Scalar> = ["=", "+", "-", "@", "\t", "\r"]

    /// A text cell made safe to open in a spreadsheet: a value that starts with `=`, `+`, `-`,
    /// `@`, a tab or a carriage return, after any number of apostrophes, gets one more apostrophe
    /// in front (`=1+1` → `'=1+1`, `'=1+1` → `''=1+1`); any other value is as it was.
    /// `formulaUnescaped` gives the value back. Numeric columns are written as numbers and not
    /// passed through this: `-0.12` stays a longitude.
    public static func formulaSafe(_ text: String) -> String {
        isFormulaEscaped(text, escaped: false) ? "'" + text : text
    }

    /// The value `formulaSafe` was given: one leading apostrophe less when the apostrophes are
    /// followed by a formula character; any other value is as it was.
    public static func formulaUnescaped(_ text: String) -> String {
        isFormulaEscaped(text, escaped: true) ? String(text.dropFirst()) : text
    }

    /// Whether `text` is apostrophes (at least one when `escaped`) then a formula character.
    private static func isFormulaEscaped(_ text: String, escaped: Bool) -> Bool {
        // By scalars: "\r\n" is one Character, and it starts with CR.
        let scalars = text.unicodeScalars
        let rest = scalars.drop { $0 == "'" }
        guard let first = rest.first, formulaStarts.contains(first) else { return false }
        return !escaped || rest.startIndex != scalars.startIndex
    }
}

extension String {
    /// Without leading and trailing spaces and tabs, cut as Unicode scalars, not Characters: a
    /// Prepend character (U+0600–U+0605, U+110BD…) joins the space after it into one Character,
    /// which a Character-wise trim then kept (the url-location fuzzer found "http://s:/\u{604}"
    /// decoding differently once padded with spaces).
    func trimmingSpaces() -> String {
        let scalars = unicodeScalars
        func blank(_ scalar: Unicode.Scalar) -> Bool { scalar == " " || scalar == "\t" }
        guard let first = scalars.firstIndex(where: { !blank($0) }), let last = scalars.lastIndex(where: { !blank($0) }) else { return "" }
        return String(Substring(scalars[first...last]))
    }
}

/// A problem in a data file (registry, scenario…), with the line it is on.
///
/// `description` reads `FILE:LINE: message` once `file` is set by the layer that read the file.
public struct DataFileError: Error, Sendable, Hashable, CustomStringConvertible {
    public var file: String?
    public var line: Int?
    public var message: String
    /// The file itself could not be read (missing, no permission), as opposed to malformed.
    public var unreadable: Bool

    public init(file: String? = nil, line: Int?, message: String, unreadable: Bool = false) {
        self.file = file
        self.line = line
        self.message = message
        self.unreadable = unreadable
    }

    public func inFile(_ file: String) -> DataFileError {
        var copy = self
        copy.file = file
        return copy
    }

    public var description: String {
        var prefix = file ?? "input"
        if let line { prefix += ":\(line)" }
        return "\(prefix): \(message)"
    }
}

extension DataFileError {
    /// A JSON syntax error as a data-file error at its line.
    public init(_ error: JSONSyntaxError) {
        self.init(line: error.line, message: "invalid JSON at column \(error.column): \(error.message)")
    }
}
