extension StringProtocol {
    /// The text for HTML or XML, as an attribute's value or as text: `&`, `<`, `>`, `"` and `'`
    /// as references, and the control characters XML 1.0 forbids even escaped (all below U+0020
    /// but tab, newline and carriage return) as `?`. The one escaper of the reports, the maps and
    /// `serve`'s pages.
    public var htmlEscaped: String {
        var out = ""
        out.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            case _ where scalar.value < 0x20: out += "?"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
