import Synchronization
public import TagFixCore
public import TagFixDevices

/// `tagfix serve`'s sink: one more `VerdictSink` in the session's fan-out, behind the durable
/// session log (docs/architecture.md, "The sink seam"). It keeps the session's state
/// (`ServeState`) and hands each verdict, scan, fix and reader change to the `EventServer`:
/// `receive` and `observe` encode the line once and send it, with `MSG_DONTWAIT`, to each
/// watching socket client that can take it at once; the rest is queued for the server's own
/// thread. They never wait for a client.
public final class ServeHub: VerdictSink {
    public let server: EventServer
    /// Set when the first event stream opens (a live page in a browser): `serve --demo` waits
    /// for it before its walk begins.
    public let firstViewer = OneShot<Bool>()
    private let state: StateBox
    private let clock: (any SessionClock)?

    /// Binds the listeners in `configuration` (nothing is served before `start()`).
    /// - Parameters:
    ///   - readers: the reader addresses, as `READER` and `DEVICES` name them.
    ///   - gps: the GPS source (`gpsd://…`).
    ///   - placements: the registry's tags, for the live page and `/api/tags`.
    ///   - clock: the session's clock, for `/metrics`' fix age and `?POLL;`'s time.
    ///   - phones: phone taps (`--http` with `--token`): the tap pages and POST /api/tap.
    ///   - log: where lines for the log go (a client cut off).
    /// - Throws: `ServeError` for an address that cannot be used.
    public init(
        _ configuration: ServeConfiguration, readers: [String], gps: String?, placements: [RegistryEntry], clock: (any SessionClock)? = nil,
        map: LiveMap = LiveMap(), phones: PhoneTaps? = nil, log: @escaping @Sendable (String) -> Void
    ) throws(ServeError) {
        let state = StateBox(ServeState(readers: readers, gps: gps, placements: placements))
        self.state = state
        self.clock = clock
        server = try EventServer(
            configuration,
            responder: Responder(
                state: state, clock: clock, release: configuration.release, map: map, viewer: firstViewer, phones: phones),
            log: log)
    }

    /// Starts serving.
    public func start() { server.start() }

    /// Replaces the registry's tags (after SIGHUP reloaded it).
    public func setPlacements(_ placements: [RegistryEntry]) {
        state.value.withLock { $0.placements = placements }
    }

    /// A copy of the state now.
    public var snapshot: ServeState { state.value.withLock { $0 } }

    public var usesRecords: Bool { true }

    public func receive(_ verdict: Verdict, now: Timestamp?) {
        receive(recorded: RecordedVerdict(verdict), now: now)
    }

    /// The VERDICT line made from the record's line the fan-out encoded for the session log too.
    public func receive(recorded: RecordedVerdict, now: Timestamp?) {
        receive(recorded: [recorded], now: now)
    }

    /// Verdicts decided together: one turn of the state's lock, one broadcast.
    public func receive(recorded: [RecordedVerdict], now: Timestamp?) {
        let events = state.value.withLock { state in recorded.map { state.receive($0) } }
        server.broadcast(events)
    }

    public func observe(_ event: VerifierEvent, now: Timestamp?) {
        let events = state.value.withLock { $0.observe(event, now: now) }
        server.broadcast(events)
    }

    /// `reader` as the verifier should read it: with several readers (merged into one stream
    /// by `MergedReader`, whose events do not say whose they are), each reader's own changes
    /// (attached, removed, an error) reach its `READER` state from its own stream. With one
    /// reader, `reader` itself: its events arrive through `observe`.
    public func watching(_ reader: any TagReader, address: String) -> any TagReader {
        guard snapshot.readers.count > 1 else { return reader }
        return ObservedReader(base: reader) { [self] event in
            let events = state.value.withLock { $0.observe(event, reader: address, now: clock?.timestamp) }
            server.broadcast(events)
        }
    }

    /// Stops serving: `SHUTDOWN` to every client, their unread output given two seconds, the
    /// sockets closed and the socket file removed.
    public func stop(reason: String) async { await server.stop(reason: reason) }

    final class StateBox: Sendable {
        let value: Mutex<ServeState>
        init(_ state: ServeState) { value = Mutex(state) }
    }

    struct Responder: ServeResponder {
        let state: StateBox
        let clock: (any SessionClock)?
        let release: String
        let map: LiveMap
        var viewer: OneShot<Bool>? = nil
        var phones: PhoneTaps? = nil

        func authenticatesItself(_ request: HTTPRequest) -> Bool { phones?.authenticatesItself(request) ?? false }

        /// GET and HEAD everywhere but `/api/tap` (with phones), which takes POST alone: any other
        /// method there, GET and HEAD too, is 405 with `Allow: POST`.
        func methodRefusal(_ request: HTTPRequest) -> HTTPResponse? {
            if phones != nil, request.path == PhoneTapRoute.postPath {
                return request.method == "POST"
                    ? nil : HTTPResponse(status: 405, body: "a tap is sent with POST\n", headers: [("Allow", "POST")])
            }
            return request.method == "GET" || request.method == "HEAD" ? nil : HTTPResponse.onlyGet
        }

        func respond(to request: HTTPRequest, stats: ServerStats, reply: HTTPReplyHandle) -> HTTPAnswer {
            if let phones, phones.authenticatesItself(request) {
                return phones.respond(to: request, reply: reply) { request in respond(to: request, stats: stats) }
            }
            guard request.method == "GET" || request.method == "HEAD" else { return .now(HTTPResponse.onlyGet) }
            return .now(respond(to: request, stats: stats))
        }

        func answer(_ command: ClientCommand) -> [String] {
            let now = clock?.timestamp
            return state.value.withLock { state in
                switch command {
                case .poll: [state.poll(now: now)]
                case .devices: [state.devices]
                default: []
                }
            }
        }

        func verdicts(since id: Int) -> [ServeEvent] {
            viewer?.finish(true)
            return state.value.withLock { state in state.verdicts(since: id).map { ServeEvent(verdict: $0.id, record: $0.recordLine) } }
        }

        func devices() -> [ServeEvent] {
            state.value.withLock { state in
                state.readers.map { ServeEvent(kind: .reader, line: ServeMessage.reader($0)) }
                    + (state.gps.map { [ServeEvent(kind: .gps, line: ServeMessage.gps($0))] } ?? [])
            }
        }

        func respond(to request: HTTPRequest, stats: ServerStats) -> HTTPResponse {
            let now = clock?.timestamp
            switch request.path {
            case "/":
                // A tech's link (`/?token=`): the browser keeps the token as its cookie (for the
                // page's stream and map, and for taps), and its page goes on to the address
                // without it, so the token leaves the address bar, the history and the page's
                // links (`PhoneCookie.linkAnswer`: not a 303, which a link from another site would
                // follow without the cookie).
                if let phones, request.query["token"] != nil, case .setCookie(_, let cookie, let location) = phones.access(request) {
                    return PhoneCookie.linkAnswer(setCookie: cookie, location: location, destination: "the live page")
                }
                // Without phones (one --token, no token file) the page still carries a ?token= on.
                let token = phones == nil ? request.query["token"] : nil
                let page = state.value.withLock { LivePage.html(state: $0, release: release, map: map, token: token) }
                return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: page, headers: LivePage.headers(map: map))
            case "/api/verdicts":
                guard let since = Int(request.query["since"] ?? "0"), since >= 0 else {
                    return HTTPResponse(status: 400, body: "since must be a verdict id (a whole number from 0)\n")
                }
                let lines = state.value.withLock { $0.verdicts(since: since).map(\.line) }
                return HTTPResponse(status: 200, contentType: "application/json", body: "[" + lines.joined(separator: ",") + "]\n")
            case "/api/tags":
                return HTTPResponse(status: 200, contentType: "application/json", body: state.value.withLock { $0.tagsJSON } + "\n")
            case "/healthz":
                return HTTPResponse(status: 200, body: "ok\n")
            case "/metrics":
                let text = state.value.withLock { state in
                    state.metrics(
                        clients: stats.clients, cutOff: stats.cutOff,
                        fixAge: now.flatMap { now in state.fix.map { $0.time.duration(to: now).seconds } })
                }
                return HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4", body: text)
            default:
                if let answer = map.respond(to: request.path) { return answer }
                return HTTPResponse(
                    status: 404,
                    body: "no such page: /, /events, /api/verdicts?since=ID, /api/tags, /healthz, /metrics, /leaflet/…, /tiles/Z/X/Y\n")
            }
        }
    }
}

/// The session clock's time, read by the server for `/metrics` and `?POLL;`.
public protocol SessionClock: Sendable {
    var timestamp: Timestamp { get }
}

/// A registry that SIGHUP can replace while the verifier runs: lookups go to the registry of
/// the moment.
public final class ReloadableRegistry: TagRegistry {
    private let current: Mutex<any TagRegistry>

    public init(_ registry: any TagRegistry) { current = Mutex(registry) }

    public func replace(with registry: any TagRegistry) { current.withLock { $0 = registry } }

    private var registry: any TagRegistry { current.withLock { $0 } }

    public func entry(forID id: String) throws(RegistryError) -> RegistryEntry? { try registry.entry(forID: id) }
    public func entry(forUID uid: TagUID) throws(RegistryError) -> RegistryEntry? { try registry.entry(forUID: uid) }
    public func placement(forTagID id: String?, uid: TagUID) throws(RegistryError) -> Placement? {
        try registry.placement(forTagID: id, uid: uid)
    }
    public func placement(forTagIDUTF8 id: Span<UInt8>, uid: TagUID) throws(RegistryError) -> Placement? {
        try registry.placement(forTagIDUTF8: id, uid: uid)
    }
}

extension MonotonicClock: SessionClock {
    public var timestamp: Timestamp { now }
}

/// A reader whose events are shown to `observe` as they pass, before the verifier gets them.
struct ObservedReader: TagReader {
    let base: any TagReader
    let observe: @Sendable (ReaderEvent) -> Void

    var readerID: String { base.readerID }

    func events() -> AsyncStream<ReaderEvent> {
        let (stream, continuation) = AsyncStream<ReaderEvent>.makeStream()
        let events = base.events()
        let pump = Task {
            for await event in events {
                observe(event)
                continuation.yield(event)
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in pump.cancel() }
        return stream
    }
}
