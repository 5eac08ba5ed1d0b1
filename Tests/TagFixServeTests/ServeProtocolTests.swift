import Foundation
import TagFixCore
import TagFixDevices
import TagFixReport
import TagFixScenarios
import TagFixServe
import Testing

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// Every event of the example site's scenario, replayed through the verifier.
func exampleEvents() throws -> [VerifierEvent] {
    let path = packageRoot + "/Examples/site/scenario.json"
    let scenario = try ScenarioLoader.load(path: path)
    let registry = try RegistryFile.parse(try TextFile.read(packageRoot + "/Examples/site/registry.csv"))
    var events: [VerifierEvent] = []
    ScenarioReplay.run(scenario, verifier: Verifier(policy: scenario.policy, registry: registry)) { events.append($0) }
    return events
}

@Suite("tagfix serve's protocol: commands in, classed JSON objects out")
struct ServeProtocolTests {
    @Test(
        "gpsd's commands parse",
        arguments: [
            (#"?WATCH={"enable":true};"#, ClientCommand.watch(enable: true)),
            (#"?WATCH={"enable":false};"#, .watch(enable: false)),
            (#"?WATCH={"enable":true,"json":true}"#, .watch(enable: true)),
            (#"?WATCH={"json":true};"#, .watch(enable: true)),
            ("?WATCH;", .watch(enable: nil)),
            ("?POLL;", .poll),
            ("  ?poll;  ", .poll),
            ("?DEVICES;", .devices),
            ("?VERSION;", .version),
            (#"?AUTH="s3cr;et";"#, .auth("s3cr;et")),
            ("?AUTH=plain;", .auth("plain")),
        ])
    func commands(_ text: String, _ expected: ClientCommand) throws {
        #expect(try ClientCommand.parse(text) == expected)
        #expect(try ClientCommand.parse(Array(text.utf8)) == expected)
    }

    @Test(
        "anything else is a ProtocolError with a message that says what to send",
        arguments: [
            "garbage", "WATCH;", "?BOGUS;", #"?WATCH={"enable":"yes"};"#, "?WATCH=[true];", #"?WATCH={"enable":tru;"#, "?POLL=1;",
            "?AUTH=;",
            #"?AUTH="unterminated;"#, "?", "",
        ])
    func garbage(_ text: String) {
        #expect(throws: ProtocolError.self) { try ClientCommand.parse(text) }
        do {
            _ = try ClientCommand.parse(text)
        } catch {
            #expect(!error.message.isEmpty)
            #expect(error.message.count < 200, "an error echoes at most an excerpt of the input: \(error.message)")
        }
    }

    @Test(
        "an error quotes what the client sent without its control characters (no forged line in a log or a reply)",
        arguments: ["?WA\nTCH;", "x\r\nSHUTDOWN", "?BOGUS\u{1B}[2J;", "\u{85}garbage"])
    func errorsQuoteNoControls(_ text: String) {
        do {
            _ = try ClientCommand.parse(text)
            Issue.record("\(text.debugDescription) was taken")
        } catch {
            #expect(!error.message.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "\(error.message)")
        }
    }

    @Test("bytes that are not UTF-8, and a command over the limit, are refused")
    func bytes() {
        #expect(throws: ProtocolError.self) { try ClientCommand.parse([0x3F, 0xFF, 0xFE]) }
        #expect(throws: ProtocolError.self) {
            try ClientCommand.parse(Array(repeating: UInt8(ascii: "?"), count: ClientCommand.maximumLength + 1))
        }
    }

    @Test("the framer splits at ; and newlines but not inside JSON, and the same however the bytes arrive")
    func framer() {
        let input = Array(#"?WATCH={"enable":true,"x":"a;b\"}"};?POLL;"#.utf8) + Array("\n?DEVICES\r\n\n;?VERSION;".utf8)
        var whole = CommandFramer()
        let pieces = whole.feed(input)
        let commands = pieces.compactMap { piece -> String? in
            guard case .command(let bytes) = piece else { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(commands == [#"?WATCH={"enable":true,"x":"a;b\"}"}"#, "?POLL", "?DEVICES", "?VERSION"])
        var trickle = CommandFramer()
        var oneByOne: [CommandFramer.Piece] = []
        for byte in input { oneByOne += trickle.feed([byte]) }
        #expect(oneByOne == pieces)
    }

    @Test("a 10 MB line is reported once as too long, never held, and the next command still works")
    func longLine() {
        var framer = CommandFramer()
        var pieces: [CommandFramer.Piece] = []
        let chunk = [UInt8](repeating: UInt8(ascii: "A"), count: 65_536)
        for _ in 0..<160 {
            pieces += framer.feed(chunk)
            #expect(framer.pendingCount <= ClientCommand.maximumLength)
        }
        pieces += framer.feed(Array("\n?POLL;".utf8))
        #expect(pieces == [.tooLong, .command(Array("?POLL".utf8))])
    }

    @Test("every VERDICT is verify --json's record with class and id in front, and decodes as the log's line does")
    func verdicts() throws {
        var state = ServeState(readers: ["mock"], gps: "mock")
        var count = 0
        for case .verdict(let verdict) in try exampleEvents() {
            count += 1
            let event = state.receive(verdict)
            #expect(event.kind == .verdict)
            #expect(event.id == count)
            let object = try JSONValue.parse(event.line)
            #expect(object["class"]?.string == "VERDICT")
            #expect(object["id"]?.double == Double(count))
            let record = SessionRecord(verdict).encoded()
            #expect(event.line.hasPrefix(#"{"class":"VERDICT","id":\#(count),"#))
            #expect("{" + event.line.dropFirst(#"{"class":"VERDICT","id":\#(count),"#.count) == record)
            let decoded = try SessionRecord(object, line: count)
            #expect(decoded.encoded() == record)
            #expect(object["reader"]?.string == verdict.scan.readerID)
        }
        #expect(count > 3)
        #expect(state.verdicts(since: 0).count == count)
        #expect(state.verdicts(since: count - 2).map(\.id) == [count - 1, count])
    }

    @Test("the history is bounded: the newest verdicts replay from any id, each tag keeps its last verdict for the map")
    func boundedHistory() throws {
        var state = ServeState(readers: ["r"], gps: nil, historyLimit: 3)
        var last: [String: String] = [:]
        var count = 0
        for _ in 0..<5 {
            for case .verdict(let verdict) in try exampleEvents() {
                let event = state.receive(verdict)
                count += 1
                last[SessionRecord(verdict).tagKey] = event.line
            }
        }
        #expect(state.history.count <= 6)
        for since in [0, count - 3, count - 1, count] {
            let ids = state.verdicts(since: since).map(\.id)
            #expect(ids.last == (since < count ? count : nil))
            #expect(ids == Array(ids.indices.map { (ids.first ?? 0) + $0 }), "ids in order without a gap")
            #expect(ids.count >= min(3, count - since))
        }
        #expect(state.lastByTag.mapValues(\.line) == last)
        #expect(Set(state.site.tags.map(\.key)) == Set(last.keys))
        for tag in state.site.tags {
            #expect(try JSONValue.parse(try #require(last[tag.key]))["verdict"]?.string == tag.status, "\(tag.key)")
        }
    }

    @Test("SCAN, FIX, READER and GPS objects carry their class first and parse as JSON")
    func devices() throws {
        var state = ServeState(readers: ["pn532_uart:/dev/ttyUSB0"], gps: "gpsd://localhost:2947")
        var classes: [String: Int] = [:]
        var events = try exampleEvents()
        events.insert(.reader(.ready(description: "PN532")), at: 0)
        events.append(.gps(.unavailable("gpsd stopped")))
        events.append(.reader(.disconnected(ReaderError(code: .io, message: "unplugged"))))
        for event in events {
            for out in state.observe(event, now: nil) {
                let object = try JSONValue.parse(out.line)
                let name = try #require(object["class"]?.string)
                #expect(out.line.hasPrefix(#"{"class":"\#(name)""#))
                classes[name, default: 0] += 1
            }
        }
        #expect(classes["SCAN"] == state.scans)
        #expect((classes["FIX"] ?? 0) > 0)
        let readerChanges = events.filter { event in
            switch event {
            case .reader(.ready), .reader(.failed), .reader(.disconnected): true
            default: false
            }
        }
        #expect(classes["READER"] == readerChanges.count)
        #expect(classes["GPS"] == 1)
        #expect(state.readers.first?.status == .removed)
        let poll = try JSONValue.parse(state.poll(now: nil))
        #expect(poll["class"]?.string == "POLL")
        #expect(poll["verdicts"]?.double == Double(state.lastID))
        let devices = try JSONValue.parse(state.devices)
        #expect(devices["devices"]?.array?.count == 2)
    }

    @Test("/metrics counts what happened, in Prometheus' text format")
    func metrics() throws {
        var state = ServeState(readers: ["r"], gps: nil)
        var verdicts: [String: Int] = [:]
        for event in try exampleEvents() {
            if case .verdict(let verdict) = event { verdicts[verdict.kind.name, default: 0] += 1 }
            _ = state.observe(event, now: nil)
        }
        let text = state.metrics(clients: ["socket": 3, "sse": 2], cutOff: 1, fixAge: 0.25)
        for (kind, count) in verdicts { #expect(text.contains("tagfix_verdicts_total{verdict=\"\(kind)\"} \(count)\n")) }
        #expect(text.contains("tagfix_clients{kind=\"socket\"} 3\n"))
        #expect(text.contains("tagfix_clients_cut_off_total 1\n"))
        #expect(text.contains("tagfix_fix_age_seconds 0.25\n"))
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            #expect(line.split(separator: " ").count == 2, "not a sample line: \(line)")
        }
    }

    @Test("HTTP request heads parse; broken ones are refused")
    func http() throws {
        let head = Array("GET /api/verdicts?since=12&token=a%20b HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t0k\r\n\r\n".utf8)
        #expect(HTTPRequest.headEnd(head) == head.count)
        #expect(HTTPRequest.headEnd(Array(head.dropLast(2))) == nil)
        let request = try HTTPRequest(head: head)
        #expect(request.method == "GET")
        #expect(request.path == "/api/verdicts")
        #expect(request.query["since"] == "12")
        #expect(request.query["token"] == "a b")
        #expect(request.bearerToken == "t0k")
        for bad in ["GET\r\n\r\n", "GET / SMTP\r\n\r\n", "GET x HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nno colon\r\n\r\n"] {
            #expect(throws: ProtocolError.self) { try HTTPRequest(head: Array(bad.utf8)) }
        }
    }

    /// RFC 9112 §9.3: HTTP/1.1 keeps the connection unless `close` is among its options,
    /// HTTP/1.0 only with `keep-alive`; options are comma-separated, without case, blanks
    /// around them ignored.
    @Test(
        "Connection's options decide whether a connection is kept",
        arguments: [
            ("HTTP/1.1", nil, true), ("HTTP/1.1", "keep-alive", true), ("HTTP/1.1", "close", false), ("HTTP/1.1", " CLOSE\t", false),
            ("HTTP/1.1", "keep-alive, close", false), ("HTTP/1.1", "Upgrade,\tClose", false), ("HTTP/1.1", "closed", true),
            ("HTTP/1.1", "", true), ("HTTP/1.0", nil, false), ("HTTP/1.0", "keep-alive", true), ("HTTP/1.0", " Keep-Alive ", true),
            ("HTTP/1.0", "keep-alives", false), ("HTTP/1.0", "Keep-Alive, close", false), ("HTTP/1.0", ",,keep-alive,", true),
        ] as [(String, String?, Bool)])
    func keepsAlive(_ version: String, _ connection: String?, _ kept: Bool) throws {
        let head = "GET / \(version)\r\nHost: x\r\n" + (connection.map { "Connection: \($0)\r\n" } ?? "") + "\r\n"
        #expect(try HTTPRequest(head: Array(head.utf8)).keepsAlive == kept)
    }

    /// The head Chromium 156 sent with the tap page's POST at a phone's viewport (captured from
    /// headless Chromium as Tests/Browser/phone_tap.py drives it; the benchmark's phones send it).
    @Test("a phone browser's tap head: its 16 headers by lower-case name, the cookie's token, kept alive")
    func browserHead() throws {
        let head = Array(
            ("POST /api/tap HTTP/1.1\r\nHost: 127.0.0.1:42671\r\nConnection: keep-alive\r\nContent-Length: 87\r\n"
                + "sec-ch-ua-platform: \"Android\"\r\nUser-Agent: Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 "
                + "(KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36\r\nsec-ch-ua: \"Not:A-Brand\";v=\"8\", \"Chromium\";v=\"156\"\r\n"
                + "Content-Type: application/json\r\nsec-ch-ua-mobile: ?1\r\nAccept: */*\r\nOrigin: http://127.0.0.1:42671\r\n"
                + "Sec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: cors\r\nSec-Fetch-Dest: empty\r\n"
                + "Accept-Encoding: gzip, deflate, br, zstd\r\nAccept-Language: en-US,en;q=0.9\r\n"
                + "Cookie: tagfix_token=bench-phone-tap-0123456789abcdef0123456789\r\n\r\n").utf8)
        #expect(HTTPRequest.headEnd(head) == head.count)
        let request = try HTTPRequest(head: head)
        #expect(request.method == "POST" && request.path == "/api/tap" && request.keepsAlive)
        #expect(request.headers.count == 16)
        #expect(request.contentLength == 87)
        #expect(request.headers["sec-ch-ua"] == #""Not:A-Brand";v="8", "Chromium";v="156""#)
        #expect(request.headers["user-agent"]?.hasSuffix("Mobile Safari/537.36") == true)
        #expect(request.headers["origin"] == "http://127.0.0.1:42671")
        #expect(PhoneCookie.token(cookieHeader: request.headers["cookie"], secure: false) == "bench-phone-tap-0123456789abcdef0123456789")
    }

    @Test(
        "--listen and --http: loopback alone without a token",
        arguments: [
            ("127.0.0.1:8080", true), ("localhost:1", true), ("[::1]:80", true), ("0.0.0.0:2948", false), ("192.168.1.5:80", false),
            ("[::]:80", false), ("[0:0:0:0:0:0:0:1]:80", true), ("[::ffff:127.0.0.1]:80", true), ("[::ffff:10.0.0.1]:80", false),
            ("127.0.0.256:80", false),
        ])
    func loopback(_ text: String, _ isLoopback: Bool) throws {
        let address = try ListenAddress(text)
        #expect(address.isLoopback == isLoopback)
        let open = ServeConfiguration(http: address, release: "t")
        if isLoopback {
            try open.check()
        } else {
            #expect(throws: ServeError.self) { try open.check() }
            try ServeConfiguration(http: address, token: "x", release: "t").check()
        }
    }

    /// systemd's default soft limit is 1024 (room for all 512), a shell's may be 256, a test's
    /// 80; an unlimited one (`Int.max`) or one the system does not say leaves the maximum.
    @Test(
        "the clients at once an open-file limit leaves room for",
        arguments: [
            (1024, 512), (576, 512), (575, 511), (256, 192), (80, 16), (72, 8), (20, 8), (Int.max, 512), (nil, 512),
        ] as [(Int?, Int)])
    func clientRoom(_ limit: Int?, _ room: Int) {
        #expect(EventServer.clientRoom(maximum: 512, openFileLimit: limit) == room)
    }

    @Test(
        "one address's share of the places, kept when the open-file limit leaves fewer",
        arguments: [(512, 128), (511, 127), (192, 48), (16, 4), (8, 2), (4, 2)])
    func addressRoom(_ room: Int, _ share: Int) {
        #expect(EventServer.addressRoom(perAddress: 128, maximum: 512, room: room) == share)
    }

    @Test("bad addresses are refused", arguments: ["8080", "host:", "host:99999", ":80", "[::1]80"])
    func badAddresses(_ text: String) {
        #expect(throws: ServeError.self) { try ListenAddress(text) }
    }

    @Test("the default socket: /run/tagfix for root, else $XDG_RUNTIME_DIR")
    func defaultSocket() {
        #expect(ServeConfiguration.defaultSocketPath(uid: 0, environment: [:]) == "/run/tagfix/tagfix.sock")
        #expect(
            ServeConfiguration.defaultSocketPath(uid: 1000, environment: ["XDG_RUNTIME_DIR": "/run/user/1000"])
                == "/run/user/1000/tagfix.sock")
        #expect(ServeConfiguration.defaultSocketPath(uid: 1000, environment: [:]) == "/tmp/tagfix-1000.sock")
    }
}
