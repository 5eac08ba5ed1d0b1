import Foundation
import TagFixServe
import TagFixSystem
import TagFixTesting
import Testing

/// `tagfix serve` at its open-file limit (`ulimit -n`): a flood of connections, or a limit set
/// low, must cost a refusal with a word, never a loop spinning on a listener it cannot accept
/// from (with no descriptor left, `accept` fails with `EMFILE` and the connection stays
/// waiting, so the listener stays readable: before, serve woke for it without end, a core at
/// 100 %, and the connection waited unanswered).
@Suite("tagfix serve at its open-file limit")
struct ServeDescriptorLimitTests {
    static let runnable = RunningTagFix.isBuilt && FileManager.default.isExecutableFile(atPath: prlimit)
    static let prlimit = "/usr/bin/prlimit"

    /// A connection to serve kept open: its request sent at once, its answer read as it comes.
    final class Held {
        let fd: FileDescriptor
        var answer: [UInt8] = []
        var closed = false

        /// - Parameter source: the loopback address it connects from (one address holds a
        /// quarter of serve's places at most).
        init(port: Int, request: String, from source: String = "127.0.0.1") throws {
            fd = try FileDescriptor.socket(domain: AF_INET, type: FileDescriptor.stream)
            if let address = SocketAddress.ipv4(source, port: 0) { try fd.bind(to: address) }
            try fd.connect(to: .loopback(port: port))
            if !request.isEmpty { _ = try fd.send(Array(request.utf8)[...]) }
        }

        /// Reads what has come, without waiting.
        func poll() {
            guard !closed else { return }
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                guard let count = try? fd.receive(into: &chunk, flags: Int32(MSG_DONTWAIT)) else { return }
                if count == 0 {
                    closed = true
                    return
                }
                answer += chunk[..<count]
            }
        }

        /// Waits (polling) until serve has closed it; whether it did.
        func untilClosed() async -> Bool {
            await RunningTagFix.poll {
                poll()
                return closed
            }
        }

        /// Waits (polling) until its answer's head has come; whether it did.
        func untilAnswered() async -> Bool {
            await RunningTagFix.poll {
                poll()
                return status != nil
            }
        }

        var text: String { String(decoding: answer, as: UTF8.self) }
        /// The answer's status, once its head has come.
        var status: Int? {
            guard text.contains("\r\n\r\n") else { return nil }
            return text.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }

        private var open = true

        /// Closes it, once (a second close could close another test's descriptor of that number).
        func close() {
            guard open else { return }
            open = false
            closed = true
            _ = try? fd.close()
        }
    }

    /// serve with phones alone on a free loopback port, its open-file limit `limit` from its start
    /// (through `prlimit`) when one is given; stopped however the test ends.
    static func withServe(
        limit: Int? = nil, _ body: (_ serve: RunningProgram, _ port: Int) async throws -> Void
    ) async throws {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        let tokens = folder + "/tokens"
        try "alice alice-token-0123456789abcdef\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        try FileSystem.setPermissions(FilePermissions(rawValue: 0o600), of: tokens)
        let serve = [
            RunningTagFix.binary, "serve", "--http", "127.0.0.1:0", "--token", tokens, "--log", folder + "/log.jsonl", "--socket",
            folder + "/serve.sock", "--quiet",
            // Connections that send nothing hold their slots however slow the machine is.
            "--client-timeout", "300",
        ]
        let (program, arguments) = limit.map { (prlimit, ["--nofile=\($0):\($0)", "--"] + serve) } ?? (serve[0], Array(serve.dropFirst()))
        try await TestProgram.withRunning(program, arguments, grace: .seconds(10)) { running in
            var port: Int?
            _ = await RunningTagFix.poll {
                port = running.stderr.components(separatedBy: "://127.0.0.1:").dropFirst().first.flatMap { Int($0.prefix { $0.isNumber }) }
                return port != nil || !running.isRunning
            }
            let found = try #require(port, "serve did not start: \(running.stderr)")
            try await body(running, found)
            running.signal(SIGTERM)
            #expect(await RunningTagFix.poll { !running.isRunning }, "serve did not stop")
            #expect(running.status == 0, "\(running.stderr)")
        }
    }

    /// Connects and asks for /healthz again and again until it is answered 200 (while serve
    /// has not yet seen the others leave, it refuses): whether it was, and the last answer.
    static func takenAgain(_ port: Int) async -> (Bool, String) {
        var again: Held?
        var last = ""
        let taken = await RunningTagFix.poll {
            if again == nil { again = try? Held(port: port, request: healthz(port)) }
            guard let held = again else { return false }
            held.poll()
            guard let status = held.status else { return false }
            last = held.text
            held.close()
            again = nil
            return status == 200
        }
        again?.close()
        return (taken, last)
    }

    static func healthz(_ port: Int) -> String { "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n" }

    @Test(
        "a limit set low at start: serve says how many clients it has room for, and the one past them gets a 503 that says so",
        .enabled(if: runnable, "needs the built tagfix and prlimit"))
    func lowLimitAtStart() async throws {
        let room = EventServer.clientRoom(maximum: 512, openFileLimit: 80)
        try await Self.withServe(limit: 80) { serve, port in
            // Said as the listeners join the loop, which may be after the address is printed.
            let said = await RunningTagFix.poll { serve.stderr.contains("leaves room for \(room) clients at once, not 512") }
            #expect(said, "\(serve.stderr)")
            // Connections that have begun nothing hold their slots (none is idle between requests),
            // each from an address of its own.
            let holders = try (0..<room).map { try Held(port: port, request: "", from: "127.0.1.\($0 + 1)") }
            defer { for held in holders { held.close() } }
            let past = try Held(port: port, request: Self.healthz(port), from: "127.0.2.1")
            defer { past.close() }
            #expect(await past.untilClosed(), "no answer: \(past.text)")
            #expect(
                past.status == 503 && past.text.contains("too many clients (\(room), all the open-file limit leaves room for)"),
                "\(past.text)")
            // Once one leaves (serve may not have seen it go when the next comes: that one is refused too).
            for held in holders { held.close() }
            let (taken, last) = await Self.takenAgain(port)
            #expect(taken, "\(last)")
        }
    }

    @Test(
        "a limit set low at start: one address still holds only its share of the places (a quarter), another is still taken",
        .enabled(if: runnable, "needs the built tagfix and prlimit"))
    func oneAddressShare() async throws {
        let room = EventServer.clientRoom(maximum: 512, openFileLimit: 80)
        let share = EventServer.addressRoom(perAddress: 128, maximum: 512, room: room)
        try await Self.withServe(limit: 80) { serve, port in
            let said = await RunningTagFix.poll { serve.stderr.contains("not 512, \(share) from one address") }
            #expect(said, "\(serve.stderr)")
            let holders = try (0..<share).map { _ in try Held(port: port, request: "", from: "127.0.3.1") }
            defer { for held in holders { held.close() } }
            let past = try Held(port: port, request: Self.healthz(port), from: "127.0.3.1")
            defer { past.close() }
            #expect(await past.untilClosed(), "no answer: \(past.text)")
            #expect(past.status == 503 && past.text.contains("too many connections from 127.0.3.1 (\(share))"), "\(past.text)")
            let other = try Held(port: port, request: Self.healthz(port), from: "127.0.3.2")
            defer { other.close() }
            #expect(await other.untilAnswered())
            #expect(other.status == 200, "\(other.text)")
        }
    }

    @Test(
        "no descriptor left (the limit lowered under a running serve): each waiting connection is taken and told, serve does not spin, and takes connections again once some leave",
        .enabled(if: runnable, "needs the built tagfix and prlimit"))
    func noDescriptorLeft() async throws {
        try await Self.withServe { serve, port in
            // serve listens before its session has begun: its descriptors are counted once the
            // session's log is open and a request has been answered (counted sooner, on a busy
            // machine, the log and what opens with it took the three left, and no connection could
            // be taken at all).
            let descriptors = "/proc/\(serve.pid)/fd"
            let logOpen = await RunningTagFix.poll {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: descriptors)) ?? []
                return names.contains { ((try? FileSystem.symbolicLinkTarget(descriptors + "/" + $0)) ?? "").hasSuffix("/log.jsonl") }
            }
            try #require(logOpen, "serve's log never opened: \(serve.stderr)")
            let (ready, first) = await Self.takenAgain(port)
            try #require(ready, "\(first)")
            let open = try FileManager.default.contentsOfDirectory(atPath: descriptors).count
            // Room for three more descriptors: the 512 clients serve would take are far past it.
            let limit = open + 3
            let lowered = try await TestProgram.run(Self.prlimit, ["--pid", "\(serve.pid)", "--nofile=\(limit):\(limit)"])
            try #require(lowered.status == 0, "\(lowered.err)")
            let connections = try (0..<12).map { _ in try Held(port: port, request: Self.healthz(port)) }
            defer { for held in connections { held.close() } }
            let answered = await RunningTagFix.poll {
                connections.allSatisfy { held in
                    held.poll()
                    return held.status != nil
                }
            }
            #expect(answered, "unanswered: \(connections.filter { $0.status == nil }.count) of 12; \(serve.stderr)")
            let refused = connections.filter { $0.status == 503 }
            #expect(!refused.isEmpty && refused.allSatisfy { $0.text.contains("no descriptor left for another client") })
            #expect(connections.contains { $0.status == 200 }, "none taken: \(connections.map(\.text))")
            // serve writes its line before its first refusal; this process reads it on a thread of its own.
            let told = await RunningTagFix.poll { serve.stderr.contains("no descriptor left for a new connection") }
            #expect(told && serve.stderr.components(separatedBy: "no descriptor left for a new connection").count == 2, "\(serve.stderr)")
            // Once they leave, connections are taken again.
            for held in connections { held.close() }
            let (taken, last) = await Self.takenAgain(port)
            #expect(taken, "\(last)")
            #expect(await RunningTagFix.poll { serve.stderr.contains("descriptors to spare again") }, "\(serve.stderr)")
        }
    }
}
