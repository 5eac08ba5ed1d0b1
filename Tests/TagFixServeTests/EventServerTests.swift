import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixServe
import TagFixTesting
import Testing

/// A fresh socket path.
func socketPath() -> String { "/tmp/tagfix-serve-\(UUID().uuidString.prefix(8)).sock" }

/// Waits (polling, up to a minute) until `condition` holds.
func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<1200 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return condition()
}

/// A responder with nothing to say: the tests here are about the server's sockets.
struct QuietResponder: ServeResponder {
    func answer(_ command: ClientCommand) -> [String] { [#"{"class":"POLL"}"#] }
    func verdicts(since id: Int) -> [ServeEvent] { [] }
    func devices() -> [ServeEvent] { [] }
    func respond(to request: HTTPRequest, stats: ServerStats) -> HTTPResponse { HTTPResponse(status: 200, body: "ok\n") }
}

final class LogLines: Sendable {
    let lines = Mutex([String]())
    func add(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

/// The tests run side by side: the most descriptors one holds is about 50 (20 watchers, both
/// ends), so all of them at once stay far below 1024, where libnfc's and libgps's select(2) in
/// other suites' tests would abort.
@Suite("tagfix serve's event server: fan-out, slow clients, bad input", .timeLimit(.minutes(2)))
struct EventServerTests {
    /// Verdict-sized events, numbered.
    static func events(_ range: ClosedRange<Int>, padding: Int = 600) -> [ServeEvent] {
        range.map { id in
            ServeEvent(kind: .verdict, line: #"{"class":"VERDICT","id":\#(id),"pad":"\#(String(repeating: "x", count: padding))"}"#, id: id)
        }
    }

    @Test("20 watching clients get every event in order; one that does not read is cut off and slows nobody")
    func fanOut() async throws {
        let path = socketPath()
        let log = LogLines()
        var configuration = ServeConfiguration(socketPath: path, release: "test")
        configuration.bufferLimit = 64 * 1024
        let server = try EventServer(configuration, responder: QuietResponder(), log: log.add)
        server.start()
        let clients = try (0..<20).map { _ in try SocketLineClient(path: path) }
        let idle = try SocketLineClient(path: path, reading: false)
        let bystander = try SocketLineClient(path: path)  // never asks to watch
        for client in clients + [idle] { client.send(#"?WATCH={"enable":true};"# + "\n") }
        #expect(await eventually { clients.allSatisfy { $0.lines(ofClass: "WATCH").count == 1 } })
        // Enough for the idle client to pass its buffer and the kernel's.
        let total = 1000
        // In batches well under the limit, each sent once every reading client has the last: a
        // reading client is never cut off, however slowly this machine runs it; the idle one
        // falls a batch further behind each time.
        for start in stride(from: 1, through: total, by: 50) {
            server.broadcast(Self.events(start...start + 49, padding: 600))
            #expect(await eventually { clients.allSatisfy { $0.lines(ofClass: "VERDICT").count >= start + 49 } })
        }
        #expect(await eventually { clients.allSatisfy { $0.lines(ofClass: "VERDICT").count == total } })
        for client in clients {
            let ids = client.lines(ofClass: "VERDICT").compactMap { line in
                Int(line.dropFirst(#"{"class":"VERDICT","id":"#.count).prefix { $0.isNumber })
            }
            #expect(ids == Array(1...total))
        }
        #expect(log.all.contains { $0.contains("cut off") && $0.contains("bytes unread") }, "\(log.all)")
        #expect(server.stats.cutOff == 1)
        #expect(bystander.lines(ofClass: "VERDICT").isEmpty)
        await server.stop(reason: "test over")
        #expect(await eventually { clients.allSatisfy { $0.closed } })
        #expect(clients.allSatisfy { $0.lines.last?.contains(#""class":"SHUTDOWN""#) == true })
        #expect(!FileManager.default.fileExists(atPath: path), "the socket file was left behind")
    }

    @Test("garbage, a 10 MB line, unknown commands and half-open clients: ERROR objects, and the others unaffected")
    func badInput() async throws {
        let path = socketPath()
        let server = try EventServer(
            ServeConfiguration(socketPath: path, http: try ListenAddress("127.0.0.1:0"), release: "test"), responder: QuietResponder(),
            log: { _ in })
        server.start()
        defer { Task { await server.stop(reason: "test over") } }
        let good = try SocketLineClient(path: path)
        good.send(#"?WATCH={"enable":true};"#)
        let garbage = try SocketLineClient(path: path)
        garbage.send([0xFF, 0x00, 0x3F, 0x0A] + Array("hello\n?NOPE;\n?WATCH={\"enable\":\"maybe\"};\n".utf8))
        let long = try SocketLineClient(path: path)
        // Sent from a thread of its own: a send this size waits for the server to read it.
        DeviceThread.detach(name: "long line") {
            long.send([UInt8](repeating: UInt8(ascii: "?"), count: 10_000_000) + Array("\n?POLL;\n".utf8))
        }
        let halfOpen = try SocketLineClient(path: path, reading: false)
        halfOpen.send(#"?WATCH={"ena"#)
        let halfHTTP = try SocketLineClient(port: server.httpPort, reading: false)
        halfHTTP.send("GET /metr")
        let hugeHTTP = try SocketLineClient(port: server.httpPort)
        DeviceThread.detach(name: "huge head") {
            hugeHTTP.send("GET / HTTP/1.1\r\nX: " + String(repeating: "y", count: 100_000) + "\r\n\r\n")
        }
        let head = try SocketLineClient(port: server.httpPort)
        head.send("HEAD /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
        let badHTTP = try SocketLineClient(port: server.httpPort)
        badHTTP.send("BREW /pot HTCPCP/1.0\r\n\r\n")

        #expect(await eventually { garbage.lines(ofClass: "ERROR").count == 4 }, "\(garbage.lines)")
        #expect(await eventually { long.lines(ofClass: "ERROR").count == 1 && long.lines(ofClass: "POLL").count == 1 }, "\(long.lines)")
        #expect(await eventually { hugeHTTP.lines.first?.hasPrefix("HTTP/1.1 431") == true }, "\(hugeHTTP.lines)")
        #expect(await eventually { badHTTP.lines.first?.hasPrefix("HTTP/1.1 400") == true }, "\(badHTTP.lines)")
        #expect(await eventually { head.closed })
        #expect(head.lines.first?.hasPrefix("HTTP/1.1 200") == true)
        #expect(head.lines.contains("Content-Length: 3\r"), "HEAD says GET's length: \(head.lines)")
        #expect(!head.lines.contains("ok"), "HEAD has no body: \(head.lines)")
        #expect(await eventually { good.lines(ofClass: "WATCH").count == 1 })
        server.broadcast(Self.events(1...3))
        #expect(await eventually { good.lines(ofClass: "VERDICT").count == 3 })
        // A client that disappears without a word is forgotten.
        halfOpen.close()
        halfHTTP.close()
        let later = try SocketLineClient(path: path)
        later.send("?VERSION;")
        #expect(await eventually { later.lines(ofClass: "VERSION").count == 2 })
    }

    @Test("with a token, TCP clients must ?AUTH first and a wrong token closes them; HTTP needs the bearer token")
    func token() async throws {
        let server = try EventServer(
            ServeConfiguration(
                listen: try ListenAddress("127.0.0.1:0"), http: try ListenAddress("127.0.0.1:0"), token: "s3cret", release: "test"),
            responder: QuietResponder(), log: { _ in })
        server.start()
        defer { Task { await server.stop(reason: "test over") } }
        let early = try SocketLineClient(port: server.listenPort)
        early.send(#"?WATCH={"enable":true};"#)
        #expect(await eventually { early.lines(ofClass: "ERROR").first?.contains("AUTH") == true })
        early.send(#"?AUTH="s3cret";?WATCH={"enable":true};"#)
        #expect(await eventually { early.lines(ofClass: "WATCH").count == 1 })
        let wrong = try SocketLineClient(port: server.listenPort)
        wrong.send(#"?AUTH="guess";"#)
        #expect(await eventually { wrong.closed })
        let anonymous = try SocketLineClient(port: server.httpPort)
        anonymous.send("GET /metrics HTTP/1.1\r\n\r\n")
        #expect(await eventually { anonymous.lines.first?.hasPrefix("HTTP/1.1 401") == true })
        let health = try SocketLineClient(port: server.httpPort)
        health.send("GET /healthz HTTP/1.1\r\n\r\n")
        #expect(await eventually { health.lines.first?.hasPrefix("HTTP/1.1 200") == true }, "/healthz needs no token")
        let bearer = try SocketLineClient(port: server.httpPort)
        bearer.send("GET /metrics HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n")
        #expect(await eventually { bearer.lines.first?.hasPrefix("HTTP/1.1 200") == true })
    }

    @Test("a socket path in use is refused, a stale one replaced, a file that is not a socket left alone, the socket is 0660")
    func socketFile() async throws {
        let path = socketPath()
        let first = try EventServer(ServeConfiguration(socketPath: path, release: "t"), responder: QuietResponder(), log: { _ in })
        first.start()
        #expect(throws: ServeError.self) {
            _ = try EventServer(ServeConfiguration(socketPath: path, release: "t"), responder: QuietResponder(), log: { _ in })
        }
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o660)
        await first.stop(reason: "over")
        // A stale socket file (its server killed before it could remove it) is replaced.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        close(stale)
        #expect(FileManager.default.fileExists(atPath: path))
        let second = try EventServer(ServeConfiguration(socketPath: path, release: "t"), responder: QuietResponder(), log: { _ in })
        second.start()
        let client = try SocketLineClient(path: path)
        #expect(await eventually { client.lines(ofClass: "VERSION").count == 1 })
        await second.stop(reason: "over")
        let file = socketPath()
        _ = FileManager.default.createFile(atPath: file, contents: Data("keep".utf8))
        defer { try? FileManager.default.removeItem(atPath: file) }
        #expect(throws: ServeError.self) {
            _ = try EventServer(ServeConfiguration(socketPath: file, release: "t"), responder: QuietResponder(), log: { _ in })
        }
        #expect(FileManager.default.contents(atPath: file) == Data("keep".utf8))
    }

    @Test(
        "an HTTP request whose head never ends gets 408 and is closed once clientTimeout has passed on the server's clock; one that ends in time is answered"
    )
    func requestHeadTimeout() async throws {
        let clock = ManualClock()
        var configuration = ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "t")
        configuration.clock = TestSessionClock(clock: clock)
        let server = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        server.start()
        let port = try #require(server.httpPort)
        let halfOpen = try SocketLineClient(port: port)
        halfOpen.send("GET /api/ta")
        #expect(await eventually { server.stats.clients["http"] == 1 })
        clock.advance(by: configuration.clientTimeout - .seconds(1))
        // Another client, slow but in time: answered; the first, not yet due, still open.
        let slow = try SocketLineClient(port: port)
        slow.send("GET /healthz HTTP/1.1\r\nConnection: close\r\n")
        #expect(await eventually { server.stats.clients["http"] == 2 })
        slow.send("\r\n")
        #expect(await eventually { slow.closed })
        #expect(slow.lines.first?.hasPrefix("HTTP/1.1 200") == true, "\(slow.lines)")
        #expect(!halfOpen.closed, "closed before its head was due")
        clock.advance(by: .seconds(1))
        #expect(await eventually { halfOpen.closed }, "the half-open request still holds its slot")
        #expect(halfOpen.lines.first?.hasPrefix("HTTP/1.1 408") == true, "\(halfOpen.lines)")
        #expect(await eventually { server.stats.clients["http", default: 0] == 0 })
        await server.stop(reason: "over")
    }

    @Test(
        "a socket client that begins a command and does not end it gets an ERROR and is closed once clientTimeout has passed since its first byte (a log line says so); a watcher that only reads is never cut off"
    )
    func socketCommandTimeout() async throws {
        let clock = ManualClock()
        let path = socketPath()
        let log = LogLines()
        var configuration = ServeConfiguration(socketPath: path, release: "t")
        configuration.clock = TestSessionClock(clock: clock)
        configuration.clientTimeout = .seconds(5)
        let server = try EventServer(configuration, responder: QuietResponder(), log: log.add)
        server.start()
        let watcher = try SocketLineClient(path: path)
        watcher.send(#"?WATCH={"enable":true};"# + "\n")
        #expect(await eventually { watcher.lines(ofClass: "WATCH").count == 1 })
        // A whole command, then the start of another in the same write: once the first is
        // answered the server has read the second's start (the clock has not moved).
        let half = try SocketLineClient(path: path)
        half.send("?POLL;\n?WATCH={\"ena")
        #expect(await eventually { half.lines(ofClass: "POLL").count == 1 })
        clock.advance(by: .seconds(4))
        half.send("ble\"")  // more of it, still not ended: the command is due from its first byte
        // A round trip on another connection: the loop has run since the clock moved.
        // (the WATCH answer had one POLL: QuietResponder's DEVICES)
        watcher.send("?POLL;\n")
        #expect(await eventually { watcher.lines(ofClass: "POLL").count == 2 })
        #expect(!half.closed, "closed before its command was due")
        clock.advance(by: .seconds(1))
        #expect(await eventually { half.closed }, "a command begun and never ended still holds its connection")
        #expect(half.lines.last?.contains(#""class":"ERROR""#) == true, "\(half.lines)")
        #expect(half.lines.last?.contains("within 5 s") == true, "\(half.lines)")
        #expect(log.all.contains { $0.contains("did not end it within 5 s") }, "\(log.all)")
        // The watcher sent only whole commands: an hour on, it is still served.
        clock.advance(by: .seconds(3600))
        server.broadcast(Self.events(1...3, padding: 10))
        #expect(await eventually { watcher.lines(ofClass: "VERDICT").count == 3 })
        watcher.send("?POLL;\n")
        #expect(await eventually { watcher.lines(ofClass: "POLL").count == 3 })
        #expect(!watcher.closed)
        #expect(server.stats.clients["socket"] == 1)
        await server.stop(reason: "over")
    }

    @Test("a watcher that sends commands while events stream gets whole lines: every event in order, every answer, nothing interleaved")
    func commandsWhileWatching() async throws {
        let path = socketPath()
        var configuration = ServeConfiguration(socketPath: path, release: "t")
        configuration.bufferLimit = 16 << 20
        let server = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        server.start()
        let client = try SocketLineClient(path: path)
        client.send(#"?WATCH={"enable":true};"# + "\n")
        #expect(await eventually { client.lines(ofClass: "WATCH").count == 1 })
        let total = 3000
        let sender = Task.detached {
            // Large events, so the socket fills and the server's loop takes over part of the time.
            for start in stride(from: 1, through: total, by: 20) { server.broadcast(Self.events(start...start + 19, padding: 2000)) }
        }
        for _ in 0..<200 { client.send("?POLL;?VERSION;\n") }
        await sender.value
        #expect(await eventually { client.lines(ofClass: "VERDICT").count == total && client.lines(ofClass: "POLL").count == 201 })
        let lines = client.lines
        #expect(lines.allSatisfy { $0.hasPrefix(#"{"class":""#) && $0.hasSuffix("}") }, "a line broken into by another")
        let ids = client.lines(ofClass: "VERDICT").compactMap { line in
            Int(line.dropFirst(#"{"class":"VERDICT","id":"#.count).prefix { $0.isNumber })
        }
        #expect(ids == Array(1...total))
        #expect(client.lines(ofClass: "VERSION").count == 201)
        #expect(server.stats.cutOff == 0)
        await server.stop(reason: "over")
    }

    /// A group the socket can be given to other than this process's own: any group as root,
    /// else one of this user's supplementary groups; `nil` when there is none.
    static var otherGroup: (name: String, id: gid_t)? {
        var ids = [gid_t](repeating: 0, count: 256)
        let count = getgroups(Int32(ids.count), &ids)
        let candidates =
            getuid() == 0 ? ["nogroup", "daemon", "users"].compactMap { try? (name: $0, id: ServeConfiguration.groupID($0)) } : []
        let supplementary = ids.prefix(Int(max(count, 0))).compactMap { id in
            getgrgid(id).map { (name: String(cString: $0.pointee.gr_name), id: id) }
        }
        return (candidates + supplementary).first { $0.id != getegid() }
    }

    @Test(
        "--socket-group: the socket belongs to that group, mode 0660; a group that does not exist is refused before anything is bound",
        .enabled(if: otherGroup != nil, "needs root or a supplementary group"))
    func socketGroup() async throws {
        let group = try #require(Self.otherGroup)
        let path = socketPath()
        var configuration = ServeConfiguration(socketPath: path, release: "t")
        configuration.socketGroup = group.name
        let server = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        server.start()
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_gid == group.id, "the socket's group is \(info.st_gid), not \(group.name) (\(group.id))")
        #expect(info.st_mode & 0o777 == 0o660)
        await server.stop(reason: "over")

        let unknown = socketPath()
        configuration = ServeConfiguration(socketPath: unknown, release: "t")
        configuration.socketGroup = "tagfix-no-such-group-\(UUID().uuidString.prefix(6))"
        let error = #expect(throws: ServeError.self) {
            _ = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        }
        #expect(error?.kind == .usage)
        #expect(error?.message.contains("no such group") == true)
        #expect(!FileManager.default.fileExists(atPath: unknown))
    }
}

@Suite("sd_notify without libsystemd")
struct SystemdNotifyTests {
    @Test("READY=1 reaches $NOTIFY_SOCKET as one datagram; without NOTIFY_SOCKET nothing is sent")
    func ready() throws {
        let path = socketPath()
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer {
            close(fd)
            unlink(path)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        #expect(SystemdNotify.send("READY=1\nSTATUS=serving", environment: ["NOTIFY_SOCKET": path]))
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        #expect(count > 0)
        #expect(String(decoding: buffer.prefix(max(0, count)), as: UTF8.self) == "READY=1\nSTATUS=serving")
        #expect(!SystemdNotify.send("READY=1", environment: [:]))
    }
}

/// A test clock as the server reads it.
struct TestSessionClock: SessionClock {
    let clock: ManualClock
    var timestamp: Timestamp { clock.now }
}
