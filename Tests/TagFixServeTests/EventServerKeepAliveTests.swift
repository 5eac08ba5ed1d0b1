import Foundation
import TagFixDevices
import TagFixServe
import TagFixTesting
import Testing

/// Answers every request with its method, path and body; `/later` from another thread.
private struct EchoResponder: ServeResponder {
    func answer(_ command: ClientCommand) -> [String] { [] }
    func verdicts(since id: Int) -> [ServeEvent] { [] }
    func devices() -> [ServeEvent] { [] }
    func respond(to request: HTTPRequest, stats: ServerStats) -> HTTPResponse { HTTPResponse(status: 200, body: "?\n") }

    func respond(to request: HTTPRequest, stats: ServerStats, reply: HTTPReplyHandle) -> HTTPAnswer {
        let answer = HTTPResponse(
            status: 200, body: "echo \(request.method) \(request.path) \(String(decoding: request.body, as: UTF8.self))\n")
        guard request.path == "/later" else { return .now(answer) }
        DeviceThread.detach(name: "later reply") { reply.send(answer) }
        return .later
    }
}

@Suite("tagfix serve's HTTP server: persistent connections over a real socket")
struct EventServerKeepAliveTests {
    static func tap(_ body: String, path: String = "/api/tap") -> String {
        "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    @Test(
        "two taps on one connection, a third at the cap closes it; Connection: close honoured; garbage after a good request closes; an idle connection closes on the server's clock"
    )
    func keepAlive() async throws {
        let clock = ManualClock()
        var configuration = ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "t")
        configuration.clock = TestSessionClock(clock: clock)
        configuration.keepAliveRequests = 3
        let server = try EventServer(configuration, responder: EchoResponder(), log: { _ in })
        server.start()
        let port = try #require(server.httpPort)

        let phone = try SocketLineClient(port: port)
        phone.send(Self.tap("one"))
        #expect(await eventually { phone.lines.contains("echo POST /api/tap one") })
        phone.send(Self.tap("two", path: "/later"))
        #expect(await eventually { phone.lines.contains("echo POST /later two") }, "\(phone.lines)")
        #expect(!phone.closed)
        #expect(server.stats.clients["http"] == 1, "the second tap came on the first's connection")
        phone.send(Self.tap("three"))
        #expect(await eventually { phone.closed }, "the third request, the cap, did not close the connection")
        #expect(phone.lines.filter { $0 == "Connection: keep-alive\r" }.count == 2, "\(phone.lines)")
        #expect(phone.lines.filter { $0 == "Connection: close\r" }.count == 1)
        #expect(phone.lines.last == "echo POST /api/tap three")

        let pipelined = try SocketLineClient(port: port)
        pipelined.send(Self.tap("a", path: "/later") + Self.tap("b") + "GET /c HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(await eventually { pipelined.closed }, "Connection: close was not honoured")
        #expect(pipelined.lines.filter { $0.hasPrefix("echo ") } == ["echo POST /later a", "echo POST /api/tap b", "echo GET /c "])

        let garbage = try SocketLineClient(port: port)
        garbage.send(Self.tap("good"))
        #expect(await eventually { garbage.lines.contains("echo POST /api/tap good") })
        garbage.send("\u{1}\u{2} not http\r\n\r\n")
        #expect(await eventually { garbage.closed }, "garbage after a good request left the connection open")
        #expect(garbage.lines.contains("HTTP/1.1 400 Bad Request\r"), "\(garbage.lines)")

        let idle = try SocketLineClient(port: port)
        idle.send("GET /first HTTP/1.1\r\n\r\n")
        #expect(await eventually { idle.lines.contains("echo GET /first ") })
        clock.advance(by: configuration.keepAliveTimeout - .seconds(1))
        idle.send("GET /second HTTP/1.1\r\n\r\n")
        #expect(await eventually { idle.lines.contains("echo GET /second ") }, "closed before it was idle for keepAliveTimeout")
        clock.advance(by: configuration.keepAliveTimeout)
        #expect(await eventually { idle.closed }, "an idle kept connection still holds its slot")
        #expect(idle.lines.last == "echo GET /second ", "something was said to an idle connection: \(idle.lines)")
        #expect(await eventually { server.stats.clients["http", default: 0] == 0 })
        await server.stop(reason: "over")
    }

    @Test("a full server closes a kept connection waiting for its next request to serve a new one")
    func fullServer() async throws {
        var configuration = ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "t")
        configuration.maximumClients = 2
        let server = try EventServer(configuration, responder: EchoResponder(), log: { _ in })
        server.start()
        let port = try #require(server.httpPort)
        let kept = try (0..<2).map { index in
            let client = try SocketLineClient(port: port)
            client.send("GET /kept\(index) HTTP/1.1\r\n\r\n")
            return client
        }
        #expect(await eventually { kept.allSatisfy { $0.lines.last?.hasPrefix("echo GET /kept") == true } })
        let newcomer = try SocketLineClient(port: port)
        newcomer.send("GET /new HTTP/1.1\r\n\r\n")
        #expect(await eventually { newcomer.lines.contains("echo GET /new ") }, "refused: \(newcomer.lines)")
        #expect(await eventually { kept.filter(\.closed).count == 1 })
        await server.stop(reason: "over")
    }
}
