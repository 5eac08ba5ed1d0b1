import Foundation
import Synchronization
import TagFixDevices
import TagFixServe
import TagFixSystem
import TagFixTesting
import Testing

/// Answers `/later` later: keeps each request and its reply handle for the test to answer.
private final class DeferringResponder: ServeResponder {
    let waiting = Mutex([(request: HTTPRequest, reply: HTTPReplyHandle)]())

    func answer(_ command: ClientCommand) -> [String] { [] }
    func verdicts(since id: Int) -> [ServeEvent] { [] }
    func devices() -> [ServeEvent] { [] }
    func respond(to request: HTTPRequest, stats: ServerStats) -> HTTPResponse { HTTPResponse(status: 200, body: "now\n") }

    func respond(to request: HTTPRequest, stats: ServerStats, reply: HTTPReplyHandle) -> HTTPAnswer {
        guard request.path == "/later" else { return .now(respond(to: request, stats: stats)) }
        waiting.withLock { $0.append((request, reply)) }
        return .later
    }

    var count: Int { waiting.withLock { $0.count } }
    func take() -> [(request: HTTPRequest, reply: HTTPReplyHandle)] { waiting.withLock { $0 } }
}

@Suite("tagfix serve's HTTP server: POST bodies and replies that come later, from other threads")
struct EventServerDeferredTests {
    /// A server on a free loopback port answering through `responder`, started, and its port.
    private static func started(_ responder: DeferringResponder) throws -> (EventServer, Int) {
        let server = try EventServer(
            ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "t"), responder: responder, log: { _ in })
        server.start()
        return (server, try #require(server.httpPort))
    }

    /// A client that asks for /later and is gone for good before its answer: its connection
    /// reset (a client that only half-closes still gets its answer, and keeps its slot until
    /// then). Returns once the responder holds its request and the server has let it go.
    private static func askAndLeave(port: Int, server: EventServer, responder: DeferringResponder) async throws {
        let gone = try Loopback.connect(port: port)
        let request = Array("GET /later HTTP/1.1\r\n\r\n".utf8)
        #expect(try gone.send(request[...]) == request.count)
        #expect(await eventually { responder.count == 1 })
        try gone.resetOnClose()
        try gone.close()
        #expect(await eventually { server.stats.clients["http", default: 0] == 0 })
    }

    @Test("many replies in flight at once, sent from other threads in reverse order: each client gets its own, with its own body echoed")
    func manyInFlight() async throws {
        let responder = DeferringResponder()
        let (server, port) = try Self.started(responder)
        let count = 40
        let clients = try (0..<count).map { index in
            let client = try SocketLineClient(port: port)
            let body = "tap \(index)"
            client.send(
                "POST /later HTTP/1.1\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            )
            return client
        }
        #expect(await eventually { responder.count == count })
        // A GET answered at once while they wait: the loop is not held up by them.
        let quick = try SocketLineClient(port: port)
        quick.send("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(await eventually { quick.closed })
        #expect(quick.lines.last == "now")
        #expect(clients.allSatisfy { !$0.closed && $0.lines.isEmpty }, "answered before the reply came")
        for (request, reply) in responder.take().reversed() {
            #expect(request.clientHost == "127.0.0.1")
            #expect(request.headers["content-type"] == "text/plain")
            let body = String(decoding: request.body, as: UTF8.self)
            DeviceThread.detach(name: "deferred reply") { reply.send(HTTPResponse(status: 200, body: "echo \(body)\n")) }
        }
        #expect(await eventually { clients.allSatisfy(\.closed) })
        for (index, client) in clients.enumerated() {
            #expect(client.lines.first?.hasPrefix("HTTP/1.1 200 OK") == true)
            #expect(client.lines.last == "echo tap \(index)", "\(client.lines)")
        }
        #expect(await eventually { server.stats.clients["http", default: 0] == 0 })
        await server.stop(reason: "over")
    }

    @Test("a reply for a client that has gone is dropped; one after the server stopped too; the server serves on")
    func clientGone() async throws {
        let responder = DeferringResponder()
        let (server, port) = try Self.started(responder)
        try await Self.askAndLeave(port: port, server: server, responder: responder)
        // Another client now holds the descriptor number the first one had: the late reply is not its.
        let next = try SocketLineClient(port: port)
        next.send("GET /later HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(await eventually { responder.count == 2 })
        let handles = responder.take()
        handles[0].reply.send(HTTPResponse(status: 500, body: "for the one that left\n"))
        handles[1].reply.send(HTTPResponse(status: 200, body: "yours\n"))
        #expect(await eventually { next.closed })
        #expect(next.lines.first?.hasPrefix("HTTP/1.1 200") == true, "\(next.lines)")
        #expect(next.lines.last == "yours")
        let last = try SocketLineClient(port: port)
        last.send("GET /later HTTP/1.1\r\n\r\n")
        #expect(await eventually { responder.count == 3 })
        await server.stop(reason: "over")
        #expect(await eventually { last.closed })
        responder.take()[2].reply.send(HTTPResponse(status: 200, body: "too late\n"))
        #expect(last.lines.isEmpty)
    }

    @Test("replies handed over together: each client gets its own, in one go; one whose client has gone is dropped, the rest written")
    func handedOverTogether() async throws {
        let responder = DeferringResponder()
        let (server, port) = try Self.started(responder)
        try await Self.askAndLeave(port: port, server: server, responder: responder)
        let clients = try (0..<5).map { index in
            let client = try SocketLineClient(port: port)
            client.send("GET /later HTTP/1.1\r\nConnection: close\r\nX-Tap: \(index)\r\n\r\n")
            return client
        }
        #expect(await eventually { responder.count == 6 })
        // The one that left first: its reply is dropped, and the others' still written.
        let replies = responder.take().map { waiting in
            (waiting.reply, HTTPResponse(status: 200, body: "for \(waiting.request.header("x-tap") ?? "the one that left")\n"))
        }
        DeviceThread.detach(name: "replies together") { HTTPReplyHandle.send(replies) }
        #expect(await eventually { clients.allSatisfy(\.closed) })
        for (index, client) in clients.enumerated() {
            #expect(client.lines.first?.hasPrefix("HTTP/1.1 200 OK") == true, "\(client.lines)")
            #expect(client.lines.last == "for \(index)", "\(client.lines)")
        }
        await server.stop(reason: "over")
    }

    @Test("POST end to end: a body over the limit 413, a body that never comes 408 on the server's clock, a responder without bodies 405")
    func postLimits() async throws {
        let clock = ManualClock()
        var configuration = ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "t")
        configuration.clock = TestSessionClock(clock: clock)
        configuration.bodyLimit = 64
        let responder = DeferringResponder()
        let server = try EventServer(configuration, responder: responder, log: { _ in })
        server.start()
        let port = try #require(server.httpPort)
        let big = try SocketLineClient(port: port)
        big.send("POST /later HTTP/1.1\r\nContent-Length: 65\r\n\r\n")
        #expect(await eventually { big.closed })
        #expect(big.lines.first?.hasPrefix("HTTP/1.1 413 Content Too Large") == true, "\(big.lines)")
        // A body far over the limit, sent whole at once: the client still reads its 413.
        let flood = try SocketLineClient(port: port)
        DeviceThread.detach(name: "flood") {
            flood.send("POST /later HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n" + String(repeating: "z", count: 1_000_000))
        }
        #expect(await eventually { flood.closed })
        #expect(flood.lines.first?.hasPrefix("HTTP/1.1 413 Content Too Large") == true, "\(flood.lines)")
        let slow = try SocketLineClient(port: port)
        slow.send("POST /later HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
        #expect(await eventually { server.stats.clients["http"] == 1 })
        clock.advance(by: configuration.clientTimeout)
        #expect(await eventually { slow.closed })
        #expect(slow.lines.first?.hasPrefix("HTTP/1.1 408") == true, "\(slow.lines)")
        #expect(responder.count == 0)
        await server.stop(reason: "over")

        let plain = try EventServer(
            ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "t"), responder: QuietResponder(), log: { _ in })
        plain.start()
        let post = try SocketLineClient(port: plain.httpPort)
        post.send("POST /api/tags HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
        #expect(await eventually { post.closed })
        #expect(post.lines.first == "HTTP/1.1 405 Method Not Allowed\r")
        #expect(post.lines.contains("Allow: GET, HEAD\r"))
        await plain.stop(reason: "over")
    }
}
