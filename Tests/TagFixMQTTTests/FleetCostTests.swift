import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import Testing

@testable import TagFixMQTT

/// The example site's messages as a publisher sends them (the log's line, `id` and `device`).
private func examplePayloads() throws -> [[UInt8]] {
    try exampleVerdicts().enumerated().map { index, verdict in
        FleetMessage.payload(line: Array(SessionRecord(verdict).encoded().utf8), id: "pi:0123456789abcdef:\(index + 1)", device: "pi")
    }
}

/// Each payload, and ways a broken or unusual publisher could change it.
private func variants(of payload: [UInt8]) -> [(String, [UInt8])] {
    let text = String(decoding: payload, as: UTF8.self)
    var all: [(String, [UInt8])] = [("as sent", payload)]
    for cut in [1, payload.count / 3, payload.count / 2, payload.count - 1] { all.append(("cut at \(cut)", Array(payload[..<cut]))) }
    func edited(_ name: String, _ change: (String) -> String) { all.append((name, Array(change(text).utf8))) }
    edited("a duplicate id") { $0.replacingOccurrences(of: "{\"time\"", with: "{\"id\":\"x\",\"time\"") }
    edited("a duplicate nested name") { $0.replacingOccurrences(of: "\"lat\":", with: "\"lat\":1,\"lat\":") }
    edited("a \\u escape") { $0.replacingOccurrences(of: "\"verdict\":\"", with: "\"verdict\":\"\\u0041") }
    edited("an escaped quote in the message") { $0.replacingOccurrences(of: "\"message\":\"", with: "\"message\":\"\\\"") }
    edited("an escape in the id") { $0.replacingOccurrences(of: "\"id\":\"", with: "\"id\":\"\\n") }
    edited("an exponent") { $0.replacingOccurrences(of: "\"accuracy_m\":", with: "\"accuracy_m\":1e3,\"x\":") }
    edited("an exponent out of range") { $0.replacingOccurrences(of: "\"accuracy_m\":", with: "\"accuracy_m\":1e999,\"x\":") }
    edited("a leading zero") { $0.replacingOccurrences(of: "\"accuracy_m\":", with: "\"accuracy_m\":01,\"x\":") }
    edited("a number as the id") { $0.replacingOccurrences(of: "\"id\":\"", with: "\"id\":5,\"y\":\"") }
    edited("no device") { $0.replacingOccurrences(of: "\"device\":", with: "\"devices\":") }
    edited("text after it") { $0 + " x" }
    edited("whitespace around it") { "\n " + $0 + "\r\n" }
    edited("an array") { "[" + $0 + "]" }
    edited("a control character") { $0.replacingOccurrences(of: "\"verdict\":\"", with: "\"verdict\":\"\u{01}") }
    var invalid = payload
    if let plusMinus = invalid.firstIndex(of: 0xC2) { invalid[plusMinus + 1] = 0x20 }
    all.append(("a broken UTF-8 sequence", invalid))
    var surrogate = payload
    if let plusMinus = surrogate.firstIndex(of: 0xC2) { surrogate.replaceSubrange(plusMinus...plusMinus + 1, with: [0xED, 0xA0, 0x80]) }
    all.append(("an encoded surrogate", surrogate))
    return all
}

@Suite("What publishing and collecting cost")
struct FleetCostTests {
    @Test("the collector's quick scan of a message gives what the JSON parser gives, or leaves it to the parser")
    func quickScan() throws {
        let payloads = try examplePayloads()
        #expect(!payloads.isEmpty)
        for payload in payloads {
            for (name, bytes) in variants(of: payload) {
                let quick = bytes.withUnsafeBytes { MessageScan.fields($0) }
                let parsed = bytes.withUnsafeBytes { FleetMessageFields.parsed($0) }
                if let quick { #expect(quick == parsed, "\(name): the scan and the parser disagree") }
                if parsed == nil { #expect(quick == nil, "\(name): the parser refuses it, the scan must not take it") }
                if name == "as sent" || name == "whitespace around it" || name == "an escaped quote in the message" {
                    #expect(quick != nil, "\(name): a message as TagFix sends it takes the quick path")
                    #expect(quick?.id?.hasPrefix("pi:") == true)
                }
            }
        }
    }

    @Test(
        "a verdict topic's site, found in one pass, is what splitting the topic at each / gives",
        arguments: [
            "tagfix/harbour/verdict/T01", "tagfix/harbour/verdict/_", "tagfix/harbour/verdict/", "tagfix//verdict/T01",
            "tagfix/harbour/verdict/T01/x", "tagfix/harbour/verdicts/T01", "tagfix/harbour/verdict", "/harbour/verdict",
            "tagfix/harbour/tag/T01/last", "tagfix/Møller/verdict/T%2F1", "", "///",
        ])
    func site(topic: String) {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        let expected = levels.count == 4 && levels[2] == "verdict" ? String(levels[1]) : nil
        #expect(FleetTopics.site(ofVerdictTopic: topic) == expected)
    }

    @Test("the publisher reads each announced record's line from the log: whole lines only, each once")
    func logTail() throws {
        let folder = try temporaryFolder()
        let path = folder + "/session.jsonl"
        let lines = try exampleVerdicts().map { SessionRecord($0).encoded() }
        #expect(lines.count >= 3)
        try (lines[0] + "\n\n" + lines[1] + "\n" + lines[2].prefix(10)).write(toFile: path, atomically: true, encoding: .utf8)
        let tail = try LogTail(path: path)
        #expect(tail.readLines(limit: 5).map { String(decoding: $0, as: UTF8.self) } == [lines[0], lines[1]])
        #expect(tail.readLines(limit: 5).isEmpty, "a line not yet whole waits")
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data((lines[2].dropFirst(10) + "\n" + lines[0] + "\n").utf8))
        try handle.close()
        #expect(tail.readLines(limit: 1).map { String(decoding: $0, as: UTF8.self) } == [lines[2]])
        #expect(tail.readLines(limit: 1).map { String(decoding: $0, as: UTF8.self) } == [lines[0]])
        #expect(tail.readLines(limit: 1).isEmpty)
    }

    @Test("a verdict is sent with the bytes its log holds, and counts as unsent until its line is read")
    func announcedVerdicts() throws {
        let folder = try temporaryFolder()
        let log = folder + "/session.jsonl"
        let sessionLog = try SessionLog(path: log)
        let verdicts = try exampleVerdicts()
        let settings = try MQTTSettings.parse(
            address: "mqtt://127.0.0.1:1/tagfix", passwordFile: nil, caFile: nil, version: nil, clientID: "t")
        let publisher = try FleetPublisher(settings: settings, site: "harbour", device: "pi", logPath: log)
        // The fan-out's order: on the disk first, then the publisher hears of it.
        for verdict in verdicts {
            try sessionLog.append(SessionRecord(verdict).encoded())
            publisher.receive(verdict, now: nil)
        }
        #expect(publisher.unacknowledged == verdicts.count, "announced, not read yet: still unsent")
        publisher.core.readAnnounced()
        #expect(publisher.unacknowledged == verdicts.count)
        let entries = publisher.core.state.withLock { state in
            var all: [OutboxQueue.Entry] = []
            var queue = state.queue
            while let next = queue.next() {
                all.append(next)
                queue.sent(next.sequence, mid: Int32(next.sequence))
            }
            return all
        }
        let logged = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map { Array($0.utf8) }
        #expect(entries.count == logged.count)
        let session = FleetMessage.session(firstLine: logged[0])
        for (entry, line) in zip(entries, logged) {
            let id = FleetMessage.id(device: "pi", session: session, sequence: entry.sequence)
            #expect(entry.payload == FleetMessage.payload(line: line, id: id, device: "pi"))
        }
        for (entry, verdict) in zip(entries, verdicts) {
            #expect(entry.topic == publisher.topics.verdict(tagID: verdict.tagID))
        }
    }

    @Test(
        "a message built from the session's quoted parts is FleetMessage's, byte for byte, and its topics are FleetTopics'",
        arguments: ["pi", "tech \"7\" \\ lab", "Møller-værksted", "tab\there", "ctl\u{01}x"])
    func builtMessages(device: String) throws {
        let topics = try FleetTopics(prefix: "tagfix", site: "harbour", device: device)
        let lines = try exampleVerdicts().map { Array(SessionRecord($0).encoded().utf8) }
        let odd = ["{}", "{ }", "[1]", "}", "", "{\"a\":1}\r\n ", "{\"a\":\"}\"}"].map { Array($0.utf8) }
        let session = FleetMessage.session(firstLine: lines[0])
        var builder = MessageBuilder(topics: topics, session: session)
        let tags = try exampleVerdicts().map(\.tagID) + [nil, "_", "a/b", "T01"]
        for (index, line) in (lines + odd).enumerated() {
            for sequence in [1, 9, 10, 12_345, index + 1] {
                let tagID = tags[index % tags.count]
                let entry = builder.entry(line: line, tagID: tagID, sequence: sequence)
                let id = FleetMessage.id(device: device, session: session, sequence: sequence)
                #expect(entry.payload == FleetMessage.payload(line: line, id: id, device: device), "line \(index + 1), record \(sequence)")
                #expect(entry.topic == topics.verdict(tagID: tagID))
                #expect(entry.lastTopic == topics.last(tagID: tagID))
                #expect(entry.sequence == sequence)
            }
        }
    }

    @Test("acknowledgements go to the disk once nothing is in flight, or a batch has gathered")
    func settleBatches() throws {
        var queue = OutboxQueue(window: 8)
        for sequence in 1...3 { queue.add(.init(sequence: sequence, topic: "t", lastTopic: "l", payload: [])) }
        for mid in Int32(1)...3 {
            let entry = try #require(queue.next())
            queue.sent(entry.sequence, mid: mid)
        }
        var state = PublisherCore.State(queue: queue, nextSequence: 4)
        #expect(!state.settleNow, "nothing acknowledged")
        for mid in Int32(1)...2 { state.settled.append(state.queue.acknowledged(mid: mid) ?? 0) }
        #expect(!state.settleNow, "one still in flight: its PUBACK comes soon, and one fsync does for all")
        #expect(state.unsettled == 3, "acknowledged but not on the disk: not counted as sent")
        state.settled.append(state.queue.acknowledged(mid: 3) ?? 0)
        #expect(state.settleNow, "nothing in flight: recorded at once")
        #expect(state.settled == [1, 2, 3])
        var burst = PublisherCore.State(queue: OutboxQueue(window: 1024), nextSequence: 1)
        for sequence in 1...PublisherCore.settleBatch + 1 {
            burst.queue.add(.init(sequence: sequence, topic: "t", lastTopic: "l", payload: []))
        }
        for mid in 1...PublisherCore.settleBatch + 1 {
            let entry = try #require(burst.queue.next())
            burst.queue.sent(entry.sequence, mid: Int32(mid))
        }
        for mid in 1..<PublisherCore.settleBatch { burst.settled.append(burst.queue.acknowledged(mid: Int32(mid)) ?? 0) }
        #expect(!burst.settleNow)
        burst.settled.append(burst.queue.acknowledged(mid: Int32(PublisherCore.settleBatch)) ?? 0)
        #expect(burst.settleNow, "a full batch is recorded while more are in flight")
    }
}
