// `TagFixBench phone-tap [TAPS] [--serve TAGFIX] [--rate R] [--sweep R1,R2,…|none] [--only serve]
// [--loads back-to-back,paced,bursts] [--floor PROGRAM] [--tokens N]`: phone taps the
// server verifies per second (the body parsed, the SUN and the position checked, the counter and
// the verdict on the disk before the answer), and the time from the POST to the answer, p50/p99,
// with N phones (200) tapping at once; beside a peer built the way the open SUN backends are
// (bench/sun_peer_flask.py: Flask and `cryptography`, no counter, writes nothing) checking the
// same SUN URLs in the same run, over HTTP on loopback.
//
// The URLs: N emulated NTAG 424 DNA tags (one a phone, each at its own spot), each read TAPS/N
// times through its ISO commands, so its SDM read counter rises tap by tap as a real tag's does.
// A phone taps its own tag's URLs one after another (a tap's counter must pass the last one).
//
// TagFix's rows:
//   http: `tagfix serve --http` (with --serve TAGFIX), POST /api/tap with the token's cookie, its
//     own group commits (PhoneTapGroups: the taps waiting share one counter transaction and one
//     log write + fsync); a `skipped` line when that serve has no /api/tap. Each phone taps from
//     a loopback address of its own, and serve is given `--tap-limit 1000000,1000000`: its
//     per-client limit (10 at once, then 1 a second) is for a tech's phone, and would refuse a
//     benchmark phone's back-to-back taps.
//   in-process, grouped: the same PhoneTapGroups, SQLiteSUNCounters and SessionLog, without HTTP.
//   in-process, per tap: PhoneTapHandler.handle and SessionLog.append one tap at a time (a
//     transaction and an fsync a tap: how serve committed before its group commits).
//   http, sweep: the same serve paced at rising rates (--sweep, 500 to 16,000 taps/s), three
//     seconds' worth each, until one it cannot keep up with: the highest rate whose p99 holds.
//   --tokens N: serve's token file holds N named tokens, the phones' the last of them (a site of
//     N techs, each with a link of their own); its rows say `tokens`. One unless told.
// Each phone keeps its connection from tap to tap (HTTP/1.1 persistent connections, as a browser
// does) and connects again when the server closes it, for TagFix and the peer alike; a row's
// `connections` counts the connections opened. The phones (TAGFIX_BENCH_PHONES, 200) share one
// event loop (PhoneLoad.swift) back to back and in bursts, as a load generator such as wrk does,
// so they take as little of the machine from the server as they can; paced, each has a thread of
// its own that sleeps to its tap's due time; TAGFIX_BENCH_PHONE_THREADS=1 puts every load on
// threads (the in-process rows always have a thread a phone).
// Every line is JSON (`bench":"phone-tap"`); the peer's in-process check rate is a line too.
import Foundation
import Glibc
import Synchronization
import TagFixCore
import TagFixCrypto
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixServe
import TagFixStore

// MARK: - The tags and their URLs

/// The benchmark's site: a tag a phone, their registry and keys, and every tap's URL.
struct PhoneTapSite {
    static let metaHex = "5D1A0B9C2E3F40516273849506A7B8C9"
    static let fileHex = "00112233445566778899AABBCCDDEEFF"
    static let meta = AES128Key(hex: metaHex)!
    static let file = AES128Key(hex: fileHex)!
    static let token = "bench-phone-tap-0123456789abcdef0123456789"
    let entries: [RegistryEntry]
    let spots: [Coordinate]
    /// urls[phone][tap]: that phone's tag's URLs, counters rising.
    let urls: [[String]]
    let names: SUNParameterNames
    let keys: SUNVerifier
    /// The phones' tags, kept for more taps (`bodies(tapsPerPhone:)`); their counters go on rising.
    let tags: [EmulatedNTAG424Tag]

    /// `origin`: where the tags' URLs point, `http://127.0.0.1:PORT` of the serve under test (a
    /// tap's URL is the page it is posted from: serve refuses one of another origin).
    init(phones: Int, tapsPerPhone: Int, origin: String) {
        var tags: [EmulatedNTAG424Tag] = []
        var entries: [RegistryEntry] = []
        var spots: [Coordinate] = []
        var urls: [[String]] = []
        var names = SUNParameterNames(piccData: "picc_data", cmac: "cmac")
        let keys = SUNVerifier(metaReadKey: Self.meta, fileReadKey: .fixed(Self.file), names: names)
        for phone in 0..<phones {
            let uid: [UInt8] = [0x04, 0x5A, UInt8(phone >> 8), UInt8(phone & 0xFF), 0x9C, 0x3D, 0x80]
            let (url, prepared) = try! NTAG424Provisioner.prepare(
                template:
                    "\(origin)/t/P\(phone)?picc_data=\(NTAG424Provisioner.piccPlaceholder)&cmac=\(NTAG424Provisioner.cmacPlaceholder)"
            )
            names = prepared
            let message = NDEFMessage(records: [.uri(url)]).encoded()
            let plan = try! NTAG424Provisioner(uid: uid, url: url, message: message, names: prepared, keys: keys)
            let tag = try! EmulatedNTAG424Tag(
                uid: uid, keys: [.zero, Self.file, Self.meta, .zero, .zero], ndefFile: plan.file, ndefSettings: plan.settings)
            let spot = Coordinate(validLatitude: 53.545 + Double(phone) * 0.001, longitude: 9.966)
            spots.append(spot)
            entries.append(
                RegistryEntry(
                    id: "P\(phone)", uid: try! TagUID(bytes: uid),
                    region: try! CircularRegion(center: spot, radius: 25, identifier: "P\(phone)"), name: nil,
                    sun: SUNSettings(keyName: "site", names: prepared)))
            urls.append((0..<tapsPerPhone).map { _ in Self.read(tag) })
            tags.append(tag)
        }
        self.tags = tags
        self.entries = entries
        self.spots = spots
        self.urls = urls
        self.names = names
        self.keys = keys
    }

    /// One tap of a phone on `tag`: the NDEF application and file selected, the file read (the
    /// tag mirrors a fresh counter and CMAC into it), its URL.
    static func read(_ tag: EmulatedNTAG424Tag) -> String {
        tag.reset()
        func apdu(_ command: [UInt8]) -> [UInt8] {
            guard case .data(let answer) = tag.transceive(command), answer.suffix(2) == [0x90, 0x00] else {
                fatalError("the emulated NTAG 424 DNA refused \(command)")
            }
            return Array(answer.dropLast(2))
        }
        _ = apdu([0x00, 0xA4, 0x04, 0x00, 0x07, 0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01, 0x00])
        _ = apdu([0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x04])
        let file = apdu([0x00, 0xB0, 0x00, 0x00, 0x00])
        let length = Int(file[0]) << 8 | Int(file[1])
        guard let url = try? NDEFMessage(bytes: Array(file[2..<2 + length])).firstURL else { fatalError("the tag's file holds no URL") }
        return url
    }

    /// More taps: each phone's next `tapsPerPhone` bodies, read from its tag (counters rising on
    /// from every URL read before).
    func bodies(tapsPerPhone: Int) -> [[String]] {
        tags.indices.map { phone in (0..<tapsPerPhone).map { _ in body(phone: phone, url: Self.read(tags[phone])) } }
    }

    /// The body a phone at its tag's spot posts (accuracy 8 m).
    func body(phone: Int, url: String) -> String {
        PhoneTapRequest(url: url, position: .fix(spots[phone], accuracy: 8)).body
    }
}

// MARK: - Phones tapping at once

/// The taps' times: each POST → answer in seconds, and the whole run's.
struct TapTimes {
    var latencies: [Double]
    var elapsed: Double
    var answered: Int
    var confirmed: Int

    func percentile(_ share: Double) -> Double {
        let sorted = latencies.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * share).rounded(.up)) - 1)]
    }
}

/// Runs `phones` threads at once, each tapping its own URLs in order through `tap` (true when
/// the answer was `confirmed`), after all have started: back to back, or with `rate`, at taps
/// per second for all the phones together, each phone's taps on a schedule of its own (open loop:
/// a tap's time runs from when it was due, so a server that falls behind is charged for it);
/// or, with `bursts`, in rounds: all the phones tap once together (each its next URL), and the
/// next round begins when every phone has its answer (200 phones tapping at once, again and again).
func tapAtOnce(
    phones: Int, urls: [[String]], rate: Double? = nil, bursts: Bool = false, tap: @escaping @Sendable (Int, String) -> Bool?
) -> TapTimes {
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)
    // Bursts: a phone's go for each round, and the round's answers counted back.
    let roundGo = (0..<phones).map { _ in DispatchSemaphore(value: 0) }
    let roundDone = DispatchSemaphore(value: 0)
    let rounds = urls.map(\.count).min() ?? 0
    let results = Mutex<(latencies: [Double], answered: Int, confirmed: Int)>(([], 0, 0))
    let clock = ContinuousClock()
    let base = Mutex<ContinuousClock.Instant>(clock.now)
    for phone in 0..<phones {
        let mine = bursts ? Array(urls[phone].prefix(rounds)) : urls[phone]
        DeviceThread.detach(name: "phone \(phone)") {
            ready.signal()
            go.wait()
            let begun = base.withLock { $0 }
            var times: [Double] = []
            var answered = 0
            var confirmed = 0
            for (index, url) in mine.enumerated() {
                if bursts { roundGo[phone].wait() }
                var start = clock.now
                if let rate {
                    let due = begun.advanced(by: .seconds((Double(phone) / Double(phones) + Double(index)) * Double(phones) / rate))
                    if due > start { usleep(UInt32(start.duration(to: due) / .microseconds(1))) }
                    start = due
                }
                let result = tap(phone, url)
                let took = start.duration(to: clock.now)
                times.append(Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18)
                if let result {
                    answered += 1
                    if result { confirmed += 1 }
                }
                if bursts { roundDone.signal() }
            }
            results.withLock {
                $0.latencies += times
                $0.answered += answered
                $0.confirmed += confirmed
            }
            finished.signal()
        }
    }
    for _ in 0..<phones { ready.wait() }
    let start = clock.now
    base.withLock { $0 = start }
    for _ in 0..<phones { go.signal() }
    if bursts {
        for _ in 0..<rounds {
            for next in roundGo { next.signal() }
            for _ in 0..<phones { roundDone.wait() }
        }
    }
    for _ in 0..<phones { finished.wait() }
    let took = start.duration(to: clock.now)
    let elapsed = Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18
    return results.withLock { TapTimes(latencies: $0.latencies, elapsed: elapsed, answered: $0.answered, confirmed: $0.confirmed) }
}

// MARK: - HTTP/1.1 on loopback

/// An HTTP/1.1 client to 127.0.0.1 (blocking: on its phone's thread), as a phone's browser is:
/// it keeps its connection for the next POST (HTTP/1.1 persistent connections) and connects
/// again when the server has closed it (its answer said `Connection: close`, or the connection
/// is found closed before an answer began, once); the answer read to its Content-Length.
final class LoopbackHTTPClient {
    private let port: UInt16
    private let source: String?
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []

    /// - Parameter source: the loopback address the connections come from (each phone its own,
    ///   127.0.x.y, as phones have their own addresses: a server's per-client limits apply per phone).
    init(port: UInt16, source: String? = nil) {
        self.port = port
        self.source = source
    }

    /// Phone `phone`'s loopback address: 127.0.x.y (all of 127/8 is loopback on Linux).
    static func source(phone: Int) -> String { "127.0.\(phone / 250).\(phone % 250 + 2)" }

    deinit { if fd >= 0 { close(fd) } }

    private func connectIfNeeded() -> Bool {
        if fd >= 0 { return true }
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketFD >= 0 else { return false }
        var one: Int32 = 1
        setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                close(socketFD)
                return false
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(socketFD)
            return false
        }
        fd = socketFD
        buffer = []
        connections += 1
        return true
    }

    /// Connections opened, and answers that said `Connection: close`.
    private(set) var connections = 0
    private(set) var closedByServer = 0

    /// POSTs `body` to `path` with the token's cookie; the status and the body, or nil when the
    /// connection failed (it is opened again on the next call). A kept connection the server
    /// closed before answering (its idle timeout) is opened again and the POST sent once more.
    func post(_ path: String, body: String, cookie: String) -> (status: Int, body: String)? {
        for attempt in 0..<2 {
            let reused = fd >= 0
            guard connectIfNeeded() else { return nil }
            switch exchange(path, body: body, cookie: cookie) {
            case .answer(let status, let answer, let keep):
                if !keep {
                    closedByServer += 1
                    disconnect()
                }
                return (status, answer)
            case .closedBeforeAnswer where reused && attempt == 0:
                disconnect()
            default:
                disconnect()
                return nil
            }
        }
        return nil
    }

    private func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
        buffer = []
    }

    private enum Exchange {
        case answer(status: Int, body: String, keepAlive: Bool)
        /// Nothing of an answer came: the connection was closed (or failed) first.
        case closedBeforeAnswer
        case failed
    }

    // The request's head, made once for a path and a cookie.
    private var head: (path: String, cookie: String, head: RequestHead)?
    // What a read takes into, kept from exchange to exchange.
    private var chunk = [UInt8](repeating: 0, count: 8192)

    // The client works on bytes, as a browser's network stack does: its own string handling
    // (Foundation's case-insensitive searches and trimming) was a tenth of the machine's CPU in
    // the phone-tap profile, taken from the server under test.
    private func exchange(_ path: String, body: String, cookie: String) -> Exchange {
        if head == nil || head!.path != path || head!.cookie != cookie {
            head = (path, cookie, Self.requestHead(path: path, port: port, cookie: cookie))
        }
        let request = head!.head.request(body: body)
        var sent = 0
        while sent < request.count {
            let wrote = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard wrote > 0 else { return .closedBeforeAnswer }
            sent += wrote
        }
        var headerEnd: Int?
        var contentLength = 0
        var status = 0
        var keepAlive = true
        var scanned = 0
        while true {
            if headerEnd == nil, let end = Self.headEnd(buffer, from: max(0, scanned - 3)) {
                headerEnd = end + 4
                (status, contentLength, keepAlive) = Self.parseHead(buffer[..<end])
            }
            scanned = buffer.count
            if let headerEnd, buffer.count >= headerEnd + contentLength {
                let answer = String(decoding: buffer[headerEnd..<headerEnd + contentLength], as: UTF8.self)
                buffer.removeFirst(headerEnd + contentLength)
                return .answer(status: status, body: answer, keepAlive: keepAlive)
            }
            let got = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard got > 0 else { return buffer.isEmpty ? .closedBeforeAnswer : .failed }
            buffer += chunk[..<got]
        }
    }

    /// A JSON POST's head to 127.0.0.1:`port` as a phone's browser sends it from the tap page:
    /// the headers, their order and their values that Chromium 156 sent for the page's `fetch`
    /// at a phone's viewport with a phone's user agent (captured from headless Chromium on this
    /// machine, as Tests/Browser/phone_tap.py drives it; no Referer, as the page's
    /// `Referrer-Policy: no-referrer` asks), 16 headers and some 610 bytes with the cookie.
    /// Made once for a path and a cookie; `RequestHead.request(body:)` puts the body's length in.
    static func requestHead(path: String, port: UInt16, cookie: String) -> RequestHead {
        RequestHead(
            beforeLength: Array("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: keep-alive\r\nContent-Length: ".utf8),
            afterLength: Array(
                ("\r\nsec-ch-ua-platform: \"Android\"\r\n"
                    + "User-Agent: Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36\r\n"
                    + "sec-ch-ua: \"Not:A-Brand\";v=\"8\", \"Chromium\";v=\"156\"\r\nContent-Type: application/json\r\n"
                    + "sec-ch-ua-mobile: ?1\r\nAccept: */*\r\nOrigin: http://127.0.0.1:\(port)\r\nSec-Fetch-Site: same-origin\r\n"
                    + "Sec-Fetch-Mode: cors\r\nSec-Fetch-Dest: empty\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n"
                    + "Accept-Language: en-US,en;q=0.9\r\nCookie: \(cookie)\r\n\r\n").utf8))
    }

    /// A request's head around its `Content-Length` value.
    struct RequestHead: Sendable {
        let beforeLength: [UInt8]
        let afterLength: [UInt8]

        /// The whole request: the head with `body`'s length, then `body`.
        func request(body: String) -> [UInt8] {
            var request = beforeLength
            request.reserveCapacity(beforeLength.count + afterLength.count + body.utf8.count + 8)
            request += "\(body.utf8.count)".utf8
            request += afterLength
            request += body.utf8
            return request
        }
    }

    /// Where "\r\n\r\n" begins in `bytes`, looking from `from`.
    static func headEnd(_ bytes: [UInt8], from: Int) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = from
        while index + 3 < bytes.count {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }

    /// An answer's head (its bytes before the blank line): the status, the Content-Length (0
    /// without one), and false when it says `Connection: close`.
    static func parseHead(_ head: ArraySlice<UInt8>) -> (status: Int, contentLength: Int, keepAlive: Bool) {
        func lower(_ byte: UInt8) -> UInt8 { byte >= 65 && byte <= 90 ? byte + 32 : byte }
        // The leading digits (at most 9: a length this client would never wait for is cut short).
        func number(_ bytes: ArraySlice<UInt8>) -> Int {
            var value = 0
            for byte in bytes.drop(while: { $0 == 32 || $0 == 9 }).prefix(9) {
                guard byte >= 48 && byte <= 57 else { break }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        func hasPrefix(_ line: ArraySlice<UInt8>, _ name: String) -> Bool {
            line.count >= name.utf8.count && zip(line, name.utf8).allSatisfy { lower($0) == $1 }
        }
        var status = 0
        var contentLength = 0
        var keepAlive = true
        var lineStart = head.startIndex
        var first = true
        while lineStart < head.endIndex {
            var lineEnd = lineStart
            while lineEnd < head.endIndex, head[lineEnd] != 13 { lineEnd += 1 }
            let line = head[lineStart..<lineEnd]
            if first {
                // "HTTP/1.1 200 OK": the digits after the first space.
                if let space = line.firstIndex(of: 32) { status = number(line[(space + 1)..<min(space + 4, line.endIndex)]) }
                first = false
            } else if hasPrefix(line, "content-length:") {
                contentLength = number(line.dropFirst(15))
            } else if hasPrefix(line, "connection:") {
                let value = line.dropFirst(11).map(lower)
                if value.indices.contains(where: { value[$0...].starts(with: "close".utf8) }) { keepAlive = false }
            }
            lineStart = min(lineEnd + 2, head.endIndex)
        }
        return (status, contentLength, keepAlive)
    }
}

/// Whether an answer's body holds `"verdict":"confirmed"`, looked for in its bytes.
func answerConfirmed(_ body: String) -> Bool { answerConfirmed(Array(body.utf8)[...]) }

/// Each phone's own client, made on its thread at its first tap.
final class PhoneClients: Sendable {
    private final class Slot: Sendable {
        let client = Mutex<LoopbackHTTPClient?>(nil)
    }
    // One client a phone, each only ever used on that phone's thread.
    private let clients: [Slot]
    /// The answers that were not 200, by status (0: no answer).
    let refused = Mutex<[Int: Int]>([:])
    private let port: UInt16

    init(phones: Int, port: UInt16) {
        clients = (0..<phones).map { _ in Slot() }
        self.port = port
    }

    func post(phone: Int, body: String) -> (status: Int, body: String)? {
        clients[phone].client.withLock { client in
            if client == nil { client = LoopbackHTTPClient(port: port, source: LoopbackHTTPClient.source(phone: phone)) }
            let answer = client!.post(PhoneTapRoute.postPath, body: body, cookie: "\(PhoneCookie.name)=\(PhoneTapSite.token)")
            if answer?.status != 200 { refused.withLock { $0[answer?.status ?? 0, default: 0] += 1 } }
            return answer
        }
    }

    /// The connections the phones opened (one each when every connection was kept throughout).
    var connections: Int { clients.reduce(0) { $0 + ($1.client.withLock { $0?.connections } ?? 0) } }

    /// The refusals as a JSON object's text: {"429":12}.
    var refusedJSON: String {
        "{" + refused.withLock { $0 }.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }
}

// MARK: - The phones over HTTP

/// Whether the phones are a thread each (`TAGFIX_BENCH_PHONE_THREADS=1`), as before the loop.
let phonesOnThreads = ProcessInfo.processInfo.environment["TAGFIX_BENCH_PHONE_THREADS"] == "1"

/// `phones` phones tap `bodies` at the server on `port`: back to back or in bursts on one event
/// loop (`LoopPhones`), paced (or with `TAGFIX_BENCH_PHONE_THREADS=1`) a thread each. The times, the answers that were not 200 as JSON, and the connections opened.
func tapOverHTTP(port: UInt16, phones: Int, bodies: [[String]], rate: Double?, bursts: Bool) -> (
    times: TapTimes, refused: String, connections: Int
) {
    func json(_ refused: [Int: Int]) -> String {
        "{" + refused.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }
    // Paced loads on threads (PhoneLoad.swift says why), the others on the loop.
    guard phonesOnThreads || rate != nil else {
        let loop = try! LoopPhones(phones: phones, port: port)
        defer { loop.close() }
        let (times, refused) = loop.run(bodies, load: bursts ? .bursts : .backToBack)
        return (times, json(refused), loop.connections)
    }
    let clients = PhoneClients(phones: phones, port: port)
    let times = tapAtOnce(phones: phones, urls: bodies, rate: rate, bursts: bursts) { phone, body in
        guard let answer = clients.post(phone: phone, body: body), answer.status == 200 else { return nil }
        return answerConfirmed(answer.body)
    }
    return (times, clients.refusedJSON, clients.connections)
}

// MARK: - The peer

/// bench/sun_peer_flask.py in a child process: started, its first line read, then stopped and
/// waited for (`stop`), so nothing of it outlives its run.
final class FlaskPeer {
    let process: ChildProcess
    private let output: FileHandle
    private var buffer = ""

    init?(python: String, arguments: [String]) {
        let pipe = Pipe()
        guard
            let process = try? BenchChildren.start(
                executable: python, arguments: ["bench/sun_peer_flask.py"] + arguments,
                standardOutput: pipe.fileHandleForWriting.fileDescriptor, standardError: FileHandle.standardError.fileDescriptor)
        else { return nil }
        try? pipe.fileHandleForWriting.close()
        self.process = process
        output = pipe.fileHandleForReading
    }

    /// Its next line, without the newline; nil once it has closed its output.
    func line() -> String? {
        while !buffer.contains("\n") {
            let chunk = output.availableData
            if chunk.isEmpty { return nil }
            buffer += String(decoding: chunk, as: UTF8.self)
        }
        guard let index = buffer.firstIndex(of: "\n") else { return nil }
        defer { buffer.removeSubrange(...index) }
        return String(buffer[..<index])
    }

    /// SIGTERM, up to a second's grace, then SIGKILL; returns once it has exited.
    func stop() { blockingStop(process) }
}

// MARK: - The benchmark

/// A result line.
func phoneTapLine(_ fields: [String: String]) -> String {
    "{" + fields.keys.sorted().map { "\"\($0)\":\(fields[$0]!)" }.joined(separator: ",") + "}"
}

func phoneTapRow(side: String, path: String, commits: String, times: TapTimes, rate: Double?, extra: [String: String] = [:]) -> String {
    var fields: [String: String] = [
        "load": rate == nil ? "\"back-to-back\"" : "\"paced\"",
        "bench": "\"phone-tap\"", "side": "\"\(side)\"", "path": "\"\(path)\"", "commits": "\"\(commits)\"",
        "taps": "\(times.latencies.count)", "answered": "\(times.answered)", "confirmed": "\(times.confirmed)",
        "phones_at_once": "\(phoneCount)", "seconds": String(format: "%.3f", times.elapsed),
        "per_second": String(format: "%.1f", Double(times.answered) / times.elapsed),
        "p50_ms": String(format: "%.3f", times.percentile(0.5) * 1000), "p99_ms": String(format: "%.3f", times.percentile(0.99) * 1000),
        "max_ms": String(format: "%.3f", (times.latencies.max() ?? .nan) * 1000),
    ]
    if let rate { fields["offered_per_second"] = String(format: "%.0f", rate) }
    fields.merge(extra) { $1 }
    return phoneTapLine(fields)
}

let phoneCount = ProcessInfo.processInfo.environment["TAGFIX_BENCH_PHONES"].flatMap { Int($0) } ?? 200

/// Synchronous, run on the main thread: it blocks (the phones' threads, the peer's pipe, SQLite),
/// never on the cooperative pool.
func phoneTapBenchmark(arguments: [String]) {
    let taps = arguments.first.flatMap { Int($0) } ?? 20_000
    func option(_ name: String) -> String? {
        arguments.firstIndex(of: name).flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
    }
    let serve = option("--serve")
    // The paced rows' load: taps per second from all the phones together.
    let rate = option("--rate").flatMap { Double($0) } ?? 500
    let python = ProcessInfo.processInfo.environment["TAGFIX_BENCH_PYTHON"] ?? "/usr/bin/python3"
    let phones = phoneCount
    let perPhone = max(1, taps / phones)
    // These taps for every run in this process with fresh stores; tagfix serve's later runs read
    // taps of their own from the tags (`site.bodies`: its counters have seen these).
    // serve's port, chosen first: the tags' URLs point at it, as a site's point at its server.
    let servePort = UInt16(PrivateDaemon.freePort())
    let site = PhoneTapSite(phones: phones, tapsPerPhone: perPhone, origin: "http://127.0.0.1:\(servePort)")
    let bodies: [[String]] = (0..<phones).map { phone in site.urls[phone].map { site.body(phone: phone, url: $0) } }
    // The bodies stand in for the URLs: a phone's list is its bodies, in counter order.
    let folder = FileManager.default.currentDirectoryPath + "/.build/phone-tap-\(getpid())"
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let registry = try! InMemoryRegistry(site.entries)
    let keyring = SUNKeyring(sets: ["site": site.keys])

    func inProcess(grouped: Bool, run: Int, rate: Double? = nil) -> String {
        let name = grouped ? "grouped" : "per-tap"
        let counters = try! SQLiteSUNCounters(path: "\(folder)/\(name)-\(run).sqlite", create: true)
        let log = try! SessionLog(path: "\(folder)/\(name)-\(run).jsonl")
        defer { log.close() }
        let handler = PhoneTapHandler(
            verifier: Verifier(policy: benchPolicy, registry: registry, sun: Verifier.SUNCheck(authenticator: keyring, counters: counters)),
            clock: MonotonicClock())
        // Grouped: serve's own PhoneTapGroups, its verdicts to a fan-out of the log alone (one
        // write and one fsync a group), each phone waiting for its answer.
        let groups = PhoneTapGroups { handler.group() }
        let fanOut = VerdictFanOut([SessionLogSink(log)])
        groups.deliver { fanOut.send(recorded: $0, whenKept: $1) }
        let times = tapAtOnce(phones: phones, urls: bodies, rate: rate) { _, body in
            guard let request = try? PhoneTapRequest(body: Array(body.utf8)) else { return nil }
            guard grouped else {
                let answer = handler.handle(request, token: "bench", client: "127.0.0.1", userAgent: "TagFixBench")
                guard (try? log.append(SessionRecord(answer.verdict).encoded())) != nil else { return nil }
                _ = answer.json
                return answer.verdict.kind == .confirmed
            }
            let answered = DispatchSemaphore(value: 0)
            let response = Mutex<HTTPResponse?>(nil)
            let reply = HTTPReplyHandle { sent in
                response.withLock { $0 = sent }
                answered.signal()
            }
            groups.submit(PhoneTap(request: request, token: "bench", client: "127.0.0.1", userAgent: "TagFixBench"), reply: reply)
            answered.wait()
            guard let sent = response.withLock({ $0 }), sent.status == 200 else { return nil }
            return String(decoding: sent.body, as: UTF8.self).contains(#""verdict":"confirmed""#)
        }
        var extra: [String: String] = [:]
        if grouped {
            let counts = groups.counts
            extra["counter_commits"] = "\(counts.groups)"
            extra["log_commits"] = "\(counts.groups)"
            extra["largest_group"] = "\(counts.largest)"
            extra["taps_per_commit"] = String(format: "%.1f", Double(counts.taps) / Double(max(counts.groups, 1)))
        } else {
            extra["counter_commits"] = "\(times.answered)"
            extra["log_commits"] = "\(times.answered)"
            extra["taps_per_commit"] = "1.0"
        }
        return phoneTapRow(
            side: "tagfix", path: "in-process",
            commits:
                grouped
                ? "grouped: serve's PhoneTapGroups, the taps waiting share one SQLite transaction (counters, synchronous=FULL) and one log write+fsync"
                : "per tap: PhoneTapHandler.handle and SessionLog.append one tap at a time (a transaction and an fsync a tap)",
            times: times, rate: rate, extra: extra)
    }

    // The peer's files: its tags and keys, and every URL (for its in-process check rate).
    let tagsFile = "\(folder)/peer-tags.json"
    let spots = site.entries.map { "\"\($0.id)\":[\($0.region.center.latitude),\($0.region.center.longitude),\($0.region.radius)]" }
    try!
        (#"{"meta_key":"\#(PhoneTapSite.metaHex)","file_key":"\#(PhoneTapSite.fileHex)","token":"\#(PhoneTapSite.token)","#
        + #""picc":"\#(site.names.piccData)","cmac":"\#(site.names.cmac)","tags":{\#(spots.joined(separator: ","))}}"#)
        .write(toFile: tagsFile, atomically: true, encoding: .utf8)
    let urlsFile = "\(folder)/urls.txt"
    try! site.urls.joined().joined(separator: "\n").write(toFile: urlsFile, atomically: true, encoding: .utf8)

    func peer(rate: Double? = nil, bursts: Bool = false) -> String {
        guard let peer = FlaskPeer(python: python, arguments: ["serve", tagsFile]) else {
            return phoneTapLine(["bench": "\"phone-tap\"", "side": "\"peer\"", "error": "\"\(python) could not be started\""])
        }
        defer { peer.stop() }
        guard let ready = peer.line(), ready.hasPrefix("ready "), let port = UInt16(ready.dropFirst(6)) else {
            return phoneTapLine(["bench": "\"phone-tap\"", "side": "\"peer\"", "error": "\"bench/sun_peer_flask.py did not start\""])
        }
        let (times, refused, connections) = tapOverHTTP(port: port, phones: phones, bodies: bodies, rate: rate, bursts: bursts)
        var extra = ["not_200": refused, "connections": "\(connections)"]
        if bursts { extra["load"] = "\"bursts\"" }
        return phoneTapRow(
            side: "peer", path: "http", commits: "none: no counter kept, nothing written", times: times, rate: rate, extra: extra)
    }

    // tagfix serve, started once; its runs between the peer's, so both share the machine's minutes.
    let tokens = max(1, option("--tokens").flatMap { Int($0) } ?? 1)
    let served = ServeUnderTest.start(serve: serve, site: site, folder: folder, port: servePort, tokens: tokens)
    if case .failure(let skipped) = served { print(skipped.line) }
    let rig = try? served.get()
    defer { rig?.stop() }
    // `--only serve`: tagfix serve's rows alone (for a profile of serve).
    let others = option("--only") != "serve"
    // `--loads back-to-back,paced,bursts` (all three unless told): which of tagfix serve's runs.
    let loads = Set((option("--loads") ?? "back-to-back,paced,bursts").split(separator: ",").map(String.init))
    if let unknown = loads.first(where: { !["back-to-back", "paced", "bursts"].contains($0) }) {
        print(phoneTapLine(["bench": "\"phone-tap\"", "error": "\"--loads takes back-to-back, paced and bursts, not \(unknown)\""]))
        return
    }
    for run in 0..<2 {
        if others {
            print(inProcess(grouped: true, run: run))
            print(peer())
        }
        // Each run its own URLs: the counters must rise (the second run's are read from the tags now).
        if let rig, loads.contains("back-to-back") {
            print(rig.run(run == 0 ? bodies : site.bodies(tapsPerPhone: perPhone), rate: nil).line)
        }
    }
    if others {
        print(inProcess(grouped: false, run: 0))
        // Paced: the phones together at `rate` taps per second, each tap's time from when it was due.
        print(inProcess(grouped: true, run: 2, rate: rate))
        print(peer(rate: rate))
    }
    if let rig, loads.contains("paced") { print(rig.run(site.bodies(tapsPerPhone: perPhone), rate: rate).line) }
    // Bursts: the 200 phones tap at the same moment, once each, round after round (each round
    // starts when the last has every answer): the time a tap waits when all the phones tap at once.
    if others { print(peer(bursts: true)) }
    if let rig, loads.contains("bursts") { print(rig.run(site.bodies(tapsPerPhone: perPhone), rate: nil, bursts: true).line) }
    // The peer's check alone, in its own process, on the same URLs.
    if others, let check = FlaskPeer(python: python, arguments: ["loop", tagsFile, urlsFile, "2"]) {
        if let line = check.line() { print(line) }
        blockUntilExit(check.process)
    }
    // The floor (`--floor PROGRAM`): the same phones, back to back and in bursts, against a
    // server that does nothing but answer.
    if let program = option("--floor"), let floor = ServeUnderTest.startFloor(program: program, phones: phones) {
        defer { floor.stop() }
        print(floor.run(bodies, rate: nil).line)
        print(floor.run(bodies, rate: nil, bursts: true).line)
    }
    // The sweep (tagfix serve only): paced at rising rates, for the highest whose p99 holds within 10 ms.
    let sweep: [Double] =
        option("--sweep") == "none"
        ? []
        : (option("--sweep") ?? "500,1000,2000,3000,4000,5000,6000,8000,10000,12000,14000,16000").split(separator: ",").compactMap {
            Double($0)
        }
    if let rig { for line in rig.sweep(sweep, site: site) { print(line) } }
}

/// How many taps a sweep step at `rate` makes: three seconds' worth, at least ten a phone.
func sweepTaps(rate: Double, phones: Int) -> Int {
    max(10, Int((rate * 3 / Double(phones)).rounded(.up)))
}

// MARK: - The real server

/// `tagfix serve --http` on a free port with the site's registry, keys and token, the same bodies
/// POSTed to /api/tap; a `skipped` line when there is no TAGFIX to run or its serve has no
/// /api/tap (it does not start with these options, or answers the route 404). Started once, its
/// runs made between the peer's (the same minutes of the machine for both), stopped at the end.
final class ServeUnderTest {
    /// Why there is no serve to measure, as a result line.
    struct Skipped: Error {
        let line: String
    }

    private let process: ChildProcess
    private let port: UInt16
    private let phones: Int
    /// Its rows' `side` and `commits`: tagfix serve's, or the floor's.
    private let side: String
    private let commits: String
    /// How many named tokens serve's token file holds (`--tokens`).
    private let tokens: Int

    private init(
        process: ChildProcess, port: UInt16, phones: Int, side: String = "tagfix",
        commits: String = "grouped: serve's own (PhoneTapGroups), its --sun-counters and --log", tokens: Int = 1
    ) {
        self.process = process
        self.port = port
        self.phones = phones
        self.side = side
        self.commits = commits
        self.tokens = tokens
    }

    /// The floor (`--floor PROGRAM`, bench/floor.c): PROGRAM PORT answers every POST at once with
    /// a fixed verdict on a kept connection, one epoll thread, no parsing beyond the head: what
    /// the machine and these phones cost before any server does any work.
    static func startFloor(program: String, phones: Int) -> ServeUnderTest? {
        let port = UInt16(PrivateDaemon.freePort())
        guard let process = try? BenchChildren.start(executable: program, arguments: ["\(port)"]) else { return nil }
        let client = LoopbackHTTPClient(port: port)
        for _ in 0..<100 where process.isRunning {
            if client.post(PhoneTapRoute.postPath, body: "{}", cookie: "")?.status == 200 {
                return ServeUnderTest(
                    process: process, port: port, phones: phones, side: "floor", commits: "none: a fixed answer, nothing checked or written"
                )
            }
            usleep(50_000)
        }
        blockingStop(process)
        return nil
    }

    /// `tokens`: how many named tokens serve's token file holds (the phones' is the last).
    static func start(serve: String?, site: PhoneTapSite, folder: String, port: UInt16, tokens count: Int = 1) -> Result<
        ServeUnderTest, Skipped
    > {
        let phones = site.entries.count
        func skipped(_ why: String) -> Result<ServeUnderTest, Skipped> {
            .failure(
                Skipped(
                    line: phoneTapLine([
                        "bench": "\"phone-tap\"", "side": "\"tagfix\"", "path": "\"http\"", "skipped": "\"\(why)\"",
                        "phones_at_once": "\(phones)",
                    ])))
        }
        guard let serve else { return skipped("no --serve TAGFIX given") }
        let registryPath = "\(folder)/registry.csv"
        try! RegistryFile.write(site.entries, format: .csv).write(toFile: registryPath, atomically: true, encoding: .utf8)
        let keysPath = "\(folder)/sun.keys"
        // Mode 0600, as serve demands of a key file (it refused the 0644 one, and the row was skipped).
        try! SecretFile.create(keysPath, "[site]\nkey = \(PhoneTapSite.fileHex)\nmeta_key = \(PhoneTapSite.metaHex)\n", mode: 0o600)
        let tokensPath = "\(folder)/tokens"
        var tokens = TokenFile()
        for tech in 1..<count { try? tokens.add(name: "tech\(tech)", token: TokenFile.generateToken()) }
        try? tokens.add(name: "bench", token: PhoneTapSite.token)
        try? tokens.write(to: tokensPath)
        let errorsPath = "\(folder)/serve.stderr"
        _ = FileManager.default.createFile(atPath: errorsPath, contents: nil)
        let errors = FileHandle(forWritingAtPath: errorsPath)!
        guard
            let process = try? BenchChildren.start(
                executable: serve,
                arguments: [
                    "serve", "--http", "127.0.0.1:\(port)", "--registry", registryPath, "--sun-keys", keysPath, "--sun-counters",
                    "\(folder)/serve-counters.sqlite", "--token", tokensPath, "--log", "\(folder)/serve.jsonl", "--socket",
                    "\(folder)/serve.sock",
                    // Its limit per client (10 at once, then 1 a second) is for a tech's phone; a
                    // benchmark phone taps back to back, so the limit is lifted (docs/protocol.md).
                    "--tap-limit", "1000000,1000000",
                ],
                environment: ProcessInfo.processInfo.environment, standardError: errors.fileDescriptor)
        else { return skipped("\(serve) could not be started") }
        // Up to 10 s for it to listen; a first tap (a tag not in the registry, position denied: a
        // `notRegistered` line in its log) tells whether it takes phone taps: 200 and a verdict.
        let client = LoopbackHTTPClient(port: port)
        var first: (status: Int, body: String)?
        for _ in 0..<100 {
            first = client.post(
                PhoneTapRoute.postPath, body: #"{"url":"http://127.0.0.1:\#(port)/t/none","error":"denied"}"#,
                cookie: "\(PhoneCookie.name)=\(PhoneTapSite.token)")
            if first != nil || !process.isRunning { break }
            usleep(100_000)
        }
        guard let first else {
            blockingStop(process)
            // What it said first, JSON-safe: letters, digits and punctuation other than quotes and backslashes.
            let said =
                ((try? String(contentsOfFile: errorsPath, encoding: .utf8)) ?? "").split(separator: "\n").first.map(String.init) ?? ""
            let safe = String(said.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "\\" }.prefix(160))
            return skipped(
                "tagfix serve did not start with --http --registry --sun-keys --sun-counters --token (named tokens) --log: \(safe)")
        }
        guard first.status == 200, first.body.contains(#""verdict""#) else {
            blockingStop(process)
            return skipped(
                "tagfix serve answers a phone tap's POST \(PhoneTapRoute.postPath) with \(first.status), not a verdict: no phone taps yet")
        }
        return .success(ServeUnderTest(process: process, port: port, phones: phones, tokens: count))
    }

    /// The phones tap `bodies` (back to back, or paced at `rate`): a result line (`load` says
    /// which, `sweep` for a step of the sweep).
    func run(_ bodies: [[String]], rate: Double?, bursts: Bool = false, load: String? = nil) -> (line: String, times: TapTimes) {
        let cpuBefore = CPUSample.process("\(process.pid)")
        let (times, refused, connections) = tapOverHTTP(port: port, phones: phones, bodies: bodies, rate: rate, bursts: bursts)
        var extra = ["not_200": refused, "connections": "\(connections)"]
        // The server's own CPU (user + system, all its threads) a tap answered: it leaves out
        // the time a tap waits, so it shows a change to serve's work where a rate mixes it with
        // the machine's other load (not immune to it: caches, migrations; clock ticks of 10 ms).
        // Its user time alone too: the kernel's part (mostly loopback TCP) moves with the machine
        // more than the server's own code does.
        if let before = cpuBefore, let after = CPUSample.process("\(process.pid)"), times.answered > 0 {
            let perTap = 1e6 / Double(sysconf(Int32(_SC_CLK_TCK))) / Double(times.answered)
            extra["server_cpu_us_per_tap"] = String(format: "%.1f", Double(after.ticks - before.ticks) * perTap)
            extra["server_user_us_per_tap"] = String(format: "%.1f", Double(after.user - before.user) * perTap)
        }
        if bursts { extra["load"] = "\"bursts\"" }
        if let load { extra["load"] = "\"\(load)\"" }
        if side == "tagfix" { extra["tokens"] = "\(tokens)" }
        let line = phoneTapRow(side: side, path: "http", commits: commits, times: times, rate: rate, extra: extra)
        return (line, times)
    }

    /// Paced at rising rates, each with taps of its own: every rate, until one the server could
    /// not keep up with (under 90 % of it answered). On a shared machine a low rate's p99 can
    /// miss while a higher one holds, so a miss does not end it.
    func sweep(_ rates: [Double], site: PhoneTapSite) -> [String] {
        var lines: [String] = []
        for rate in rates {
            let (line, times) = run(site.bodies(tapsPerPhone: sweepTaps(rate: rate, phones: phones)), rate: rate, load: "sweep")
            lines.append(line)
            if Double(times.answered) / times.elapsed < rate * 0.9 { break }
        }
        return lines
    }

    /// SIGTERM, then SIGKILL after a grace; returns once it has exited.
    func stop() { blockingStop(process) }
}
