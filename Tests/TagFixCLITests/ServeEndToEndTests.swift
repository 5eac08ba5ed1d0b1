import Foundation
import Synchronization
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixReport
import TagFixTestDaemons
import TagFixTesting
import Testing

/// `tagfix serve` behind the emulators, as a lab runs it: the PN532 emulator read by libnfc, the
/// NMEA emulator read by a private gpsd, and `tagfix serve` (the built binary) between them and
/// its clients.
final class ServeRig: Sendable {
    static let here = Coordinate(validLatitude: 53.545, longitude: 9.966)
    /// A tag where it should be, and one 300 m north of its place.
    static let urls = [
        "https://tags.example.org/t/E1?lat=53.545&lon=9.966&r=30", "https://tags.example.org/t/E2?lat=53.5476949&lon=9.966&r=30",
    ]

    let receiver: NMEAEmulator
    private let gpsd: Mutex<PrivateGPSD>
    let gpsdPort: Int
    private let reader: Mutex<PN532Emulator>
    /// The reader's device: a symbolic link to the emulator's pty, as udev's /dev/nfc-pn532 is.
    let link: String
    let serve: RunningTagFix
    let socket: String
    let log: String
    let httpPort: Int
    private let present = Mutex(-1)

    init(extra: [String] = []) async throws {
        receiver = try NMEAEmulator(source: .at(Self.here, noise: 0.5, seed: 11), rate: 5)
        let gpsd = try await PrivateGPSD.start(device: receiver.path)
        self.gpsd = Mutex(gpsd)
        gpsdPort = gpsd.port
        receiver.start()
        let reader = try Self.emulator()
        self.reader = Mutex(reader)
        let name = UUID().uuidString.prefix(8)
        link = "/tmp/tagfix-serve-\(name).pn532"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: reader.path)
        socket = "/tmp/tagfix-serve-\(name).sock"
        log = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-serve-\(name).jsonl").path
        let serve = try RunningTagFix(
            [
                "serve", "--reader", "pn532_uart:\(link)", "--gps", "gpsd://127.0.0.1:\(gpsd.port)", "--socket", socket, "--http",
                "127.0.0.1:0", "--log", log, "--quiet", "--json", "--fix-timeout", "30",
            ] + extra)
        var port: Int?
        _ = await RunningTagFix.poll {
            port = serve.stderr.components(separatedBy: "http://127.0.0.1:").dropFirst().first.flatMap { Int($0.prefix { $0.isNumber }) }
            return port != nil || !serve.process.isRunning
        }
        _ = await RunningTagFix.poll { serve.stderr.contains("reader: ") || !serve.process.isRunning }
        self.serve = serve
        httpPort = port ?? 0
    }

    /// The PN532 emulator with both tags, out of the field.
    static func emulator() throws -> PN532Emulator {
        // Two tags, each its own UID: one taking the other's place is a new tap.
        let tags = try urls.enumerated().map {
            try EmulatedType2Tag.ntag(
                215, message: NDEFMessage(records: [NDEFRecord.uri($0.element)]).encoded(),
                uid: [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x60 + UInt8($0.offset)])
        }
        // Seed 3: tag 0 made weak (`weaken`) meets its faults from the first exchange on.
        let reader = try PN532Emulator(tags: tags, options: .init(seed: 3))
        for index in tags.indices { reader.setPresent(false, tag: index) }
        return reader
    }

    /// Makes tag `index` weak from its next exchange on (RF errors at `rfErrorRate`; 0 heals it).
    func weaken(tag index: Int, rfErrorRate: Double) {
        reader.withLock { $0.setWeak(rfErrorRate: rfErrorRate, tag: index) }
    }

    /// Unplugs the reader (the emulator stops and the link goes, as udev removes it), or plugs a
    /// new one in.
    func reader(plugged: Bool) throws {
        if plugged {
            let next = try Self.emulator()
            reader.withLock { $0 = next }
            present.withLock { $0 = -1 }
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: next.path)
        } else {
            reader.withLock { $0.stop() }
            try FileManager.default.removeItem(atPath: link)
        }
    }

    /// Taps the next tag: the other one leaves the field as it comes, so the reader sees one go
    /// and the next arrive. Returns once the log holds `count` verdicts.
    func tap(expecting count: Int) async -> Bool {
        let next = present.withLock { index in
            index = (index + 1) % Self.urls.count
            return index
        }
        reader.withLock { reader in
            reader.setPresent(true, tag: next)
            for other in Self.urls.indices where other != next { reader.setPresent(false, tag: other) }
        }
        return await RunningTagFix.poll { self.logLines.count >= count }
    }

    /// Stops gpsd (`start: false`), or starts a new one on the same port.
    func gpsd(start: Bool) async throws {
        if start {
            let next = try await PrivateGPSD.start(device: receiver.path, port: gpsdPort)
            gpsd.withLock { $0 = next }
        } else {
            await gpsd.withLock { $0 }.stop()
        }
    }

    var logLines: [String] {
        (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
    }

    func stop() async -> Bool {
        let exited = await serve.stop(with: SIGTERM)
        reader.withLock { $0.stop() }
        try? FileManager.default.removeItem(atPath: link)
        await gpsd.withLock { $0 }.stop()
        receiver.stop()
        try? FileManager.default.removeItem(atPath: log)
        return exited
    }
}

/// The record of a VERDICT line (without `class` and `id`): the session log's line.
private func record(ofVerdict line: String) -> String? {
    guard line.hasPrefix(#"{"class":"VERDICT","id":"#), let comma = line.dropFirst(24).firstIndex(of: ",") else { return nil }
    return "{" + line[line.index(after: comma)...]
}

/// Each test runs its own emulators, gpsd and tagfix serve (and one a browser), on paths and
/// ports of its own: nothing is shared, so they run side by side.
@Suite("tagfix serve end to end: PN532 emulator + libnfc, NMEA emulator + gpsd, socket and SSE clients", .timeLimit(.minutes(4)))
struct ServeEndToEndTests {
    static var runnable: Bool { RunningTagFix.isBuilt && PrivateGPSD.installedPath != nil }

    @Test(
        "50 socket clients and 10 SSE clients get every VERDICT in order, as the log holds it; one that does not read is cut off",
        .enabled(if: runnable, "needs the built tagfix and gpsd"))
    func fanOut() async throws {
        let rig = try await ServeRig()
        #expect(rig.httpPort > 0, "no HTTP port: \(rig.serve.stderr)")
        let clients = try (0..<50).map { _ in try SocketLineClient(path: rig.socket) }
        for client in clients { client.send(#"?WATCH={"enable":true};"# + "\n") }
        let streams = try (0..<10).map { _ in try SocketLineClient(port: rig.httpPort) }
        for stream in streams { stream.send("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") }
        // A client that asks for everything and reads nothing: the server must cut it off.
        let idle = try SocketLineClient(path: rig.socket, reading: false)
        DeviceThread.detach(name: "test helper") {
            idle.send(#"?WATCH={"enable":true};"# + String(repeating: "?POLL;?DEVICES;", count: 20_000))
        }
        #expect(await RunningTagFix.poll { clients.allSatisfy { $0.lines(ofClass: "WATCH").count == 1 } })
        #expect(await RunningTagFix.poll { streams.allSatisfy { $0.lines.contains("retry: 1000") } })

        let taps = 6
        for count in 1...taps {
            #expect(await rig.tap(expecting: count), "tap \(count) gave no verdict: \(rig.serve.stderr)")
        }
        let logged = rig.logLines
        #expect(logged.count == taps)
        #expect(await RunningTagFix.poll { clients.allSatisfy { $0.lines(ofClass: "VERDICT").count >= taps } })
        #expect(await RunningTagFix.poll { streams.allSatisfy { $0.lines.filter { $0 == "event: verdict" }.count >= taps } })
        #expect(await RunningTagFix.poll { rig.serve.stderr.contains("cut off") }, "the idle client was never cut off: \(rig.serve.stderr)")
        #expect(await rig.stop(), "SIGTERM left tagfix serve running")
        #expect(rig.serve.exitedCleanly, "\(rig.serve.ending)")

        let kinds = try logged.map { try JSONValue.parse($0)["verdict"]?.string ?? "" }
        #expect(kinds == (0..<taps).map { $0 % 2 == 0 ? "confirmed" : "outside" }, "\(logged)")
        for client in clients {
            let verdicts = client.lines(ofClass: "VERDICT")
            #expect(verdicts.compactMap(record(ofVerdict:)) == logged)
            #expect(verdicts.map { try? JSONValue.parse($0)["id"]?.double } == (1...taps).map { Double($0) })
            #expect(client.lines(ofClass: "SCAN").count == taps)
            #expect(!client.lines(ofClass: "FIX").isEmpty)
            #expect(client.lines.last?.contains(#""class":"SHUTDOWN""#) == true)
        }
        for stream in streams {
            let lines = stream.lines
            let data = lines.indices.filter { lines[$0] == "event: verdict" }.compactMap { index in
                lines[index...].first { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) }
            }
            #expect(data.compactMap(record(ofVerdict:)) == logged)
            // A stream is told the devices' states as it opens, not only their later changes
            // (the page loaded after the reader attached once never heard of it).
            let firstVerdict = lines.firstIndex(of: "event: verdict") ?? lines.endIndex
            #expect(lines[..<firstVerdict].contains("event: reader"), "\(lines.prefix(12))")
            #expect(lines[..<firstVerdict].contains("event: gps"), "\(lines.prefix(12))")
            #expect(lines.contains { $0.hasPrefix("data: ") && $0.contains(#""class":"READER""#) && $0.contains(#""status":"attached""#) })
        }
        // --json prints the same records on standard output.
        #expect(rig.serve.stdoutLines == logged)
        #expect(!FileManager.default.fileExists(atPath: rig.socket), "the socket file was left behind")
    }

    @Test(
        "bad input on the socket and over HTTP while taps go on: ERROR objects, no crash, the watching client unaffected",
        .enabled(if: runnable, "needs the built tagfix and gpsd"))
    func badInput() async throws {
        let rig = try await ServeRig()
        let good = try SocketLineClient(path: rig.socket)
        good.send(#"?WATCH={"enable":true};"#)
        let garbage = try SocketLineClient(path: rig.socket)
        garbage.send([0x00, 0xFF, 0x0A] + Array("?FOO;\n{\"class\":\"WATCH\"}\n".utf8))
        let long = try SocketLineClient(path: rig.socket)
        DeviceThread.detach(name: "test helper") { long.send([UInt8](repeating: 0x41, count: 10_000_000) + Array("\n?DEVICES;\n".utf8)) }
        let halfOpen = try SocketLineClient(path: rig.socket, reading: false)
        halfOpen.send("?WATCH={")
        let halfHTTP = try SocketLineClient(port: rig.httpPort, reading: false)
        halfHTTP.send("GET /api/ta")
        let badHTTP = try SocketLineClient(port: rig.httpPort)
        badHTTP.send("GET /api/verdicts?since=-4 HTTP/1.1\r\n\r\n")

        #expect(await rig.tap(expecting: 1))
        #expect(await RunningTagFix.poll { garbage.lines(ofClass: "ERROR").count == 3 }, "\(garbage.lines)")
        #expect(await RunningTagFix.poll { long.lines(ofClass: "ERROR").count == 1 && long.lines(ofClass: "DEVICES").count == 1 })
        #expect(await RunningTagFix.poll { badHTTP.lines.first?.hasPrefix("HTTP/1.1 400") == true })
        halfOpen.close()
        #expect(await rig.tap(expecting: 2))
        #expect(await RunningTagFix.poll { good.lines(ofClass: "VERDICT").count == 2 })
        #expect(rig.serve.process.isRunning, "\(rig.serve.ending)")
        let tags = try SocketLineClient(port: rig.httpPort)
        tags.send("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(await RunningTagFix.poll { tags.closed })
        #expect(tags.lines.contains("tagfix_verdicts_total{verdict=\"confirmed\"} 1"), "\(tags.lines)")
        #expect(tags.lines.contains("tagfix_verdicts_total{verdict=\"outside\"} 1"))
        #expect(await rig.stop())
        #expect(rig.serve.exitedCleanly, "\(rig.serve.ending)")
    }

    @Test(
        "gpsd restarted under tagfix serve: clients are told (GPS unavailable, then connected), fixes and verdicts resume",
        .enabled(if: runnable, "needs the built tagfix and gpsd"))
    func gpsdRestarts() async throws {
        let rig = try await ServeRig()
        let client = try SocketLineClient(path: rig.socket)
        client.send(#"?WATCH={"enable":true};"#)
        #expect(await RunningTagFix.poll { !client.lines(ofClass: "FIX").isEmpty })
        try await rig.gpsd(start: false)
        #expect(
            await RunningTagFix.poll { client.lines(ofClass: "GPS").contains { $0.contains(#""status":"unavailable""#) } },
            "\(client.lines)")
        let fixesBefore = client.lines(ofClass: "FIX").count
        try await rig.gpsd(start: true)
        #expect(
            await RunningTagFix.poll { client.lines(ofClass: "GPS").last?.contains(#""status":"connected""#) == true }, "\(client.lines)")
        #expect(await RunningTagFix.poll { client.lines(ofClass: "FIX").count > fixesBefore })
        #expect(await rig.tap(expecting: 1))
        #expect(await RunningTagFix.poll { client.lines(ofClass: "VERDICT").count == 1 })
        #expect(rig.serve.process.isRunning, "\(rig.serve.ending)")
        #expect(await rig.stop())
        #expect(rig.serve.exitedCleanly, "\(rig.serve.ending)")
    }

    @Test(
        "a reader unplugged and plugged back under tagfix serve: READER removed, then attached, and taps are verified again",
        .enabled(if: runnable, "needs the built tagfix and gpsd"))
    func readerReplugged() async throws {
        let rig = try await ServeRig()
        let client = try SocketLineClient(path: rig.socket)
        client.send(#"?WATCH={"enable":true};"#)
        #expect(await rig.tap(expecting: 1))
        try rig.reader(plugged: false)
        #expect(
            await RunningTagFix.poll { client.lines(ofClass: "READER").contains { $0.contains(#""status":"removed""#) } }, "\(client.lines)"
        )
        try rig.reader(plugged: true)
        #expect(
            await RunningTagFix.poll { client.lines(ofClass: "READER").last?.contains(#""status":"attached""#) == true }, "\(client.lines)")
        #expect(await rig.tap(expecting: 2))
        #expect(await RunningTagFix.poll { client.lines(ofClass: "VERDICT").count == 2 })
        #expect(rig.serve.process.isRunning, "\(rig.serve.ending)")
        #expect(await rig.stop())
        #expect(rig.serve.exitedCleanly, "\(rig.serve.ending)")
    }

    @Test(
        "--client-timeout: a socket client that begins a command and never ends it gets an ERROR and is closed, with a line on standard error; a watcher that only reads stays and gets the next verdict",
        .enabled(if: runnable, "needs the built tagfix and gpsd"))
    func clientTimeout() async throws {
        // The process's own clock: the option's wiring is what is tested here (EventServerTests
        // test the timeout itself on a manual clock). Nothing is timed: the test waits for the close.
        let rig = try await ServeRig(extra: ["--client-timeout", "0.5"])
        let watcher = try SocketLineClient(path: rig.socket)
        watcher.send(#"?WATCH={"enable":true};"#)
        #expect(await RunningTagFix.poll { watcher.lines(ofClass: "WATCH").count == 1 })
        let half = try SocketLineClient(path: rig.socket)
        half.send(#"?WATCH={"ena"#)
        #expect(await RunningTagFix.poll { half.closed }, "\(half.lines)")
        #expect(half.lines.last?.contains(#""class":"ERROR""#) == true, "\(half.lines)")
        #expect(half.lines.last?.contains("within 0.5 s") == true, "\(half.lines)")
        #expect(await RunningTagFix.poll { rig.serve.stderr.contains("did not end it within 0.5 s") }, "\(rig.serve.stderr)")
        #expect(await rig.tap(expecting: 1))
        #expect(await RunningTagFix.poll { watcher.lines(ofClass: "VERDICT").count == 1 })
        #expect(!watcher.closed)
        #expect(await rig.stop())
        #expect(rig.serve.exitedCleanly, "\(rig.serve.ending)")
    }

    @Test(
        "SIGHUP reloads the registry: a tag placed elsewhere is outside, then confirmed once the registry moves it; a broken registry keeps the last one",
        .enabled(if: runnable, "needs the built tagfix and gpsd"))
    func reload() async throws {
        // E1 registered 300 m north of where it is (and where the GPS is): outside.
        let registry = try temporaryFile("site.csv", "id,uid,lat,lon,radius_m,name\nE1,,53.5476949,9.966,30,Gate\n")
        let rig = try await ServeRig(extra: ["--registry", registry])
        #expect(await rig.tap(expecting: 1))
        try "id,uid,lat,lon,radius_m,name\nE1,,53.545,9.966,30,Gate\n".write(toFile: registry, atomically: true, encoding: .utf8)
        kill(rig.serve.pid, SIGHUP)
        #expect(await RunningTagFix.poll { rig.serve.stderr.contains("registry reloaded") }, "\(rig.serve.stderr)")
        #expect(await rig.tap(expecting: 2))  // E2: not in the registry; its URL decides
        #expect(await rig.tap(expecting: 3))
        try "id,uid,lat,lon\nbroken".write(toFile: registry, atomically: true, encoding: .utf8)
        kill(rig.serve.pid, SIGHUP)
        #expect(await RunningTagFix.poll { rig.serve.stderr.contains("was not reloaded") }, "\(rig.serve.stderr)")
        #expect(await rig.tap(expecting: 4))
        #expect(await rig.tap(expecting: 5))
        let verdicts = try rig.logLines.map { try JSONValue.parse($0) }
        let e1 = verdicts.filter { $0["tag_id"]?.string == "E1" }.map { $0["verdict"]?.string ?? "" }
        #expect(e1 == ["outside", "confirmed", "confirmed"], "\(rig.logLines)")
        #expect(rig.serve.process.isRunning, "\(rig.serve.ending)")
        #expect(await rig.stop())
        #expect(rig.serve.exitedCleanly, "\(rig.serve.ending)")
    }

    @Test(
        "serve --publish: the verdicts on the socket and those mosquitto_sub gets from the broker are the same ones, each once",
        .enabled(
            if: runnable && PrivateMosquitto.installedPath != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/mosquitto_sub"),
            "needs the built tagfix, gpsd, mosquitto and mosquitto-clients"))
    func publishes() async throws {
        // No saved state: a kept session read back may repeat a QoS 1 message, and this counts copies.
        var options = PrivateMosquitto.Options()
        options.persistence = false
        try await PrivateMosquitto.with(options: options) { broker in
            let subscriber = try await BrokerSubscriber(port: broker.port, filter: "tagfix/+/verdict/+")
            defer { subscriber.stop() }
            let rig = try await ServeRig(extra: [
                "--publish", "mqtt://127.0.0.1:\(broker.port)/tagfix", "--site", "lab", "--device-id", "serve-pi", "--publish-linger", "30",
            ])
            let client = try SocketLineClient(path: rig.socket)
            client.send(#"?WATCH={"enable":true};"#)
            #expect(await RunningTagFix.poll { client.lines(ofClass: "WATCH").count == 1 })
            let taps = 4
            for count in 1...taps {
                #expect(await rig.tap(expecting: count), "tap \(count) gave no verdict: \(rig.serve.stderr)")
            }
            #expect(await RunningTagFix.poll { client.lines(ofClass: "VERDICT").count >= taps })
            #expect(await RunningTagFix.poll { subscriber.messages.count >= taps }, "\(subscriber.messages) \(rig.serve.stderr)")
            #expect(await rig.stop())
            #expect(rig.serve.exitedCleanly, "\(rig.serve.ending)")
            #expect(rig.serve.stderr.contains("none unsent"), "\(rig.serve.stderr)")
            /// A record's members without those only one side has (`id`, `device`).
            func members(_ value: JSONValue) -> [String: JSONValue] {
                Dictionary((value.members ?? []).filter { $0.key != "id" && $0.key != "device" }.map { ($0.key, $0.value) }) { first, _ in
                    first
                }
            }
            let onSocket = try client.lines(ofClass: "VERDICT").compactMap(record(ofVerdict:)).map { members(try JSONValue.parse($0)) }
            let published = subscriber.messages
            let onBroker = try published.map { members(try JSONValue.parse($0.payload)) }
            #expect(onSocket.count == taps)
            #expect(onBroker.count == onSocket.count, "each verdict once on the broker: \(published)")
            #expect(Set(onBroker) == Set(onSocket))
            for message in published {
                let tag = try JSONValue.parse(message.payload)["tag_id"]?.string ?? "_"
                #expect(message.topic == "tagfix/lab/verdict/\(tag)")
                #expect(try JSONValue.parse(message.payload)["device"]?.string == "serve-pi")
            }
        }
    }

    @Test(
        "two --reader: both PN532 emulators read by one verifier; each VERDICT names its reader, READER and ?DEVICES; name both",
        .enabled(if: runnable, "needs the built tagfix and gpsd"))
    func twoReaders() async throws {
        let second = try ServeRig.emulator()
        defer { second.stop() }
        let link = "/tmp/tagfix-serve-\(UUID().uuidString.prefix(8)).pn532"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: second.path)
        defer { try? FileManager.default.removeItem(atPath: link) }
        let rig = try await ServeRig(extra: ["--reader", "pn532_uart:\(link)"])
        let addresses = ["pn532_uart:\(rig.link)", "pn532_uart:\(link)"]
        let client = try SocketLineClient(path: rig.socket)
        client.send(#"?WATCH={"enable":true};"#)
        /// Each reader's status as `?DEVICES;` answers now.
        func devices() async -> [String: String] {
            let before = client.lines(ofClass: "DEVICES").count
            client.send("?DEVICES;\n")
            _ = await RunningTagFix.poll(upTo: .seconds(10)) { client.lines(ofClass: "DEVICES").count > before }
            let answer = (try? JSONValue.parse(client.lines(ofClass: "DEVICES").last ?? ""))?["devices"]?.array ?? []
            let readers = answer.filter { $0["kind"]?.string == "reader" }
            return Dictionary(readers.map { ($0["path"]?.string ?? "", $0["status"]?.string ?? "") }) { first, _ in first }
        }
        var attached = false
        for _ in 0..<300 where !attached {
            attached = await devices() == Dictionary(uniqueKeysWithValues: addresses.map { ($0, "attached") })
            if !attached { try? await Task.sleep(for: .milliseconds(200)) }
        }
        let seen = await devices()
        #expect(attached, "\(seen) \(rig.serve.stderr)")
        // A tap on the first reader, then one on the second.
        #expect(await rig.tap(expecting: 1), "\(rig.serve.stderr)")
        second.setPresent(true, tag: 0)
        #expect(await RunningTagFix.poll { rig.logLines.count == 2 }, "\(rig.serve.stderr)")
        #expect(await RunningTagFix.poll { client.lines(ofClass: "VERDICT").count == 2 })
        let readers = try client.lines(ofClass: "VERDICT").map { try JSONValue.parse($0)["reader"]?.string ?? "" }
        #expect(Set(readers) == Set(addresses), "\(client.lines(ofClass: "VERDICT"))")
        let logged = try rig.logLines.map { try JSONValue.parse($0)["reader"]?.string ?? "" }
        #expect(logged == readers, "the log and the socket agree on whose verdict each is")
        // The second reader unplugged: its READER says removed, and only it is.
        second.stop()
        try? FileManager.default.removeItem(atPath: link)
        func removed() -> [String] {
            client.lines(ofClass: "READER").compactMap { line in
                let object = try? JSONValue.parse(line)
                return object?["status"]?.string == "removed" ? object?["path"]?.string : nil
            }
        }
        #expect(await RunningTagFix.poll { !removed().isEmpty }, "\(client.lines(ofClass: "READER"))")
        #expect(Set(removed()) == [addresses[1]], "\(client.lines(ofClass: "READER"))")
        #expect(await devices() == [addresses[0]: "attached", addresses[1]: "removed"])
        #expect(rig.serve.process.isRunning, "\(rig.serve.ending)")
        #expect(await rig.stop())
        #expect(rig.serve.exitedCleanly, "\(rig.serve.ending)")
    }

    @Test(
        "tagfix serve refuses what it cannot do safely: another machine's address without --token (64), a missing token file (66), no --reader",
        arguments: [
            (["--http", "0.0.0.0:8080"], Int32(64), "--token"), (["--listen", "192.168.1.2:2948"], 64, "--token"),
            (["--http", "nowhere"], 64, "HOST:PORT"), (["--http", "127.0.0.1:8080", "--token", "/nonexistent/token"], 66, "token"),
            (["--socket-group", "tagfix-no-such-group"], 64, "no such group"), (["--reader", "pn532_uart:/dev/null"], 64, "twice"),
            (["--client-timeout", "0"], 64, "--client-timeout"), (["--client-timeout", "soon"], 64, "--client-timeout"),
            (["--reader", "pn532_uart:/dev/null:115200"], 64, "are one reader"),
        ])
    func refusals(_ options: [String], _ code: Int32, _ says: String) async throws {
        let socket = "/tmp/tagfix-serve-refusal-\(UUID().uuidString.prefix(8)).sock"
        let result = await run(["serve", "--reader", "pn532_uart:/dev/null", "--socket", socket] + options)
        #expect(result.code == code, "\(result)")
        #expect(result.err.joined().contains(says), "\(result.err)")
        #expect(!FileManager.default.fileExists(atPath: socket))
        let missing = await run(["serve", "--socket", socket])
        #expect(missing.code == 64)
    }

    /// One reader by two names would wait for itself for ever: the second is busy while the first
    /// has it, and says so every time it is asked.
    @Test("tagfix serve takes a reader once: a port and a link to it (a udev name) are one reader, refused at start (64) naming both")
    func readerByTwoNames() async throws {
        let link = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-by-id-\(UUID().uuidString)").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/dev/null")
        defer { try? FileManager.default.removeItem(atPath: link) }
        let socket = "/tmp/tagfix-serve-twice-\(UUID().uuidString.prefix(8)).sock"
        let result = await run(["serve", "--reader", "pn532_uart:/dev/null", "--reader", "pn532_uart:\(link)", "--socket", socket])
        #expect(result.code == 64, "\(result)")
        #expect(result.err.count == 1, "\(result.err)")
        #expect(
            result.err.joined().contains("--reader pn532_uart:/dev/null and --reader pn532_uart:\(link) are one reader"), "\(result.err)")
        #expect(!FileManager.default.fileExists(atPath: socket))
    }

    @Test(
        "docs/protocol.md's Python client, run as written, prints each verdict",
        .enabled(if: runnable && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "needs the built tagfix, gpsd, python3"))
    func pythonClient() async throws {
        let doc = try String(contentsOfFile: packageRoot + "/docs/protocol.md", encoding: .utf8)
        let block = try #require(doc.components(separatedBy: "```python\n").dropFirst().first?.components(separatedBy: "```").first)
        let lines = block.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.isEmpty }
        #expect(lines.count <= 20, "the client is \(lines.count) lines")
        let script = try temporaryFile("client.py", block)
        let rig = try await ServeRig()
        let python = try RunningProgram("/usr/bin/python3", [script, rig.socket])
        // The client is connected once the server counts a watching socket client; tap twice.
        var connected = false
        for _ in 0..<600 where !connected {
            connected = await Self.metric(port: rig.httpPort, "tagfix_clients{kind=\"socket\"} 1")
            if !connected { try? await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(connected, "the Python client never connected")
        #expect(await rig.tap(expecting: 1))
        #expect(await rig.tap(expecting: 2))
        #expect(await rig.stop())
        #expect(await RunningTagFix.poll { !python.isRunning && python.outputClosed && !python.stdout.isEmpty })
        let text = python.stdout
        #expect(text.contains("E1 confirmed"), "\(text)")
        #expect(text.contains("E2 outside"), "\(text)")
    }

    /// Whether `/metrics` has the line.
    static func metric(port: Int, _ line: String) async -> Bool {
        guard let client = try? SocketLineClient(port: port) else { return false }
        client.send("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
        _ = await RunningTagFix.poll(upTo: .seconds(10)) { client.closed }
        return client.lines.contains(line)
    }

    static let seleniumPython = ProcessInfo.processInfo.environment["TAGFIX_SELENIUM_PYTHON"]

    @Test(
        "the live page in headless Chromium: a tap turns its tag's circle from grey to green, gpsd's loss shows beside a live stream (screenshot in .build/test-artefacts)",
        .enabled(
            if: runnable && seleniumPython != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"),
            "needs the built tagfix, gpsd, chromium-driver and TAGFIX_SELENIUM_PYTHON (scripts/test sets it up)"))
    func browser() async throws {
        let registry = try temporaryFile(
            "site.csv", "id,uid,lat,lon,radius_m,name\nE1,,53.545,9.966,30,Gate\nE2,,53.5476949,9.966,30,Shed\n")
        let rig = try await ServeRig(extra: ["--registry", registry])
        let artefacts = packageRoot + "/.build/test-artefacts"
        try FileManager.default.createDirectory(atPath: artefacts, withIntermediateDirectories: true)
        let shot = artefacts + "/serve-live-map.png"
        try? FileManager.default.removeItem(atPath: shot)
        let browser = try RunningProgram(
            try #require(Self.seleniumPython),
            [
                packageRoot + "/Tests/Browser/live_map.py", "http://127.0.0.1:\(rig.httpPort)/", "E1", SiteReport.colour("confirmed"),
                shot,
            ])
        let text = { browser.transcript }
        // The first whole line (one its newline ends) that starts with `prefix`: a line still
        // being written is not yet what the script says.
        let line = { (prefix: String) in
            text().split(separator: "\n", omittingEmptySubsequences: false).dropLast().first { $0.hasPrefix(prefix) }.map(String.init)
        }
        #expect(await RunningTagFix.poll { line("READY") != nil || !browser.isRunning }, "\(text())")
        #expect(line("READY") == "READY \(SiteReport.colour(nil))", "the circle was not grey before the tap: \(text())")
        #expect(await rig.tap(expecting: 1))
        #expect(await RunningTagFix.poll { line("CHANGED") != nil || !browser.isRunning }, "\(text())")
        #expect(line("CHANGED") == "CHANGED \(SiteReport.colour("confirmed"))", "\(text())")
        // gpsd goes: the page says so in the GPS's place, and still says its stream is live (a
        // device's news once overwrote "live", and a page loaded as gpsd connected never said it).
        try await rig.gpsd(start: false)
        #expect(await RunningTagFix.poll { line("DEVICES") != nil || !browser.isRunning }, "\(text())")
        let devices = line("DEVICES ")?.dropFirst("DEVICES ".count) ?? ""
        #expect(devices.hasPrefix("stream=live; readers=reader attached"), "\(text())")
        #expect(devices.contains("gps=GPS unavailable"), "\(text())")
        _ = await RunningTagFix.poll { !browser.isRunning }
        if browser.isRunning { browser.signal(SIGTERM) }
        #expect(await rig.stop())
        #expect(FileManager.default.fileExists(atPath: shot), "no screenshot at \(shot)")
    }
}

/// Runs `work` on a thread of its own (a broker's start waits), off the cooperative pool.
func offThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DeviceThread.detach(name: "test helper") { continuation.resume(with: Result { try work() }) }
    }
}

/// `mosquitto_sub -v` on a private broker, started as the product starts programs, known to be
/// subscribed once a probe it asked for reaches it; what it receives, topic and payload.
final class BrokerSubscriber: Sendable {
    private let program: RunningProgram

    init(port: Int, filter: String) async throws {
        program = try RunningProgram(
            "/usr/bin/mosquitto_sub", ["-h", "127.0.0.1", "-p", String(port), "-q", "1", "-v", "-t", filter, "-t", "probe", "-W", "200"],
            standardError: .discard)
        // A probe at a time, until one arrives.
        var subscribed = false
        for _ in 0..<300 where !subscribed {
            _ = try await TestProgram.run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", String(port), "-t", "probe", "-m", "probe"])
            subscribed = await RunningProgram.poll(upTo: .milliseconds(200)) { [program] in program.stdoutLines.contains("probe probe") }
        }
        if !subscribed { await program.stop() }
        try #require(subscribed, "mosquitto_sub never subscribed")
    }

    /// The messages other than the probe.
    var messages: [(topic: String, payload: String)] {
        program.stdoutLines.filter { !$0.hasPrefix("probe ") }.compactMap { line in
            line.firstIndex(of: " ").map { (String(line[..<$0]), String(line[line.index(after: $0)...])) }
        }
    }

    /// Stops it without waiting (SIGTERM, SIGKILL a second later if it lingers), for a `defer`.
    func stop() { program.terminate() }
}
