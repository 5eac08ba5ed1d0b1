import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixSystem

/// What an `MQTTClient` needs of its I/O loop: an `IOLoop` on any clock (the pause before
/// connecting again and the keep-alive's tick are timers on it).
protocol MQTTEventLoop: AnyObject, Sendable {
    func register(
        _ descriptor: FileDescriptor, for interest: IOEvents, handler: @escaping @Sendable (IOEvents) throws -> Void,
        onError: @escaping @Sendable (any Error) -> Void
    ) throws(IOLoopError) -> IORegistration
    func modify(_ registration: IORegistration, interest: IOEvents) throws(IOLoopError)
    func deregister(_ registration: IORegistration)
    @discardableResult func schedule(after delay: Duration, _ body: @escaping @Sendable () -> Void) -> IOTimer
    @discardableResult func cancel(_ timer: IOTimer) -> Bool
    @discardableResult func execute(_ body: @escaping @Sendable () -> Void) -> Bool
    var inLoopThread: Bool { get }
}

extension IOLoop: MQTTEventLoop {}

/// One connection to a broker, kept up on an `IOLoop` (by default the process's one MQTT loop,
/// `MQTTClient.sharedLoop`: one thread for every client, whatever their number). The handle, its
/// socket and every libmosquitto call live on the loop's thread, never on the cooperative pool:
/// the socket (`mosquitto_socket`) is registered for reading, and for writing only while
/// libmosquitto has something to write (`mosquitto_want_write`); `mosquitto_loop_read`,
/// `loop_write` and `loop_misc` run when it is ready, on each `wake()` and on a one-second tick
/// (keep-alive). Only the blocking connect (the name's lookup, TCP's handshake) runs on a device
/// thread, which ends with it. A dropped connection is a new handle, and so a new socket
/// registered, after a growing pause (0.2 s up to 5 s, a timer on the loop's clock), so what the
/// delegate sends after `connected` is all that is in flight. Other threads only `wake()` it (`IOLoop.execute`) and
/// `stop()` it.
final class MQTTClient: Sendable {
    let settings: MQTTSettings
    private let delegate: any MQTTClientDelegate
    /// nil when the shared loop could not be started (then `why` says so).
    private let loop: (any MQTTEventLoop)?
    private let noLoop: String?
    private let control = Mutex(Control())
    /// The connection and the pause before the next: touched only on the loop's thread (a lock
    /// so the client is `Sendable`; never held while libmosquitto or the delegate is called).
    private let machine: Mutex<Machine>

    private struct Control {
        var stopping = false
        var started = false
        /// A `wake` is handed to the loop and has not run yet: another need not be.
        var wakePending = false
    }

    private struct Machine {
        var connection: Connection?
        /// The timer that connects again.
        var retry: IOTimer?
        var delay: Duration
        var watch = TakeoverWatch()
        /// Stopped, or ended on its own: nothing connects again.
        var over = false
        /// A handle is being made and connected on a device thread.
        var connecting = false
        /// Attempts to connect so far.
        var attempts = 0
    }

    /// A connected handle as the loop watches it.
    private struct Connection {
        let handle: MQTTHandle
        var registration: IORegistration
        var interest: IOEvents
        var tick: IOTimer?
    }

    /// Times each connection's life (`TakeoverWatch`).
    private let now: @Sendable () -> Timestamp

    /// The keep-alive's tick: `mosquitto_loop_misc` (PINGREQ, its answer's deadline) at least
    /// this often.
    static var tick: Duration { .seconds(1) }

    /// The loop every client runs on unless given one: started with the first client, never
    /// closed (its thread waits in `epoll_wait` while no client is connected).
    static let sharedLoop: Result<IOLoop<ContinuousClock>, Errno> = Result { () throws(Errno) in try IOLoop(name: "tagfix-mqtt") }

    /// - Parameters:
    ///   - loop: the loop to run on (a test's, on its clock); the shared one when nil.
    init(
        settings: MQTTSettings, delegate: any MQTTClientDelegate, now: @escaping @Sendable () -> Timestamp, loop: (any MQTTEventLoop)? = nil
    ) {
        self.settings = settings
        self.delegate = delegate
        self.now = now
        machine = Mutex(Machine(delay: settings.retryDelay))
        if let loop {
            self.loop = loop
            noLoop = nil
        } else {
            switch Self.sharedLoop {
            case .success(let shared):
                self.loop = shared
                noLoop = nil
            case .failure(let error):
                self.loop = nil
                noLoop = "cannot start the MQTT client's I/O loop: \(error) (too many open files or threads? see ulimit -n and ulimit -u)"
            }
        }
    }

    /// Starts connecting, on the loop's thread.
    func start() {
        let first = control.withLock { control in
            defer { control.started = true }
            return !control.started
        }
        guard first else { return }
        guard let loop else {
            delegate.disconnected(noLoop ?? "no I/O loop")
            return
        }
        loop.execute { [self] in connect() }
    }

    /// Asks the loop to call the delegate's `wake` (from any thread; never waits).
    func wake() {
        let needed = control.withLock { control in
            defer { control.wakePending = true }
            return !control.wakePending
        }
        guard needed, let loop else { return }
        let handed = loop.execute { [self] in
            control.withLock { $0.wakePending = false }
            pass(read: false)
        }
        if !handed { control.withLock { $0.wakePending = false } }
    }

    /// Stops the client: a connected client says its last words (`stopping`) and disconnects;
    /// nothing connects again. Awaits the loop having done it (the loop may be busy with another
    /// client's delegate first), holding no thread. On the loop's own thread (a delegate's call)
    /// it does not wait: the loop does it on its next turn, once libmosquitto's call under way
    /// returns.
    func stop() async {
        let started = control.withLock { control in
            control.stopping = true
            return control.started
        }
        guard started, let loop else { return }
        if loop.inLoopThread {
            loop.execute { [self] in shutDown() }
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // A loop that is closing runs what was handed before; what it refuses never runs.
            let handed = loop.execute { [self] in
                shutDown()
                continuation.resume()
            }
            if !handed { continuation.resume() }
        }
    }

    private var isStopping: Bool { control.withLock { $0.stopping } }

    /// Whether the next attempt to connect waits for its timer, for tests.
    var waitingToConnect: Bool { machine.withLock { $0.retry != nil } }

    /// How many attempts to connect have started, for tests.
    var attempts: Int { machine.withLock { $0.attempts } }

    /// What the loop watches now, for tests: the socket and its interest (nil: no connection).
    var watching: (descriptor: FileDescriptor, interest: IOEvents)? {
        machine.withLock { machine in machine.connection.map { ($0.registration.descriptor, $0.interest) } }
    }

    // MARK: - On the loop's thread

    /// Makes a handle and connects it on a short-lived device thread (`mosquitto_connect_bind_v5`
    /// blocks for the name's lookup and the TCP connection, which to a host that does not answer
    /// takes minutes: the loop, which every client shares, never waits for it), then adopts it
    /// on the loop.
    private func connect() {
        guard let loop, !isStopping else { return }
        let due = machine.withLock { machine -> Bool in
            machine.retry = nil
            guard !machine.over, machine.connection == nil, !machine.connecting else { return false }
            machine.connecting = true
            machine.attempts += 1
            return true
        }
        guard due else { return }
        DeviceThread.detach(name: "tagfix-mqtt-connect") { [self] in
            let context = MQTTCallbackContext(delegate: delegate, sendMaximum: settings.sendMaximum, now: now)
            let made = MQTTHandle.connect(settings, context: context)
            let handed = loop.execute { [self] in adopt(made) }
            if !handed, case .success(let handle) = made { handle.destroy() }
        }
    }

    /// Watches a new connection's socket, or, when it could not be made, pauses and tries again.
    /// A client stopped meanwhile lets it go.
    private func adopt(_ made: Result<MQTTHandle, MQTTConnectFailure>) {
        guard let loop else { return }
        let over = machine.withLock { machine -> Bool in
            machine.connecting = false
            return machine.over
        }
        let handle: MQTTHandle
        switch made {
        case .success(let connected): handle = connected
        case .failure(let failure): return ended(nil, why: failure.message)
        }
        guard !over, !isStopping else { return handle.destroy() }
        guard let socket = handle.socket else {
            handle.destroy()
            return ended(handle.context, why: "the connection to \(settings.address) closed")
        }
        let interest: IOEvents = handle.wantsWrite ? [.readable, .writable] : .readable
        let registration: IORegistration
        do throws(IOLoopError) {
            registration = try loop.register(socket, for: interest, handler: { [self] events in ready(events) }, onError: { _ in })
        } catch {
            handle.destroy()
            return ended(handle.context, why: "cannot watch the connection to \(settings.address): \(error)")
        }
        let tick = loop.schedule(after: Self.tick) { [self] in ticked() }
        machine.withLock { $0.connection = Connection(handle: handle, registration: registration, interest: interest, tick: tick) }
    }

    /// The socket is ready: read what waits (when there is), then the rest of a pass.
    private func ready(_ events: IOEvents) {
        pass(read: !events.isDisjoint(with: [.readable, .hangUp, .error]))
    }

    /// The keep-alive's tick: a pass, and the next tick.
    private func ticked() {
        guard let loop, let handle = machine.withLock({ $0.connection?.handle }) else { return }
        pass(read: false)
        machine.withLock { machine in
            guard let connection = machine.connection, connection.handle === handle else { return }
            machine.connection?.tick = loop.schedule(after: Self.tick) { [self] in ticked() }
        }
    }

    /// One turn for the connection: read (when the socket is readable), let the delegate keep
    /// what was received and queue what waits (`wake`), then write the queue: PUBACKs follow the
    /// collector's commit. Then the socket is watched for writing only if something is left to
    /// write.
    private func pass(read: Bool) {
        guard let connection = machine.withLock({ $0.connection }), !isStopping else { return }
        let handle = connection.handle
        guard handle.socket != nil else {
            return connectionEnded(why: handle.context.brokerEnded(settings.address) ?? "the connection to \(settings.address) closed")
        }
        var result = MQTTResultCode.success.rawValue
        if read { result = handle.read() }
        if result == MQTTResultCode.success.rawValue, handle.context.connected, !isStopping { delegate.wake(handle.link) }
        if result == MQTTResultCode.success.rawValue, handle.wantsWrite, !delegate.holdsWrites { result = handle.write() }
        if result == MQTTResultCode.success.rawValue { result = handle.misc() }
        guard result == MQTTResultCode.success.rawValue else {
            return connectionEnded(why: handle.context.failure(result, address: settings.address))
        }
        watch(handle)
    }

    /// Keeps the registration in step with the handle: its socket now (a new descriptor is
    /// registered in place of the old), readable always, writable while `mosquitto_want_write`
    /// and the delegate does not hold the writes back (it wakes the client when it stops).
    private func watch(_ handle: MQTTHandle) {
        guard let loop, let connection = machine.withLock({ $0.connection }), connection.handle === handle else { return }
        guard let socket = handle.socket else {
            return connectionEnded(why: handle.context.brokerEnded(settings.address) ?? "the connection to \(settings.address) closed")
        }
        let interest: IOEvents = handle.wantsWrite && !delegate.holdsWrites ? [.readable, .writable] : .readable
        do throws(IOLoopError) {
            if socket != connection.registration.descriptor {
                loop.deregister(connection.registration)
                let registration = try loop.register(socket, for: interest, handler: { [self] events in ready(events) }, onError: { _ in })
                machine.withLock { $0.connection?.registration = registration }
            } else if interest != connection.interest {
                try loop.modify(connection.registration, interest: interest)
            }
            machine.withLock { $0.connection?.interest = interest }
        } catch {
            connectionEnded(why: "cannot watch the connection to \(settings.address): \(error)")
        }
    }

    /// The connection is over: its socket leaves the loop, the handle goes, and the client
    /// pauses and connects again (or ends, or stops).
    private func connectionEnded(why: String) {
        guard let connection = machine.withLock({ $0.connection.take() }) else { return }
        forget(connection)
        ended(connection.handle.context, why: why)
    }

    /// Deregisters a connection's socket and destroys its handle (which closes the socket).
    private func forget(_ connection: Connection) {
        loop?.deregister(connection.registration)
        if let tick = connection.tick { loop?.cancel(tick) }
        connection.handle.destroy()
    }

    /// After a connection (or an attempt): the delegate is told, and the next attempt is
    /// scheduled after the pause, which doubles up to `maximumRetryDelay` and starts again from
    /// `retryDelay` after a connection the broker accepted. A client that yields its session ends
    /// instead when `TakeoverWatch` says another client has it.
    /// - Parameter context: the connection's, nil for one that could not be made.
    private func ended(_ context: MQTTCallbackContext?, why: String) {
        guard let loop, !isStopping else { return }
        if settings.yieldsSession {
            let ending: TakeoverWatch.Ending =
                if let context, context.connected {
                    if context.sessionTakenOver {
                        .takenOver
                    } else if context.brokerReason == nil, !context.abandoned, context.lostWithoutReason {
                        .dropped
                    } else {
                        .other  // another reason from the broker, an error here, or dropped by this client
                    }
                } else {
                    .refused
                }
            let end = machine.withLock { $0.watch.ended(ending, acceptedAt: context?.connectedAt, at: now()) }
            if let end {
                machine.withLock { $0.over = true }
                delegate.ended(explanation(end))
                return
            }
        }
        delegate.disconnected(why)
        machine.withLock { machine in
            guard !machine.over else { return }
            if context?.connected == true { machine.delay = settings.retryDelay }
            let delay = machine.delay
            machine.delay = min(delay * 2, settings.maximumRetryDelay)
            machine.retry = loop.schedule(after: delay) { [self] in connect() }
        }
    }

    private func explanation(_ end: TakeoverWatch.Decision) -> String {
        machine.withLock { $0.watch }.explanation(end, address: settings.address, clientID: settings.clientID)
    }

    /// Stops for good: the last words of a connected client, then its socket leaves the loop
    /// and its handle goes; the pending attempt is cancelled.
    private func shutDown() {
        let (connection, retry) = machine.withLock { machine in
            machine.over = true
            defer { machine.retry = nil }
            return (machine.connection.take(), machine.retry)
        }
        if let retry { loop?.cancel(retry) }
        guard let connection else { return }
        if connection.handle.context.connected {
            delegate.stopping(connection.handle.link)
            // Held back, the queue goes unwritten (a collector's PUBACKs of what is not stored
            // yet): the socket closes without a DISCONNECT, and the broker keeps the session.
            if !delegate.holdsWrites { connection.handle.disconnect() }
        }
        forget(connection)
    }
}
