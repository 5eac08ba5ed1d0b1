import Foundation
import Synchronization
import TagFixCore
import Testing

@testable import TagFixServe

/// Answers as a session would, with lines a test can tell apart.
private struct ScriptedResponder: ServeResponder {
    func answer(_ command: ClientCommand) -> [String] {
        command == .devices ? [#"{"class":"DEVICES","devices":[]}"#] : [#"{"class":"POLL","active":0}"#]
    }
    func verdicts(since id: Int) -> [ServeEvent] {
        [ServeEvent(kind: .verdict, line: #"{"class":"VERDICT","id":\#(id + 1)}"#, id: id + 1)]
    }
    func devices() -> [ServeEvent] { [ServeEvent(kind: .reader, line: #"{"class":"READER"}"#)] }
    func respond(to request: HTTPRequest, stats: ServerStats) -> HTTPResponse { HTTPResponse(status: 200, body: "ok\n") }
}

private let start = Timestamp(nanosecondsSinceEpoch: 1_767_225_600_000_000_000)

/// A connection as the server makes it, on `start`.
private func connection(
    _ kind: ServeConnection.Kind, token: String? = nil, authenticated: Bool = true, bufferLimit: Int = 1 << 20
) -> ServeConnection {
    ServeConnection(
        kind: kind, name: "\(kind) client 1 (test)", authenticated: authenticated,
        settings: ServeConnection.Settings(token: token, release: "test", clientTimeout: .seconds(10), bufferLimit: bufferLimit),
        responder: ScriptedResponder(), now: start)
}

extension ServeConnection {
    /// Everything queued, as the socket would take it, written.
    mutating func drain() -> String {
        let text = String(decoding: pending, as: UTF8.self)
        wrote(unsent)
        return text
    }

    /// Lines queued (written), without their newlines.
    mutating func lines() -> [String] {
        drain().split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }
}

@Suite("tagfix serve's connection state machine: bytes in, actions and bytes out, no socket")
struct ServeConnectionTests {
    @Test("a socket client is greeted with VERSION and nothing else")
    func greeting() {
        var client = connection(.socket)
        let lines = client.lines()
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix(#"{"class":"VERSION""#) == true)
        #expect(!client.closeWhenFlushed)
        #expect(client.deadline == nil)
    }

    static let commandText = "?POLL;"

    @Test("a command split at any byte is answered once, when its end arrives", arguments: 0..<commandText.utf8.count)
    func partialCommand(split: Int) {
        var client = connection(.socket)
        _ = client.drain()
        let bytes = Array(Self.commandText.utf8)
        #expect(client.receive(bytes[..<split], now: start).isEmpty)
        #expect(client.unsent == 0, "answered before its end")
        #expect(client.receive(bytes[split...], now: start).isEmpty)
        #expect(client.lines() == [#"{"class":"POLL","active":0}"#])
    }

    @Test(
        "pipelined commands in one read are answered in order",
        arguments: [
            ("?POLL;?VERSION;\n?DEVICES;", ["POLL", "VERSION", "DEVICES"]),
            ("?DEVICES;\n\n?POLL;?POLL;", ["DEVICES", "POLL", "POLL"]),
            ("  ?VERSION;  ?POLL\n", ["VERSION", "POLL"]),
        ])
    func pipelined(input: String, classes: [String]) {
        var client = connection(.socket)
        _ = client.drain()
        #expect(client.receive(Array(input.utf8), now: start).isEmpty)
        let answered = client.lines().map { $0.dropFirst(#"{"class":""#.count).prefix { $0 != "\"" } }.map(String.init)
        #expect(answered == classes)
    }

    @Test(
        "garbage gets an ERROR object for each line, and the client stays open",
        arguments: [
            ([0xFF, 0x00, 0x3F, 0x0A] as [UInt8], 1),
            (Array("hello\n".utf8), 1),
            (Array("?NOPE;\n?WATCH={\"enable\":\"maybe\"};\n".utf8), 2),
            (Array("?POLL=1;?AUTH;\n".utf8), 2),
        ])
    func garbage(bytes: [UInt8], errors: Int) {
        var client = connection(.socket)
        _ = client.drain()
        #expect(client.receive(bytes, now: start).isEmpty)
        let lines = client.lines()
        #expect(lines.count == errors, "\(lines)")
        #expect(lines.allSatisfy { $0.hasPrefix(#"{"class":"ERROR""#) }, "\(lines)")
        #expect(!client.closeWhenFlushed)
    }

    @Test("a command over the limit is skipped to the end of its line with one ERROR; the next is answered")
    func overlongCommand() {
        var client = connection(.socket)
        _ = client.drain()
        let long = [UInt8](repeating: UInt8(ascii: "?"), count: ClientCommand.maximumLength * 3)
        _ = client.receive(long, now: start)
        _ = client.receive(long, now: start)
        _ = client.receive(Array("\n?POLL;\n".utf8), now: start)
        let lines = client.lines()
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.contains("longer than") == true)
        #expect(lines.last == #"{"class":"POLL","active":0}"#)
    }

    @Test("?WATCH asks the shell to add the client to the fan-out (once), with the devices; disabling takes it off")
    func watch() {
        var client = connection(.socket)
        _ = client.drain()
        #expect(client.receive(Array(#"?WATCH={"enable":true};"#.utf8), now: start) == [.watch(true)])
        #expect(client.watching)
        #expect(client.lines() == [#"{"class":"DEVICES","devices":[]}"#, ServeMessage.watch(enabled: true)])
        #expect(client.receive(Array(#"?WATCH={"enable":true};"#.utf8), now: start).isEmpty, "already watching")
        _ = client.drain()
        #expect(client.receive(Array(#"?WATCH={"enable":false};?WATCH;"#.utf8), now: start) == [.watch(false)])
        #expect(!client.watching)
        #expect(client.lines() == [ServeMessage.watch(enabled: false), ServeMessage.watch(enabled: false)])
    }

    @Test("with a token: commands but ?VERSION wait for ?AUTH; a wrong token is answered and the client closed once written")
    func token() {
        var client = connection(.socket, token: "s3cret", authenticated: false)
        _ = client.drain()
        _ = client.receive(Array(#"?WATCH={"enable":true};?VERSION;"#.utf8), now: start)
        var lines = client.lines()
        #expect(lines.first?.contains("needs a token first") == true)
        #expect(lines.last?.hasPrefix(#"{"class":"VERSION""#) == true)
        #expect(!client.watching)
        _ = client.receive(Array(#"?AUTH="s3cret";?WATCH={"enable":true};"#.utf8), now: start)
        lines = client.lines()
        #expect(lines.first == #"{"class":"AUTH","authenticated":true}"#)
        #expect(client.watching)

        var wrong = connection(.socket, token: "s3cret", authenticated: false)
        _ = wrong.drain()
        _ = wrong.receive(Array(#"?AUTH="guess";?POLL;"#.utf8), now: start)
        #expect(wrong.closeWhenFlushed)
        #expect(!wrong.isFinished, "closed before the refusal is written")
        #expect(wrong.lines() == [ServeMessage.error("wrong token; closing")])
        #expect(wrong.isFinished)
        #expect(wrong.receive(Array("?POLL;".utf8), now: start).isEmpty)
        #expect(wrong.unsent == 0, "heard after its refusal")
    }

    @Test("a command begun is due clientTimeout after its first byte; more bytes of it do not extend that; a finished one clears it")
    func commandTimeout() {
        var client = connection(.socket)
        _ = client.drain()
        _ = client.receive(Array("?POLL;\n?WATCH={\"ena".utf8), now: start)
        _ = client.drain()
        #expect(client.deadline == start.advanced(by: .seconds(10)))
        _ = client.receive(Array("ble\"".utf8), now: start.advanced(by: .seconds(4)))
        #expect(client.deadline == start.advanced(by: .seconds(10)))
        #expect(client.expire(now: start.advanced(by: .seconds(9))).isEmpty)
        #expect(client.unsent == 0)
        let actions = client.expire(now: start.advanced(by: .seconds(10)))
        #expect(actions == [.log("serve: socket client 1 (test) closed: it began a command and did not end it within 10 s")])
        #expect(client.lines().last?.contains("within 10 s") == true)
        #expect(client.isFinished)

        var quiet = connection(.socket)
        _ = quiet.receive(Array("?POL".utf8), now: start)
        _ = quiet.receive(Array("L;\n".utf8), now: start.advanced(by: .seconds(1)))
        #expect(quiet.deadline == nil, "a watcher that only reads is never due")
        #expect(quiet.expire(now: start.advanced(by: .seconds(3600))).isEmpty)
    }

    static let requestHead = "GET /api/verdicts?since=3&token=t HTTP/1.1\r\nHost: example\r\nUser-Agent: test\r\nConnection: close\r\n\r\n"

    /// A GET or HEAD that says it has a body: the body was left in the buffer and read as the
    /// next request on the kept connection (request smuggling behind a proxy that keeps its
    /// connection to serve). Now refused, the connection closed, nothing handed out.
    @Test(
        "a GET or HEAD with a body is refused and its connection closed: the body is never read as a request",
        arguments: [
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 62\r\n\r\n",
            "HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 62\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
        ])
    func getWithBody(head: String) {
        var client = connection(.http)
        let smuggled = "GET /api/verdicts HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n"
        let actions = client.receive(Array((head + smuggled).utf8), now: start)
        #expect(!actions.contains { if case .respond = $0 { true } else { false } }, "handed out: \(actions)")
        #expect(client.drain().hasPrefix("HTTP/1.1 400 "))
        #expect(client.closeWhenFlushed)
        #expect(client.receive(Array(smuggled.utf8), now: start).isEmpty, "read after the refusal")
    }

    @Test("a GET with Content-Length: 0 is answered as any GET")
    func getWithEmptyBody() throws {
        var client = connection(.http)
        let actions = client.receive(Array("GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".utf8), now: start)
        guard case .respond(let request) = try #require(actions.first) else {
            Issue.record("expected .respond, got \(actions)")
            return
        }
        #expect(request.path == "/x")
    }

    @Test("an HTTP head split at any byte is handed out once, when its blank line arrives", arguments: 0..<requestHead.utf8.count)
    func headSplit(split: Int) throws {
        var client = connection(.http)
        let bytes = Array(Self.requestHead.utf8)
        #expect(client.receive(bytes[..<split], now: start).isEmpty)
        let actions = client.receive(bytes[split...], now: start)
        guard case .respond(let request) = try #require(actions.first), actions.count == 1 else {
            Issue.record("expected one .respond, got \(actions)")
            return
        }
        #expect(request.method == "GET")
        #expect(request.path == "/api/verdicts")
        #expect(request.query == ["since": "3", "token": "t"])
        #expect(request.headers["user-agent"] == "test")
        #expect(client.deadline == nil, "a request read is no longer due")
        #expect(client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start).isEmpty)
        #expect(client.drain().hasSuffix("\r\n\r\nok\n"))
        #expect(client.isFinished)
    }

    @Test(
        "refusals: an oversized head 431, garbage 400, another method 405, no token 401; each closed once written",
        arguments: [
            ("GET / HTTP/1.1\r\nX: " + String(repeating: "y", count: 20_000), nil, 431),
            ("BREW /pot HTCPCP/1.0\r\n\r\n", nil, 400),
            ("\u{FF}\r\n\r\n", nil, 400),
            ("GET nopath HTTP/1.1\r\n\r\n", nil, 400),
            ("DELETE / HTTP/1.1\r\n\r\n", nil, 405),
            ("GET /metrics HTTP/1.1\r\n\r\n", "s3cret", 401),
            ("GET /metrics HTTP/1.1\r\nAuthorization: Bearer guess\r\n\r\n", "s3cret", 401),
        ] as [(String, String?, Int)])
    func refusals(head: String, token: String?, status: Int) {
        var client = connection(.http, token: token)
        #expect(client.receive(Array(head.utf8), now: start).isEmpty)
        #expect(client.drain().hasPrefix("HTTP/1.1 \(status) "))
        #expect(client.isFinished)
        #expect(client.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start).isEmpty, "heard after its answer")
    }

    @Test("with a token, /healthz needs none and the bearer token or ?token= lets a request through")
    func httpToken() {
        for head in [
            "GET /healthz HTTP/1.1\r\n\r\n", "GET /metrics HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n",
            "GET /metrics?token=s3cret HTTP/1.1\r\n\r\n",
        ] {
            var client = connection(.http, token: "s3cret")
            let actions = client.receive(Array(head.utf8), now: start)
            #expect(actions.count == 1, "\(head): \(actions)")
        }
    }

    @Test("HEAD gets GET's head and no body")
    func head() {
        var client = connection(.http)
        _ = client.receive(Array("HEAD /healthz HTTP/1.1\r\n\r\n".utf8), now: start)
        _ = client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start)
        let text = client.drain()
        #expect(text.contains("Content-Length: 3\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
    }

    @Test("a head that never ends gets 408 at clientTimeout after the connection, not before")
    func headTimeout() {
        var client = connection(.http)
        _ = client.receive(Array("GET /api/ta".utf8), now: start.advanced(by: .seconds(5)))
        #expect(client.deadline == start.advanced(by: .seconds(10)))
        #expect(client.expire(now: start.advanced(by: .seconds(9))).isEmpty)
        #expect(client.expire(now: start.advanced(by: .seconds(10))).count == 1)
        #expect(client.drain().hasPrefix("HTTP/1.1 408 "))
        #expect(client.isFinished)
    }

    @Test("/events: the stream's head, the devices, the verdicts after Last-Event-ID; the stream stays open")
    func events() {
        var client = connection(.http)
        let actions = client.receive(Array("GET /events HTTP/1.1\r\nLast-Event-ID: 4\r\n\r\n".utf8), now: start)
        #expect(actions == [.streamOpened])
        #expect(client.kind == .events)
        let text = client.drain()
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"))
        #expect(
            text.hasSuffix(
                "event: reader\ndata: {\"class\":\"READER\"}\n\nevent: verdict\nid: 5\ndata: {\"class\":\"VERDICT\",\"id\":5}\n\n"))
        #expect(!client.closeWhenFlushed)
        #expect(client.receive(Array("more".utf8), now: start).isEmpty)
        _ = client.shutdown(reason: "over")
        #expect(client.drain().hasPrefix("event: shutdown\n"))
        #expect(client.isFinished)
    }

    @Test(
        "a client that never reads is cut off once its unread output would pass the limit, and nothing more happens to it",
        arguments: [1, 100, 4096])
    func neverReads(lineSize: Int) {
        let limit = 64 * 1024
        var client = connection(.socket, bufferLimit: limit)
        let line = [UInt8](repeating: UInt8(ascii: "x"), count: lineSize - 1) + [10]
        var queued = client.unsent
        var actions: [ServeConnection.Action] = []
        while actions.isEmpty {
            actions = client.queue(line)
            if actions.isEmpty { queued += lineSize }
        }
        #expect(queued <= limit && queued + lineSize > limit)
        #expect(
            actions == [.cutOff("serve: socket client 1 (test) cut off: \(queued + lineSize) bytes unread, over the limit of \(limit)")])
        #expect(client.isCutOff)
        #expect(client.queue(line).isEmpty)
        #expect(client.receive(Array("?POLL;".utf8), now: start).isEmpty)
    }

    @Test("a client that reads keeps up: what it took is forgotten and it is never cut off")
    func reads() {
        var client = connection(.socket, bufferLimit: 1024)
        let line = [UInt8](repeating: UInt8(ascii: "x"), count: 99) + [10]
        for _ in 0..<1000 {
            #expect(client.queue(line).isEmpty)
            client.wrote(min(client.unsent, 150))
        }
        #expect(!client.isCutOff)
    }

    @Test("stopping: a socket client gets SHUTDOWN, an HTTP client mid-request is simply closed")
    func shutdown() {
        var socket = connection(.socket)
        _ = socket.drain()
        _ = socket.shutdown(reason: "bye")
        #expect(socket.lines().first?.hasPrefix(#"{"class":"SHUTDOWN""#) == true)
        #expect(socket.isFinished)
        var http = connection(.http)
        _ = http.receive(Array("GET /".utf8), now: start)
        _ = http.shutdown(reason: "bye")
        #expect(http.unsent == 0)
        #expect(http.isFinished)
    }
}

@Suite("tagfix serve's connection state machine: POST and PUT bodies, deferred replies")
struct ServeConnectionBodyTests {
    static let post =
        "POST /t/tag-7?x=1 HTTP/1.1\r\nHost: field.example\r\nOrigin: https://field.example\r\n"
        + "Cookie: tagfix=abc; theme=dark\r\nUser-Agent: phone\r\nContent-Type: application/json\r\nContent-Length: 24\r\n\r\n"
        + #"{"lat":52.5,"lon":13.40}"#

    private static func handedOut(_ actions: [ServeConnection.Action]) -> HTTPRequest? {
        guard actions.count == 1, case .respond(let request) = actions[0] else { return nil }
        return request
    }

    @Test(
        "a POST split at any byte (head or body) is handed out once, its body whole, with its headers and client",
        arguments: 0..<post.utf8.count)
    func postSplit(split: Int) throws {
        var client = ServeConnection(
            kind: .http, name: "HTTP client 1 (test)", clientAddress: "192.0.2.7:50000", authenticated: true,
            settings: ServeConnection.Settings(release: "test"), responder: ScriptedResponder(), now: start)
        let bytes = Array(Self.post.utf8)
        #expect(client.receive(bytes[..<split], now: start).isEmpty)
        let request = try #require(Self.handedOut(client.receive(bytes[split...], now: start)))
        #expect(request.method == "POST")
        #expect(request.path == "/t/tag-7")
        #expect(request.body == Array(#"{"lat":52.5,"lon":13.40}"#.utf8))
        #expect(request.cookies == ["tagfix": "abc", "theme": "dark"])
        #expect(request.headers["origin"] == "https://field.example")
        #expect(request.headers["host"] == "field.example")
        #expect(request.headers["user-agent"] == "phone")
        #expect(request.headers["content-type"] == "application/json")
        #expect(request.clientAddress == "192.0.2.7:50000")
        #expect(request.clientHost == "192.0.2.7")
        #expect(client.unsent == 0)
    }

    /// Framing two readers could take differently (a proxy in front, and serve) is refused with
    /// 400 and the connection ends: a request smuggled after the body is never answered. Before,
    /// the last `Content-Length` counted, and the bytes after the shorter body were served as a
    /// request of their own.
    @Test(
        "two different Content-Lengths, or a space before a header's colon: 400, closed, nothing after it served",
        arguments: [
            "Content-Length: 70\r\nContent-Length: 2\r\n", "Content-Length: 2\r\nContent-Length: 70\r\n",
            "Content-Length : 2\r\n", "Content-Length\t: 2\r\n", "Content-Length: 2\r\nTransfer-Encoding : chunked\r\n",
        ])
    func smuggling(_ framing: String) {
        var client = connection(.http)
        let smuggled = "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"
        let actions = client.receive(Array(("POST /api/tap HTTP/1.1\r\nHost: h\r\n" + framing + "\r\n{}" + smuggled).utf8), now: start)
        #expect(Self.handedOut(actions) == nil, "no request is handed out")
        let sent = client.drain()
        #expect(sent.hasPrefix("HTTP/1.1 400 "), "\(sent)")
        #expect(sent.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer, not one for the smuggled GET")
        #expect(client.isFinished)
    }

    @Test("a client's side that ends while its request is being answered: the answer is still written, then the connection closes")
    func inputEndedWhileAnswering() throws {
        var client = connection(.http)
        _ = try #require(Self.handedOut(client.receive(Array("POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}".utf8), now: start)))
        let kept = client.inputEnded()
        #expect(kept, "kept for its answer")
        #expect(!client.isFinished)
        let more = client.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start)
        #expect(more.isEmpty, "nothing more is heard")
        _ = client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start)
        let sent = client.drain()
        #expect(sent.hasPrefix("HTTP/1.1 200 OK") && sent.contains("Connection: close"), "\(sent)")
        #expect(client.isFinished)
    }

    @Test("a client's side that ends with nothing to answer or write: closed at once")
    func inputEndedIdle() {
        var idle = connection(.http)
        let idleKept = idle.inputEnded()
        #expect(!idleKept)
        var midBody = connection(.http)
        let handed = midBody.receive(Array("POST /x HTTP/1.1\r\nContent-Length: 9\r\n\r\n{}".utf8), now: start)
        #expect(handed.isEmpty)
        let midBodyKept = midBody.inputEnded()
        #expect(!midBodyKept, "a request whose body never came is not answered")
    }

    @Test("the same Content-Length twice is one length")
    func repeatedLength() throws {
        var client = connection(.http)
        let request = try #require(
            Self.handedOut(
                client.receive(Array("POST /x HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}".utf8), now: start)))
        #expect(request.body == Array("{}".utf8))
    }

    @Test("bytes after the body are not read; a POST or PUT without Content-Length has an empty body")
    func bodyBounds() throws {
        var client = connection(.http)
        let request = try #require(
            Self.handedOut(client.receive(Array("PUT /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcdef".utf8), now: start)))
        #expect(request.body == Array("abc".utf8))
        #expect(client.receive(Array("more".utf8), now: start).isEmpty)
        var empty = connection(.http)
        let bare = try #require(Self.handedOut(empty.receive(Array("POST /x HTTP/1.1\r\n\r\n".utf8), now: start)))
        #expect(bare.body.isEmpty)
    }

    @Test(
        "a body over the limit gets 413, a malformed length 400, a chunked body 411; each closed once written, nothing handed out",
        arguments: [
            ("Content-Length: 101", 413), ("Content-Length: 99999999999999999999", 400), ("Content-Length: abc", 400),
            ("Content-Length: -1", 400), ("Content-Length: 1e3", 400), ("Content-Length: ", 400), ("Content-Length: +5", 400),
            ("Transfer-Encoding: chunked", 411),
        ])
    func refusedBodies(header: String, status: Int) {
        var client = ServeConnection(
            kind: .http, name: "HTTP client 1 (test)", authenticated: true,
            settings: ServeConnection.Settings(release: "test", bodyLimit: 100), responder: ScriptedResponder(), now: start)
        #expect(client.receive(Array("POST /tap HTTP/1.1\r\n\(header)\r\n\r\n".utf8), now: start).isEmpty)
        #expect(client.drain().hasPrefix("HTTP/1.1 \(status) "))
        #expect(client.isFinished)
    }

    @Test("a body of exactly the limit is read")
    func bodyAtLimit() throws {
        var client = ServeConnection(
            kind: .http, name: "HTTP client 1 (test)", authenticated: true,
            settings: ServeConnection.Settings(release: "test", bodyLimit: 100), responder: ScriptedResponder(), now: start)
        let head = Array("POST /tap HTTP/1.1\r\nContent-Length: 100\r\n\r\n".utf8)
        let request = try #require(Self.handedOut(client.receive(head + [UInt8](repeating: 7, count: 100), now: start)))
        #expect(request.body.count == 100)
    }

    @Test("a body that never comes gets 408 at clientTimeout after the connection; Expect: 100-continue is answered first")
    func bodyTimeout() {
        var client = connection(.http)
        let head = "POST /tap HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\nabc"
        #expect(client.receive(Array(head.utf8), now: start.advanced(by: .seconds(2))).isEmpty)
        #expect(client.drain() == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(client.deadline == start.advanced(by: .seconds(10)))
        #expect(client.expire(now: start.advanced(by: .seconds(9))).isEmpty)
        let actions = client.expire(now: start.advanced(by: .seconds(10)))
        #expect(actions == [.log("serve: http client 1 (test) closed: its request's body did not arrive within 10 s")])
        let text = client.drain()
        #expect(text.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
        #expect(text.hasSuffix("the request's body did not arrive within 10 s\n"))
        #expect(client.isFinished)
    }

    @Test("a deferred reply: nothing is written until it comes; it is written once, a second one and one unasked for are ignored")
    func deferred() throws {
        var client = connection(.http)
        var stray = connection(.http)
        #expect(stray.reply(HTTPResponse(status: 200, body: "?\n"), now: start).isEmpty)
        #expect(stray.unsent == 0, "a reply nobody asked for was written")
        _ = try #require(Self.handedOut(client.receive(Array("GET /later HTTP/1.1\r\nConnection: close\r\n\r\n".utf8), now: start)))
        #expect(client.unsent == 0)
        #expect(!client.isFinished)
        #expect(client.deadline == nil, "a request waiting for its reply is not the client's fault")
        #expect(client.expire(now: start.advanced(by: .seconds(3600))).isEmpty)
        #expect(client.reply(HTTPResponse(status: 202, body: "later\n"), now: start).isEmpty)
        #expect(client.reply(HTTPResponse(status: 500, body: "again\n"), now: start).isEmpty)
        let text = client.drain()
        #expect(text.hasPrefix("HTTP/1.1 202 "))
        #expect(text.hasSuffix("\r\n\r\nlater\n"))
        #expect(client.isFinished)
    }

    @Test("the reply handle hands over its first response only, from any thread")
    func handle() async {
        let got = Mutex([Int]())
        let handle = HTTPReplyHandle { response in got.withLock { $0.append(response.status) } }
        #expect(handle.isPending)
        await withTaskGroup(of: Void.self) { group in
            for status in 200..<232 { group.addTask { handle.send(HTTPResponse(status: status, body: "")) } }
        }
        #expect(got.withLock { $0.count } == 1)
        #expect(!handle.isPending)
    }

    /// A server as the handles see it: every hand-over it is given, in order.
    final class RecordedRoute: HTTPReplyRoute {
        let handedOver = Mutex<[[String]]>([])
        func deliver(_ replies: [(client: Int, response: HTTPResponse)]) {
            handedOver.withLock { $0.append(replies.map { "\($0.client):\($0.response.status)" }) }
        }
    }

    @Test("replies given together: one hand-over a server, in order, each handle's first answer only; a handle of its own is called itself")
    func handsOverTogether() {
        let (one, two) = (RecordedRoute(), RecordedRoute())
        let handles = (0..<6).map { HTTPReplyHandle(server: $0 % 3 == 2 ? two : one, client: $0) }
        let own = Mutex([Int]())
        let plain = HTTPReplyHandle { response in own.withLock { $0.append(response.status) } }
        // Answered already: skipped, as a second `send` would be.
        handles[1].send(HTTPResponse(status: 500, body: ""))
        plain.send(HTTPResponse(status: 201, body: ""))
        HTTPReplyHandle.send(
            (handles + [plain]).enumerated().map { ($0.element, HTTPResponse(status: 200 + $0.offset, body: "")) })
        #expect(one.handedOver.withLock { $0 } == [["1:500"], ["0:200", "3:203", "4:204"]])
        #expect(two.handedOver.withLock { $0 } == [["2:202", "5:205"]])
        #expect(own.withLock { $0 } == [201])
        #expect(handles.allSatisfy { !$0.isPending })
        // Sent again, together: nothing more.
        HTTPReplyHandle.send(handles.map { ($0, HTTPResponse(status: 299, body: "")) })
        #expect(one.handedOver.withLock { $0.count } == 2)
        #expect(two.handedOver.withLock { $0.count } == 1)
    }

    @Test("a responder without a deferred answer keeps GET's answer and refuses POST with 405 as before")
    func defaultResponder() {
        let handle = HTTPReplyHandle { _ in }
        var request = try? HTTPRequest(head: Array("POST / HTTP/1.1\r\n\r\n".utf8))
        guard case .now(let refused) = ScriptedResponder().respond(to: request!, stats: ServerStats(), reply: handle) else {
            Issue.record("not answered at once")
            return
        }
        #expect(refused.bytes == HTTPResponse.onlyGet.bytes)
        #expect(String(decoding: refused.bytes, as: UTF8.self).contains("Allow: GET, HEAD\r\n"))
        request?.method = "GET"
        guard case .now(let answer) = ScriptedResponder().respond(to: request!, stats: ServerStats(), reply: handle) else { return }
        #expect(answer.status == 200)
    }
}

@Suite("tagfix serve's connection state machine under random input")
struct ServeConnectionRandomInputTests {

    /// Bytes that look like the protocols often enough to reach their deep states.
    static let fragments: [[UInt8]] = [
        "?POLL;", "?WATCH={\"enable\":true};", "?WATCH={\"enable\":false}\n", "?AUTH=\"x\";", "?DEVICES;", "\n", ";", "{", "\"",
        "GET / HTTP/1.1\r\n", "POST /t HTTP/1.1\r\n", "Content-Length: 5\r\n", "Content-Length: 99999\r\n", "Expect: 100-continue\r\n",
        "\r\n", "Host: a\r\n", "GET /events HTTP/1.1\r\n",
    ].map { Array($0.utf8) }

    @Test(
        "random bytes and fragments, split anywhere, with reads, timeouts and replies between: no trap, output within its limit",
        arguments: 1...40)
    func random(seed: Int) {
        var random = SeededGenerator(seed: UInt64(seed))  // SplitMix64: a failure is repeated by its seed
        let limit = 4096
        for kind in [ServeConnection.Kind.socket, .http] {
            var client = ServeConnection(
                kind: kind, name: "client", authenticated: seed % 2 == 0,
                settings: ServeConnection.Settings(token: "x", release: "t", bufferLimit: limit, bodyLimit: 64),
                responder: ScriptedResponder(),
                now: start)
            var now = start
            for _ in 0..<200 {
                var bytes: [UInt8] = []
                if Bool.random(using: &random) {
                    bytes = Self.fragments.randomElement(using: &random)!
                } else {
                    for _ in 0..<Int.random(in: 1...32, using: &random) { bytes.append(UInt8.random(in: 0...255, using: &random)) }
                }
                var actions = client.receive(bytes, now: now)
                switch Int.random(in: 0..<6, using: &random) {
                case 0: client.wrote(Int.random(in: 0...client.unsent, using: &random))
                case 1:
                    now = now.advanced(by: .seconds(Int.random(in: 0...12, using: &random)))
                    actions += client.expire(now: now)
                case 2: actions += client.reply(HTTPResponse(status: 200, body: "ok\n"), now: now)
                case 3: actions += client.queue(Array("{\"class\":\"VERDICT\"}\n".utf8))
                default: break
                }
                #expect(client.unsent <= limit)
                if actions.contains(where: { if case .cutOff = $0 { true } else { false } }) || client.isFinished { break }
            }
        }
    }
}

/// A responder that checks tag pages' credentials itself, as `serve` does for phone taps.
private struct TapResponder: ServeResponder {
    func answer(_ command: ClientCommand) -> [String] { [] }
    func verdicts(since id: Int) -> [ServeEvent] { [] }
    func devices() -> [ServeEvent] { [] }
    func respond(to request: HTTPRequest, stats: ServerStats) -> HTTPResponse { HTTPResponse(status: 200, body: "ok\n") }
    func authenticatesItself(_ request: HTTPRequest) -> Bool { request.path.hasPrefix("/t/") }
}

@Suite("tagfix serve's connection state machine: requests the responder authenticates itself")
struct ServeConnectionSelfAuthenticationTests {
    func client(tokens: TokenRing? = nil) -> ServeConnection {
        var settings = ServeConnection.Settings(token: "s3cret-0123456789abcdef", release: "test")
        settings.tokens = tokens
        return ServeConnection(
            kind: .http, name: "HTTP client 1 (test)", authenticated: false, settings: settings, responder: TapResponder(), now: start)
    }

    @Test(
        "with a token set, a tag's page reaches the responder without the bearer token (its target kept as sent); the live page still needs it"
    )
    func tagPages() throws {
        var tap = client()
        let actions = tap.receive(Array("GET /t/E1?picc_data=AB&cmac=CD HTTP/1.1\r\nHost: h\r\n\r\n".utf8), now: start)
        guard case .respond(let request) = try #require(actions.first) else {
            Issue.record("expected .respond, got \(actions)")
            return
        }
        #expect(request.target == "/t/E1?picc_data=AB&cmac=CD")
        var live = client()
        #expect(live.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start).isEmpty)
        #expect(live.drain().hasPrefix("HTTP/1.1 401"))
    }

    @Test(
        "the 401 says what to do: a program sends the bearer token; with a token file (phones), a person opens the tech's link once, which sets a cookie on the phone"
    )
    func refusalSaysWhatToDo() {
        let ring = TokenRing(TokenFile(entries: [.init(name: "anna", token: "anna-0123456789abcdef")]))
        for tokens in [nil, ring] {
            var browser = client(tokens: tokens)
            #expect(browser.receive(Array("GET / HTTP/1.1\r\nHost: h\r\n\r\n".utf8), now: start).isEmpty)
            let answer = browser.drain()
            #expect(answer.hasPrefix("HTTP/1.1 401") && answer.contains("WWW-Authenticate: Bearer\r\n"), "\(answer)")
            #expect(answer.contains("a program: send Authorization: Bearer TOKEN, or ?token=TOKEN\n"), "\(answer)")
            let cookie = "open the link your site lead gave you (it ends in ?token=…) once. It sets a cookie on this phone"
            // Only a token file makes the link set a cookie: without one, the words would send a tech nowhere.
            #expect(answer.contains(cookie) == (tokens != nil), "\(answer)")
        }
    }

    @Test("with named tokens, any of them is the bearer token; one revoked is refused from then on")
    func namedTokens() throws {
        let ring = TokenRing(
            TokenFile(entries: [.init(name: "anna", token: "anna-0123456789abcdef"), .init(name: "ben", token: "ben-0123456789abcdef")]))
        for token in ["anna-0123456789abcdef", "ben-0123456789abcdef"] {
            var reader = client(tokens: ring)
            let actions = reader.receive(Array("GET / HTTP/1.1\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8), now: start)
            #expect(actions.count == 1, "\(token): \(actions)")
        }
        ring.replace(with: TokenFile(entries: [.init(name: "anna", token: "anna-0123456789abcdef")]))
        var revoked = client(tokens: ring)
        #expect(revoked.receive(Array("GET / HTTP/1.1\r\nAuthorization: Bearer ben-0123456789abcdef\r\n\r\n".utf8), now: start).isEmpty)
        #expect(revoked.drain().hasPrefix("HTTP/1.1 401"))
    }
}

@Suite("tagfix serve's connection state machine: HTTP/1.1 persistent connections")
struct ServeConnectionKeepAliveTests {
    static let idle = Duration.seconds(15)

    /// An HTTP connection as the server makes it on `start`, answering at most `maximumRequests`.
    static func client(maximumRequests: Int = 1000, bodyLimit: Int = 16 * 1024) -> ServeConnection {
        ServeConnection(
            kind: .http, name: "HTTP client 1 (test)", authenticated: true,
            settings: ServeConnection.Settings(
                release: "test", clientTimeout: .seconds(10), bodyLimit: bodyLimit, idleTimeout: idle, maximumRequests: maximumRequests),
            responder: ScriptedResponder(), now: start)
    }

    /// The requests an action list hands out.
    static func handedOut(_ actions: [ServeConnection.Action]) -> [HTTPRequest] {
        actions.compactMap { if case .respond(let request) = $0 { request } else { nil } }
    }

    static func tap(_ body: String, connection: String? = nil) -> [UInt8] {
        let option = connection.map { "Connection: \($0)\r\n" } ?? ""
        return Array("POST /api/tap HTTP/1.1\r\nHost: h\r\n\(option)Content-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
    }

    @Test("two taps on one connection: each answered `Connection: keep-alive`, otherwise the same bytes; the connection stays open")
    func twoTaps() throws {
        var client = Self.client()
        let first = Self.handedOut(client.receive(Self.tap("one"), now: start))
        #expect(first.map(\.body) == [Array("one".utf8)])
        #expect(client.reply(HTTPResponse(status: 200, body: "ok 1\n"), now: start).isEmpty)
        let answer = client.drain()
        var closing = HTTPResponse(status: 200, body: "ok 1\n")
        closing.headOnly = false
        #expect(
            answer
                == String(decoding: closing.bytes, as: UTF8.self).replacingOccurrences(
                    of: "Connection: close", with: "Connection: keep-alive"))
        #expect(!client.isFinished)
        #expect(client.deadline == start.advanced(by: Self.idle), "kept: it waits idleTimeout for the next request")
        let later = start.advanced(by: .seconds(3))
        let second = Self.handedOut(client.receive(Self.tap("two"), now: later))
        #expect(second.map(\.body) == [Array("two".utf8)])
        _ = client.reply(HTTPResponse(status: 200, body: "ok 2\n"), now: later)
        #expect(client.drain().hasSuffix("Connection: keep-alive\r\n\r\nok 2\n"))
        #expect(client.answered == 2)
        #expect(!client.isFinished)
    }

    @Test(
        "who asks to close is closed: HTTP/1.1 with Connection: close, HTTP/1.0 without keep-alive; HTTP/1.0 with keep-alive is kept",
        arguments: [
            ("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", false), ("GET / HTTP/1.1\r\nConnection: Upgrade, CLOSE\r\n\r\n", false),
            ("GET / HTTP/1.0\r\n\r\n", false), ("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
            ("GET / HTTP/1.1\r\n\r\n", true), ("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", true),
        ])
    func connectionHeader(head: String, kept: Bool) {
        var client = Self.client()
        #expect(Self.handedOut(client.receive(Array(head.utf8), now: start)).count == 1)
        _ = client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start)
        #expect(client.drain().contains(kept ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n"))
        #expect(client.isFinished == !kept)
        #expect(client.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start).count == (kept ? 1 : 0))
    }

    @Test("an error answer (status 400 or more) closes a connection that asked to be kept")
    func errorsClose() {
        var client = Self.client()
        _ = client.receive(Array("GET /nothing HTTP/1.1\r\n\r\n".utf8), now: start)
        _ = client.reply(HTTPResponse(status: 404, body: "no\n"), now: start)
        #expect(client.drain().contains("\r\nConnection: close\r\n"))
        #expect(client.isFinished)
    }

    @Test("a kept connection idle for idleTimeout is closed without a word, not before; a request begun in time is due from its first byte")
    func idleTimeout() {
        var client = Self.client()
        _ = client.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start)
        let answered = start.advanced(by: .seconds(2))
        _ = client.reply(HTTPResponse(status: 200, body: "ok\n"), now: answered)
        _ = client.drain()
        #expect(client.expire(now: answered.advanced(by: Self.idle - .seconds(1))).isEmpty)
        #expect(!client.isFinished)
        #expect(client.expire(now: answered.advanced(by: Self.idle)).isEmpty, "an idle close is not logged")
        #expect(client.unsent == 0, "nothing is said to an idle connection")
        #expect(client.isFinished)

        var slow = Self.client()
        _ = slow.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start)
        _ = slow.reply(HTTPResponse(status: 200, body: "ok\n"), now: start)
        _ = slow.drain()
        let begun = start.advanced(by: .seconds(14))
        #expect(slow.receive(Array("GET /sl".utf8), now: begun).isEmpty)
        #expect(slow.deadline == begun.advanced(by: .seconds(10)), "the next head is due clientTimeout from its first byte")
        #expect(slow.expire(now: start.advanced(by: Self.idle)).isEmpty)
        #expect(!slow.isFinished, "closed as idle while its request was coming")
        _ = slow.expire(now: begun.advanced(by: .seconds(10)))
        #expect(slow.drain().hasPrefix("HTTP/1.1 408 "))
        #expect(slow.isFinished)
    }

    @Test("the per-connection cap: the maximumRequests-th answer says Connection: close and the connection is closed")
    func requestCap() {
        var client = Self.client(maximumRequests: 3)
        for index in 1...3 {
            #expect(Self.handedOut(client.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start)).count == 1, "request \(index)")
            _ = client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start)
            let text = client.drain()
            #expect(text.contains(index < 3 ? "Connection: keep-alive" : "Connection: close"), "answer \(index)")
            #expect(client.isFinished == (index == 3))
        }
        #expect(client.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start).isEmpty, "heard after its last answer")
    }

    @Test("garbage after a good request: the good one is answered and kept, the garbage gets 400 and the connection is closed")
    func garbageAfter() {
        var client = Self.client()
        #expect(Self.handedOut(client.receive(Self.tap("one") + Array("\u{FF}\u{FE}junk\r\n\r\n".utf8), now: start)).count == 1)
        #expect(client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start).isEmpty, "the garbage is no request")
        let text = client.drain()
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(text.contains("\r\n\r\nok\nHTTP/1.1 400 Bad Request\r\n"), "\(text)")
        #expect(client.isFinished)
    }

    @Test("pipelined requests (sent before the last answer) are served in order, each handed out once the one before is answered")
    func pipelined() throws {
        var client = Self.client()
        let bytes = Self.tap("one") + Array("GET /two HTTP/1.1\r\n\r\n".utf8) + Self.tap("three", connection: "close")
        for split in [0, 7, bytes.count / 2, bytes.count - 1] {
            var client = Self.client()
            var handed = Self.handedOut(client.receive(bytes[..<split], now: start))
            handed += Self.handedOut(client.receive(bytes[split...], now: start))
            #expect(handed.map(\.body) == [Array("one".utf8)], "split at \(split)")
        }
        var handed = Self.handedOut(client.receive(bytes, now: start))
        #expect(handed.map(\.path) == ["/api/tap"])
        handed = Self.handedOut(client.reply(HTTPResponse(status: 200, body: "1\n"), now: start))
        #expect(handed.map(\.path) == ["/two"])
        handed = Self.handedOut(client.reply(HTTPResponse(status: 200, body: "2\n"), now: start))
        #expect(handed.map(\.body) == [Array("three".utf8)])
        #expect(client.reply(HTTPResponse(status: 200, body: "3\n"), now: start).isEmpty)
        let text = client.drain()
        #expect(text.components(separatedBy: "HTTP/1.1 200 OK").count == 4)
        #expect(text.hasSuffix("Connection: close\r\n\r\n3\n"))
        #expect(text.range(of: "\n1\n")!.lowerBound < text.range(of: "\n2\n")!.lowerBound)
        #expect(client.isFinished)
    }

    @Test("a flood of pipelined requests is kept only up to a request's worth: the connection closes after the answer, the rest unread")
    func pipelineFlood() {
        var client = Self.client(bodyLimit: 1024)
        let one = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        #expect(Self.handedOut(client.receive(one, now: start)).count == 1)
        // While the first waits for its answer, a megabyte of requests more.
        var flood: [UInt8] = []
        for _ in 0..<(1 << 20) / one.count { flood += one }
        for chunk in stride(from: 0, to: flood.count, by: 65_536) {
            #expect(client.receive(flood[chunk..<min(flood.count, chunk + 65_536)], now: start).isEmpty)
        }
        let actions = client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start)
        #expect(actions.isEmpty, "a request of the flood was served: \(actions.count)")
        #expect(client.drain().contains("Connection: close"))
        #expect(client.isFinished)
    }

    @Test("a pipelined flood within the limit is served one answer at a time, and the cap still ends the connection")
    func pipelinedCap() {
        var client = Self.client(maximumRequests: 5)
        let one = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        var handed = Self.handedOut(client.receive(Array((0..<50).map { _ in one }.joined()), now: start)).count
        var answers = 0
        while handed > 0 {
            handed = Self.handedOut(client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start)).count
            answers += 1
        }
        #expect(answers == 5)
        #expect(client.drain().components(separatedBy: "HTTP/1.1 200 OK").count == 6)
        #expect(client.isFinished)
    }

    @Test("a server that stops while a kept connection's answer is pending answers it with Connection: close")
    func stopping() {
        var client = Self.client()
        _ = client.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), now: start)
        _ = client.shutdown(reason: "over")
        _ = client.reply(HTTPResponse(status: 200, body: "ok\n"), now: start)
        #expect(client.drain().contains("Connection: close"))
        #expect(client.isFinished)
    }
}

@Suite("HTTP request heads: the ASCII reading and the text reading agree")
struct HTTPHeadReadingTests {
    static func both(_ head: [UInt8]) -> (ascii: Result<HTTPRequest, ProtocolError>, text: Result<HTTPRequest, ProtocolError>) {
        (
            Result { () throws(ProtocolError) in try HTTPRequest(asciiHead: head) },
            Result { () throws(ProtocolError) in try HTTPRequest(text: head) }
        )
    }

    static func agree(_ head: [UInt8]) -> Bool {
        switch both(head) {
        case (.success(let a), .success(let b)): a == b
        case (.failure(let a), .failure(let b)): a.message == b.message
        default: false
        }
    }

    @Test(
        "the same fields or the same error",
        arguments: [
            "GET /api/verdicts?since=12&token=a%20b+c HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t0k\r\n\r\n",
            "POST /api/tap HTTP/1.1\r\nHost: h\r\nCookie: tagfix_token=abc; x=y\r\nContent-Length: 3\r\n\r\n",
            "GET / HTTP/1.0\nConnection:\tkeep-alive \t\n\n", "GET  /x   HTTP/1.1\r\r\nA: 1\rB:2\n\n", "get /X?a&b=&=c HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nX-Dup: 1\r\nx-dup: 2\r\n: empty name\r\nV: a:b:c\r\n\r\n", "GET / HTTP/1.1\r\n  Spaced-Name  :  v  \r\n\r\n",
            "GET\r\n\r\n", "GET / SMTP\r\n\r\n", "GET x HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nno colon\r\n\r\n", "\r\n\r\n", "",
            "GET / HTTP/1.1 extra\r\n\r\n", "GET\t/ HTTP/1.1\r\n\r\n", "GET / HTTP/1.\r\nA:\u{0}\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 2\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length : 1\r\n\r\n",
            "GET / HTTP/1.1\r\nX-A: a\rHost: evil\r\n\r\n", "GET / HTTP/1.1\r\nX-A: a\r\n Host: evil\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\tX: b\r\n\r\n",
        ])
    func fixed(head: String) {
        #expect(Self.agree(Array(head.utf8)), "\(Self.both(Array(head.utf8)))")
    }

    /// A header a proxy in front reads as part of another (after a bare CR, on a folded line),
    /// or a second Host: each was read as a Host of its own, the last one counting.
    @Test(
        "a Host injected by a bare CR or a folded line, or given twice, is refused",
        arguments: [
            ("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rHost: evil\r\n\r\n", HTTPRequest.bareCR),
            ("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n Host: evil\r\n\r\n", HTTPRequest.folded),
            ("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tHost: evil\r\n\r\n", HTTPRequest.folded),
            ("GET / HTTP/1.1\r\nHost: x\r\nHOST: evil\r\n\r\n", HTTPRequest.twoHosts),
            ("GET / HTTP/1.1\r\nHost: x\r\nX: ü\r\nhost: evil\r\n\r\n", HTTPRequest.twoHosts),
        ])
    func injectedHost(head: String, error: ProtocolError) {
        #expect(throws: error) { try HTTPRequest(head: Array(head.utf8)) }
        #expect(Self.agree(Array(head.utf8)))
    }

    @Test("random heads of ASCII fragments", arguments: 1...20)
    func random(seed: Int) {
        var random = SeededGenerator(seed: UInt64(seed))
        let fragments = [
            "GET", "POST", " ", "  ", "\t", "/", "/a", "?", "&", "=", "%20", "%zz", "+", "HTTP/1.1", "HTTP/1.0", "HTTP/2", "\r\n", "\n",
            "\r",
            ":", "Host", "Connection", "close", "X", "a", "Z",
        ]
        for _ in 0..<200 {
            let head = (0..<Int.random(in: 1...24, using: &random)).map { _ in fragments.randomElement(using: &random)! }.joined()
            #expect(Self.agree(Array(head.utf8)), "\(head.debugDescription): \(Self.both(Array(head.utf8)))")
        }
    }
}
