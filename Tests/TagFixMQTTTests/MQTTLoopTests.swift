import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixSystem
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixMQTT

/// A delegate that counts what its client tells it; on each connection it subscribes to
/// `topic/#` and publishes one message there (so a message comes back through the connection's
/// socket), or runs `onConnect` instead.
private final class CountingDelegate: MQTTClientDelegate {
    struct Seen: Sendable {
        var connections = 0
        var disconnections: [String] = []
        var subscriptions = 0
        /// Connections on which the message was sent.
        var sent = 0
        var received = 0
    }

    let seen = Mutex(Seen())
    let topic: String?
    let onConnect: (@Sendable (MQTTLink) -> Void)?

    init(topic: String? = nil, onConnect: (@Sendable (MQTTLink) -> Void)? = nil) {
        self.topic = topic
        self.onConnect = onConnect
    }

    var connections: Int { seen.withLock { $0.connections } }
    var disconnections: [String] { seen.withLock { $0.disconnections } }
    var received: Int { seen.withLock { $0.received } }

    func connected(_ link: MQTTLink, sessionPresent: Bool) {
        seen.withLock { $0.connections += 1 }
        if let topic { _ = link.subscribe(topic + "/#") }
        onConnect?(link)
    }
    func subscribed(granted: [Int32]) { seen.withLock { $0.subscriptions += 1 } }
    func wake(_ link: MQTTLink) {
        // Once subscribed on this connection: one message, to come back through its socket.
        guard let topic else { return }
        let send = seen.withLock { seen -> Bool in
            guard seen.subscriptions == seen.connections, seen.sent < seen.connections else { return false }
            seen.sent = seen.connections
            return true
        }
        if send { _ = link.publish(topic + "/echo", Array("hello".utf8)) }
    }
    func published(mid: Int32, reason: Int32, _ link: MQTTLink) {}
    func received(topic: String, payload: UnsafeRawBufferPointer) { seen.withLock { $0.received += 1 } }
    func disconnected(_ why: String) { seen.withLock { $0.disconnections.append(why) } }
    func stopping(_ link: MQTTLink) {}
    func ended(_ why: String) {}
}

/// The threads of this process named `name` (`/proc/self/task/*/comm`).
private func threads(named name: String) -> Int {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.filter { task in
        let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
        return comm.trimmingCharacters(in: .whitespacesAndNewlines) == name
    }.count
}

/// A CA and a server certificate for 127.0.0.1 signed by it, in `folder` (ca.pem, server.pem,
/// server.key), made by openssl.
private func makeCertificates(in folder: String) async throws {
    let openssl = "/usr/bin/openssl"
    try #require(FileManager.default.isExecutableFile(atPath: openssl))
    try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: folder + "/san.cnf", atomically: true, encoding: .utf8)
    for arguments in [
        [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj",
            "/CN=TagFix test CA",
        ],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"],
        [
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2",
            "-extfile", "san.cnf",
        ],
    ] {
        let result = try await TestProgram.run(
            openssl,
            arguments.map { argument in
                [".key", ".pem", ".csr", ".cnf"].contains { argument.hasSuffix($0) } ? folder + "/" + argument : argument
            })
        try #require(result.status == 0, "\(result.err)")
    }
}

/// Returns once the loop has run what was due when it was called: a closure handed to the loop
/// runs before its timers on a turn, so a second one, handed from the first, runs after them.
private func barrier<C>(_ loop: IOLoop<C>) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        loop.execute { loop.execute { continuation.resume() } }
    }
}

/// MQTTClient on the I/O loop: libmosquitto's socket registered with an `IOLoop`, written only
/// while it wants to write, connected again on a timer of the loop's clock.
@Suite("MQTTClient on one I/O loop", .timeLimit(.minutes(3)))
struct MQTTLoopTests {
    @Test(
        "twenty clients run on the one shared loop thread: no thread per client",
        .enabled(if: haveBroker, "needs mosquitto and mosquitto-clients"))
    func noThreadPerClient() async throws {
        try await PrivateMosquitto.with { broker in
            _ = try MQTTClient.sharedLoop.get()
            // A thread starts with its maker's name and takes its own a moment later: a connecting
            // thread the loop (another test's client) has just made may wear the loop's name. So
            // each count waits for a moment with no such newborn; a thread of a client's own stays.
            #expect(
                await eventually { threads(named: "tagfix-mqtt") == 1 },
                "the shared loop's thread is not there, or not alone: \(threads(named: "tagfix-mqtt")) threads named tagfix-mqtt")
            let address = try MQTTAddress("mqtt://127.0.0.1:\(broker.port)/loop")
            let clients = (0..<20).map { index in
                let delegate = CountingDelegate()
                let client = MQTTClient(
                    settings: MQTTSettings(address: address, clientID: "loop-\(index)-\(getpid())"), delegate: delegate,
                    now: { MonotonicClock().now })
                return (client, delegate)
            }
            for (client, _) in clients { client.start() }
            #expect(await eventually { clients.allSatisfy { $0.1.connections == 1 } }, "not every client connected")
            #expect(
                await eventually { threads(named: "tagfix-mqtt") == 1 },
                "a client made a thread of its own: \(threads(named: "tagfix-mqtt")) threads named tagfix-mqtt")
            for (client, _) in clients { await client.stop() }
        }
    }

    @Test(
        "the broker killed and started again: the client connects again, and its new socket is the one the loop watches",
        .enabled(if: haveBroker, "needs mosquitto and mosquitto-clients"), arguments: [false, true])
    func brokerRestarted(tls: Bool) async throws {
        var options = PrivateMosquitto.Options()
        var caFile: String?
        if tls {
            let folder = try temporaryFolder()
            try await makeCertificates(in: folder)
            options.tls = .init(certificate: folder + "/server.pem", key: folder + "/server.key", ca: folder + "/ca.pem")
            caFile = folder + "/ca.pem"
        }
        try await PrivateMosquitto.with(options: options) { broker in
            let delegate = CountingDelegate(topic: "loop/restart/\(getpid())")
            let client = MQTTClient(
                settings: MQTTSettings(
                    address: try MQTTAddress("\(tls ? "mqtts" : "mqtt")://127.0.0.1:\(broker.port)/loop"),
                    clientID: "loop-restart-\(tls)-\(getpid())", caFile: caFile),
                delegate: delegate, now: { MonotonicClock().now })
            client.start()
            #expect(await eventually { delegate.received == 1 }, "no message came back on the first connection: \(delegate.disconnections)")
            #expect(try client.watching?.descriptor.peerAddress().port == broker.port)

            await broker.kill()
            #expect(await eventually { !delegate.disconnections.isEmpty }, "the lost connection was not noticed")
            try await broker.restart()

            #expect(await eventually { delegate.connections == 2 }, "never connected again: \(delegate.disconnections)")
            #expect(await eventually { delegate.received == 2 }, "no message came back through the new socket")
            // The loop watches the new connection's socket, a connection to the broker.
            let second = try #require(client.watching)
            #expect(second.interest.contains(.readable))
            #expect(try second.descriptor.peerAddress().port == broker.port)
            await client.stop()
            #expect(client.watching == nil)
        }
    }

    @Test("the socket is watched for writing only while libmosquitto has something to write")
    func writableOnlyWhileWanted() async throws {
        let (listener, port) = try Loopback.listen()
        defer { _ = try? listener.close() }
        // More than the two sockets' buffers hold: the write stops until the peer reads.
        let size = 32 << 20
        let delegate = CountingDelegate(onConnect: { link in _ = link.publish("loop/big", [UInt8](repeating: 0x55, count: size), qos: 0) })
        let client = MQTTClient(
            settings: MQTTSettings(
                address: try MQTTAddress("mqtt://127.0.0.1:\(port)/loop"), clientID: "loop-write-\(getpid())", version: .v311),
            delegate: delegate, now: { MonotonicClock().now })
        client.start()
        let peer = try await offThePool("accept") { () throws(Errno) in try listener.accept() }
        defer { _ = try? peer.close() }
        // CONNECT written: nothing left to write, so only reading is watched.
        #expect(await eventually { client.watching?.interest == .readable }, "\(String(describing: client.watching))")

        _ = try peer.writeAll([0x20, 0x02, 0x00, 0x00])  // CONNACK, accepted
        #expect(await eventually { delegate.connections == 1 })
        #expect(
            await eventually { client.watching?.interest == [.readable, .writable] },
            "a write the socket could not take is not watched: \(String(describing: client.watching))")

        // The peer reads it all: the rest goes out, and writing is no longer watched.
        let read = try await offThePool("read the publish") { () throws(Errno) -> Int in
            var total = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while total < size {
                let count = try peer.read(into: &buffer)
                if count == 0 { break }
                total += count
            }
            return total
        }
        #expect(read >= size)
        #expect(
            await eventually { client.watching?.interest == .readable }, "still watched for writing with nothing to write")
        await client.stop()
    }

    @Test("connecting again waits on the loop's clock: 0.2 s, then 0.4 s, and no sooner")
    func retryOnTheLoopsClock() async throws {
        let clock = ManualClock()
        let loop = try IOLoop(name: "test mqtt retry", clock: clock)
        // Refused at once, every attempt: no other test's broker can take a dead port.
        let dead = try DeadPort()
        defer { withExtendedLifetime(dead) {} }
        let port = dead.port
        let delegate = CountingDelegate()
        let client = MQTTClient(
            settings: MQTTSettings(address: try MQTTAddress("mqtt://127.0.0.1:\(port)/loop"), clientID: "loop-retry-\(getpid())"),
            delegate: delegate, now: { clock.now }, loop: loop)
        client.start()
        // Each attempt connects on a device thread of its own and is refused at once; the next
        // waits for its timer on the loop's clock.
        #expect(await eventually { delegate.disconnections.count == 1 && client.waitingToConnect }, "\(delegate.disconnections)")
        #expect(delegate.disconnections.first?.contains("cannot connect to") == true, "\(delegate.disconnections)")

        clock.advance(by: .milliseconds(199))
        loop.wake()
        await barrier(loop)
        #expect(client.attempts == 1, "tried again before 0.2 s had passed")
        clock.advance(by: .milliseconds(1))
        loop.wake()
        await barrier(loop)
        #expect(client.attempts == 2, "did not try again after 0.2 s")
        #expect(await eventually { delegate.disconnections.count == 2 && client.waitingToConnect }, "\(delegate.disconnections)")

        clock.advance(by: .milliseconds(399))
        loop.wake()
        await barrier(loop)
        #expect(client.attempts == 2, "tried again before 0.4 s had passed")
        clock.advance(by: .milliseconds(1))
        loop.wake()
        await barrier(loop)
        #expect(client.attempts == 3, "did not try again after 0.4 s")
        #expect(await eventually { delegate.disconnections.count == 3 && client.waitingToConnect }, "\(delegate.disconnections)")

        // Stopped: the pending attempt is cancelled.
        await client.stop()
        #expect(!client.waitingToConnect, "the pending attempt was not cancelled")
        clock.advance(by: .seconds(10))
        loop.wake()
        await barrier(loop)
        #expect(client.attempts == 3 && delegate.disconnections.count == 3, "tried again after stop")
        await loop.close()
    }
}
