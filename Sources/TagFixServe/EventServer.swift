public import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixSystem

/// Where `tagfix serve` listens, and its limits.
public struct ServeConfiguration: Sendable {
    /// The Unix socket's path (`nil`: none).
    public var socketPath: String?
    /// The socket is the default one (`defaultSocketPath()`): its folder is made (mode 0755) when
    /// it is not there, as a service's runtime folder is — /run/tagfix is gone after every boot.
    public var makesSocketFolder = false
    public var socketMode: mode_t = 0o660
    /// The group the socket is given (`--socket-group`), so its members may connect; `nil`: the
    /// process's group.
    public var socketGroup: String?
    /// The TCP event socket (`--listen`).
    public var listen: ListenAddress?
    /// The HTTP server (`--http`).
    public var http: ListenAddress?
    /// The bearer token (`--token`): HTTP requests and TCP socket clients must give it.
    public var token: String?
    /// The named tokens (`--token FILE` as a `TokenFile`): any of them is the bearer token, and
    /// a phone's cookie carries one. Replaces `token`'s check when set; SIGHUP reloads it.
    public var tokens: TokenRing?
    /// HTTPS (`--tls-cert`, `--tls-key`): every HTTP connection speaks TLS with the context of
    /// the moment (SIGHUP reloads it; live connections keep theirs).
    public var tls: ServeTLS? {
        didSet {
            if let tls {
                httpTransport = { @Sendable (fd: FileDescriptor) -> (any ConnectionTransport)? in tls.transport(for: fd) }
            } else {
                httpTransport = nil
            }
        }
    }
    /// What a client may have unread before it is cut off.
    public var bufferLimit = 1 << 20
    /// Connections beyond this many are refused (beyond fewer when the open-file limit leaves
    /// room for fewer: `clientRoom`). libnfc and libgps wait with select(2), which aborts the
    /// process on a descriptor above 1023; a reader or gpsd reconnecting while the clients hold
    /// the low ones would get one. 512 keeps them clear.
    public var maximumClients = 512
    /// TCP connections beyond this many from one address (the peer's, not its port) are refused
    /// (a kept HTTP connection of that address waiting for its next request is closed to make
    /// room first): one address cannot hold every slot. A quarter of `maximumClients`; a reverse
    /// proxy on this machine is one address, and its kept connections are reused or closed.
    public var maximumClientsPerAddress = 128
    /// The VERSION object's release.
    public var release: String
    /// How long a client has to finish what it began sending (`--client-timeout`): an HTTP
    /// client its request's head (line and headers) and body, counted from its connection (a
    /// later request on a kept connection: from its first byte); a socket
    /// client a command, counted from the command's first byte. One that has not by then gets
    /// 408 (HTTP) or an `ERROR` object (socket) and is closed, with a line in the log, so a
    /// half-sent request cannot hold a slot. A socket client that only reads is never cut off
    /// by it.
    public var clientTimeout: Duration = .seconds(10)
    /// The largest POST or PUT body read (`Content-Length`); a larger one gets 413.
    public var bodyLimit = 16 * 1024
    /// How long an HTTP connection kept after an answer (HTTP/1.1 persistent connections) may
    /// wait for its next request's first byte before it is closed, without a word.
    public var keepAliveTimeout: Duration = .seconds(15)
    /// The most requests one HTTP connection is answered; the last answer says
    /// `Connection: close`.
    public var keepAliveRequests = 1000
    /// The clock `clientTimeout` is measured on: the monotonic clock, or a test's.
    public var clock: any SessionClock = MonotonicClock()
    /// Makes the transport of each HTTP connection accepted (`nil` from it: the connection is
    /// refused); without one, the plain socket. Where TLS plugs in.
    var httpTransport: (@Sendable (FileDescriptor) -> (any ConnectionTransport)?)?

    public init(
        socketPath: String? = nil, listen: ListenAddress? = nil, http: ListenAddress? = nil, token: String? = nil, release: String
    ) {
        self.socketPath = socketPath
        self.listen = listen
        self.http = http
        self.token = token
        self.release = release
    }

    /// The id of a group given by name (or by number).
    public static func groupID(_ name: String) throws(ServeError) -> gid_t {
        if let number = gid_t(name) { return number }
        var entry = group()
        var found: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        let status = getgrnam_r(name, &entry, &buffer, buffer.count, &found)
        guard status == 0, found != nil else {
            throw ServeError(.usage, "--socket-group \(name): no such group (getent group lists them; or give its number)")
        }
        return entry.gr_gid
    }

    /// The default socket path: `/run/tagfix/tagfix.sock` for root, else
    /// `$XDG_RUNTIME_DIR/tagfix.sock` (or `/tmp/tagfix-UID.sock` without one).
    public static func defaultSocketPath(uid: uid_t = getuid(), environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String
    {
        if uid == 0 { return "/run/tagfix/tagfix.sock" }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/tagfix.sock" }
        return "/tmp/tagfix-\(uid).sock"
    }

    /// Refuses a listener another machine could reach without a token, and a socket group
    /// that does not exist.
    public func check() throws(ServeError) {
        if let socketGroup { _ = try Self.groupID(socketGroup) }
        for (option, address) in [("listen", listen), ("http", http)] {
            if let address, !address.isLoopback, token == nil, tokens == nil {
                throw ServeError(
                    .usage,
                    "--\(option) \(address) can be reached from other machines: give --token FILE (a bearer token) too, or listen on 127.0.0.1"
                )
            }
        }
    }
}

/// What the server asks the session while it answers clients (called on the server's thread;
/// must not wait).
public protocol ServeResponder: Sendable {
    /// The lines that answer `?POLL;` or `?DEVICES;`.
    func answer(_ command: ClientCommand) -> [String]
    /// The verdicts after `id`, for an event stream that (re)connects.
    func verdicts(since id: Int) -> [ServeEvent]
    /// The readers' and the GPS's states as they are now, for an event stream that (re)connects:
    /// it is told only of changes after that.
    func devices() -> [ServeEvent]
    /// Any HTTP request but `/events` (what the default `respond(to:stats:reply:)` asks).
    func respond(to request: HTTPRequest, stats: ServerStats) -> HTTPResponse
    /// Any HTTP request but `/events`: GET and HEAD, and POST and PUT with their body read whole
    /// (at most `ServeConfiguration.bodyLimit` bytes). Answer `.now(response)`, or `.later` and
    /// then `reply.send(response)` from any thread (a client gone by then is fine).
    ///
    /// The default answers GET and HEAD with `respond(to:stats:)` at once, and anything else
    /// 405 (only GET).
    func respond(to request: HTTPRequest, stats: ServerStats, reply: HTTPReplyHandle) -> HTTPAnswer
    /// Whether the responder checks this request's credentials itself (phone taps: a token's
    /// cookie), so the server's bearer token is not asked for. The default: none.
    func authenticatesItself(_ request: HTTPRequest) -> Bool
    /// The answer (405) to a request whose method its path never takes, given before any token
    /// is asked for: `PUT /api/tap` is a wrong method, not a wrong token. The default: `nil`
    /// (the responder answers every method it is handed).
    func methodRefusal(_ request: HTTPRequest) -> HTTPResponse?
}

extension ServeResponder {
    public func respond(to request: HTTPRequest, stats: ServerStats, reply: HTTPReplyHandle) -> HTTPAnswer {
        guard request.method == "GET" || request.method == "HEAD" else { return .now(HTTPResponse.onlyGet) }
        return .now(respond(to: request, stats: stats))
    }

    public func authenticatesItself(_ request: HTTPRequest) -> Bool { false }

    public func methodRefusal(_ request: HTTPRequest) -> HTTPResponse? { nil }
}

/// The server's counts, for `/metrics`.
public struct ServerStats: Sendable, Hashable {
    /// Connected clients: `socket`, `sse`, `http`.
    public var clients: [String: Int] = [:]
    /// Clients cut off because they did not read.
    public var cutOff = 0
}

/// The event socket (Unix and TCP) and the HTTP server on one `IOLoop` (epoll) and its thread:
/// no call here blocks, and nothing here runs on the cooperative pool. This is the I/O shell:
/// each connection's protocol (commands, HTTP, timeouts, its bounded output) is a
/// `ServeConnection`, fed the bytes read and drained as the socket takes them.
///
/// The fan-out (`broadcast`): each line is encoded once and sent straight from the caller's
/// thread, with `MSG_DONTWAIT`, to every watching socket client that has nothing queued (most of
/// them, most of the time): one `send` a client, no wake-up of the loop, no copy. What a socket
/// does not take at once (it is full, or the client already has a backlog) is set aside for that
/// client and handed to the loop (`IOLoop.execute`, its eventfd wake-up): it queues the rest in the client's bounded
/// buffer and writes it as the socket takes it; once the backlog is gone the client is sent to
/// directly again. Event streams (SSE) are always written by the loop. A client whose unread
/// output passes `bufferLimit` is cut off, with a line in the log; no client waits for another,
/// and `send` with `MSG_DONTWAIT` never waits for any.
public final class EventServer: Sendable, HTTPReplyRoute {
    public let configuration: ServeConfiguration
    /// The TCP event socket's port, when `--listen` was given (port 0 picks one).
    public let listenPort: Int?
    /// The HTTP port, when `--http` was given.
    public let httpPort: Int?

    private let listeners: [Listener]
    /// The loop every socket is served on: its thread is the server's.
    private let loop: IOLoop<ContinuousClock>
    /// What only the loop's thread touches (set by `start`, gone once the loop has ended).
    private let core = Mutex<Loop?>(nil)
    private let inbox = Mutex(Inbox())
    private let statistics = Mutex(ServerStats())
    private let responder: any ServeResponder
    private let log: @Sendable (String) -> Void

    struct Listener: Sendable {
        enum Kind: Sendable { case unix, tcp, http }
        var fd: FileDescriptor
        var kind: Kind
    }

    private struct Inbox {
        /// Events for the loop to send to the event streams (only while there are some).
        var events: [ServeEvent] = []
        var stopping: String?
        /// The loop has been asked to take what is set aside here and has yet to.
        var drainPending = false
        var finished = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var started = false
        /// Every watching socket client. `broadcast` sends to the direct ones and sets lines
        /// aside for the others; only the loop adds and removes them (before it closes one's
        /// descriptor), so nothing is ever sent to a descriptor that has been closed.
        var watchers: [Watcher] = []
        /// Event streams (SSE clients) open.
        var streams = 0
    }

    /// A watching socket client as `broadcast` sees it.
    private struct Watcher {
        let fd: FileDescriptor
        /// Nothing is queued for it in the loop: `broadcast` may send to its socket. While it is
        /// not, only the loop writes to the socket.
        var direct: Bool
        /// What `broadcast` could not send, in order, for the loop to queue.
        var spill: [UInt8] = []
    }

    /// The descriptors serve keeps beside its clients' (its listeners, the loop's, the log, the
    /// registry and its journal, readers, gpsd, a broker, a TLS reload, a reader reopened).
    public static let descriptorsBesideClients = 64

    /// The clients at once an open-file limit of `openFileLimit` leaves room for: `maximum`, or
    /// the limit less `descriptorsBesideClients` when that is fewer (never under 8). A
    /// connection past it is refused with a word, where one past the limit itself could not be
    /// accepted at all.
    public static func clientRoom(maximum: Int, openFileLimit: Int?) -> Int {
        guard let limit = openFileLimit else { return maximum }
        return min(maximum, max(8, limit - descriptorsBesideClients))
    }

    /// The connections one address may hold when the clients at once are `room`: its share of
    /// `maximum` (`perAddress` of it) kept when the room is smaller, at least 2, so one address
    /// still cannot hold every slot.
    public static func addressRoom(perAddress: Int, maximum: Int, room: Int) -> Int {
        guard room < maximum, maximum > 0 else { return perAddress }
        return min(perAddress, max(2, room * perAddress / maximum))
    }

    /// Binds every listener (nothing is served until `start()`).
    /// - Throws: `ServeError` for an address that cannot be used.
    public init(_ configuration: ServeConfiguration, responder: any ServeResponder, log: @escaping @Sendable (String) -> Void)
        throws(ServeError)
    {
        try configuration.check()
        var listeners: [Listener] = []
        func closeAll() { for listener in listeners { _ = try? listener.fd.close() } }
        var listenPort: Int?
        var httpPort: Int?
        do throws(ServeError) {
            if let path = configuration.socketPath {
                let group = try configuration.socketGroup.map { name throws(ServeError) in (name, try ServeConfiguration.groupID(name)) }
                if configuration.makesSocketFolder { try Socket.makeFolder(of: path) }
                listeners.append(Listener(fd: try Socket.listenUnix(path, mode: configuration.socketMode, group: group), kind: .unix))
            }
            if let address = configuration.listen {
                let (fd, port) = try Socket.listenTCP(address, option: "listen")
                listeners.append(Listener(fd: fd, kind: .tcp))
                listenPort = port
            }
            if let address = configuration.http {
                let (fd, port) = try Socket.listenTCP(address, option: "http")
                listeners.append(Listener(fd: fd, kind: .http))
                httpPort = port
            }
        } catch {
            closeAll()
            throw error
        }
        let loop: IOLoop<ContinuousClock>
        do throws(Errno) {
            loop = try IOLoop(name: "tagfix-serve")
        } catch {
            closeAll()
            throw ServeError(
                .unavailable, "cannot start the server's I/O loop: \(error) (too many open files or threads? see ulimit -n and ulimit -u)")
        }
        self.configuration = configuration
        self.listeners = listeners
        self.listenPort = listenPort
        self.httpPort = httpPort
        self.loop = loop
        self.responder = responder
        self.log = log
        // A reloaded token file closes what a revoked token holds open.
        configuration.tokens?.whenReplaced { [weak self] in self?.tokensChanged() }
    }

    /// The tokens were replaced (SIGHUP): event streams and socket clients let in with a token
    /// that is no longer held are closed (on the loop's thread).
    public func tokensChanged() {
        loop.execute { [self] in
            withLoop { state in
                state.closeRevoked()
                state.settle()
            }
        }
    }

    /// Starts serving: the listeners join the loop.
    public func start() {
        let first = inbox.withLock { inbox -> Bool in
            defer { inbox.started = true }
            return !inbox.started && inbox.stopping == nil
        }
        guard first else { return }
        core.withLock { $0 = Loop(server: self) }
        loop.execute { [self] in withLoop { $0.begin() } }
    }

    /// Hands replies given later to the loop, all at once (`HTTPReplyRoute`).
    func deliver(_ replies: [(client: Int, response: HTTPResponse)]) {
        _ = loop.execute { [self] in withLoop { $0.deliver(replies) } }
    }

    /// Runs `body` with the loop's state, on the loop's thread (while the server serves).
    private func withLoop(_ body: (Loop) -> Void) {
        core.withLock { core in
            guard let state = core else { return }
            body(state)
            if state.ended { core = nil }
        }
    }

    /// Sends lines to every watching client. Never waits: under one lock, each line is sent
    /// (`MSG_DONTWAIT`) to each watching socket client with nothing queued; what a socket does
    /// not take, and the lines for the rest (and for event streams), go to the loop
    /// (`IOLoop.execute`: one hand-over until the loop has taken them).
    public func broadcast(_ events: [ServeEvent]) {
        guard !events.isEmpty else { return }
        let wakeLoop = inbox.withLock { inbox -> Bool in
            guard inbox.stopping == nil, !inbox.finished else { return false }
            var wakeLoop = false
            for event in events {
                // The line's bytes are made only for a socket client that watches (none may:
                // phones alone tapping, with the live page closed, made a copy a tap for nothing).
                if !inbox.watchers.isEmpty {
                    var bytes = Array(event.line.utf8)
                    bytes.append(UInt8(ascii: "\n"))
                    bytes.withUnsafeBytes { line in
                        for index in inbox.watchers.indices {
                            if inbox.watchers[index].direct {
                                let written = (try? inbox.watchers[index].fd.send(line, flags: Int32(MSG_DONTWAIT))) ?? -1
                                if written == line.count { continue }
                                // Full (or failing: the loop's next write finds out why): the rest
                                // goes by the loop, and so does everything after it.
                                inbox.watchers[index].direct = false
                                inbox.watchers[index].spill.append(contentsOf: line[max(0, written)...])
                            } else {
                                inbox.watchers[index].spill.append(contentsOf: line)
                            }
                            wakeLoop = true
                        }
                    }
                }
                if inbox.streams > 0 {
                    inbox.events.append(event)
                    wakeLoop = true
                }
            }
            guard wakeLoop, !inbox.drainPending else { return false }
            inbox.drainPending = true
            return true
        }
        if wakeLoop { loop.execute { [self] in withLoop { $0.drainInbox() } } }
    }

    /// Tells every client the server is stopping (`SHUTDOWN`), gives them up to two seconds to
    /// read what they have not, closes everything and removes the socket file; returns when the
    /// loop's thread has ended.
    public func stop(reason: String) async {
        let started = inbox.withLock { inbox -> Bool in
            if inbox.stopping == nil { inbox.stopping = reason }
            return inbox.started
        }
        guard started else {
            let first = inbox.withLock { inbox -> Bool in
                defer { inbox.finished = true }
                return !inbox.finished
            }
            if first { for listener in listeners { _ = try? listener.fd.close() } }
            await loop.close()
            return
        }
        loop.execute { [self] in withLoop { $0.drainInbox() } }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = inbox.withLock { inbox -> Bool in
                if inbox.finished { return true }
                inbox.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// The server's counts now.
    public var stats: ServerStats { statistics.withLock { $0 } }

    /// The loop's thread has ended: those waiting in `stop` are told.
    private func finished() {
        let waiters = inbox.withLock { inbox in
            inbox.finished = true
            defer { inbox.waiters = [] }
            return inbox.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: - The loop (its thread only)

    /// One connection: its transport (the socket, or TLS over it), and its protocol's state
    /// (`ServeConnection`).
    private final class Client {
        let id: Int
        let fd: FileDescriptor
        var transport: any ConnectionTransport
        var connection: ServeConnection
        var registration: IORegistration?
        /// Watched for room to write (output is queued that the socket did not take).
        var wantsWrite = false
        /// Closed: nothing more is done with it.
        var dropped = false
        /// The peer's address without its port (`nil`: the Unix socket), what the limit per
        /// address counts by.
        var host: String?
        /// Its side reached its end: no longer watched for reading, kept to write its answer.
        var inputEnded = false

        init(id: Int, transport: any ConnectionTransport, connection: ServeConnection) {
            self.id = id
            self.fd = transport.descriptor
            self.transport = transport
            self.connection = connection
        }
    }

    private final class Loop {
        let server: EventServer
        var clients: [Int32: Client] = [:]
        /// The same clients by id: what a deferred HTTP reply finds its client by (a descriptor's
        /// number is reused; an id never is).
        var clientsByID: [Int: Client] = [:]
        var registrations: [IORegistration] = []
        var nextID = 1
        var cutOff = 0
        var stopping: String?
        /// Set once everything is closed and the loop told to end.
        var ended = false
        /// The timer that looks for overdue requests, and when it runs.
        var headTimer: (timer: IOTimer, due: ContinuousClock.Instant)?
        /// Socket clients and event streams connected (the rest of `clients` are HTTP clients):
        /// counted as they come and go, not by a pass over the clients after every event.
        var socketClients = 0
        var streamClients = 0
        /// TCP clients connected, by the peer's address (without its port).
        var clientsByHost: [String: Int] = [:]
        /// The counts last made into `stats` (socket, sse, http, cut off), and that `ServerStats`.
        var counted = (0, 0, 0, 0)
        var stats = ServerStats()
        /// The counts `server.statistics` was last given.
        var published = (0, 0, 0, 0)
        /// Whether a deadline can be due sooner than a second after it is set (a client timeout
        /// under a second): then the head timer is worked out again after every event.
        let shortTimeouts: Bool
        var buffer = [UInt8](repeating: 0, count: 65_536)
        /// The clients at once this process's open-file limit leaves room for (`clientRoom`), and
        /// one address's share of them (`addressRoom`).
        let room: Int
        let roomPerAddress: Int
        /// The open-file limit at start (what `room` was made from).
        let openFileLimit: Int?
        /// A descriptor held for the moment the process has none left (`EMFILE`): let go, it lets
        /// one waiting connection be accepted and told the server is full, and is held again.
        /// Without it a listener with connections waiting stays readable, and the loop would
        /// wake for it again and again, a core spent on nothing.
        var spare: FileDescriptor?
        /// Whether connections are being refused for want of descriptors (a spell that ends when
        /// one is accepted again), and whether this spell was told in the log: at most one a
        /// minute is (`shortTold`: when), however often the limit is reached and left, and its
        /// end is told only when its start was.
        enum Shortage { case none, untold, told }
        var shortage = Shortage.none
        var shortTold: Timestamp?
        /// The listeners' watch paused (no memory or descriptor even for the spare), and the
        /// timer that resumes it.
        var paused: IOTimer?

        let settings: ServeConnection.Settings

        init(server: EventServer) {
            self.server = server
            settings = ServeConnection.Settings(server.configuration)
            shortTimeouts = min(settings.clientTimeout, settings.idleTimeout) < .seconds(1)
            let configuration = server.configuration
            openFileLimit = Processes.openFileLimit
            room = EventServer.clientRoom(maximum: configuration.maximumClients, openFileLimit: openFileLimit)
            roomPerAddress = EventServer.addressRoom(
                perAddress: configuration.maximumClientsPerAddress, maximum: configuration.maximumClients, room: room)
        }

        var configuration: ServeConfiguration { server.configuration }
        var loop: IOLoop<ContinuousClock> { server.loop }

        /// Registers the listeners.
        func begin() {
            spare = Self.holdSpare()
            if room < configuration.maximumClients {
                server.log(
                    "serve: the open-file limit (ulimit -n \(openFileLimit ?? 0)) leaves room for \(room) clients at once, "
                        + "not \(configuration.maximumClients), \(roomPerAddress) from one address: raise it for more (ulimit -n 1024; systemd: LimitNOFILE=1024)"
                )
            }
            for listener in server.listeners {
                do throws(IOLoopError) {
                    let registration = try loop.register(listener.fd, for: .readable) { [server] _ in
                        server.withLoop { $0.ready(listener) }
                    }
                    registrations.append(registration)
                } catch {
                    server.log("serve: cannot watch a listener: \(error)")
                }
            }
            settle()
        }

        /// What follows every event the loop handles: the next look for overdue requests, the
        /// counts for `stats`, and, once stopping, the end when nothing is left to write.
        ///
        /// The head timer is armed here only when none is: every deadline is set at least a
        /// second ahead (`shortTimeouts` aside), and an armed timer runs within a second, looks
        /// at every client and arms the next. So an event costs no pass over the clients (with
        /// 200 phones' connections kept, that pass was a fifth of the loop's time).
        func settle() {
            guard !ended else { return }
            if stopping != nil {
                if clients.values.allSatisfy({ $0.connection.unsent == 0 }) { end() }
                return
            }
            if headTimer == nil || shortTimeouts { armHeadTimer() }
            publishStats()
        }

        func ready(_ listener: Listener) {
            accept(listener)
            settle()
        }

        func ready(_ fd: Int32, _ events: IOEvents) {
            if let client = clients[fd] {
                if !events.isDisjoint(with: [.readable, .hangUp, .error])
                    || (events.contains(.writable) && client.transport.wantsWritable)
                {
                    read(client)
                }
                if !client.dropped, events.contains(.writable) { flush(client) }
            }
            settle()
        }

        /// Looks for overdue requests when the next is due, and at least each second (so a
        /// test's clock advanced is noticed); no timer while none is awaited.
        func armHeadTimer() {
            guard let wait = headWait() else {
                if let headTimer { loop.cancel(headTimer.timer) }
                headTimer = nil
                return
            }
            let due = loop.clock.now.advanced(by: wait)
            if let headTimer {
                if headTimer.due <= due { return }
                loop.cancel(headTimer.timer)
            }
            let timer = loop.schedule(at: due) { [server] in
                server.withLoop { state in
                    state.headTimer = nil
                    if state.stopping == nil { state.expireUnfinished() }
                    state.settle()
                }
            }
            headTimer = (timer, due)
        }

        /// How long until the next request head or command is due (at most one second, so a
        /// test's clock advanced is noticed), or `nil` (none is awaited).
        func headWait() -> Duration? {
            // One pass, no array: this runs after every event, with up to 512 clients.
            var first: Timestamp?
            for client in clients.values {
                if let deadline = client.connection.deadline, first.map({ deadline < $0 }) ?? true { first = deadline }
            }
            guard let first else { return nil }
            let left = configuration.clock.timestamp.duration(to: first)
            return max(.zero, min(.seconds(1), left))
        }

        /// Tells the clients the server stops; they have two seconds to read what they have not.
        func beginStop(_ reason: String) {
            stopping = reason
            for registration in registrations { loop.deregister(registration) }
            registrations = []
            if let headTimer { loop.cancel(headTimer.timer) }
            headTimer = nil
            for client in Array(clients.values) {
                takeSetAside(client)
                perform(client.connection.shutdown(reason: reason), for: client)
                flush(client)
            }
            loop.schedule(after: .seconds(2)) { [server] in server.withLoop { $0.end() } }
        }

        /// Closes everything and ends the loop; `stop` returns once its thread has.
        func end() {
            guard !ended else { return }
            ended = true
            closeEverything()
            loop.close { [server] in server.finished() }
        }

        /// Answers every client whose request head or command is overdue, and closes it.
        func expireUnfinished() {
            let now = configuration.clock.timestamp
            for client in Array(clients.values) {
                guard let deadline = client.connection.deadline, deadline <= now else { continue }
                takeSetAside(client)
                perform(client.connection.expire(now: now), for: client)
                flush(client)
            }
        }

        /// Closes the clients whose token was revoked (see `ServeConnection.tokensChanged()`).
        func closeRevoked() {
            guard stopping == nil else { return }
            for client in Array(clients.values) where client.connection.credential != nil {
                takeSetAside(client)
                perform(client.connection.tokensChanged(), for: client)
                flush(client)
            }
        }

        /// Takes what `broadcast` set aside (and a stop) from the inbox.
        func drainInbox() {
            let (events, spills, stop) = server.inbox.withLock { inbox in
                inbox.drainPending = false
                defer { inbox.events = [] }
                var spills: [(Int32, [UInt8])] = []
                for index in inbox.watchers.indices where !inbox.watchers[index].spill.isEmpty {
                    spills.append((inbox.watchers[index].fd.rawValue, inbox.watchers[index].spill))
                    inbox.watchers[index].spill = []
                }
                return (inbox.events, spills, inbox.stopping)
            }
            for (fd, bytes) in spills {
                guard let client = clients[fd] else { continue }
                perform(client.connection.queue(bytes), for: client)
                flush(client)
            }
            deliver(events)
            if let stop, stopping == nil { beginStop(stop) }
            settle()
        }

        /// Sends events to the event streams (`broadcast` has sent them to the socket clients).
        func deliver(_ events: [ServeEvent]) {
            guard !events.isEmpty else { return }
            let streams = clients.values.filter { $0.connection.kind == .events }
            for event in events {
                let bytes = HTTPResponse.event(event)
                for client in streams where !client.dropped { perform(client.connection.queue(bytes), for: client) }
            }
            for client in streams { flush(client) }
        }

        /// Carries out what a connection asks for, in order.
        func perform(_ actions: [ServeConnection.Action], for client: Client) {
            for action in actions {
                guard !client.dropped else { return }
                switch action {
                case .watch(let enable):
                    setWatching(client, enable)
                case .streamOpened:
                    streamClients += 1
                    server.inbox.withLock { $0.streams += 1 }
                case .respond(let request):
                    answer(request, for: client)
                case .log(let line):
                    server.log(line)
                case .cutOff(let line):
                    cutOff += 1
                    server.log(line)
                    drop(client)
                }
            }
        }

        /// Hands a request to the responder. An answer given at once is queued, and a request
        /// the client sent after it (pipelined, kept by its connection) is handed on in turn: a
        /// loop, not a recursion, however many there are.
        func answer(_ request: HTTPRequest, for client: Client) {
            var next: HTTPRequest? = request
            while let request = next, !client.dropped {
                next = nil
                let id = client.id
                let handle = HTTPReplyHandle(server: server, client: id)
                guard case .now(let response) = server.responder.respond(to: request, stats: currentStats(), reply: handle) else { return }
                var actions = client.connection.reply(response, now: configuration.clock.timestamp)
                if let index = actions.firstIndex(where: { if case .respond = $0 { true } else { false } }),
                    case .respond(let following) = actions.remove(at: index)
                {
                    next = following
                }
                perform(actions, for: client)
            }
        }

        /// Replies the responder sent later: each written, unless its client has gone.
        func deliver(_ replies: [(client: Int, response: HTTPResponse)]) {
            for (id, response) in replies {
                guard let client = clientsByID[id] else { continue }
                perform(client.connection.reply(response, now: configuration.clock.timestamp), for: client)
                flush(client)
            }
            settle()
        }

        /// Makes a socket client a watcher of `broadcast`'s (`enable`), or no longer one: what
        /// was set aside for it is queued then, so it gets every line sent while it watched.
        func setWatching(_ client: Client, _ enable: Bool) {
            let spill = server.inbox.withLock { inbox -> [UInt8] in
                if enable {
                    inbox.watchers.append(Watcher(fd: client.fd, direct: false))
                    return []
                }
                guard let index = inbox.watchers.firstIndex(where: { $0.fd == client.fd }) else { return [] }
                return inbox.watchers.remove(at: index).spill
            }
            if !spill.isEmpty { perform(client.connection.queue(spill), for: client) }
        }

        /// Before anything is queued for a watcher: it is taken off `broadcast`'s direct sends,
        /// and what was set aside for it is queued first.
        func takeSetAside(_ client: Client) {
            guard client.connection.watching, !client.dropped else { return }
            let spill = server.inbox.withLock { inbox -> [UInt8] in
                guard let index = inbox.watchers.firstIndex(where: { $0.fd == client.fd }) else { return [] }
                inbox.watchers[index].direct = false
                defer { inbox.watchers[index].spill = [] }
                return inbox.watchers[index].spill
            }
            if !spill.isEmpty { perform(client.connection.queue(spill), for: client) }
        }

        func accept(_ listener: Listener) {
            while true {
                let fd: FileDescriptor
                do throws(Errno) {
                    fd = try listener.fd.accept(nonBlocking: true)
                } catch {
                    switch error.rawValue {
                    // That connection went before it was taken (or a firewall refused it): the next.
                    case ECONNABORTED, EPROTO, EPERM: continue
                    case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                        guard refuseForWantOfDescriptors(listener, error) else { return }
                        continue
                    // None waiting (EAGAIN), or the listener is being closed.
                    default: return
                    }
                }
                if shortage != .none {
                    if shortage == .told { server.log("serve: descriptors to spare again: new connections are taken") }
                    shortage = .none
                }
                if listener.kind != .unix { _ = try? fd.setOption(level: Int32(IPPROTO_TCP), name: TCP_NODELAY, to: 1) }
                let address = listener.kind == .unix ? nil : Socket.peerAddress(fd)
                let host = address.map(Socket.host(ofPeer:))
                // An address over its share first: room is made among its own connections only.
                if let host, clientsByHost[host, default: 0] >= roomPerAddress, !closeAnIdleConnection(of: host) {
                    refuse(fd, listener.kind, "too many connections from \(host) (\(roomPerAddress)); close some, or try again later")
                    continue
                }
                guard clients.count < room || closeAnIdleConnection() else {
                    let limit = room < configuration.maximumClients ? ", all the open-file limit leaves room for" : ""
                    refuse(fd, listener.kind, "too many clients (\(room)\(limit)); try again later")
                    continue
                }
                let id = nextID
                nextID += 1
                let peer = address ?? (listener.kind == .unix ? "unix socket" : "?")
                let isHTTP = listener.kind == .http
                let connection = ServeConnection(
                    kind: isHTTP ? .http : .socket, name: "\(isHTTP ? "HTTP" : "socket") client \(id) (\(peer))", clientAddress: address,
                    authenticated: (configuration.token == nil && configuration.tokens == nil) || listener.kind == .unix,
                    settings: settings, responder: server.responder,
                    now: configuration.clock.timestamp)
                let transport: any ConnectionTransport
                if isHTTP, let make = configuration.httpTransport {
                    guard let made = make(fd) else {
                        server.log("serve: \(connection.name) refused: its transport could not be set up")
                        _ = try? fd.close()
                        continue
                    }
                    transport = made
                } else {
                    transport = PlainSocketTransport(fd)
                }
                let client = Client(id: id, transport: transport, connection: connection)
                client.host = host
                do throws(IOLoopError) {
                    let raw = fd.rawValue
                    client.registration = try loop.register(fd, for: .readable) { [server] events in
                        server.withLoop { $0.ready(raw, events) }
                    }
                } catch {
                    server.log("serve: \(connection.name) refused: \(error)")
                    client.transport.close()
                    continue
                }
                clients[fd.rawValue] = client
                clientsByID[id] = client
                if let host { clientsByHost[host, default: 0] += 1 }
                if !isHTTP { socketClients += 1 }
                flush(client)
                // An HTTP client sends its request as it connects: often it is there already, and
                // is read now rather than after another turn of the loop.
                if isHTTP { read(client) }
            }
        }

        /// No descriptor is left (or no memory for one, `error`): the spare is let go, one waiting
        /// connection is taken and told so (as a connection over the limit is), and the spare is
        /// held again. Whether one was: `false` when none waits, or when there was no spare to
        /// let go, or it did not help (no memory); then the listeners are not watched for a tenth
        /// of a second (`pause()`), so the loop does not spin on them.
        func refuseForWantOfDescriptors(_ listener: Listener, _ error: Errno) -> Bool {
            if shortage == .none {
                // A clock stepped back counts as a minute gone.
                let now = configuration.clock.timestamp
                let tell = shortTold.map { $0.duration(to: now) >= .seconds(60) || now < $0 } ?? true
                shortage = tell ? .told : .untold
                if tell {
                    shortTold = now
                    // The limit now: it may have been lowered since the start (prlimit).
                    let limit = Processes.openFileLimit.map { " (ulimit -n \($0))" } ?? ""
                    server.log(
                        "serve: no descriptor left for a new connection\(limit), \(clients.count) clients connected: \(error); "
                            + "new connections are refused until some leave (raise the limit: ulimit -n; systemd: LimitNOFILE=)")
                }
            }
            guard let held = spare else {
                pause()
                return false
            }
            _ = try? held.close()
            spare = nil
            defer { spare = Self.holdSpare() }
            do throws(Errno) {
                let fd = try listener.fd.accept(nonBlocking: true)
                refuse(fd, listener.kind, "the server has no descriptor left for another client; try again later")
                return true
            } catch  where error.rawValue == EAGAIN {
                return false
            } catch {
                pause()
                return false
            }
        }

        /// The spare descriptor: /dev/null, read-only.
        static func holdSpare() -> FileDescriptor? {
            try? FileDescriptor.open("/dev/null", .readOnly, options: .closeOnExec)
        }

        /// Stops watching the listeners for a tenth of a second, then watches them again (and
        /// holds a spare again if it had none).
        func pause() {
            guard paused == nil else { return }
            for registration in registrations { try? loop.modify(registration, interest: []) }
            paused = loop.schedule(after: .milliseconds(100)) { [server] in
                server.withLoop { loop in
                    loop.paused = nil
                    guard !loop.ended, loop.stopping == nil else { return }
                    if loop.spare == nil { loop.spare = Self.holdSpare() }
                    for registration in loop.registrations { try? loop.loop.modify(registration, interest: .readable) }
                }
            }
        }

        /// Refuses a connection accepted over a limit, with a word its client can read where it
        /// can be read: an HTTP client (plain) a 503, a socket client an `ERROR` object; a TLS
        /// client is simply closed (its handshake has not begun).
        func refuse(_ fd: FileDescriptor, _ kind: Listener.Kind, _ message: String) {
            switch kind {
            case .http where configuration.httpTransport == nil:
                _ = try? fd.send(HTTPResponse(status: 503, body: message + "\n", headers: [("Retry-After", "5")]).bytes[...])
            case .http:
                break
            case .unix, .tcp:
                _ = try? fd.send(Array((ServeMessage.error(message) + "\n").utf8)[...])
            }
            _ = try? fd.close()
        }

        /// Makes room for a new client when the server is full (or its address has its share):
        /// a kept HTTP connection waiting for its next request (of `host`, when given) is closed
        /// (the one idle longest is not sought: any will do, and its client simply connects
        /// again). Whether one was.
        func closeAnIdleConnection(of host: String? = nil) -> Bool {
            guard
                let idle = clients.values.first(where: {
                    $0.connection.isIdle && $0.connection.unsent == 0 && (host == nil || $0.host == host)
                })
            else { return false }
            idle.connection.closeIdle()
            flush(idle)
            return idle.dropped
        }

        func read(_ client: Client) {
            for _ in 0..<4 {
                switch client.transport.read(into: &buffer) {
                case .wouldBlock:
                    return watchWritable(client)
                case .closed:
                    return drop(client)
                case .ended:
                    // A client that half-closes after its request still gets the answer.
                    guard !client.inputEnded, client.connection.inputEnded() else { return drop(client) }
                    client.inputEnded = true
                    return watch(client)
                case .bytes(let count):
                    takeSetAside(client)
                    perform(client.connection.receive(buffer[0..<count], now: configuration.clock.timestamp), for: client)
                    flush(client)
                    guard !client.dropped, count == buffer.count || client.transport.hasBufferedInput else { return }
                }
            }
            // The socket's own bytes left are seen by the next wait (level-triggered); what the
            // transport holds is read on the loop's next turn, after the other clients'.
            guard !client.dropped, client.transport.hasBufferedInput else { return }
            let id = client.id
            loop.execute { [server] in
                server.withLoop { state in
                    guard let client = state.clientsByID[id] else { return }
                    state.read(client)
                    state.settle()
                }
            }
        }

        /// Writes what the transport takes; a watcher whose queue empties (and has nothing set
        /// aside) is handed back to `broadcast`'s direct sends. A connection finished is closed.
        func flush(_ client: Client) {
            while !client.dropped {
                while client.connection.unsent > 0 {
                    switch client.transport.write(client.connection.pending) {
                    case .wouldBlock: return watchWritable(client)
                    case .closed, .ended: return drop(client)
                    case .bytes(let count): client.connection.wrote(count)
                    }
                }
                if client.connection.isFinished { return drop(client) }
                watchWritable(client)
                guard client.connection.watching else { return }
                let direct = client.transport.allowsDirectSends
                let spill = server.inbox.withLock { inbox -> [UInt8] in
                    guard let index = inbox.watchers.firstIndex(where: { $0.fd == client.fd }) else { return [] }
                    if inbox.watchers[index].spill.isEmpty {
                        inbox.watchers[index].direct = inbox.stopping == nil && direct
                        return []
                    }
                    defer { inbox.watchers[index].spill = [] }
                    return inbox.watchers[index].spill
                }
                if spill.isEmpty { return }
                perform(client.connection.queue(spill), for: client)
            }
        }

        /// Watches a client's socket for room to write while output is queued (or its transport
        /// asks to be), or no longer.
        func watchWritable(_ client: Client) {
            let enable = client.connection.unsent > 0 || client.transport.wantsWritable
            guard client.wantsWrite != enable else { return }
            client.wantsWrite = enable
            watch(client)
        }

        /// Sets what the loop watches the client for: reading until its side ended, writing
        /// while output waits.
        func watch(_ client: Client) {
            guard !client.dropped, let registration = client.registration else { return }
            var interest: IOEvents = client.inputEnded ? [] : .readable
            if client.wantsWrite { interest.insert(.writable) }
            do throws(IOLoopError) {
                try loop.modify(registration, interest: interest)
            } catch {
                server.log("serve: \(client.connection.name) closed: \(error)")
                drop(client)
            }
        }

        /// Closes a connection; a watcher leaves `broadcast`'s list first, so its descriptor
        /// number, once reused, gets nothing meant for it.
        func drop(_ client: Client) {
            guard !client.dropped else { return }
            client.dropped = true
            clients.removeValue(forKey: client.fd.rawValue)
            clientsByID.removeValue(forKey: client.id)
            if let host = client.host {
                let left = clientsByHost[host, default: 1] - 1
                clientsByHost[host] = left > 0 ? left : nil
            }
            server.inbox.withLock { inbox in
                if !inbox.watchers.isEmpty { inbox.watchers.removeAll { $0.fd == client.fd } }
            }
            switch client.connection.kind {
            case .socket: socketClients -= 1
            case .events:
                streamClients -= 1
                server.inbox.withLock { $0.streams -= 1 }
            case .http: break
            }
            if let registration = client.registration { loop.deregister(registration) }
            client.transport.close()
        }

        /// The counts now: made anew only when one has changed (this runs after every event and
        /// for every request).
        func currentStats() -> ServerStats {
            let now = (socketClients, streamClients, clients.count - socketClients - streamClients, cutOff)
            guard now != counted else { return stats }
            counted = now
            stats = ServerStats()
            for (kind, count) in [("socket", now.0), ("sse", now.1), ("http", now.2)] where count > 0 { stats.clients[kind] = count }
            stats.cutOff = cutOff
            return stats
        }

        /// Hands the counts to `stats` when they have changed since it was last given them.
        func publishStats() {
            let stats = currentStats()
            guard counted != published else { return }
            published = counted
            server.statistics.withLock { $0 = stats }
        }

        func closeEverything() {
            for client in Array(clients.values) { drop(client) }
            for listener in server.listeners { _ = try? listener.fd.close() }
            if let path = configuration.socketPath, !path.hasPrefix("@") { _ = try? FileSystem.removeFile(path) }
            if let timer = paused { _ = loop.cancel(timer) }
            _ = try? spare?.close()
            spare = nil
            publishStats()
        }
    }
}
