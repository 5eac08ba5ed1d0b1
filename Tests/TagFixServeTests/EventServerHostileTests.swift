import Foundation
import TagFixCore
import TagFixServe
import TagFixSystem
import TagFixTesting
import Testing

/// What a hostile review of `tagfix serve --http` found, over real sockets: each test fails
/// without its fix.
@Suite("tagfix serve's event server against hostile clients", .timeLimit(.minutes(2)))
struct EventServerHostileTests {
    static let alice = "alice-token-0123456789abcdef"
    static let bob = "bob-token-0123456789abcdef"

    static func ring() -> TokenRing {
        TokenRing(TokenFile(entries: [.init(name: "alice", token: alice), .init(name: "bob", token: bob)]))
    }

    @Test(
        "a revoked token's event stream and watching socket client are closed when the tokens are reloaded; another token's stream gets the next events"
    )
    func revokedTokenClosesItsStreams() async throws {
        let tokens = Self.ring()
        var configuration = ServeConfiguration(
            listen: try ListenAddress("127.0.0.1:0"), http: try ListenAddress("127.0.0.1:0"), release: "test")
        configuration.tokens = tokens
        let log = LogLines()
        let server = try EventServer(configuration, responder: QuietResponder(), log: log.add)
        server.start()
        let revoked = try SocketLineClient(port: server.httpPort)
        revoked.send("GET /events?token=\(Self.bob) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let kept = try SocketLineClient(port: server.httpPort)
        kept.send("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.alice)\r\n\r\n")
        let socket = try SocketLineClient(port: server.listenPort)
        socket.send(#"?AUTH="\#(Self.bob)";?WATCH={"enable":true};"#)
        #expect(await eventually { server.stats.clients["sse"] == 2 && socket.lines(ofClass: "WATCH").count == 1 })
        let first = ServeEvent(kind: .verdict, line: #"{"class":"VERDICT","id":1}"#, id: 1)
        server.broadcast([first])
        #expect(
            await eventually { [revoked, kept].allSatisfy { $0.lines.contains("id: 1") } && socket.lines(ofClass: "VERDICT").count == 1 })

        // bob is revoked (SIGHUP reloads the file without him).
        tokens.replace(with: TokenFile(entries: [.init(name: "alice", token: Self.alice)]))
        #expect(await eventually { revoked.closed && socket.closed }, "a revoked token's connections stay open")
        #expect(socket.lines(ofClass: "ERROR").last?.contains("revoked") == true, "\(socket.lines)")
        #expect(log.all.filter { $0.contains("revoked") }.count == 2, "\(log.all)")
        server.broadcast([ServeEvent(kind: .verdict, line: #"{"class":"VERDICT","id":2}"#, id: 2)])
        #expect(await eventually { kept.lines.contains("id: 2") })
        #expect(!kept.closed)
        #expect(!revoked.lines.contains("id: 2") && socket.lines(ofClass: "VERDICT").count == 1)
        await server.stop(reason: "over")
    }

    /// One request on a fresh connection; its answer's lines once the server has closed it.
    static func exchange(port: Int?, _ request: String) async throws -> [String] {
        let client = try SocketLineClient(port: port)
        client.send(request)
        _ = await eventually { client.closed }
        return client.lines
    }

    @Test(
        "without a token, a request whose Host is another site's name (DNS rebinding) gets 421; this machine's names and the --http address are served; with a token any name is"
    )
    func dnsRebinding() async throws {
        let server = try EventServer(
            ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "test"), responder: QuietResponder(), log: { _ in })
        server.start()
        let port = try #require(server.httpPort)
        for host in ["evil.example:\(port)", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example:\(port)", "10.0.0.5"] {
            for path in ["/api/verdicts?since=0", "/api/tags", "/events"] {
                let lines = try await Self.exchange(port: port, "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
                #expect(lines.first == "HTTP/1.1 421 Misdirected Request\r", "\(host) \(path): \(lines)")
                #expect(lines.last?.contains("--token") == true, "\(lines)")
            }
        }
        for host in ["127.0.0.1:\(port)", "localhost:\(port)", "LOCALHOST", "[::1]:\(port)", "127.0.0.2", "tagfix.localhost:\(port)", ""] {
            let head = host.isEmpty ? "" : "Host: \(host)\r\n"
            let lines = try await Self.exchange(port: port, "GET /api/tags HTTP/1.1\r\n\(head)Connection: close\r\n\r\n")
            #expect(lines.first == "HTTP/1.1 200 OK\r", "\(host): \(lines)")
        }
        await server.stop(reason: "over")

        // With a token, the token guards the server: a proxy's name is served to a client that has it.
        let guarded = try EventServer(
            ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), token: Self.alice, release: "test"), responder: QuietResponder(),
            log: { _ in })
        guarded.start()
        let lines = try await Self.exchange(
            port: guarded.httpPort,
            "GET /api/tags HTTP/1.1\r\nHost: tags.example.org\r\nAuthorization: Bearer \(Self.alice)\r\nConnection: close\r\n\r\n")
        #expect(lines.first == "HTTP/1.1 200 OK\r", "\(lines)")
        await guarded.stop(reason: "over")
    }

    @Test(
        "one address holds at most its share of the connections: one more from it is refused (503) and closed, its others stay open, and another address is served"
    )
    func connectionsPerAddress() async throws {
        var configuration = ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "test")
        configuration.maximumClientsPerAddress = 4
        let server = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        server.start()
        let port = try #require(server.httpPort)
        // Four connections that begin no request: none is idle between requests, none can be closed for room.
        let holders = try (0..<4).map { _ in try SocketLineClient(port: port, from: "127.0.0.2") }
        #expect(await eventually { server.stats.clients["http"] == 4 })
        let extra = try SocketLineClient(port: port, from: "127.0.0.2")
        extra.send("GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(await eventually { extra.closed })
        #expect(extra.lines.first == "HTTP/1.1 503 Service Unavailable\r", "\(extra.lines)")
        #expect(extra.lines.last?.contains("too many connections from 127.0.0.2") == true, "\(extra.lines)")
        let other = try SocketLineClient(port: port, from: "127.0.0.3")
        other.send("GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        #expect(await eventually { other.closed })
        #expect(other.lines.first == "HTTP/1.1 200 OK\r", "\(other.lines)")
        #expect(holders.allSatisfy { !$0.closed }, "the address's own connections were closed")
        // One of them gone, the address may connect again.
        holders[0].close()
        #expect(await eventually { server.stats.clients["http"] == 3 })
        let again = try SocketLineClient(port: port, from: "127.0.0.2")
        again.send("GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        #expect(await eventually { again.closed })
        #expect(again.lines.first == "HTTP/1.1 200 OK\r", "\(again.lines)")
        await server.stop(reason: "over")
    }
}
