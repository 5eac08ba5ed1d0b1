public import TagFixCore
import TagFixDevices
import TagFixSystem

// Who may tap (issue 34): named tokens in serve's token file, the cookie that carries one after
// the first link, the same-origin rule for POSTs and a rate limit per client. Pure but for the
// token file's reading and writing.

// MARK: - The token file

/// `serve --token FILE`: one token, as it always was (the whole file, trimmed; its name is
/// `default`), or named tokens, one `NAME TOKEN` a line (`#` comments and blank lines allowed),
/// one per tech or device, made by `tagfix tokens add NAME`.
public struct TokenFile: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public var name: String
        public var token: String

        public init(name: String, token: String) {
            self.name = name
            self.token = token
        }
    }

    public private(set) var entries: [Entry] {
        didSet { index = Self.index(entries) }
    }

    /// The entries by their token's keyed digest (`digest(_:)`): a tap's token is compared with
    /// the one or two entries its digest finds, not with every entry, so a file of a hundred
    /// techs costs a tap what a file of one does (a tap had compared its token with each entry,
    /// twice: in bursts, 44–49 µs of serve's CPU a tap with one token, 82–89 with a hundred).
    private var index: [Int: [Int]]

    /// The name a single-token file's token has.
    public static let defaultName = "default"

    public init(entries: [Entry] = []) {
        self.entries = entries
        index = Self.index(entries)
    }

    public static func == (a: TokenFile, b: TokenFile) -> Bool { a.entries == b.entries }
    public func hash(into hasher: inout Hasher) { hasher.combine(entries) }

    /// Reads the file's text.
    /// - Throws: `DataFileError` naming the line; never the token's text.
    public init(text: String) throws(DataFileError) {
        self.init(entries: try Self.entries(text: text))
    }

    private static func entries(text: String) throws(DataFileError) -> [Entry] {
        let trimmed = text.trimmingScalars
        // Today's file: one word, no name.
        if !trimmed.isEmpty, !trimmed.unicodeScalars.contains(where: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }),
            !trimmed.hasPrefix("#")
        {
            // Taken as it always was, whatever its length or characters.
            return [Entry(name: Self.defaultName, token: trimmed)]
        }
        var entries: [Entry] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw).trimmingScalars
            if line.isEmpty || line.hasPrefix("#") { continue }
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard fields.count == 2 else {
                throw DataFileError(line: index + 1, message: "a token line is NAME TOKEN (two fields), this one has \(fields.count)")
            }
            guard Self.isName(fields[0]) else { throw DataFileError(line: index + 1, message: Self.badName(fields[0])) }
            guard Self.isToken(fields[1]) else { throw DataFileError(line: index + 1, message: Self.badToken) }
            guard !entries.contains(where: { $0.name == fields[0] }) else {
                throw DataFileError(line: index + 1, message: "the name \(fields[0]) is given twice: each token has a name of its own")
            }
            guard !entries.contains(where: { $0.token == fields[1] }) else {
                throw DataFileError(line: index + 1, message: "this token is given twice: make a new one with tagfix tokens add")
            }
            entries.append(Entry(name: fields[0], token: fields[1]))
        }
        return entries
    }

    /// The file's text: a header, then `NAME TOKEN` lines.
    public var text: String {
        "# tagfix serve tokens: NAME TOKEN (tagfix tokens add | list | revoke)\n"
            + entries.map { "\($0.name) \($0.token)\n" }.joined()
    }

    /// The name of the entry whose token is `token`. Its time does not depend on where the bytes
    /// differ, nor on which entry matches, nor on how many entries there are: the token's keyed
    /// digest finds the entries it may be (a wrong token's digest meets a real one's once in
    /// 2⁶⁴, and the key is this process's secret), and each is compared in constant time.
    public func name(forToken token: String) -> String? {
        Self.name(forToken: token, among: index[Self.digest(token)] ?? [], of: entries)
    }

    /// The name of the last of `entries[positions]` whose token is `token`, each compared in
    /// constant time: the entries a digest found (more than one when two tokens' digests meet).
    static func name(forToken token: String, among positions: [Int], of entries: [Entry]) -> String? {
        var found: String?
        for position in positions where same(entries[position].token, token) { found = entries[position].name }
        return found
    }

    /// A random key for this process, so that a token's digest cannot be worked out elsewhere.
    private static let digestKey: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
    }()

    /// The token's SipHash (the standard library's `Hasher`, seeded at random for each process),
    /// `digestKey` hashed first.
    static func digest(_ token: String) -> Int {
        var hasher = Hasher()
        hasher.combine(digestKey.0)
        hasher.combine(digestKey.1)
        var token = token
        token.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        return hasher.finalize()
    }

    private static func index(_ entries: [Entry]) -> [Int: [Int]] {
        var index: [Int: [Int]] = [:]
        for (position, entry) in entries.enumerated() { index[digest(entry.token), default: []].append(position) }
        return index
    }

    /// Adds a token named `name`.
    public mutating func add(name: String, token: String) throws(TokenFileError) {
        guard Self.isName(name) else { throw .badName(name) }
        guard !entries.contains(where: { $0.name == name }) else { throw .exists(name) }
        entries.append(Entry(name: name, token: token))
    }

    /// Removes `name`'s token.
    public mutating func revoke(name: String) throws(TokenFileError) {
        guard let index = entries.firstIndex(where: { $0.name == name }) else { throw .unknown(name) }
        entries.remove(at: index)
    }

    /// A fresh token: 32 random bytes from the system's generator, base64url without padding
    /// (43 characters).
    public static func generateToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = 0
            for byte in chunk { value = value << 8 | Int(byte) }
            value <<= 8 * (3 - chunk.count)
            for position in 0..<(chunk.count + 1) { out.append(alphabet[(value >> (18 - 6 * position)) & 63]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Reads the token file at `path` (mode 0600 or stricter, as every key file).
    public static func read(_ path: String) throws(DataFileError) -> TokenFile {
        do {
            return try TokenFile(text: SecretFile.read(path))
        } catch {
            throw error.file == nil ? error.inFile(path) : error
        }
    }

    /// Replaces the file at `path` with this one atomically (`OutputFile`): a new file beside it,
    /// synced, renamed over it, the folder synced; a reader sees the old file or the new, never a
    /// part. A link is followed (the file it names is replaced, the link stays), and the file
    /// keeps its owner and mode: `sudo tagfix tokens add` on the file of a serve that runs as
    /// its own user left it root's, which that serve could no longer read. A new file is 0600.
    public func write(to path: String) throws(TokenFileError) {
        do {
            try OutputFile.write(Array(text.utf8), to: path, newFileMode: FilePermissions(rawValue: 0o600))
        } catch {
            throw .cannotWrite(path, error.description)
        }
    }

    /// A name: 1–64 letters, digits, `_`, `-`, `.`, `@`.
    public static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy { ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || "_-.@".utf8.contains($0) }
    }

    /// A token: 16–256 printable ASCII characters, no space, none of `;` `,` `"` `\` (so it can
    /// ride in a cookie as it is).
    public static func isToken(_ text: String) -> Bool {
        (16...256).contains(text.utf8.count) && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !";,\"\\".utf8.contains($0) }
    }

    static let badToken =
        "a token is 16 to 256 printable characters without spaces, ; , \" or \\ (make one with tagfix tokens add NAME)"
    static func badName(_ name: String) -> String {
        "\"\(name.prefix(64))\" is not a token name (1 to 64 letters, digits, _ - . @)"
    }

    /// Compares two tokens in time that does not depend on where they differ, without a copy.
    static func same(_ a: String, _ b: String) -> Bool {
        var (a, b) = (a, b)
        return a.withUTF8 { x in
            b.withUTF8 { y in
                var difference = UInt8(x.count == y.count ? 0 : 1)
                for index in 0..<max(x.count, y.count) {
                    difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
                }
                return difference == 0
            }
        }
    }
}

/// Why `tagfix tokens` could not do what it was asked.
public enum TokenFileError: Error, Sendable, Hashable, CustomStringConvertible {
    case badName(String)
    case exists(String)
    case unknown(String)
    case cannotWrite(String, String)

    public var description: String {
        switch self {
        case .badName(let name): TokenFile.badName(name)
        case .exists(let name): "a token named \(name) exists: revoke it first (tagfix tokens revoke \(name)), or choose another name"
        case .unknown(let name): "no token is named \(name): tagfix tokens list shows the names"
        case .cannotWrite(let path, let why): "cannot write \(path): \(why)"
        }
    }
}

extension String {
    /// Without blanks at either end, cut by Unicode scalars.
    fileprivate var trimmingScalars: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}

// MARK: - The cookie

/// The token as a cookie: given once in a tech's link (`?token=`), then kept by the phone's
/// browser, HTTP-only, for this site only.
public enum PhoneCookie {
    /// The cookie's name over plain HTTP.
    public static let name = "tagfix_token"
    /// Its name where the phone sees HTTPS: with the `__Host-` prefix a browser keeps it only
    /// when it is `Secure`, has `Path=/` and no `Domain`, so it was set by this host itself. A
    /// page on another host of the same site (`evil.example.org` beside `tags.example.org`) can
    /// set a plain `tagfix_token` for the whole domain (cookie tossing: its own token, so the taps
    /// of this phone would count as its), never this one.
    public static let hostOnlyName = "__Host-tagfix_token"

    /// The name the cookie has, and the only one read, where the phone sees HTTPS (`secure`) or not.
    public static func name(secure: Bool) -> String { secure ? hostOnlyName : name }
    /// How long a browser keeps it: a year (revoking the token ends it sooner).
    public static let maximumAge = 365 * 24 * 3600

    /// The `Set-Cookie` value for `token`: `HttpOnly` (no script reads it), `SameSite=Strict` (no
    /// other site's page sends it, nor a navigation another site began: its link to a tap page
    /// gets the refusal, not a tap), `Path=/`, and where the phone sees HTTPS `Secure` and the
    /// `__Host-` name (`hostOnlyName`).
    public static func setCookie(token: String, secure: Bool) -> String {
        "\(name(secure: secure))=\(token); Path=/; Max-Age=\(maximumAge); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The answer to a tech's link (`?token=` known): the cookie, and a small page (200) that
    /// sends the browser on to `location`, the same address without the token, by itself (a
    /// `<meta http-equiv="refresh">`, and a link beside it).
    ///
    /// Not a redirect: a link followed from another site (the tech's webmail) begins a cross-site
    /// navigation, and a browser counts a redirect as part of it, so the request after a 303 left
    /// the `SameSite=Strict` cookie out and that page refused the tech (401) until a reload. A
    /// navigation this server's own page makes is same-site, and carries the cookie. A refresh
    /// replaces the link in the history, and the page sends no referrer, so the token stays out
    /// of both.
    /// - Parameter destination: where the browser goes, for a person ("the tap page").
    public static func linkAnswer(setCookie: String, location: String, destination: String) -> HTTPResponse {
        let address = location.htmlEscaped
        let body = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <meta http-equiv="refresh" content="0; url=\(address)">
            <title>TagFix</title><style>body{font-family:sans-serif;margin:1em;max-width:36em}</style></head><body>
            <p>This browser keeps this server's token now: <a href="\(address)">on to \(destination)</a>.</p>
            </body></html>

            """
        return HTTPResponse(
            status: 200, contentType: "text/html; charset=utf-8", body: body, headers: [("Set-Cookie", setCookie)] + linkHeaders)
    }

    /// The link page's headers: nothing from elsewhere (no script at all), no framing, no referrer.
    static let linkHeaders: [(String, String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
        ("Referrer-Policy", "no-referrer"),
    ]

    /// The token in a `Cookie` header, if it has ours (the first of that name): where the phone
    /// sees HTTPS (`secure`) only the `__Host-` one, which no other host can have set.
    public static func token(cookieHeader: String?, secure: Bool) -> String? {
        guard let cookieHeader else { return nil }
        let name = name(secure: secure)
        // On the header's bytes: a split into Characters was 4 % of serve's work on a tap.
        let bytes = cookieHeader.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex
            let pair = bytes[start..<end].drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            if let equals = pair.firstIndex(of: UInt8(ascii: "=")), pair[..<equals].elementsEqual(name.utf8) {
                return String(cookieHeader[bytes.index(after: equals)..<end])
            }
            start = end < bytes.endIndex ? bytes.index(after: end) : end
        }
        return nil
    }

    /// What a request's token says.
    public enum Access: Sendable, Hashable {
        /// The link's `?token=` is known: set the cookie and send the phone to `location`, the
        /// same path and query without the token (so it leaves the address bar and the history),
        /// through `linkAnswer`.
        case setCookie(name: String, setCookie: String, location: String)
        /// The cookie's token is known, with its name.
        case allowed(name: String)
        /// No token, or one the file does not hold (another site's, a revoked one): refused with
        /// a page that says what to do; nothing is logged.
        case refused
    }

    /// Decides a request: `?token=` first (a link), then the cookie.
    /// - Parameters:
    ///   - path: the request's path; `query`: its decoded query, in order.
    public static func access(
        tokens: TokenFile, path: String, query: [(String, String)], cookieHeader: String?, secure: Bool
    ) -> Access {
        if let given = query.first(where: { $0.0 == "token" })?.1 {
            guard let name = tokens.name(forToken: given) else { return .refused }
            let rest = query.filter { $0.0 != "token" }
            // The path as one absolute path on this server: a path that begins `//` or `/\`
            // would be a browser's link to another host (an open redirect that plants a token).
            let location =
                "/" + path.drop(while: { $0 == "/" || $0 == "\\" })
                + (rest.isEmpty ? "" : "?" + rest.map { percentEncoded($0.0) + "=" + percentEncoded($0.1) }.joined(separator: "&"))
            return .setCookie(name: name, setCookie: setCookie(token: given, secure: secure), location: location)
        }
        guard let cookie = token(cookieHeader: cookieHeader, secure: secure), let name = tokens.name(forToken: cookie) else {
            return .refused
        }
        return .allowed(name: name)
    }

    /// Percent-encodes all but RFC 3986's unreserved characters.
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            if (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || "-._~".utf8.contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 15, radix: 16, uppercase: true)
            }
        }
        return out
    }
}

extension HTTPResponse {
    /// The 401 for a request without a token this server knows: what a program sends and, when a
    /// tech's link can set the cookie (a token file: phones), what a person does next on a phone
    /// or in a browser: open the link once, which leaves the token in a cookie there.
    static func tokenNeeded(linkSetsCookie: Bool) -> HTTPResponse {
        var body = "this server needs its token, and this request has none it knows\n"
        if linkSetsCookie {
            body +=
                "on a phone or in a browser: open the link your site lead gave you (it ends in ?token=…) once. It sets a cookie on this phone (in this browser) that holds the token, so this page and the tags' links open without it from then on. If they stop opening (cookies cleared, another browser, the token revoked), open the link again or ask for a new one.\n"
        }
        body += "a program: send Authorization: Bearer TOKEN, or ?token=TOKEN\n"
        return HTTPResponse(status: 401, body: body, headers: [("WWW-Authenticate", "Bearer")])
    }
}

// MARK: - Same origin

/// POSTs are same-origin only: a page of another site cannot make a phone post a tap.
public enum SameOrigin {
    /// Whether a POST with these headers comes from this server's own page: its `Origin` must
    /// be present and be `http(s)://HOST` for the request's `Host` (the scheme the server speaks).
    /// A missing, `null` or foreign origin is refused.
    public static func allows(origin: String?, host: String?, secure: Bool) -> Bool {
        guard let origin = origin?.lowercased(), let host = host?.lowercased(), !host.isEmpty else { return false }
        let expected = (secure ? "https://" : "http://") + host
        let port = secure ? ":443" : ":80"
        return origin == expected || origin == expected + port || (host.hasSuffix(port) && origin + port == expected)
    }
}

// MARK: - Who is behind a proxy

/// The client a proxy on this machine says it forwards: the last address of `X-Forwarded-For`
/// (what the proxy itself added), or, without one, the `for=` of the last element of RFC 7239's
/// `Forwarded`. Only an IPv4 or IPv6 address is taken, in its canonical form; anything else
/// (a name, `unknown`, an obfuscated `_id`, `garbage<script>`) is not, and the peer stands.
public enum ForwardedClient {
    /// The forwarded client's address, or `nil` (none given, or not an address).
    public static func address(xForwardedFor: String?, forwarded: String?) -> String? {
        if let xForwardedFor {
            guard let last = xForwardedFor.split(separator: ",", omittingEmptySubsequences: false).last else { return nil }
            return SocketAddress.numericHost(String(trimmed(last)))
        }
        guard let element = forwarded?.split(separator: ",", omittingEmptySubsequences: false).last else { return nil }
        for pair in element.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, trimmed(parts[0]).lowercased() == "for" else { continue }
            var value = trimmed(parts[1])
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
            if value.hasPrefix("[") {
                // "[2001:db8::17]:4711": the address in brackets, a port after it.
                guard let close = value.firstIndex(of: "]") else { return nil }
                value = value[value.index(after: value.startIndex)..<close]
            } else if let colon = value.firstIndex(of: ":") {
                // 192.0.2.43:47011: a port after an IPv4 address (an IPv6 one is in brackets).
                value = value[..<colon]
            }
            return SocketAddress.numericHost(String(value))
        }
        return nil
    }

    /// Without spaces and tabs at either end.
    static func trimmed(_ text: Substring) -> Substring {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) }) else { return "" }
        return text[first...last]
    }
}

// MARK: - The rate limit

/// A token bucket per client: `burst` taps at once, then one each `interval`. Time comes in
/// (`now`, on the server's clock); memory is bounded: at most `maximumClients` buckets, the
/// idle (full) ones dropped first, then the one seen longest ago.
public struct PhoneRateLimiter: Sendable {
    public let burst: Int
    public let interval: Duration
    public let maximumClients: Int

    private struct Bucket: Sendable {
        var tokens: Double
        var updated: Timestamp
    }

    private var buckets: [String: Bucket] = [:]

    public init(burst: Int = 10, interval: Duration = .seconds(1), maximumClients: Int = 10_000) {
        precondition(burst >= 1 && interval > .zero && maximumClients >= 1)
        self.burst = burst
        self.interval = interval
        self.maximumClients = maximumClients
    }

    /// How many clients have a bucket.
    public var clientCount: Int { buckets.count }

    /// Whether `client` may make a request at `now`; takes one token when it may.
    public mutating func allow(client: String, now: Timestamp) -> Bool {
        var bucket = buckets[client] ?? Bucket(tokens: Double(burst), updated: now)
        let elapsed = max(0, bucket.updated.duration(to: now).seconds)
        bucket.tokens = min(Double(burst), bucket.tokens + elapsed / interval.seconds)
        bucket.updated = max(bucket.updated, now)
        let allowed = bucket.tokens >= 1
        if allowed { bucket.tokens -= 1 }
        if buckets[client] == nil, buckets.count >= maximumClients { makeRoom(now: now) }
        buckets[client] = bucket
        return allowed
    }

    /// Drops the buckets that have refilled (a client that comes back gets a full one anyway),
    /// or, when none has, the one seen longest ago.
    private mutating func makeRoom(now: Timestamp) {
        let full = interval.seconds * Double(burst)
        let before = buckets.count
        buckets = buckets.filter { $0.value.updated.duration(to: now).seconds < full }
        if buckets.count == before, let oldest = buckets.min(by: { $0.value.updated < $1.value.updated }) {
            buckets[oldest.key] = nil
        }
    }
}
