import CMosquitto
import Glibc
import TagFixCore
import TagFixSystem

// MARK: - Every call into libmosquitto goes through this file.

/// The connection as the client's delegate sees it, on the client's loop thread only: publish and
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
    /// again to the session on the next connection. The client finds the socket closed and
    /// connects again.
    func abandon() {
        MQTTCallbackContext.from(mosquitto_userdata(handle))?.abandoned = true
        let socket = mosquitto_socket(handle)
        if socket >= 0 { _ = try? FileDescriptor(rawValue: socket).shutdown(Int32(SHUT_RDWR)) }
    }

    /// mosquitto_subscribe_v5 at `qos`.
    func subscribe(_ filter: String, qos: Int32 = 1) -> MQTTResultCode {
        MQTTResultCode(rawValue: mosquitto_subscribe_v5(handle, nil, filter, qos, 0, nil))
    }
}

/// What an `MQTTClient` tells its owner, always on the client's I/O loop thread (one at a time).
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
    /// Whether nothing may be written to the connection now (a collector's PUBACKs wait for a
    /// commit on another thread); the delegate calls `MQTTClient.wake()` once it may. A client
    /// stopping meanwhile closes without writing.
    var holdsWrites: Bool { get }
}

extension MQTTClientDelegate {
    var holdsWrites: Bool { false }
}

// MARK: - The C callbacks' context

/// The per-handle context the C callbacks find through their `obj` pointer: what the connection
/// said of itself (refused, ended by the broker, lost), read when it ends.
final class MQTTCallbackContext {
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

    static func from(_ pointer: UnsafeMutableRawPointer?) -> MQTTCallbackContext? {
        pointer.map { Unmanaged<MQTTCallbackContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Why a connection whose last call returned `result` ended, for a person.
    func failure(_ result: Int32, address: MQTTAddress) -> String {
        if let refusal { return "\(address) refused the connection: \(refusal)" }
        if let ended = brokerEnded(address) { return ended }
        return "lost the connection to \(address) (\(MQTTResultCode(rawValue: result)))"
    }

    /// Why the broker ended the connection, when it said (an MQTT 5 DISCONNECT).
    func brokerEnded(_ address: MQTTAddress) -> String? {
        brokerReason.map { "\(address) ended the connection: \(String(cString: mosquitto_reason_string($0)))" }
    }

    /// Whether the broker gave the session to another client (MQTT 5 DISCONNECT 0x8E).
    var sessionTakenOver: Bool { brokerReason == Int32(MQTT_RC_SESSION_TAKEN_OVER.rawValue) }
}

// MARK: - One handle

/// One libmosquitto handle, from `mosquitto_new` to `mosquitto_destroy`: one connection's life.
/// The client makes a new one for each connection, so its socket is a new descriptor each time.
/// @unchecked Sendable: holds libmosquitto's handle (an OpaquePointer), used on the client's I/O loop thread only.
final class MQTTHandle: @unchecked Sendable {
    let context: MQTTCallbackContext
    private let handle: OpaquePointer
    private let retained: Unmanaged<MQTTCallbackContext>
    private var destroyed = false

    private init(handle: OpaquePointer, context: MQTTCallbackContext, retained: Unmanaged<MQTTCallbackContext>) {
        self.handle = handle
        self.context = context
        self.retained = retained
    }

    /// Makes a handle, configures it (`configure`) and connects it
    /// (`mosquitto_connect_bind_v5`: the TCP connection; TLS's handshake and MQTT's CONNECT
    /// follow on the socket). Returns why not, for a person, when it cannot.
    static func connect(_ settings: MQTTSettings, context: MQTTCallbackContext) -> Result<MQTTHandle, MQTTConnectFailure> {
        _ = mosquittoLibrary
        let retained = Unmanaged.passRetained(context)
        guard let raw = mosquitto_new(settings.clientID, settings.cleanSession, retained.toOpaque()) else {
            retained.release()
            return .failure(MQTTConnectFailure("cannot make an MQTT client (out of memory, or an empty client id with a session kept)"))
        }
        let handle = MQTTHandle(handle: raw, context: context, retained: retained)
        if let failure = handle.configure(settings) {
            handle.destroy()
            return .failure(MQTTConnectFailure(failure))
        }
        var properties: OpaquePointer?
        if settings.version == .v5, !settings.cleanSession {
            _ = cmosquitto_add_session_expiry(&properties, settings.sessionExpiry)
        }
        defer { if properties != nil { mosquitto_property_free_all(&properties) } }
        let address = settings.address
        let connect = mosquitto_connect_bind_v5(raw, address.host, Int32(address.port), settings.keepAlive, nil, properties)
        guard connect == MOSQ_ERR_SUCCESS.rawValue else {
            handle.destroy()
            return .failure(MQTTConnectFailure("cannot connect to \(address) (\(MQTTResultCode(rawValue: connect)))"))
        }
        return .success(handle)
    }

    /// The connection's socket (`mosquitto_socket`); nil once libmosquitto has closed it.
    var socket: FileDescriptor? {
        let socket = mosquitto_socket(handle)
        return socket >= 0 ? FileDescriptor(rawValue: socket) : nil
    }

    /// Whether libmosquitto has something to write (`mosquitto_want_write`): the socket is
    /// watched for room to write only while it has.
    var wantsWrite: Bool { mosquitto_want_write(handle) }

    /// The delegate's view of the connection.
    var link: MQTTLink { context.link(handle) }

    /// Reads what waits on the socket (`mosquitto_loop_read`), packet after packet, so the
    /// delegate's `wake` handles a burst at once (one commit) instead of one packet at a time.
    /// Whether more waits is asked of the socket (a peek that does not wait), not read off errno:
    /// a packet that queues an answer (a PUBACK) ends with libmosquitto's write of a wake-up byte
    /// into its own socket pair, which nothing reads, so errno says EAGAIN after every such
    /// packet, and the collector committed once a message. Under TLS, `mosquitto_loop_read` goes
    /// on while OpenSSL holds decrypted bytes.
    func read() -> Int32 {
        var result = MOSQ_ERR_SUCCESS.rawValue
        var packets = 0
        repeat {
            result = mosquitto_loop_read(handle, 1)
            packets += 1
        } while result == MOSQ_ERR_SUCCESS.rawValue && packets < 512 && moreToRead
        return result
    }

    /// Whether the socket has bytes to read now (`recv` with `MSG_PEEK | MSG_DONTWAIT`).
    private var moreToRead: Bool {
        guard let socket else { return false }
        var byte = [UInt8](repeating: 0, count: 1)
        return ((try? socket.receive(into: &byte, flags: Int32(MSG_PEEK | MSG_DONTWAIT))) ?? 0) > 0
    }

    /// Writes what is queued (`mosquitto_loop_write`) with the socket corked (TCP_CORK): the
    /// packets leave together when it returns, in as few segments as they fill, instead of one
    /// segment each (TCP_NODELAY): a publisher's pass of verdicts, a collector's read of PUBACKs.
    func write() -> Int32 {
        guard let socket else { return mosquitto_loop_write(handle, 1) }
        _ = try? socket.setOption(level: Int32(IPPROTO_TCP), name: TCP_CORK, to: 1)
        defer { _ = try? socket.setOption(level: Int32(IPPROTO_TCP), name: TCP_CORK, to: 0) }
        return mosquitto_loop_write(handle, 1)
    }

    /// Keep-alive and retries (`mosquitto_loop_misc`).
    func misc() -> Int32 { mosquitto_loop_misc(handle) }

    /// Says goodbye (`mosquitto_disconnect`) and writes what is queued, a few times at most:
    /// the client is stopping and waits for no one.
    func disconnect() {
        _ = mosquitto_disconnect(handle)
        for _ in 0..<10 where mosquitto_want_write(handle) {
            guard mosquitto_loop_write(handle, 1) == MOSQ_ERR_SUCCESS.rawValue else { break }
        }
    }

    /// `mosquitto_destroy`: closes the socket (deregister it from the loop first) and lets the
    /// context go. Once only.
    func destroy() {
        guard !destroyed else { return }
        destroyed = true
        mosquitto_destroy(handle)
        retained.release()
    }

    /// Sets the protocol version, TLS, the user and password, the Last Will and the callbacks.
    private func configure(_ settings: MQTTSettings) -> String? {
        _ = mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, settings.version.option)
        // Every packet waits in the handle's queue until `mosquitto_loop_write`, which the client
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
            guard let handle, let context = MQTTCallbackContext.from(object) else { return }
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
            guard let context = MQTTCallbackContext.from(object) else { return }
            if code >= 0x80 {
                context.brokerReason = code
            } else if code == Int32(MOSQ_ERR_CONN_LOST.rawValue) || code == Int32(MOSQ_ERR_ERRNO.rawValue) {
                context.lostWithoutReason = true
            }
        }
        mosquitto_publish_v5_callback_set(handle) { handle, object, mid, reason, _ in
            guard let handle, let context = MQTTCallbackContext.from(object) else { return }
            context.delegate.published(mid: mid, reason: reason, context.link(handle))
        }
        mosquitto_subscribe_v5_callback_set(handle) { _, object, _, count, granted, _ in
            guard let context = MQTTCallbackContext.from(object) else { return }
            context.delegate.subscribed(granted: granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(count))) } ?? [])
        }
        mosquitto_message_v5_callback_set(handle) { _, object, message, _ in
            guard let context = MQTTCallbackContext.from(object), let message = message?.pointee, let topic = message.topic else { return }
            context.delegate.received(
                topic: String(cString: topic), payload: UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen)))
        }
        return nil
    }
}

/// Why a handle could not be made or connected, for a person.
struct MQTTConnectFailure: Error, Sendable {
    let message: String
    init(_ message: String) { self.message = message }
}
