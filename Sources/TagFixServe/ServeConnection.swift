import TagFixCore

/// One client of `tagfix serve` as a state machine: bytes in, actions and bytes out. No
/// descriptor, no thread, no clock of its own (the time comes with each call), so every protocol
/// rule is tested without a socket (swift-nio's EmbeddedChannel style).
///
/// - A socket client (`.socket`): the line protocol (`CommandFramer`, `ClientCommand`), token
///   authentication, `?WATCH` (a `.watch` action: the shell adds it to the fan-out, or takes it
///   off), and a command begun and not ended within `clientTimeout` (an `ERROR`, then closed).
/// - An HTTP client (`.http`): a request head (bounded by `HTTPRequest.maximumHead`, due
///   `clientTimeout` after the connection, or after its first byte for a later request), the
///   bearer token; GET and HEAD, and POST and PUT with a `Content-Length` body read whole by the
///   same deadline (at most `bodyLimit`: 413; a malformed length 400; chunked 411); `/events`
///   makes it an event stream (`.events`); any other request is handed out (`.respond`) and
///   answered with `reply(_:now:)` — at once or later.
/// - HTTP/1.1 persistent connections: after an answer the connection is kept for the client's
///   next request when the request allows it (HTTP/1.1 without `Connection: close`, HTTP/1.0 with
///   `Connection: keep-alive`), the answer is not an error (status below 400), and it is not the
///   connection's `maximumRequests`th; otherwise the answer says `Connection: close` and the
///   connection is closed once it is written. A kept connection with no request begun for
///   `idleTimeout` is closed without a word. A request sent before the last one's answer
///   (pipelining) is kept and served in order, up to `HTTPRequest.maximumHead + bodyLimit`
///   bytes; past that the connection is closed after the answer, the excess unread. An error
///   the connection finds itself (a malformed or oversized request, a timeout) is answered and
///   closed, as before.
/// - Output: what is queued waits in `pending` until the shell says what the socket took
///   (`wrote(_:)`); a client whose unread output would pass `bufferLimit` is cut off (`.cutOff`).
///
/// The shell (`EventServer`) reads, writes, closes and keeps the timers; it closes the
/// connection on `.cutOff`, and once `isFinished` (all written of a connection that is to close).
struct ServeConnection {
    enum Kind: Sendable, Hashable {
        /// The event socket's line protocol (Unix or TCP).
        case socket
        /// An HTTP request, not yet answered or answered and being written.
        case http
        /// An HTTP event stream (`/events`, Server-Sent Events).
        case events
    }

    /// The limits and answers the connection needs from the server's configuration.
    struct Settings: Sendable {
        var token: String?
        /// The named tokens (`--token` as a `TokenFile`, reloaded on SIGHUP): any of them is the
        /// bearer token. `nil`: `token` alone.
        var tokens: TokenRing?
        var release: String
        var clientTimeout: Duration
        var bufferLimit: Int
        var bodyLimit: Int
        /// How long a kept HTTP connection may wait for its next request's first byte.
        var idleTimeout: Duration
        /// The most requests one HTTP connection is answered (the last says `Connection: close`).
        var maximumRequests: Int
        /// Without a token: the names besides this machine's own (`localhost`, 127.0.0.0/8,
        /// `[::1]`) a request's `Host` may give (the `--http` address as given); a request for
        /// another name gets 421, so that a page of another site cannot read the server through
        /// DNS rebinding. `nil`: any `Host` (a token guards the server).
        var localHosts: Set<String>?
        /// The server speaks TLS: a phone's cookie is the `__Host-` one (`PhoneCookie`).
        var secure = false

        init(
            token: String? = nil, release: String, clientTimeout: Duration = .seconds(10), bufferLimit: Int = 1 << 20,
            bodyLimit: Int = 16 * 1024, idleTimeout: Duration = .seconds(15), maximumRequests: Int = 1000
        ) {
            self.token = token
            self.release = release
            self.clientTimeout = clientTimeout
            self.bufferLimit = bufferLimit
            self.bodyLimit = bodyLimit
            self.idleTimeout = idleTimeout
            self.maximumRequests = maximumRequests
        }

        init(_ configuration: ServeConfiguration) {
            self.init(
                token: configuration.token, release: configuration.release, clientTimeout: configuration.clientTimeout,
                bufferLimit: configuration.bufferLimit, bodyLimit: configuration.bodyLimit,
                idleTimeout: configuration.keepAliveTimeout, maximumRequests: configuration.keepAliveRequests)
            tokens = configuration.tokens
            secure = configuration.tls != nil
            if !needsToken, let http = configuration.http { localHosts = [http.host.lowercased()] }
        }

        /// Whether a token is asked for at all.
        var needsToken: Bool { token != nil || tokens != nil }

        /// Whether `given` is the bearer token (or one of the named ones).
        func accepts(_ given: String) -> Bool {
            if let tokens { return tokens.name(forToken: given) != nil }
            guard let token else { return false }
            return TokenFile.same(given, token)
        }
    }

    /// What the shell must do, in order, after a call.
    enum Action: Sendable, Hashable {
        /// Add the client to the fan-out's watchers (true) or take it off (false).
        case watch(Bool)
        /// The client has become an event stream: it is sent every event from now on.
        case streamOpened
        /// Answer this HTTP request (the responder's): `reply(_:now:)` with the response.
        case respond(HTTPRequest)
        /// A line for the server's log.
        case log(String)
        /// The client did not read: its unread output would pass the limit. Close it now (the
        /// line is for the log).
        case cutOff(String)
    }

    private(set) var kind: Kind
    /// The client in log lines: `socket client 3 (127.0.0.1:4711)`.
    let name: String
    let settings: Settings
    let responder: any ServeResponder
    /// Whether the client watches the fan-out (`?WATCH={"enable":true}`).
    private(set) var watching = false
    /// Nothing more is heard from the client; it is closed once what is queued is written.
    private(set) var closeWhenFlushed = false
    /// Cut off: the shell closes it at once and nothing more happens here.
    private(set) var isCutOff = false

    private var framer = CommandFramer()
    private var authenticated: Bool
    /// The token a long-lived connection was let in with: a socket client's `?AUTH`, an event
    /// stream's bearer token (`nil`: none was asked for). Once the tokens are reloaded without
    /// it, the connection is closed (`tokensChanged()`).
    private(set) var credential: String?
    private var output: [UInt8] = []
    private var sent = 0
    private var request: [UInt8] = []
    /// When an HTTP client connected (or its next request's first byte came), or a socket
    /// client's unfinished command began: it is due `clientTimeout` later.
    private var opened: Timestamp?
    /// A socket client: no command is begun. An HTTP client: nothing more is read.
    private var requestDone = false
    /// The method of the request handed out with `.respond` (HEAD: the reply has no body), and
    /// whether its client asked to keep the connection.
    private var respondingTo: (method: String, keepAlive: Bool)?
    /// A POST or PUT whose head is read, and its body's length: the body is being read.
    private var awaitingBody: (request: HTTPRequest, length: Int)?
    /// A kept HTTP connection waits for its next request's first byte since then.
    private var idleSince: Timestamp?
    /// The HTTP requests answered on this connection.
    private(set) var answered = 0
    /// More was sent before an answer than is kept: the connection closes after the answer.
    private var closeAfterAnswer = false
    /// The client's `HOST:PORT`, for the requests it sends.
    let clientAddress: String?
    private var actions: [Action] = []

    /// A new connection: a socket client is greeted with `VERSION`; an HTTP client's head is due
    /// `clientTimeout` from `now`.
    /// - Parameter authenticated: whether it needs no token (no token is set, or it came on the
    ///   Unix socket).
    init(
        kind: Kind, name: String, clientAddress: String? = nil, authenticated: Bool, settings: Settings, responder: any ServeResponder,
        now: Timestamp
    ) {
        self.kind = kind
        self.name = name
        self.clientAddress = clientAddress
        self.authenticated = authenticated
        self.settings = settings
        self.responder = responder
        if kind == .http { opened = now }
        if kind == .socket { reply([ServeMessage.version(release: settings.release)]) }
    }

    // MARK: - Output

    /// The bytes queued and not yet written.
    var pending: ArraySlice<UInt8> { output[sent...] }
    var unsent: Int { output.count - sent }
    /// All is written of a client that is to be closed: close it.
    var isFinished: Bool { closeWhenFlushed && unsent == 0 && !isCutOff }

    /// The socket took `count` bytes of `pending`.
    mutating func wrote(_ count: Int) {
        sent += min(count, unsent)
        if sent == output.count {
            output.removeAll(keepingCapacity: output.count < 65_536)
            sent = 0
        }
    }

    /// Queues bytes (the fan-out's lines, an event stream's events). Returns `.cutOff` when
    /// they would pass the limit.
    mutating func queue(_ bytes: [UInt8]) -> [Action] {
        append(bytes)
        return takeActions()
    }

    private mutating func append(_ bytes: [UInt8]) {
        guard !isCutOff else { return }
        if unsent + bytes.count > settings.bufferLimit {
            isCutOff = true
            actions.append(
                .cutOff(
                    "serve: \(name) cut off: \(unsent + bytes.count) bytes unread, over the limit of \(settings.bufferLimit)"))
            return
        }
        if sent > 0, sent >= output.count / 2 {
            output.removeFirst(sent)
            sent = 0
        }
        output.append(contentsOf: bytes)
    }

    private mutating func reply(_ lines: [String]) {
        append(Array(lines.map { $0 + "\n" }.joined().utf8))
    }

    private mutating func takeActions() -> [Action] {
        defer { actions = [] }
        return actions
    }

    // MARK: - Input

    /// Bytes the client sent, at `now`.
    mutating func receive(_ bytes: some Collection<UInt8>, now: Timestamp) -> [Action] {
        guard !isCutOff else { return [] }
        switch kind {
        case .socket: commands(bytes, now: now)
        case .http: request(bytes, now: now)
        case .events: break  // nothing more is read from an event stream
        }
        return takeActions()
    }

    private mutating func commands(_ bytes: some Collection<UInt8>, now: Timestamp) {
        guard !closeWhenFlushed else { return }  // being closed: nothing more is heard
        let pieces = framer.feed(bytes)
        // An unfinished command is due `clientTimeout` after its first byte came (after the read
        // that began it: the command before it ended in the same read, or none was open).
        if !framer.isMidCommand {
            opened = nil
        } else if opened == nil || !pieces.isEmpty {
            opened = now
        }
        requestDone = opened == nil
        for piece in pieces {
            guard !isCutOff, !closeWhenFlushed else { return }
            switch piece {
            case .tooLong:
                reply([ServeMessage.error("command longer than \(ClientCommand.maximumLength) bytes; skipped to the end of its line")])
            case .command(let text):
                do throws(ProtocolError) {
                    try run(ClientCommand.parse(text))
                } catch {
                    reply([ServeMessage.error(error.message)])
                }
            }
        }
    }

    private mutating func run(_ command: ClientCommand) throws(ProtocolError) {
        if !authenticated {
            switch command {
            case .auth(let token):
                guard settings.needsToken, settings.accepts(token) else {
                    closeWhenFlushed = true
                    reply([ServeMessage.error("wrong token; closing")])
                    return
                }
                authenticated = true
                credential = token
                reply([#"{"class":"AUTH","authenticated":true}"#])
                return
            case .version:
                break
            default:
                throw ProtocolError("this server needs a token first: ?AUTH=\"TOKEN\";")
            }
        }
        switch command {
        case .watch(let enable):
            if let enable, enable != watching {
                watching = enable
                actions.append(.watch(enable))
            }
            reply((watching && enable == true ? responder.answer(.devices) : []) + [ServeMessage.watch(enabled: watching)])
        case .poll, .devices:
            reply(responder.answer(command))
        case .version:
            reply([ServeMessage.version(release: settings.release)])
        case .auth:
            reply([#"{"class":"AUTH","authenticated":true}"#])
        }
    }

    /// The request's token the server holds: its bearer token (Authorization, ?token=), else its
    /// cookie's; `nil` when neither is one.
    static func acceptedToken(_ request: HTTPRequest, _ settings: Settings) -> String? {
        if let bearer = request.bearerToken, settings.accepts(bearer) { return bearer }
        let secure = PhoneTaps.seesHTTPS(request, serverTLS: settings.secure)
        if let cookie = PhoneCookie.token(cookieHeader: request.header("cookie"), secure: secure), settings.accepts(cookie) {
            return cookie
        }
        return nil
    }

    /// The most bytes kept of requests sent before the last one's answer.
    private var pipelineLimit: Int { HTTPRequest.maximumHead + settings.bodyLimit }

    private mutating func request(_ bytes: some Collection<UInt8>, now: Timestamp) {
        guard !requestDone, !closeWhenFlushed, !bytes.isEmpty else { return }
        if respondingTo != nil {
            // Pipelined: kept for after the answer, in order, up to a request's worth.
            guard request.count + bytes.count <= pipelineLimit else {
                closeAfterAnswer = true
                requestDone = true
                request = []
                return
            }
            return request.append(contentsOf: bytes)
        }
        if idleSince != nil {
            // A kept connection's next request begins: it is due `clientTimeout` from now.
            idleSince = nil
            opened = now
        }
        request.append(contentsOf: bytes)
        readRequest()
    }

    /// Reads the request in `request` (its head, then its body), as far as it has come.
    private mutating func readRequest() {
        if awaitingBody != nil { return readBody() }
        guard let end = HTTPRequest.headEnd(request) else {
            if request.count > HTTPRequest.maximumHead {
                respond(HTTPResponse(status: 431, body: "request head over \(HTTPRequest.maximumHead) bytes\n"))
            }
            return
        }
        var parsed: HTTPRequest
        do {
            parsed = try HTTPRequest(head: request[..<end])
        } catch {
            return respond(HTTPResponse(status: 400, body: error.message + "\n"))
        }
        parsed.clientAddress = clientAddress
        // Without a token, only a request for this machine's own name: a page of another site
        // whose name is made to point here (DNS rebinding) sends that name.
        if let localHosts = settings.localHosts, let host = parsed.header("host"), !ListenAddress.isLocalHost(host, also: localHosts) {
            return respond(
                HTTPResponse(
                    status: 421,
                    body:
                        "this server has no --token, so it answers only requests for this machine (localhost, 127.0.0.1, [::1] or its --http address), not for \(host.excerpt(64)): open it by one of those, or give serve --token FILE\n"
                ))
        }
        // What follows the head: the start of a body (or the next request).
        request.removeFirst(end)
        // A method the server, or the path, never takes: 405 before any token is asked for (the
        // path's own answer first: `/api/tap` says `Allow: POST` whatever the method).
        if let refusal = responder.methodRefusal(parsed) { return respond(refusal) }
        guard ["GET", "HEAD", "POST", "PUT"].contains(parsed.method) else { return respond(HTTPResponse.onlyGet) }
        // A GET or HEAD has no body. One that says it has (a Content-Length other than 0, a
        // Transfer-Encoding) is refused and its connection closed: its body was left to be read
        // as the next request, which a proxy that keeps its connection to this server would pass
        // as its own (with the X-Forwarded-For and -Proto this server takes from a proxy).
        if parsed.method == "GET" || parsed.method == "HEAD", parsed.header("transfer-encoding") != nil || parsed.contentLength != 0 {
            return respond(
                HTTPResponse(status: 400, body: "a GET or HEAD request has no body: send it without Content-Length or Transfer-Encoding\n"))
        }
        // The token: the bearer token (Authorization, ?token=), else the cookie a tech's link set
        // (the live page's address keeps no token; its event stream and map send the cookie).
        // Phone taps authenticate themselves (their token's cookie, or the link's ?token=): the
        // responder says which requests it checks, and their token is looked for there, once.
        // The event stream never: its token is kept, so that a revoked one closes it.
        let checksItself =
            settings.needsToken && parsed.path != "/events" && (parsed.path == "/healthz" || responder.authenticatesItself(parsed))
        let accepted = settings.needsToken && !checksItself ? Self.acceptedToken(parsed, settings) : nil
        if settings.needsToken, !checksItself, accepted == nil {
            // A token file is what lets a tech's link set the cookie: the answer says so.
            return respond(HTTPResponse.tokenNeeded(linkSetsCookie: settings.tokens != nil))
        }
        switch parsed.method {
        case "GET", "HEAD":
            break
        case "POST", "PUT":
            return beginBody(of: parsed)
        default:
            return respond(HTTPResponse.onlyGet)
        }
        if parsed.path == "/events" {
            requestDone = true
            request = []
            kind = .events
            if settings.needsToken { credential = accepted }
            actions.append(.streamOpened)
            append(HTTPResponse.eventStreamHead)
            for event in responder.devices() { append(HTTPResponse.event(event)) }
            let since = Int(parsed.header("last-event-id") ?? parsed.query["since"] ?? "") ?? -1
            if since >= 0 {
                for event in responder.verdicts(since: since) { append(HTTPResponse.event(event)) }
            }
            return
        }
        handOut(parsed)
    }

    /// A POST or PUT: its body is read whole (as `Content-Length` says, at most `bodyLimit`
    /// bytes), by the same deadline as its head.
    private mutating func beginBody(of parsed: HTTPRequest) {
        if parsed.header("transfer-encoding") != nil {
            return respond(
                HTTPResponse(status: 411, body: "send the body with a Content-Length (a chunked body is not read)\n"))
        }
        guard let length = parsed.contentLength else {
            return respond(HTTPResponse(status: 400, body: "Content-Length must be a whole number of bytes\n"))
        }
        guard length <= settings.bodyLimit else {
            return respond(HTTPResponse(status: 413, body: "request body over \(settings.bodyLimit) bytes; nothing was recorded\n"))
        }
        awaitingBody = (parsed, length)
        if request.count < length, parsed.header("expect")?.lowercased() == "100-continue" {
            append(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        }
        readBody()
    }

    /// Hands out the request awaiting its body once the body is all there.
    private mutating func readBody() {
        guard let (parsed, length) = awaitingBody, request.count >= length else { return }
        var whole = parsed
        whole.body = Array(request.prefix(length))
        awaitingBody = nil
        request.removeFirst(length)
        handOut(whole)
    }

    private mutating func handOut(_ parsed: HTTPRequest) {
        respondingTo = (parsed.method, parsed.keepsAlive)
        actions.append(.respond(parsed))
    }

    /// Answers the request handed out with `.respond` (a HEAD request gets the head only), at
    /// `now`. The connection is kept for the next request (see the type's notes), or closed once
    /// the answer is written; a request already sent after it is read at once (perhaps another
    /// `.respond`). Nothing happens for a client that has no request waiting for its answer.
    mutating func reply(_ response: HTTPResponse, now: Timestamp) -> [Action] {
        guard let (method, keepAlive) = respondingTo, !isCutOff else { return [] }
        respondingTo = nil
        answered += 1
        var response = response
        response.headOnly = method == "HEAD"
        let keep =
            keepAlive && response.status < 400 && answered < settings.maximumRequests && !closeAfterAnswer && !closeWhenFlushed
        guard keep else {
            respond(response)
            return takeActions()
        }
        append(response.bytes(keepAlive: true))
        if request.isEmpty {
            idleSince = now
            opened = nil
        } else {
            opened = now
            readRequest()
        }
        return takeActions()
    }

    /// The last answer on this connection: `Connection: close`, closed once written.
    private mutating func respond(_ response: HTTPResponse) {
        requestDone = true
        closeWhenFlushed = true
        awaitingBody = nil
        request = []
        append(response.bytes)
    }

    /// The client's side reached its end (it half-closed, or closed after its last byte): nothing
    /// more is heard from it. An HTTP request handed out and not yet answered still gets its
    /// answer (`Connection: close`), and what is queued is still written, then the connection
    /// closes: a phone whose tap was logged would otherwise never see its verdict. Returns whether
    /// there is something to write before closing; `false`: close now.
    mutating func inputEnded() -> Bool {
        guard kind == .http, !isCutOff else { return false }
        if respondingTo != nil {
            requestDone = true
            closeAfterAnswer = true
            awaitingBody = nil
            request = []
            return true
        }
        guard unsent > 0 else { return false }
        requestDone = true
        closeWhenFlushed = true
        return true
    }

    /// A kept HTTP connection between requests: none begun, none being answered.
    var isIdle: Bool { idleSince != nil && !closeWhenFlushed && !isCutOff }

    /// Closes a kept HTTP connection that waits for its next request (the server needs its slot):
    /// nothing is said; it is closed once what is queued is written.
    mutating func closeIdle() {
        guard isIdle else { return }
        requestDone = true
        closeWhenFlushed = true
    }

    // MARK: - Time

    /// When the client's unfinished request or command is due, or a kept HTTP connection's wait
    /// for its next request ends (`nil`: none is awaited).
    var deadline: Timestamp? {
        guard !requestDone, !isCutOff else { return nil }
        if let idleSince { return closeWhenFlushed ? nil : idleSince.advanced(by: settings.idleTimeout) }
        guard respondingTo == nil, let opened else { return nil }
        return opened.advanced(by: settings.clientTimeout)
    }

    /// The timeout in words, for the log and the client: `10 s`, `2.5 s`.
    var timeoutText: String {
        let (seconds, attoseconds) = settings.clientTimeout.components
        return attoseconds == 0 ? "\(seconds) s" : "\(Double(seconds) + Double(attoseconds) / 1e18) s"
    }

    /// At `now`: a socket client whose command is overdue gets an `ERROR`, an HTTP client whose
    /// head is overdue 408; either is closed once that is written (a line in the log). A kept
    /// HTTP connection idle for `idleTimeout` is closed without a word.
    mutating func expire(now: Timestamp) -> [Action] {
        guard let deadline, deadline <= now else { return [] }
        if isIdle {
            closeIdle()
            return takeActions()
        }
        if kind == .socket {
            actions.append(.log("serve: \(name) closed: it began a command and did not end it within \(timeoutText)"))
            requestDone = true
            opened = nil
            closeWhenFlushed = true
            reply([ServeMessage.error("a command begun and not ended within \(timeoutText) (end each with ; or a newline); closing")])
        } else {
            let part = awaitingBody == nil ? "head" : "body"
            awaitingBody = nil
            actions.append(.log("serve: \(name) closed: its request's \(part) did not arrive within \(timeoutText)"))
            respond(HTTPResponse(status: 408, body: "the request's \(part) did not arrive within \(timeoutText)\n"))
        }
        return takeActions()
    }

    // MARK: - Revoked tokens

    /// The tokens were reloaded (SIGHUP): a socket client or an event stream let in with a token
    /// the server no longer holds is closed, so a revoked token stops receiving anything. A
    /// socket client is told why (an `ERROR`) and leaves the fan-out; a stream is closed once
    /// what is queued is written (its browser reconnects, and its token is refused then). HTTP
    /// requests need no more: each is checked as it comes.
    mutating func tokensChanged() -> [Action] {
        guard let credential, !settings.accepts(credential), !closeWhenFlushed, !isCutOff else { return [] }
        actions.append(.log("serve: \(name) closed: the token it gave was revoked (the token file was reloaded)"))
        if kind == .socket {
            if watching {
                watching = false
                actions.append(.watch(false))
            }
            reply([
                ServeMessage.error(
                    "the token this client gave was revoked: ?AUTH with a token the server holds (tagfix tokens list); closing")
            ])
        }
        requestDone = true
        opened = nil
        closeWhenFlushed = true
        return takeActions()
    }

    // MARK: - Stopping

    /// The server stops: a socket client or an event stream is told (`SHUTDOWN`); every client
    /// is closed once what is queued is written.
    mutating func shutdown(reason: String) -> [Action] {
        let line = ServeEvent(kind: .shutdown, line: ServeMessage.shutdown(reason: reason))
        switch kind {
        case .socket: append(Array((line.line + "\n").utf8))
        case .events: append(HTTPResponse.event(line))
        case .http: break
        }
        closeWhenFlushed = true
        return takeActions()
    }
}
