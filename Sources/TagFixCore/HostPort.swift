/// `HOST:PORT` as a person writes it in an address (`--http`, `--listen`, `gpsd://…`,
/// `mqtt://…`): `HOST`, `HOST:PORT`, `[IPv6]` or `[IPv6]:PORT`. An IPv6 address needs its
/// brackets whenever it stands beside a port: `::1:8080` could be `::1` port 8080 or the address
/// `::1:8080` itself, so it is refused rather than guessed. The one reading of an address's
/// authority; each caller says what its own default port and range are.
public struct HostPort: Sendable, Hashable {
    /// The host, without brackets (empty when the text gave none, e.g. `:2947`).
    public var host: String
    /// The port as written, `nil` when none was.
    public var port: Int?

    public enum Problem: Error, Sendable, Hashable, CustomStringConvertible {
        case unclosedBracket
        case afterBracket(String)
        case bareIPv6
        case port(String)

        public var description: String {
            switch self {
            case .unclosedBracket: "an IPv6 host needs its closing ]"
            case .afterBracket(let text): "expected :PORT after the IPv6 host, found \"\(text.excerpt())\""
            case .bareIPv6: "write an IPv6 host in brackets, e.g. [::1]:8080"
            case .port(let text): "the port \"\(text.excerpt())\" is not a number from 0 to 65535"
            }
        }
    }

    public init(host: String, port: Int?) {
        self.host = host
        self.port = port
    }

    /// Reads `text`.
    /// - Throws: `Problem` for an unclosed bracket, text after one, an IPv6 host without
    ///   brackets, or a port that is not a number from 0 to 65535.
    public init(parsing text: some StringProtocol) throws(Problem) {
        let text = Substring(text)
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .unclosedBracket }
            host = String(text[text.index(after: text.startIndex)..<close])
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw .afterBracket(String(after))
            }
        } else if let colon = text.firstIndex(of: ":") {
            guard text[text.index(after: colon)...].firstIndex(of: ":") == nil else { throw .bareIPv6 }
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
        } else {
            host = String(text)
        }
        if let portText {
            guard portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = Int(portText),
                number <= 65_535
            else { throw .port(String(portText)) }
            port = number
        } else {
            port = nil
        }
    }

    /// `HOST:PORT` for a person or a URL, an IPv6 host in brackets.
    public static func described(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
