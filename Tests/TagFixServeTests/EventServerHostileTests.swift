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
}
