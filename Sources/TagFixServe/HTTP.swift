import Foundation
import Synchronization

/// One HTTP/1.x request head, as the live page's server reads it. Pure.
public struct HTTPRequest: Sendable, Hashable {
    public var method: String
    /// The path without its query.
    public var path: String
    /// The request target as sent: the path and its query, undecoded (what a tap page's URL is
    /// read from).
    public var target: String = ""
    public var query: [String: String]
    /// Header names in lower case (`cookie`, `user-agent`, `origin`, `host`, `content-type`…),
    /// a name given twice: its last value. Made when asked; `header(_:)` reads one.
    public var headers: [String: String] {
        get {
            switch fields {
            case .dictionary(let headers):
                return headers
            case .head(let bytes, let fields):
                var headers = Dictionary<String, String>(minimumCapacity: fields.count)
                for field in fields { headers[Self.lowercased(bytes[field.name])] = String(decoding: bytes[field.value], as: UTF8.self) }
                return headers
            }
        }
        set { fields = .dictionary(newValue) }
    }

    /// The value of the header `name` (in lower case), the last one when given twice.
    public func header(_ name: String) -> String? {
        switch fields {
        case .dictionary(let headers):
            return headers[name]
        case .head(let bytes, let fields):
            var name = name
            let found = name.withUTF8 { wanted in
                bytes.withUnsafeBufferPointer { bytes in fields.lastIndex { Self.equalsIgnoringCase(bytes[$0.name], wanted) } }
            }
            return found.map { String(decoding: bytes[fields[$0].value], as: UTF8.self) }
        }
    }

    /// Where the headers are: an ASCII head's bytes with each header's name and value in them,
    /// read when asked (a phone's browser sends 16 headers and the server reads 6 of them: a
    /// dictionary of strings made for all of them was a tenth of serve's work on a tap), or
    /// a dictionary.
    private var fields: Fields

    private enum Fields: Sendable {
        case head([UInt8], [(name: Range<Int>, value: Range<Int>)])
        case dictionary([String: String])
    }
    /// The body of a POST or PUT (read whole, as its `Content-Length` says); empty otherwise.
    public var body: [UInt8] = []
    /// Who sent it: the peer's `HOST:PORT`, the host as digits (`nil` when not known).
    public var clientAddress: String?
    /// The protocol of the request line: `HTTP/1.1`, `HTTP/1.0`.
    public var version = "HTTP/1.1"

    /// The longest request head read; a longer one is refused (431).
    public static let maximumHead = 16 * 1024

    /// Where the head ends in `bytes` (just past the blank line), if it has.
    public static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count where bytes[index] == 10 {
            if bytes[index - 1] == 10 { return index + 1 }
            if bytes[index - 1] == 13, bytes[index - 2] == 10 { return index + 1 }
            if bytes[index - 1] == 13, bytes[index - 2] == 13 { return index + 1 }
            if bytes[index - 1] == 13, bytes[index - 3] == 13, bytes[index - 2] == 10 { return index + 1 }
        }
        return nil
    }

    public static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.target == b.target && a.query == b.query && a.body == b.body
            && a.clientAddress == b.clientAddress && a.version == b.version && a.headers == b.headers
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(method)
        hasher.combine(target)
        hasher.combine(body)
        hasher.combine(headers)
    }

    /// Parses a request head (request line and headers).
    /// - Throws: `ProtocolError` for anything that is not a request line and headers.
    public init(head: some Collection<UInt8>) throws(ProtocolError) {
        // Nearly every head is ASCII: read from its bytes, with no Foundation and no Characters;
        // the same fields and errors as the reading of its text below (a test holds them equal).
        // One pass over the bytes for both readings: whether they are ASCII, and no bare CR.
        let bytes = Array(head)
        var ascii = true
        for (position, byte) in bytes.enumerated() {
            if byte >= 0x80 { ascii = false }
            if byte == 13, position + 1 == bytes.count || bytes[position + 1] != 10 { throw Self.bareCR }
        }
        if ascii {
            self = try Self(asciiHead: bytes)
            return
        }
        try self.init(text: head)
    }

    /// Reads a head from its text: any UTF-8.
    init(text head: some Collection<UInt8>) throws(ProtocolError) {
        guard let text = String(validating: head, as: UTF8.self) else { throw ProtocolError("the request is not UTF-8 text") }
        var lines = text.split(omittingEmptySubsequences: true) { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }.map(String.init)
        guard !lines.isEmpty else { throw ProtocolError("an empty request") }
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: true)
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else {
            throw ProtocolError("not an HTTP/1.x request line")
        }
        method = String(requestLine[0])
        version = String(requestLine[2])
        let target = requestLine[1]
        guard target.hasPrefix("/") else { throw ProtocolError("the request target must be a path") }
        self.target = String(target)
        if let mark = target.firstIndex(of: "?") {
            path = String(target[..<mark])
            query = Self.query(target[target.index(after: mark)...])
        } else {
            path = String(target)
            query = [:]
        }
        var headers: [String: String] = [:]
        for line in lines {
            if line.first == " " || line.first == "\t" { throw Self.folded }
            guard let colon = line.firstIndex(of: ":") else { throw ProtocolError("a header line without a colon") }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            if let last = line[..<colon].last, last == " " || last == "\t" { throw Self.spaceBeforeColon }
            try Self.add(name, line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces), to: &headers)
        }
        fields = .dictionary(headers)
    }

    /// A header's name followed by a space or a tab (RFC 9112 §5.1: a server must refuse it, as
    /// two readers of the head may not agree on the header's name).
    static let spaceBeforeColon = ProtocolError("a space between a header's name and its colon")

    /// Adds a header; a second `Content-Length` that says another length is refused (RFC 9112
    /// §6.3: two readers of the stream could take different bodies, and the rest as a request of
    /// its own). Other repeated headers: the last one counts.
    static func add(_ name: String, _ value: String, to headers: inout [String: String]) throws(ProtocolError) {
        if name == "content-length", let earlier = headers[name], earlier != value { throw contentLengths }
        if name == "host", headers[name] != nil { throw twoHosts }
        headers[name] = value
    }

    static let contentLengths = ProtocolError("two Content-Length headers that differ")

    /// RFC 9112 §2.2: a CR that does not begin a line's CRLF. Lines were ended at it, so that
    /// `X-A: a<CR>Host: evil` read as a second header; a proxy in front may not read it so.
    static let bareCR = ProtocolError("a CR in the head that does not end a line (a bare CR)")
    /// RFC 9112 §5.2: a line that begins with a space or a tab continues the header before it
    /// (obs-fold), where it was read as a header of its own (`X-A: a`, ` Host: evil`).
    static let folded = ProtocolError("a header line that begins with a space or a tab (a folded header)")
    /// RFC 9112 §3.2: a request with more than one Host is refused.
    static let twoHosts = ProtocolError("two Host headers")

    /// Reads an ASCII head from its bytes: lines end at LF or CRLF (empty ones skipped; a bare CR
    /// was refused by `init(head:)`), the
    /// request line's parts are split at spaces, a header's name and value are trimmed of spaces
    /// and tabs (what `.whitespaces` is in ASCII) and its name lower-cased.
    init(asciiHead bytes: [UInt8]) throws(ProtocolError) {
        // One pass over the bytes, line by line, with no array of lines or of parts.
        let count = bytes.count
        var index = 0
        func nextLine() -> Range<Int>? {
            while index < count, bytes[index] == 10 || bytes[index] == 13 { index += 1 }
            guard index < count else { return nil }
            let start = index
            while index < count, bytes[index] != 10, bytes[index] != 13 { index += 1 }
            return start..<index
        }
        guard let first = nextLine() else { throw ProtocolError("an empty request") }
        // The request line's parts at spaces: exactly three.
        var parts: [Range<Int>] = []
        parts.reserveCapacity(3)
        var at = first.lowerBound
        while at < first.upperBound {
            while at < first.upperBound, bytes[at] == 0x20 { at += 1 }
            guard at < first.upperBound else { break }
            let start = at
            while at < first.upperBound, bytes[at] != 0x20 { at += 1 }
            parts.append(start..<at)
            if parts.count > 3 { break }
        }
        guard parts.count == 3, bytes[parts[2]].starts(with: "HTTP/1.".utf8) else {
            throw ProtocolError("not an HTTP/1.x request line")
        }
        method = String(decoding: bytes[parts[0]], as: UTF8.self)
        version = String(decoding: bytes[parts[2]], as: UTF8.self)
        let target = bytes[parts[1]]
        guard target.first == UInt8(ascii: "/") else { throw ProtocolError("the request target must be a path") }
        self.target = String(decoding: target, as: UTF8.self)
        if let mark = target.firstIndex(of: UInt8(ascii: "?")) {
            path = String(decoding: target[..<mark], as: UTF8.self)
            query = Self.query(Substring(String(decoding: target[(mark + 1)...], as: UTF8.self)))
        } else {
            path = self.target
            query = [:]
        }
        // Each header's name and value where they are in `bytes`; strings only when asked.
        var fields: [(name: Range<Int>, value: Range<Int>)] = []
        fields.reserveCapacity(24)
        var contentLength: Range<Int>?
        var host = false
        while let line = nextLine() {
            if bytes[line.lowerBound] == 0x20 || bytes[line.lowerBound] == 0x09 { throw Self.folded }
            guard let colon = bytes[line].firstIndex(of: UInt8(ascii: ":")) else { throw ProtocolError("a header line without a colon") }
            let name = Self.trimmed(line.lowerBound..<colon, of: bytes)
            if name.upperBound < colon { throw Self.spaceBeforeColon }
            let value = Self.trimmed((colon + 1)..<line.upperBound, of: bytes)
            if Self.equalsIgnoringCase(bytes[name], "content-length".utf8) {
                if let earlier = contentLength, !bytes[earlier].elementsEqual(bytes[value]) { throw Self.contentLengths }
                contentLength = value
            }
            if Self.equalsIgnoringCase(bytes[name], "host".utf8) {
                if host { throw Self.twoHosts }
                host = true
            }
            fields.append((name, value))
        }
        self.fields = .head(bytes, fields)
    }

    /// A name in lower case (ASCII letters; other bytes as they are).
    static func lowercased(_ bytes: ArraySlice<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { out in
            for (offset, byte) in bytes.enumerated() { out[offset] = lowercased(byte) }
            return bytes.count
        }
    }

    /// Whether the client asks to keep the connection for its next request: HTTP/1.1 unless
    /// `Connection: close`, HTTP/1.0 only with `Connection: keep-alive` (RFC 9112 §9.3).
    public var keepsAlive: Bool {
        guard var connection = header("connection") else { return version != "HTTP/1.0" }
        // Its options on bytes, each trimmed of spaces and tabs and compared without case: a
        // browser sends `Connection: keep-alive` with every request.
        let (close, keepAlive) = connection.withUTF8 { bytes in
            var (close, keepAlive) = (false, false)
            var start = 0
            while start <= bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
                let option = bytes[Self.trimmed(start..<end, of: bytes)]
                if Self.equalsIgnoringCase(option, "close".utf8) { close = true }
                if Self.equalsIgnoringCase(option, "keep-alive".utf8) { keepAlive = true }
                start = end + 1
            }
            return (close, keepAlive)
        }
        if close { return false }
        return version == "HTTP/1.0" ? keepAlive : true
    }

    /// Whether `bytes` are `lowercase` (ASCII letters in lower case; other bytes as they are)
    /// in any case.
    static func equalsIgnoringCase(_ bytes: some Collection<UInt8>, _ lowercase: some Collection<UInt8>) -> Bool {
        guard bytes.count == lowercase.count else { return false }
        return zip(bytes, lowercase).allSatisfy { byte, want in lowercased(byte) == want }
    }

    /// An ASCII letter in lower case; any other byte as it is.
    static func lowercased(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

    /// `range` of `bytes` without the spaces and tabs at either end.
    static func trimmed<Bytes: RandomAccessCollection<UInt8>>(_ range: Range<Int>, of bytes: Bytes) -> Range<Int>
    where Bytes.Index == Int {
        var (lower, upper) = (range.lowerBound, range.upperBound)
        while lower < upper, bytes[lower] == 0x20 || bytes[lower] == 0x09 { lower += 1 }
        while upper > lower, bytes[upper - 1] == 0x20 || bytes[upper - 1] == 0x09 { upper -= 1 }
        return lower..<upper
    }

    /// The peer's host as digits (`clientAddress` without its port): what a limit per client
    /// counts by.
    public var clientHost: String? { clientAddress.map(Socket.host(ofPeer:)) }

    /// The cookies of the `Cookie` header, by name (the first of a name given twice).
    public var cookies: [String: String] {
        var result: [String: String] = [:]
        for pair in (header("cookie") ?? "").split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, result[name] == nil else { continue }
            result[name] = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
        }
        return result
    }

    /// The body's length as `Content-Length` gives it: 0 without one, `nil` for one that is not
    /// a whole number of bytes.
    public var contentLength: Int? {
        guard let text = header("content-length") else { return 0 }
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }

    /// A query's names and values, by name (a name given twice: its last value).
    static func query(_ text: Substring) -> [String: String] {
        Dictionary(queryPairs(text), uniquingKeysWith: { _, last in last })
    }

    /// A query's names and values, decoded (`%XX`, and `+` for a space in a value), in order.
    static func queryPairs(_ text: Substring) -> [(String, String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let raw = parts.count > 1 ? String(parts[1]).replacingOccurrences(of: "+", with: " ") : ""
            return (key, raw.removingPercentEncoding ?? raw)
        }
    }

    /// The query of a request target (`target`), decoded, in order.
    static func queryPairs(ofTarget target: String) -> [(String, String)] {
        guard let mark = target.firstIndex(of: "?") else { return [] }
        return queryPairs(target[target.index(after: mark)...])
    }

    /// The bearer token the request carries: `Authorization: Bearer …`, else `?token=` (which
    /// a browser's EventSource and a phone's address bar can send).
    public var bearerToken: String? {
        if let header = header("authorization"), header.lowercased().hasPrefix("bearer ") {
            return String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        }
        return query["token"]
    }
}

/// How a responder answers an HTTP request: at once, or later through its `HTTPReplyHandle`.
public enum HTTPAnswer: Sendable {
    /// This is the response.
    case now(HTTPResponse)
    /// The response will come through the request's `HTTPReplyHandle`, from any thread.
    case later
}

/// The one way to answer an HTTP request the responder answered `.later`: `send` hands the
/// response to the server's loop, which writes it (and closes the connection, or keeps it for
/// the client's next request). Safe from any
/// thread; only the first `send` counts. A client that has gone (or a server that has stopped)
/// before it is fine: the response is dropped.
public final class HTTPReplyHandle: Sendable {
    private let deliver: Mutex<(@Sendable (HTTPResponse) -> Void)?>
    /// The server and the client there this reply goes to, for `send(_:)` of many at once.
    private let route: (server: any HTTPReplyRoute, client: Int)?

    /// A handle whose first `send` calls `deliver` (a test's responder can make its own).
    public init(_ deliver: @escaping @Sendable (HTTPResponse) -> Void) {
        self.deliver = Mutex(deliver)
        route = nil
    }

    /// A server's handle for its client `client`.
    init(server: any HTTPReplyRoute, client: Int) {
        deliver = Mutex { [server] response in server.deliver([(client, response)]) }
        route = (server, client)
    }

    /// Answers the request (the first call only; later ones do nothing). Never waits.
    public func send(_ response: HTTPResponse) {
        let deliver = self.deliver.withLock { $0.take() }
        deliver?(response)
    }

    /// Answers many requests at once, as `send` each would (the first answer of each handle
    /// counts): those of one server in one hand-over to its loop, in order, where `send` makes
    /// one hand-over a reply (a group of 200 phone taps' answers took the committer 0.9 ms to
    /// hand over one by one, and the loop began writing them only after). Never waits.
    public static func send(_ replies: some Sequence<(HTTPReplyHandle, HTTPResponse)>) {
        var servers: [ObjectIdentifier: (server: any HTTPReplyRoute, replies: [(client: Int, response: HTTPResponse)])] = [:]
        for (handle, response) in replies {
            guard let deliver = handle.deliver.withLock({ $0.take() }) else { continue }
            guard let (server, client) = handle.route else {
                deliver(response)
                continue
            }
            servers[ObjectIdentifier(server), default: (server, [])].replies.append((client, response))
        }
        for (server, replies) in servers.values { server.deliver(replies) }
    }

    /// Whether `send` has yet to be called.
    public var isPending: Bool { deliver.withLock { $0 != nil } }
}

/// A server that takes replies given later (`HTTPReplyHandle`), many in one hand-over.
protocol HTTPReplyRoute: AnyObject, Sendable {
    /// Writes each response to its client (one that has gone is skipped), in order. Never waits.
    func deliver(_ replies: [(client: Int, response: HTTPResponse)])
}

/// A response the server writes; then it closes the connection or keeps it for the client's next
/// request (HTTP/1.1 persistent connections, `ServeConnection`).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    public var extraHeaders: [(String, String)] = []
    /// The answer to HEAD: the head GET would have, without the body.
    public var headOnly = false

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String, headers: [(String, String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = Array(body.utf8)
        self.extraHeaders = headers
    }

    /// A response of bytes (a tile, an image).
    public init(status: Int, contentType: String, bytes: [UInt8], headers: [(String, String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = bytes
        self.extraHeaders = headers
    }

    public static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 303: "See Other"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 421: "Misdirected Request"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 503: "Service Unavailable"
        default: "Error"
        }
    }

    /// The bytes on the wire, `Connection: close`.
    public var bytes: [UInt8] { bytes(keepAlive: false) }

    /// The bytes on the wire: `Connection: keep-alive` (the connection is kept for the next
    /// request) or `Connection: close`; otherwise the same.
    public func bytes(keepAlive: Bool) -> [UInt8] {
        // Into one array: an answer to every tap is made this way.
        var out: [UInt8] = []
        out.reserveCapacity(200 + extraHeaders.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 } + (headOnly ? 0 : body.count))
        func put(_ text: String) { out.append(contentsOf: text.utf8) }
        put("HTTP/1.1 ")
        put(String(status))
        put(" ")
        put(Self.reason(status))
        put("\r\nContent-Type: ")
        put(contentType)
        put("\r\nContent-Length: ")
        put(String(body.count))
        put("\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: ")
        put(keepAlive ? "keep-alive\r\n" : "close\r\n")
        for (name, value) in extraHeaders {
            put(name)
            put(": ")
            put(value)
            put("\r\n")
        }
        put("\r\n")
        if !headOnly { out.append(contentsOf: body) }
        return out
    }

    /// 405 for a method the server (or its responder) does not take.
    public static var onlyGet: HTTPResponse { HTTPResponse(status: 405, body: "only GET\n", headers: [("Allow", "GET, HEAD")]) }

    /// The head of `/events`: a stream that stays open.
    public static let eventStreamHead = Array(
        ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nX-Accel-Buffering: no\r\n"
            + "Connection: keep-alive\r\n\r\nretry: 1000\n\n").utf8)

    /// One Server-Sent Event.
    public static func event(_ event: ServeEvent) -> [UInt8] {
        var text = "event: \(event.kind.rawValue)\n"
        if let id = event.id { text += "id: \(id)\n" }
        return Array((text + "data: \(event.line)\n\n").utf8)
    }
}
