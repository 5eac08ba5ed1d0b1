import Foundation
import Synchronization
public import TagFixCore
import TagFixDevices

// Phone taps as `tagfix serve` answers them (issue 34): the tap page on a tag's URL and
// POST /api/tap, through the pieces in PhoneAccess.swift, PhonePage.swift and
// PhoneTapHandler.swift. The decision blocks (the registry, a SUN counter's commit), so it runs on
// a thread of its own, never on the server's loop; its verdict goes to the session's fan-out
// (the log first) before the phone gets its answer.

// MARK: - Tokens

/// The named tokens of `serve --token FILE`, replaced whole when SIGHUP reloads the file: the
/// bearer token's check and the phones' cookies read the file of the moment.
public final class TokenRing: Sendable {
    private let file: Mutex<TokenFile>

    public init(_ file: TokenFile) { self.file = Mutex(file) }

    /// Replaces the tokens (a reloaded file): a revoked token is refused from the next request.
    public func replace(with file: TokenFile) { self.file.withLock { $0 = file } }

    /// The tokens now.
    public var current: TokenFile { file.withLock { $0 } }

    /// The name of `token`, if the file holds it.
    public func name(forToken token: String) -> String? { current.name(forToken: token) }
}

// MARK: - The service

/// What `serve` needs to answer phone taps: the decision (a `PhoneTapHandler`), the tokens, the
/// rate limit, and where verdicts go (the session's fan-out, given once it exists).
public final class PhoneTaps: Sendable {
    /// The verifier taps are decided by (which paths are tap pages).
    public let verifier: Verifier
    public let tokens: TokenRing
    /// Whether the server speaks TLS: the cookie is `Secure`, the origin `https://`.
    public let secure: Bool
    public let keepPositions: Bool
    private let decide: @Sendable (PhoneTapRequest, String, String, String) -> PhoneTapAnswer
    private let clock: any SessionClock
    private let limiter: Mutex<PhoneRateLimiter>
    private let sink = Mutex<(@Sendable (Verdict) -> Bool)?>(nil)

    /// - Parameters:
    ///   - handler: decides each tap (its verifier, clock and policy).
    ///   - clock: the server's clock, for the rate limit.
    public init<C: Clock>(
        handler: PhoneTapHandler<C>, tokens: TokenRing, secure: Bool, clock: any SessionClock,
        limiter: PhoneRateLimiter = PhoneRateLimiter()
    ) where C.Instant == Timestamp, C.Duration == Duration {
        verifier = handler.verifier
        self.tokens = tokens
        self.secure = secure
        keepPositions = handler.policy.keepPositions
        decide = { handler.handle($0, token: $1, client: $2, userAgent: $3) }
        self.clock = clock
        self.limiter = Mutex(limiter)
    }

    /// Where each tap's verdict goes: the session's fan-out (the log first). It says whether
    /// the verdict was recorded. Until this is called, taps are answered 503.
    public func deliver(to sink: @escaping @Sendable (Verdict) -> Bool) { self.sink.withLock { $0 = sink } }

    /// Whether the server leaves `request`'s credentials to this (a tap page or a tap), so the
    /// bearer token is not asked for.
    func authenticatesItself(_ request: HTTPRequest) -> Bool {
        switch request.method {
        case "POST": request.path == PhoneTapRoute.postPath
        case "GET", "HEAD": PhoneTapRoute.mayBeTapPage(request.path)
        default: false
        }
    }

    /// Answers a request `authenticatesItself` took: later, from a thread of its own (the
    /// registry is read, a SUN counter committed). `fallback` answers a GET that is no tap page
    /// for a client with the bearer token (the server's own 404 or page).
    func respond(to request: HTTPRequest, reply: HTTPReplyHandle, fallback: @escaping @Sendable (HTTPRequest) -> HTTPResponse)
        -> HTTPAnswer
    {
        if request.method == "POST" {
            if let refusal = refusePost(request) { return .now(refusal) }
        }
        DeviceThread.detach(name: "tagfix-phone-tap") { [self] in
            reply.send(request.method == "POST" ? tap(request) : page(request, fallback: fallback))
        }
        return .later
    }

    /// What is refused before the tap is decided (on the loop: nothing here waits): a client
    /// over its rate, a tap without a known token, from another origin, a body too large or not
    /// a tap. Nothing refused is logged.
    func refusePost(_ request: HTTPRequest) -> HTTPResponse? {
        let client = Self.client(request)
        guard limiter.withLock({ $0.allow(client: client, now: clock.timestamp) }) else {
            return HTTPResponse(
                status: 429, body: "too many taps from this phone: wait a second, then check again\n", headers: [("Retry-After", "1")])
        }
        guard case .allowed = access(request) else {
            return HTTPResponse(
                status: 401,
                body:
                    "this phone has no token for this server: open the link your site lead gave you (…?token=…) once in this browser, then tap again; nothing was recorded\n"
            )
        }
        guard SameOrigin.allows(origin: request.headers["origin"], host: request.headers["host"], secure: isSecure(request)) else {
            return HTTPResponse(
                status: 403,
                body: "a tap is posted by this server's own tap page only (its Origin must be this server); nothing was recorded\n")
        }
        guard request.body.count <= PhoneTapRequest.maximumBody else {
            return HTTPResponse(status: 413, body: "a tap's body is at most \(PhoneTapRequest.maximumBody) bytes; nothing was recorded\n")
        }
        do {
            _ = try PhoneTapRequest(body: request.body)
        } catch {
            return HTTPResponse(status: error.status, body: error.description + "; nothing was recorded\n")
        }
        return nil
    }

    /// Decides a tap that passed `refusePost` and records its verdict: 200 with the answer once
    /// the fan-out (the log first) has it.
    func tap(_ request: HTTPRequest) -> HTTPResponse {
        guard case .allowed(let name) = access(request), let parsed = try? PhoneTapRequest(body: request.body) else {
            return HTTPResponse(status: 401, body: "this phone's token was revoked; nothing was recorded\n")
        }
        guard let sink = sink.withLock({ $0 }) else {
            return HTTPResponse(
                status: 503, body: "the server is starting: check again in a moment; nothing was recorded\n",
                headers: [("Retry-After", "1")])
        }
        let answer = decide(parsed, name, Self.client(request), request.headers["user-agent"] ?? "")
        guard sink(answer.verdict) else {
            return HTTPResponse(
                status: 503, body: "the server could not record this tap (its log failed): nothing was confirmed; tell the site lead\n")
        }
        return HTTPResponse(status: 200, contentType: "application/json", body: answer.json + "\n")
    }

    /// A GET on a path that may be a tag's: the tap page (with a known token), the cookie and a
    /// redirect (a link's `?token=`), the refusal page (no known token), or, when the path is
    /// no tap page, what the server answers anyone else.
    func page(_ request: HTTPRequest, fallback: @Sendable (HTTPRequest) -> HTTPResponse) -> HTTPResponse {
        guard let host = request.headers["host"], !host.isEmpty else {
            return HTTPResponse(status: 400, body: "the request names no Host\n")
        }
        guard PhoneTapRoute.isTapPage(target: request.target, host: host, secure: isSecure(request), verifier: verifier) else {
            guard tokens.name(forToken: request.bearerToken ?? "") != nil else {
                return HTTPResponse(
                    status: 401, body: "this server needs its token: Authorization: Bearer TOKEN, or ?token=TOKEN\n",
                    headers: [("WWW-Authenticate", "Bearer")])
            }
            return fallback(request)
        }
        switch access(request) {
        case .setCookie(_, let cookie, let location):
            return HTTPResponse(
                status: 303, body: "the token is kept; on to the tap page\n", headers: [("Location", location), ("Set-Cookie", cookie)])
        case .allowed:
            return HTTPResponse(
                status: 200, contentType: "text/html; charset=utf-8", body: PhoneTapPage.html(keepPositions: keepPositions),
                headers: PhoneTapPage.headers)
        case .refused:
            return HTTPResponse(
                status: 401, contentType: "text/html; charset=utf-8", body: PhoneTapPage.refused, headers: PhoneTapPage.headers)
        }
    }

    func access(_ request: HTTPRequest) -> PhoneCookie.Access {
        PhoneCookie.access(
            tokens: tokens.current, path: request.path, query: Self.orderedQuery(request.target), cookieHeader: request.headers["cookie"],
            secure: isSecure(request))
    }

    /// Whether the phone sees HTTPS: the server's own TLS, or a TLS proxy on this machine that
    /// says so (`X-Forwarded-Proto: https`, taken from a loopback peer only).
    func isSecure(_ request: HTTPRequest) -> Bool {
        secure || (Self.isLoopback(request.clientHost) && request.headers["x-forwarded-proto"]?.lowercased() == "https")
    }

    /// Who tapped, for the limit and the audit: the peer, or, from a proxy on this machine, the
    /// last address its `X-Forwarded-For` adds.
    static func client(_ request: HTTPRequest) -> String {
        let peer = request.clientHost ?? "?"
        guard isLoopback(peer), let forwarded = request.headers["x-forwarded-for"]?.split(separator: ",").last else { return peer }
        let address = forwarded.trimmingCharacters(in: .whitespaces)
        return address.isEmpty || address.utf8.count > 64 ? peer : address
    }

    static func isLoopback(_ host: String?) -> Bool {
        guard let host else { return false }
        return host.hasPrefix("127.") || host == "::1" || host == "[::1]"
    }

    /// The query of a request target, decoded, in order.
    static func orderedQuery(_ target: String) -> [(String, String)] {
        guard let mark = target.firstIndex(of: "?") else { return [] }
        return target[target.index(after: mark)...].split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let raw = parts.count > 1 ? String(parts[1]).replacingOccurrences(of: "+", with: " ") : ""
            return (key, raw.removingPercentEncoding ?? raw)
        }
    }
}

extension PhoneTapRoute {
    /// Whether `path` may be a tag's page: none of the server's own paths.
    static func mayBeTapPage(_ path: String) -> Bool {
        path.hasPrefix("/") && !ownPaths.contains(path) && !ownPrefixes.contains(where: { path.hasPrefix($0) })
    }
}
