import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixScenarios
import TagFixTesting
import Testing

@testable import TagFixMQTT

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The example site's verdicts, replayed (the same as `verify --scenario Examples/site/scenario.json`).
func exampleVerdicts() throws -> [Verdict] {
    let scenario = try ScenarioLoader.load(path: packageRoot + "/Examples/site/scenario.json")
    let registry = try RegistryFile.parse(try TextFile.read(packageRoot + "/Examples/site/" + (scenario.registryPath ?? "")))
    return ScenarioReplay.verdicts(scenario, verifier: Verifier(policy: scenario.policy, registry: registry))
}

/// A fresh folder for one test.
func temporaryFolder() throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-mqtt-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder
}

@Suite("Fleet topics and messages")
struct FleetTopicTests {
    @Test(
        "every verdict topic of the example site has exactly four levels, and names its site and tag",
        arguments: ["harbour", "Site 7", "ü-hall"])
    func fourLevels(site: String) throws {
        let topics = try FleetTopics(prefix: "tagfix", site: site, device: "pi-3")
        let verdicts = try exampleVerdicts()
        #expect(!verdicts.isEmpty)
        for verdict in verdicts {
            let topic = topics.verdict(tagID: verdict.tagID)
            let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
            #expect(levels.count == 4, "\(topic)")
            #expect(FleetTopics.site(ofVerdictTopic: topic) == site)
            let tagLevel = String(levels[3])
            #expect(tagLevel == verdict.tagID ?? "_")
            #expect(topics.last(tagID: verdict.tagID).split(separator: "/").count == 5)
        }
        #expect(topics.status == "tagfix/\(site)/device/pi-3/status")
    }

    @Test(
        "a site, prefix or device that is not one level is refused with a typed error",
        arguments: ["a/b", "north+", "#", "", "$SYS", "x\0y"])
    func refused(level: String) {
        #expect(throws: FleetTopicError.self) { try FleetTopics(prefix: "tagfix", site: level, device: "d") }
        #expect(throws: FleetTopicError.self) { try FleetTopics(prefix: level, site: "s", device: "d") }
        #expect(throws: FleetTopicError.self) { try FleetTopics(prefix: "tagfix", site: "s", device: level) }
        #expect(throws: FleetTopicError.self) { try MQTTAddress("mqtt://broker/\(level)") }
    }

    @Test("a tag id with separators or wildcards stays one level, and two ids never share one")
    func tagLevels() {
        let ids = ["T01", "a/b", "a%2Fb", "+", "#", "_", "%", "x y", "a+b#c"]
        let levels = ids.map { FleetTopics.tagLevel($0) }
        for level in levels {
            #expect(!level.contains("/") && !level.contains("+") && !level.contains("#") && !level.isEmpty)
        }
        #expect(Set(levels).count == ids.count)
        #expect(!levels.contains("_"), "_ means no tag id")
        #expect(FleetTopics.tagLevel(nil) == "_")
    }

    @Test(
        "broker addresses",
        arguments: [
            ("mqtt://broker.example/tagfix", "mqtt://broker.example:1883/tagfix"),
            ("mqtts://ops@broker.example:9883/fleet", "mqtts://ops@broker.example:9883/fleet"),
            ("mqtts://broker/p", "mqtts://broker:8883/p"),
            ("mqtt://[::1]:1884/p", "mqtt://[::1]:1884/p"),
        ])
    func addresses(text: String, canonical: String) throws {
        #expect(try MQTTAddress(text).description == canonical)
    }

    @Test(
        "addresses that cannot work are refused",
        arguments: [
            "http://b/p", "mqtt://b", "mqtt://b:0/p", "mqtt://u:pw@b/p", "mqtt:///p", "mqtt://b/a/b", "mqtt://::1:1883/p", "mqtt://[::1/p",
            "mqtt://[::1]1883/p",
        ])
    func badAddresses(text: String) {
        #expect(throws: FleetTopicError.self) { try MQTTAddress(text) }
    }

    @Test("a message is the log's line with its id and device, the same bytes every time")
    func payload() throws {
        for (index, verdict) in try exampleVerdicts().enumerated() {
            let line = Array(SessionRecord(verdict).encoded().utf8)
            let session = FleetMessage.session(firstLine: line)
            let id = FleetMessage.id(device: "pi", session: session, sequence: index + 1)
            let payload = FleetMessage.payload(line: line, id: id, device: "pi")
            #expect(payload == FleetMessage.payload(line: line, id: id, device: "pi"))
            let value = try JSONValue.parse(payload)
            #expect(value["id"]?.string == id)
            #expect(value["device"]?.string == "pi")
            #expect(value["verdict"]?.string == verdict.kind.name)
            #expect(SessionLog.isRecord(value))
            #expect(payload.starts(with: Array(SessionRecord.linePrefix.utf8)))
        }
    }
}

@Suite("The outbox queue")
struct OutboxQueueTests {
    func entry(_ sequence: Int) -> OutboxQueue.Entry {
        .init(
            sequence: sequence, topic: "p/s/verdict/T\(sequence)", lastTopic: "p/s/tag/T\(sequence)/last",
            payload: Array("\(sequence)".utf8))
    }

    @Test("sends in order within its window; a PUBACK settles one; a lost connection sends the rest again in order", arguments: [1, 3, 32])
    func order(window: Int) {
        var queue = OutboxQueue(window: window)
        for sequence in 1...40 { queue.add(entry(sequence)) }
        var sent: [Int] = []
        var mid: Int32 = 100
        while let next = queue.next() {
            mid += 1
            queue.sent(next.sequence, mid: mid)
            sent.append(next.sequence)
        }
        #expect(sent == Array(1...min(window, 40)))
        #expect(queue.acknowledged(mid: 101) == 1)
        #expect(queue.acknowledged(mid: 101) == nil, "a PUBACK settles once")
        #expect(queue.acknowledged(mid: 7) == nil, "not a verdict's message")
        queue.connectionLost()
        var again: [Int] = []
        while let next = queue.next() {
            mid += 1
            queue.sent(next.sequence, mid: mid)
            again.append(next.sequence)
        }
        #expect(again == Array(2...min(window + 1, 40)))
        #expect(queue.unacknowledged == 39)
    }

    @Test("no more in flight than the window or the connection's send maximum, whichever is smaller", arguments: [1, 20, 32])
    func sendMaximum(limit: Int) {
        var queue = OutboxQueue(window: 24)
        for sequence in 1...60 { queue.add(entry(sequence)) }
        let first = queue.ready(limit: limit)
        #expect(first.map(\.sequence) == Array(1...min(24, limit)))
        for (offset, entry) in first.enumerated() { queue.sent(entry.sequence, mid: Int32(offset + 1)) }
        #expect(queue.ready(limit: limit).isEmpty, "the window is full")
        #expect(queue.next(limit: limit) == nil)
        #expect(queue.acknowledged(mid: 1) == 1)
        #expect(queue.ready(limit: limit).map(\.sequence) == [min(24, limit) + 1], "one PUBACK makes room for one")
    }

    @Test("each verdict goes as its tag's retained last (QoS 0) and then the verdict (QoS 1), in the log's order")
    func messageOrder() {
        let batch = (1...5).map(entry)
        let messages = OutboxQueue.messages(batch)
        #expect(messages.count == 10)
        for (index, entry) in batch.enumerated() {
            let last = messages[2 * index]
            let verdict = messages[2 * index + 1]
            #expect(last == .last(entry), "the last before its verdict: the verdict's PUBACK says the broker took it")
            #expect(last.topic == entry.lastTopic && last.qos == 0 && last.retain && last.payload == entry.payload)
            #expect(verdict == .verdict(entry))
            #expect(verdict.topic == entry.topic && verdict.qos == 1 && !verdict.retain && verdict.payload == entry.payload)
        }
    }

    @Test("a publisher's acknowledgements survive a restart, and the same log gives the same messages")
    func restart() throws {
        let folder = try temporaryFolder()
        let log = folder + "/session.jsonl"
        let sessionLog = try SessionLog(path: log)
        for verdict in try exampleVerdicts() { try sessionLog.append(SessionRecord(verdict).encoded()) }
        let settings = try MQTTSettings.parse(
            address: "mqtt://127.0.0.1:1/tagfix", passwordFile: nil, caFile: nil, version: nil, clientID: "t")
        let first = try FleetPublisher(settings: settings, site: "harbour", device: "pi", logPath: log)
        let entries = first.core.state.withLock { state in
            var all: [OutboxQueue.Entry] = []
            var queue = state.queue
            while let next = queue.next() {
                all.append(next)
                queue.sent(next.sequence, mid: Int32(next.sequence))
            }
            return all
        }
        #expect(entries.map(\.sequence) == Array(1...entries.count))
        #expect(entries.count == (try exampleVerdicts()).count)
        // Acknowledge three, as the client's thread does.
        first.core.acks.withLock { $0.record([1, 2, 4]) }
        let second = try FleetPublisher(settings: settings, site: "harbour", device: "pi", logPath: log)
        let again = second.core.state.withLock { state in
            var all: [OutboxQueue.Entry] = []
            var queue = state.queue
            while let next = queue.next() {
                all.append(next)
                queue.sent(next.sequence, mid: Int32(next.sequence))
            }
            return all
        }
        #expect(again.map(\.sequence) == entries.map(\.sequence).filter { ![1, 2, 4].contains($0) })
        for entry in again {
            #expect(entries.first { $0.sequence == entry.sequence } == entry, "a re-sent message has the same id, topic and bytes")
        }
        #expect(throws: FleetPublishError.self) { try FleetPublisher(settings: settings, site: "harbour", device: "other", logPath: log) }
    }

    @Test("a line of LOG.acks torn by a kill settles nothing, and is cut off", arguments: ["1", "1\r", "# tagfix out"])
    func tornAcknowledgement(torn: String) throws {
        let folder = try temporaryFolder()
        let log = folder + "/session.jsonl"
        let sessionLog = try SessionLog(path: log)
        for verdict in try exampleVerdicts() { try sessionLog.append(SessionRecord(verdict).encoded()) }
        let header = torn.hasPrefix("#") ? "" : "# tagfix outbox: device pi\n2\n"
        try (header + torn).write(toFile: log + ".acks", atomically: true, encoding: .utf8)
        let settings = try MQTTSettings.parse(
            address: "mqtt://127.0.0.1:1/tagfix", passwordFile: nil, caFile: nil, version: nil, clientID: "t")
        let publisher = try FleetPublisher(settings: settings, site: "harbour", device: "pi", logPath: log)
        let waiting = publisher.core.state.withLock { state in
            var sequences: [Int] = []
            var queue = state.queue
            while let next = queue.next() {
                sequences.append(next.sequence)
                queue.sent(next.sequence, mid: Int32(next.sequence))
            }
            return sequences
        }
        #expect(waiting.first == 1, "record 1 was never acknowledged: \(waiting)")
        #expect(waiting.contains(2) == torn.hasPrefix("#"))
        let text = try String(contentsOfFile: log + ".acks", encoding: .utf8)
        #expect(text == (torn.hasPrefix("#") ? "" : header) + (torn.hasPrefix("#") ? "# tagfix outbox: device pi\n" : ""))
    }

    @Test("at the end it waits --publish-linger on the session's clock, then says how many are unsent")
    func linger() async throws {
        let folder = try temporaryFolder()
        let log = folder + "/session.jsonl"
        let sessionLog = try SessionLog(path: log)
        let verdicts = try exampleVerdicts()
        // Nothing listens on port 1: the broker is down for the whole session.
        let settings = try MQTTSettings.parse(
            address: "mqtt://127.0.0.1:1/tagfix", passwordFile: nil, caFile: nil, version: nil, clientID: "t")
        let publisher = try FleetPublisher(settings: settings, site: "harbour", device: "pi", logPath: log)
        publisher.start()
        let fanOut = VerdictFanOut([SessionLogSink(sessionLog), publisher])
        for verdict in verdicts { fanOut.send(.verdict(verdict)) }
        let clock = ManualClock()
        async let outcome = publisher.finish(linger: .seconds(10), clock: clock)
        while clock.sleeperCount == 0 { await Task.yield() }
        clock.advance(by: .seconds(9))
        #expect(clock.sleeperCount == 1, "still waiting before the linger is over")
        clock.advance(by: .seconds(1))
        let result = await outcome
        #expect(result.unsent == verdicts.count)
        #expect(result.acknowledged == 0)
        #expect(result.summary(address: "mqtt://127.0.0.1:1/tagfix", log: log, linger: .seconds(10)).contains("\(verdicts.count) unsent"))
    }
}

@Suite("Telling a fight over one client id from a broker that is away")
struct TakeoverWatchTests {
    typealias Connection = (life: Double?, ending: TakeoverWatch.Ending)
    static func quick(_ count: Int, _ ending: TakeoverWatch.Ending = .dropped) -> [Connection] {
        Array(repeating: (0.3, ending), count: count)
    }

    /// Each connection: how long it lived once accepted (seconds; nil when the broker never
    /// accepted it) and how it ended, with `gap` seconds before the next; and after which
    /// connection (1-based) the watch must say "fight", if any.
    @Test(
        "the watch ends a client told its session was taken while young, or after five accepted connections in a row closed with no reason, each within 2 s, all within 10 s",
        arguments: [
            ("two clients, one id: each connection lives until the other reconnects", quick(6), 0.2, 5),
            ("the one that was there: its first loss is a long session's, so it counts one fewer", [(3_600, .dropped)] + quick(6), 0.2, 6),
            ("a broker down: nothing accepted, nothing counted", Array(repeating: (nil, .refused), count: 7), 0.2, nil),
            ("a refusal starts the count again", quick(4) + [(nil, .refused)] + quick(5), 0.2, 10),
            ("a broker restarted a few times, a session that lasts between", quick(4) + [(30, .dropped)] + quick(4), 0.2, nil),
            ("closed at 2 s exactly is not quick", Array(repeating: (2, .dropped), count: 6), 0.2, nil),
            ("a broker that gives a reason each time (quota, ACL): no fight", quick(8, .other), 0.2, nil),
            ("a store that fails each time: dropped by the client itself, no fight", quick(8, .other), 0.2, nil),
            ("quick drops 3 s apart never make five within 10 s", quick(8), 3, nil),
            ("the broker says taken over (0x8E) to a young connection: at once", quick(1, .takenOver), 0.2, 1),
            ("taken over after a long session: once more, then taken over young", [(30, .takenOver)] + quick(1, .takenOver), 0.2, 2),
        ] as [(String, [Connection], Double, Int?)])
    func fight(_ what: String, connections: [Connection], gap: Double, endsAfter: Int?) {
        var watch = TakeoverWatch()
        var now = Timestamp(nanosecondsSinceEpoch: 1_796_000_000_000_000_000)
        var ended: Int?
        for (index, connection) in connections.enumerated() where ended == nil {
            let accepted = connection.life.map { _ in now }
            now = now.advanced(by: .nanoseconds(Int64((connection.life ?? 0.1) * 1e9)))
            if let decision = watch.ended(connection.ending, acceptedAt: accepted, at: now) {
                ended = index + 1
                #expect(decision == (connection.ending == .takenOver ? .takenOver : .fight), "\(what)")
            }
            now = now.advanced(by: .nanoseconds(Int64(gap * 1e9)))
        }
        #expect(ended == endsAfter, "\(what)")
    }
}
