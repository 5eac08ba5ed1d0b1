import CMosquitto
import Foundation
import Glibc
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixSystem

// MARK: - Every call into libmosquitto goes through this file (and the result codes'
// names, MQTTResultCode.swift).

/// The connection as the client's delegate sees it, on the client's thread only: publish and
/// subscribe. Valid only for the call it is given to.
struct MQTTLink {
    fileprivate let handle: OpaquePointer
    /// How many QoS 1 messages may be unacknowledged at once on this connection: the broker's
    /// Receive Maximum from its CONNACK (MQTT 5), else `MQTTSettings.sendMaximum`. libmosquitto
    /// holds any beyond it and sends each from inside a PUBACK's handling, one packet at a time.
    let sendMaximum: Int

    /// mosquitto_publish_v5: queues `payload` on `topic`; returns the message id.
    func publish(_ topic: String, _ payload: [UInt8], qos: Int32 = 1, retain: Bool = false) -> Result<Int32, MQTTResultCode> {
        var mid: Int32 = 0
        let result = payload.withUnsafeBytes { bytes in
            mosquitto_publish_v5(handle, &mid, topic, Int32(bytes.count), bytes.baseAddress, qos, retain, nil)
        }
        return result == MOSQ_ERR_SUCCESS.rawValue ? .success(mid) : .failure(MQTTResultCode(rawValue: result))
    }

    /// Drops the connection without sending what is queued: the PUBACKs of messages the owner
    /// could not keep (a store that failed) never reach the broker, which sends those messages
    /// again to the session on the next connection. The client's loop finds the socket closed
    /// and connects again.
    func abandon() {
        MQTTClient.Context.from(mosquitto_userdata(handle))?.abandoned = true
        let socket = mosquitto_socket(handle)
        if socket >= 0 { _ = try? FileDescriptor(rawValue: socket).shutdown(Int32(SHUT_RDWR)) }
    }

    /// mosquitto_subscribe_v5 at `qos`.
    func subscribe(_ filter: String, qos: Int32 = 1) -> MQTTResultCode {
        MQTTResultCode(rawValue: mosquitto_subscribe_v5(handle, nil, filter, qos, 0, nil))
    }
}

/// What an `MQTTClient` tells its owner, always on the client's own thread.
protocol MQTTClientDelegate: AnyObject, Sendable {
    /// The broker accepted the connection (CONNACK 0): subscribe, send what waits.
    func connected(_ link: MQTTLink, sessionPresent: Bool)
    /// After each read of the socket and each `MQTTClient.wake()` (while connected), before
    /// anything queued is written: keep what was received (the PUBACKs of the messages read go out
    /// only after this returns), send what waits.
    func wake(_ link: MQTTLink)
    /// The broker acknowledged message `mid` (PUBACK) with `reason` (0: accepted).
    func published(mid: Int32, reason: Int32, _ link: MQTTLink)
    /// The broker answered a subscription (SUBACK): the granted QoS per filter (0x80 and up: refused).
    func subscribed(granted: [Int32])
    /// A message arrived on a subscription.
    func received(topic: String, payload: UnsafeRawBufferPointer)
    /// The connection is gone, or could not be made: why, for a person. Every message in flight
    /// is forgotten with the handle; the next connection starts afresh.
    func disconnected(_ why: String)
    /// The client is stopping while connected: the last things to say (a status).
    func stopping(_ link: MQTTLink)
    /// The client ended on its own and will not connect again (`MQTTSettings.yieldsSession`):
    /// why, for a person.
    func ended(_ why: String)
}

/// One connection to a broker, kept up by a thread of its own: the handle, its socket and every
/// libmosquitto call live on that thread (`mosquitto_loop_read` / `loop_write` / `loop_misc` under
/// its own `poll`), never on the cooperative pool. A dropped connection is a new handle after a
/// growing pause (0.2 s up to 5 s), so what the delegate sends after `connected` is all that is in
/// flight. Other threads only `wake()` it (one byte down a pipe) and `stop()` it.
final class MQTTClient: Sendable {
    let settings: MQTTSettings
    private let delegate: any MQTTClientDelegate
    private let control = Mutex(Control())
    /// The wake pipe: read end polled by the thread, write end for `wake()` (`nil`: no
    /// descriptors to be had; the thread then sees a wake or a stop only when its poll times out).
    private let wakePipe: (readEnd: FileDescriptor, writeEnd: FileDescriptor)?
    private let finished = DispatchSemaphore(value: 0)

    private struct Control {
        var stopping = false
        var started = false
        /// A byte is in the wake pipe and not yet read: another `wake()` need not write one.
        var wakePending = false
    }

    /// Times each connection's life (`TakeoverWatch`).
    private let now: @Sendable () -> Timestamp

    init(settings: MQTTSettings, delegate: any MQTTClientDelegate, now: @escaping @Sendable () -> Timestamp) {
        _ = mosquittoLibrary
        self.settings = settings
        self.delegate = delegate
        self.now = now
        let wakePipe = try? FileDescriptor.pipe()
        _ = try? wakePipe?.readEnd.setNonBlocking()
        _ = try? wakePipe?.writeEnd.setNonBlocking()
        self.wakePipe = wakePipe
    }

    deinit {
        _ = try? wakePipe?.readEnd.close()
        _ = try? wakePipe?.writeEnd.close()
    }

    /// The wake pipe's read end for `poll` (-1, which poll skips, without one).
    private var wakeRead: Int32 { wakePipe?.readEnd.rawValue ?? -1 }

    /// One byte down the wake pipe.
    private func pokeWakePipe() {
        _ = try? wakePipe?.writeEnd.write([1][...])
    }

    /// Starts the client's thread.
    func start() {
        let first = control.withLock { control in
            defer { control.started = true }
            return !control.started
        }
        guard first else { return }
        DeviceThread.detach(name: "tagfix-mqtt") { [self] in run() }
    }

    /// Asks the thread to call the delegate's `wake` (from any thread; never waits).
    func wake() {
        let needed = control.withLock { control in
            defer { control.wakePending = true }
            return !control.wakePending
        }
        guard needed else { return }
        pokeWakePipe()
    }

    /// Reads what is in the wake pipe; the next `wake()` writes again.
    private func drainWakePipe() {
        control.withLock { $0.wakePending = false }
        var sink = [UInt8](repeating: 0, count: 256)
        while let wakePipe, (try? wakePipe.readEnd.read(into: &sink)) ?? 0 > 0 {}
    }

    /// Stops the thread: a connected client says its last words (`stopping`) and disconnects.
    /// Waits for the thread, at most `timeout`.
    func stop(timeout: Duration = .seconds(3)) {
        let started = control.withLock { control in
            control.stopping = true
            return control.started
        }
        pokeWakePipe()
        guard started else { return }
        let nanoseconds = UInt64(timeout.components.seconds) * 1_000_000_000 + UInt64(timeout.components.attoseconds / 1_000_000_000)
        _ = finished.wait(timeout: .now() + .nanoseconds(Int(nanoseconds)))
    }

    private var isStopping: Bool { control.withLock { $0.stopping } }

    // MARK: - The thread

    /// The per-handle context the C callbacks find through their `obj` pointer.
    fileprivate final class Context {
        let delegate: any MQTTClientDelegate
        var refusal: String?
        /// The reason code of the broker's DISCONNECT (MQTT 5), when it sent one.
        var brokerReason: Int32?
        /// When the broker accepted the connection (CONNACK 0).
        var connectedAt: Timestamp?
        var connected: Bool { connectedAt != nil }
        /// The delegate dropped the connection itself (`MQTTLink.abandon()`).
        var abandoned = false
        /// libmosquitto found the connection closed or reset, with no reason given.
        var lostWithoutReason = false
        let now: @Sendable () -> Timestamp
        /// The connection's send maximum (`MQTTLink.sendMaximum`).
        var sendMaximum: Int
        init(delegate: any MQTTClientDelegate, sendMaximum: Int32, now: @escaping @Sendable () -> Timestamp) {
            self.delegate = delegate
            self.now = now
            self.sendMaximum = Int(sendMaximum)
        }

        func link(_ handle: OpaquePointer) -> MQTTLink { MQTTLink(handle: handle, sendMaximum: sendMaximum) }

        static func from(_ pointer: UnsafeMutableRawPointer?) -> Context? {
            pointer.map { Unmanaged<Context>.fromOpaque($0).takeUnretainedValue() }
        }
    }

    private func run() {
        defer { finished.signal() }
        var delay = settings.retryDelay
        var watch = TakeoverWatch()
        while !isStopping {
            let context = Context(delegate: delegate, sendMaximum: settings.sendMaximum, now: now)
            let why = session(context)
            if isStopping { break }
            if settings.yieldsSession {
                let ending: TakeoverWatch.Ending =
                    if !context.connected {
                        .refused
                    } else if context.brokerReason == Int32(MQTT_RC_SESSION_TAKEN_OVER.rawValue) {
                        .takenOver
                    } else if context.brokerReason == nil, !context.abandoned, context.lostWithoutReason {
                        .dropped
                    } else {
                        .other  // another reason from the broker, an error here, or dropped by this client
                    }
                if let end = watch.ended(ending, acceptedAt: context.connectedAt, at: now()) {
                    delegate.ended(watch.explanation(end, address: settings.address, clientID: settings.clientID))
                    break
                }
            }
            delegate.disconnected(why)
            if context.connected { delay = settings.retryDelay }
            pause(delay)
            delay = min(delay * 2, settings.maximumRetryDelay)
        }
    }

    /// One handle, from `mosquitto_new` to `mosquitto_destroy`: connect, then serve until the
    /// connection ends or the client stops. Returns why it ended.
    private func session(_ context: Context) -> String {
        let unmanaged = Unmanaged.passRetained(context)
        defer { unmanaged.release() }
        guard let handle = mosquitto_new(settings.clientID, settings.cleanSession, unmanaged.toOpaque()) else {
            return "cannot make an MQTT client (out of memory, or an empty client id with a session kept)"
        }
        defer { mosquitto_destroy(handle) }
        if let failure = configure(handle) { return failure }
        var properties: OpaquePointer?
        if settings.version == .v5, !settings.cleanSession {
            _ = cmosquitto_add_session_expiry(&properties, settings.sessionExpiry)
        }
        defer { if properties != nil { mosquitto_property_free_all(&properties) } }
        let address = settings.address
        let connect = mosquitto_connect_bind_v5(
            handle, address.host, Int32(address.port), settings.keepAlive, nil, properties)
        guard connect == MOSQ_ERR_SUCCESS.rawValue else {
            return "cannot connect to \(address) (\(MQTTResultCode(rawValue: connect)))"
        }
        return serve(handle, context)
    }

    /// Sets the protocol version, TLS, the user and password, the Last Will and the callbacks.
    private func configure(_ handle: OpaquePointer) -> String? {
        _ = mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, settings.version.option)
        // Every packet waits in the handle's queue until `mosquitto_loop_write`, which the loop
        // calls after the delegate's `wake`. libmosquitto 2.0 sends a QoS 1 message's PUBACK
        // before it hands the message over (handle__publish); unthreaded, the PUBACK went out
        // at once, so a collector killed, or whose store failed, before its commit lost the
        // message. Queued, it goes out after the commit.
        _ = mosquitto_threaded_set(handle, true)
        // Small packets go out at once: with Nagle's algorithm the second of a verdict's two
        // messages could wait for the first's TCP acknowledgement (up to 40 ms, delayed ACK).
        _ = mosquitto_int_option(handle, MOSQ_OPT_TCP_NODELAY, 1)
        _ = mosquitto_int_option(handle, MOSQ_OPT_SEND_MAXIMUM, settings.sendMaximum)
        if let receiveMaximum = settings.receiveMaximum {
            _ = mosquitto_int_option(handle, MOSQ_OPT_RECEIVE_MAXIMUM, receiveMaximum)
        }
        if settings.address.tls {
            let result = mosquitto_tls_set(handle, settings.caFile, settings.caFile == nil ? "/etc/ssl/certs" : nil, nil, nil, nil)
            guard result == MOSQ_ERR_SUCCESS.rawValue else {
                return "cannot set up TLS with \(settings.caFile ?? "the system's CA certificates") (\(MQTTResultCode(rawValue: result)))"
            }
        }
        if let user = settings.address.user {
            _ = mosquitto_username_pw_set(handle, user, settings.password)
        }
        if let will = settings.will {
            let bytes = Array(will.payload.utf8)
            _ = mosquitto_will_set(handle, will.topic, Int32(bytes.count), bytes, 1, true)
        }
        mosquitto_connect_v5_callback_set(handle) { handle, object, code, flags, properties in
            guard let handle, let context = Context.from(object) else { return }
            guard code == 0 else {
                context.refusal = String(cString: mosquitto_reason_string(code))
                return
            }
            // The broker's Receive Maximum, as libmosquitto reads it from the same CONNACK.
            var receiveMaximum: UInt16 = 0
            if mosquitto_property_read_int16(properties, Int32(MQTT_PROP_RECEIVE_MAXIMUM.rawValue), &receiveMaximum, false) != nil,
                receiveMaximum > 0
            {
                context.sendMaximum = Int(receiveMaximum)
            }
            context.connectedAt = context.now()
            context.delegate.connected(context.link(handle), sessionPresent: flags & 1 == 1)
        }
        mosquitto_disconnect_v5_callback_set(handle) { _, object, code, _ in
            // The broker's reason codes are 0x80 and up (a DISCONNECT it sent); below are
            // libmosquitto's own result codes for a connection that failed here.
            guard let context = Context.from(object) else { return }
            if code >= 0x80 {
                context.brokerReason = code
            } else if code == Int32(MOSQ_ERR_CONN_LOST.rawValue) || code == Int32(MOSQ_ERR_ERRNO.rawValue) {
                context.lostWithoutReason = true
            }
        }
        mosquitto_publish_v5_callback_set(handle) { handle, object, mid, reason, _ in
            guard let handle, let context = Context.from(object) else { return }
            context.delegate.published(mid: mid, reason: reason, context.link(handle))
        }
        mosquitto_subscribe_v5_callback_set(handle) { _, object, _, count, granted, _ in
            guard let context = Context.from(object) else { return }
            context.delegate.subscribed(granted: granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(count))) } ?? [])
        }
        mosquitto_message_v5_callback_set(handle) { _, object, message, _ in
            guard let context = Context.from(object), let message = message?.pointee, let topic = message.topic else { return }
            context.delegate.received(
                topic: String(cString: topic), payload: UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen)))
        }
        return nil
    }

    /// Polls the socket and the wake pipe until the connection ends or the client stops.
    private func serve(_ handle: OpaquePointer, _ context: Context) -> String {
        while true {
            if isStopping {
                if context.connected {
                    delegate.stopping(context.link(handle))
                    _ = mosquitto_disconnect(handle)
                    for _ in 0..<10 where mosquitto_want_write(handle) {
                        guard mosquitto_loop_write(handle, 1) == MOSQ_ERR_SUCCESS.rawValue else { break }
                    }
                }
                return "stopped"
            }
            let socket = mosquitto_socket(handle)
            guard socket >= 0 else { return brokerEnded(context) ?? "the connection to \(settings.address) closed" }
            var fds = [
                pollfd(fd: socket, events: Int16(POLLIN) | (mosquitto_want_write(handle) ? Int16(POLLOUT) : 0), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&fds, 2, 1000)
            if ready < 0, Errno.current != .interrupted { return "poll failed (\(Errno.current))" }
            var result = MOSQ_ERR_SUCCESS.rawValue
            if fds[0].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
                // Whatever else already waits on the socket is read now, so the delegate's `wake`
                // handles a burst at once (one commit) instead of one packet at a time. Whether
                // more waits is asked of the socket (a poll that does not wait), not read off
                // errno: a packet that queues an answer (a PUBACK) ends with libmosquitto's write
                // of a wake-up byte into its own socket pair, which nothing reads, so errno says
                // EAGAIN after every such packet, and the collector committed once a message.
                var packets = 0
                repeat {
                    result = mosquitto_loop_read(handle, 1)
                    packets += 1
                } while result == MOSQ_ERR_SUCCESS.rawValue && packets < 512 && Self.readable(socket)
            }
            if fds[1].revents & Int16(POLLIN) != 0 { drainWakePipe() }
            // What was read is kept (the collector's commit) and what waits is queued (the
            // publisher's next messages) before the queue is written: PUBACKs follow the commit.
            if result == MOSQ_ERR_SUCCESS.rawValue, context.connected, !isStopping { delegate.wake(context.link(handle)) }
            if result == MOSQ_ERR_SUCCESS.rawValue, mosquitto_want_write(handle) {
                result = corked(handle) { mosquitto_loop_write(handle, 1) }
            }
            if result == MOSQ_ERR_SUCCESS.rawValue { result = mosquitto_loop_misc(handle) }
            guard result == MOSQ_ERR_SUCCESS.rawValue else {
                if let refusal = context.refusal { return "\(settings.address) refused the connection: \(refusal)" }
                if let ended = brokerEnded(context) { return ended }
                return "lost the connection to \(settings.address) (\(MQTTResultCode(rawValue: result)))"
            }
        }
    }

    /// Why the broker ended the connection, when it said (an MQTT 5 DISCONNECT).
    private func brokerEnded(_ context: Context) -> String? {
        context.brokerReason.map { "\(settings.address) ended the connection: \(String(cString: mosquitto_reason_string($0)))" }
    }

    /// Whether `socket` has something to read now (a poll that does not wait).
    private static func readable(_ socket: Int32) -> Bool {
        var fd = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&fd, 1, 0) > 0 && fd.revents & Int16(POLLIN) != 0
    }

    /// Runs `body` (the queue's write) with the socket corked (TCP_CORK): the packets it writes
    /// leave together when it returns, in as few segments as they fill, instead of one segment
    /// each (TCP_NODELAY): a publisher's pass of verdicts, a collector's read of PUBACKs.
    private func corked(_ handle: OpaquePointer, _ body: () -> Int32) -> Int32 {
        let socket = mosquitto_socket(handle)
        guard socket >= 0 else { return body() }
        let descriptor = FileDescriptor(rawValue: socket)
        _ = try? descriptor.setOption(level: Int32(IPPROTO_TCP), name: TCP_CORK, to: 1)
        defer { _ = try? descriptor.setOption(level: Int32(IPPROTO_TCP), name: TCP_CORK, to: 0) }
        return body()
    }

    /// Waits `delay`, or less when the client is stopped (the wake pipe).
    private func pause(_ delay: Duration) {
        let milliseconds = Int32(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)
        var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 1, milliseconds)
        drainWakePipe()
    }
}
