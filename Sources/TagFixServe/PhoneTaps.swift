import Foundation
import Synchronization
public import TagFixCore
import TagFixDevices

// Phone taps as `tagfix serve` answers them (issue 34): the tap page on a tag's URL and
// POST /api/tap, through the pieces in PhoneAccess.swift, PhonePage.swift and
// PhoneTapHandler.swift. Taps are committed in groups (`PhoneTapGroups`): the decision and the
// commits block (the registry, SQLite, fsync), so they run on a thread of their own, never on the
// server's loop, and a tap's answer leaves only once its counter and its record are on the disk.

// MARK: - Tokens

/// The named tokens of `serve --token FILE`, replaced whole when SIGHUP reloads the file: the
/// bearer token's check and the phones' cookies read the file of the moment.
public final class TokenRing: Sendable {
    private let file: Mutex<TokenFile>
    private let observers = Mutex([@Sendable () -> Void]())

    public init(_ file: TokenFile) { self.file = Mutex(file) }

    /// Replaces the tokens (a reloaded file): a revoked token is refused from the next request,
    /// and those told (`whenReplaced`) close what it holds open.
    public func replace(with file: TokenFile) {
        self.file.withLock { $0 = file }
        for observer in observers.withLock({ $0 }) { observer() }
    }

    /// Calls `body` after each `replace` (the server closes the event streams and socket
    /// clients of a revoked token). Must not wait.
    public func whenReplaced(_ body: @escaping @Sendable () -> Void) { observers.withLock { $0.append(body) } }

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
    private let clock: any SessionClock
    private let limiter: Mutex<PhoneRateLimiter>
    private let groups: PhoneTapGroups

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
        groups = PhoneTapGroups { handler.group() }
        self.clock = clock
        self.limiter = Mutex(limiter)
    }

    /// Where the verdicts of taps that arrived together go, in order: the session's fan-out
    /// (`VerdictFanOut.send(recorded:now:whenKept:)`: the log first, one fsync for all). It says
    /// through its second argument whether they were recorded; no tap of the group is answered
    /// before it does. Until this is called, taps wait (the server listens a moment before the
    /// log is open).
    public func deliver(groupsTo sink: @escaping PhoneTapGroups.Sink) { groups.deliver(to: sink) }

    /// Stops taking taps (later ones: 503, nothing recorded) and returns once those taken are
    /// committed and answered: call it before the session's log closes.
    public func finish() async { await groups.finish() }

    /// Whether the server leaves `request`'s credentials to this (a tap page or a tap), so the
    /// bearer token is not asked for.
    func authenticatesItself(_ request: HTTPRequest) -> Bool {
        switch request.method {
        case "POST": request.path == PhoneTapRoute.postPath
        case "GET", "HEAD": PhoneTapRoute.mayBeTapPage(request.path)
        default: false
        }
    }

    /// Answers a request `authenticatesItself` took: a refused tap now; an admitted one later,
    /// once its group is committed (`PhoneTapGroups`); a page later, from a thread of its own
    /// (the registry is read). `fallback` answers a GET that is no tap page for a client with the
    /// bearer token (the server's own 404 or page).
    func respond(to request: HTTPRequest, reply: HTTPReplyHandle, fallback: @escaping @Sendable (HTTPRequest) -> HTTPResponse)
        -> HTTPAnswer
    {
        if request.method == "POST" {
            switch admit(request) {
            case .failure(let refusal): return .now(refusal.response)
            case .success(let tap): groups.submit(tap, reply: reply)
            }
            return .later
        }
        // A thread of its own for each page: pages are made side by side, so one slow registry
        // read holds up no other phone's page.
        DeviceThread.detach(name: "tagfix-phone-page") { [self] in reply.send(page(request, fallback: fallback)) }
        return .later
    }

    /// A refused tap's answer.
    struct Refusal: Error {
        var response: HTTPResponse
    }

    /// The tap a POST carries, read once, or why it is refused (on the loop: nothing here waits):
    /// a tap without a known token, from another origin, a client over its rate, a body too
    /// large or not a tap. Nothing refused is logged.
    func admit(_ request: HTTPRequest) -> Result<PhoneTap, Refusal> {
        let client = Self.client(request)
        // A tap's token is its cookie: a `?token=` on a POST (no link of ours makes one) is not read.
        guard case .allowed(let name) = access(request, readsLink: false) else {
            return .failure(
                Refusal(
                    response: HTTPResponse(
                        status: 401,
                        body:
                            "this phone has no token for this server: open the link your site lead gave you (…?token=…) once in this browser (it sets a cookie on this phone that holds the token), then tap again; nothing was recorded\n"
                    )))
        }
        guard SameOrigin.allows(origin: request.header("origin"), host: request.header("host"), secure: isSecure(request)) else {
            return .failure(
                Refusal(
                    response: HTTPResponse(
                        status: 403,
                        body: "a tap is posted by this server's own tap page only (its Origin must be this server); nothing was recorded\n"
                    )))
        }
        // Only a tech's taps count (a known token, this server's page): refused ones counted, a
        // stranger behind the same address (a site's NAT) could use up the techs' limit.
        guard limiter.withLock({ $0.allow(client: client, now: clock.timestamp) }) else {
            return .failure(
                Refusal(
                    response: HTTPResponse(
                        status: 429, body: "too many taps from this phone: wait a second, then check again\n",
                        headers: [("Retry-After", "1")])))
        }
        guard request.body.count <= PhoneTapRequest.maximumBody else {
            return .failure(
                Refusal(
                    response: HTTPResponse(
                        status: 413, body: "a tap's body is at most \(PhoneTapRequest.maximumBody) bytes; nothing was recorded\n")))
        }
        let parsed: PhoneTapRequest
        do {
            parsed = try PhoneTapRequest(body: request.body)
        } catch {
            return .failure(Refusal(response: HTTPResponse(status: error.status, body: error.description + "; nothing was recorded\n")))
        }
        // The page posts its own address: a URL of another server, or of this server's own pages,
        // is no tap a phone made here (a stranger's review logged a foreign URL as confirmed).
        guard PhoneTapRoute.mayBeTapURL(parsed.url, host: request.header("host"), secure: isSecure(request)) else {
            return .failure(
                Refusal(
                    response: HTTPResponse(
                        status: 400,
                        body:
                            "the tap's url is not a tag page of this server: a tap sends the address of the tap page it is posted from (same scheme, host and port); nothing was recorded\n"
                    )))
        }
        return .success(PhoneTap(request: parsed, token: name, client: client, userAgent: request.header("user-agent") ?? ""))
    }

    /// A GET on a path that may be a tag's: the tap page (with a known token), the cookie and a
    /// page that goes on to the tap page (a link's `?token=`), the refusal page (no known token), or, when the path is
    /// no tap page, what the server answers anyone else.
    func page(_ request: HTTPRequest, fallback: @Sendable (HTTPRequest) -> HTTPResponse) -> HTTPResponse {
        guard let host = request.header("host"), !host.isEmpty else {
            return HTTPResponse(status: 400, body: "the request names no Host\n")
        }
        guard PhoneTapRoute.isTapPage(target: request.target, host: host, secure: isSecure(request), verifier: verifier) else {
            if tokens.name(forToken: request.bearerToken ?? "") != nil { return fallback(request) }
            // A phone with a known token: a tag's link that names no tag of this site.
            if case .allowed = access(request, readsLink: false) {
                return HTTPResponse(
                    status: 404, contentType: "text/html; charset=utf-8", body: PhoneTapPage.unknownTag, headers: PhoneTapPage.headers)
            }
            return HTTPResponse.tokenNeeded(linkSetsCookie: true)
        }
        switch access(request) {
        case .setCookie(_, let cookie, let location):
            return PhoneCookie.linkAnswer(setCookie: cookie, location: location, destination: "the tap page")
        case .allowed:
            return HTTPResponse(
                status: 200, contentType: "text/html; charset=utf-8", body: PhoneTapPage.html(keepPositions: keepPositions),
                headers: PhoneTapPage.headers)
        case .refused:
            return HTTPResponse(
                status: 401, contentType: "text/html; charset=utf-8", body: PhoneTapPage.refused, headers: PhoneTapPage.headers)
        }
    }

    /// What the request's token says: a link's `?token=` first (unless `readsLink` is false:
    /// the cookie alone), then the cookie.
    func access(_ request: HTTPRequest, readsLink: Bool = true) -> PhoneCookie.Access {
        PhoneCookie.access(
            tokens: tokens.current, path: request.path, query: readsLink ? HTTPRequest.queryPairs(ofTarget: request.target) : [],
            cookieHeader: request.header("cookie"), secure: isSecure(request))
    }

    /// Whether the phone sees HTTPS: the server's own TLS, or a TLS proxy on this machine that
    /// says so (`X-Forwarded-Proto: https`, taken from a loopback peer only).
    func isSecure(_ request: HTTPRequest) -> Bool { Self.seesHTTPS(request, serverTLS: secure) }

    /// Whether the phone sees HTTPS: the server's own TLS (`serverTLS`), or a TLS proxy on this
    /// machine that says so.
    static func seesHTTPS(_ request: HTTPRequest, serverTLS: Bool) -> Bool {
        serverTLS || proxySaysHTTPS(request)
    }

    /// A TLS proxy on this machine says the phone sees HTTPS (`X-Forwarded-Proto: https`).
    static func proxySaysHTTPS(_ request: HTTPRequest) -> Bool {
        isLoopback(request.clientHost) && request.header("x-forwarded-proto")?.lowercased() == "https"
    }

    /// Who tapped, for the limit and the audit: the peer, or, from a proxy on this machine, the
    /// address it forwards (`ForwardedClient`: an IP address only, else the peer).
    static func client(_ request: HTTPRequest) -> String {
        let peer = request.clientHost ?? "?"
        guard isLoopback(peer) else { return peer }
        return ForwardedClient.address(xForwardedFor: request.header("x-forwarded-for"), forwarded: request.header("forwarded")) ?? peer
    }

    static func isLoopback(_ host: String?) -> Bool {
        host.map(ListenAddress.isLoopback) ?? false
    }
}

extension PhoneTapRoute {
    /// Whether `path` may be a tag's page: none of the server's own paths.
    static func mayBeTapPage(_ path: String) -> Bool {
        path.hasPrefix("/") && !ownPaths.contains(path) && !ownPrefixes.contains(where: { path.hasPrefix($0) })
    }
}
