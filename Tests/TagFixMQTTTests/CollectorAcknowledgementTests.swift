import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixMQTT
@testable import TagFixStore

/// A collector acknowledges a verdict only once it is stored. libmosquitto 2.0 queues a QoS 1
/// message's PUBACK before it hands the message over; written at once, a collector that could not
/// store it (a locked or full disk) or was killed before its commit lost it for good, since the
/// broker had its acknowledgement.
@Suite(
    "The collector acknowledges what it has stored", .enabled(if: haveBroker, "needs mosquitto and mosquitto-clients"),
    .timeLimit(.minutes(3)))
struct CollectorAcknowledgementTests {
    /// Another program holds the fleet store's write lock (python3's sqlite3, `BEGIN EXCLUSIVE`)
    /// until `release()`.
    struct Lock {
        let process: RunningProgram

        static func hold(_ path: String) async throws -> Lock {
            let process = try RunningProgram(
                "/usr/bin/python3",
                [
                    "-c",
                    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()",
                    path,
                ], input: .pipe)
            guard await process.waitFor("locked") else {
                await process.kill()
                throw CocoaError(.fileLocking)
            }
            return Lock(process: process)
        }

        func release() async {
            process.closeInput()
            _ = await process.exit()
        }
    }

    @Test(
        "a verdict the store could not take is not acknowledged: the broker sends it again, and it is stored once",
        arguments: ["5", "3.1.1"])
    func unstoredIsNotAcknowledged(version: String) async throws {
        try await PrivateMosquitto.with { broker in
            let path = try temporaryFolder() + "/fleet.sqlite"
            let store = try FleetStore(path: path, create: true)
            let notes = Mutex<[String]>([])
            try await withCollector(
                broker, store: store, id: "office-ack", version: version, note: { line in notes.withLock { $0.append(line) } }
            ) { office in
                let verdicts = try exampleVerdicts()
                func publish(_ index: Int) async throws {
                    let payload = FleetMessage.payload(
                        line: Array(SessionRecord(verdicts[index]).encoded().utf8), id: "pi:0123456789abcdef:\(index + 1)", device: "pi")
                    try await publishOnce(broker, topic: "tagfix/harbour/verdict/T\(index)", payload: payload)
                }

                try await publish(0)
                #expect(await RunningProgram.poll { (try? store.count()) == 1 })

                // The store's writer is locked for longer than its busy timeout: the commit fails.
                let lock = try await Lock.hold(path)
                try await publish(1)
                #expect(
                    await RunningProgram.poll(upTo: .seconds(30)) { notes.withLock { $0.contains { $0.contains("cannot store") } } },
                    "the commit never failed: \(notes.withLock { $0 })")
                await lock.release()

                // Sent again on the next connection, and kept this time.
                #expect(
                    await RunningProgram.poll(upTo: .seconds(30)) { (try? store.count()) == 2 },
                    "the verdict was acknowledged unstored: \(notes.withLock { $0 })")
                try await publish(2)
                #expect(await RunningProgram.poll { (try? store.count()) == 3 })
                let ids = try store.all().map(\.id)
                #expect(ids.sorted() == (1...3).map { "pi:0123456789abcdef:\($0)" })
                #expect(await RunningProgram.poll { office.counts.stored == 3 }, "the counts follow the commit: \(office.counts)")
            }
        }
    }

    /// A full disk fails each commit at once: the collector tries again, waiting longer each time,
    /// says so once (not once a try), and, when it lets a connection go rather than keep the
    /// broker waiting, that is no fight over its client id and must not end the collector
    /// (`TakeoverWatch` counts only closes the broker made).
    @Test("a full disk: the collector keeps trying, says so once, and stores every verdict once there is room")
    func fullDisk() async throws {
        try await PrivateMosquitto.with { broker in
            let path = try temporaryFolder() + "/fleet.sqlite"
            let store = try FleetStore(path: path, create: true)
            let notes = Mutex<[String]>([])
            try await withCollector(broker, store: store, id: "office-full", note: { line in notes.withLock { $0.append(line) } }) {
                office in
                let ended = Mutex<String?>(nil)
                let watcher = Task { if let why = await office.ended() { ended.withLock { $0 = why } } }
                defer { watcher.cancel() }

                try store.limitPages(try store.pageCount())
                let verdicts = try exampleVerdicts()
                let count = 40
                for index in 0..<count {
                    let payload = FleetMessage.payload(
                        line: Array(SessionRecord(verdicts[index % verdicts.count]).encoded().utf8), id: "pi:0123456789abcdef:\(index + 1)",
                        device: "pi")
                    try await publishOnce(broker, topic: "tagfix/harbour/verdict/T\(index)", payload: payload)
                }
                let failures = { notes.withLock { $0.filter { $0.contains("cannot store") }.count } }
                #expect(
                    await RunningProgram.poll(upTo: .seconds(90)) {
                        office.counts.storeFailures >= TakeoverWatch.limit && office.counts.connections >= 2
                    },
                    "the store never filled: \(notes.withLock { $0 })")
                // Let go after StoreRetry.longestHold without a word to the broker, and connected again.
                #expect(failures() == 1, "said once, not once a try: \(notes.withLock { $0 })")
                #expect(ended.withLock { $0 } == nil, "a full disk was taken for a fight over the client id")
                let before = try store.count()
                #expect(before < count)

                try store.limitPages(nil)
                #expect(
                    await RunningProgram.poll(upTo: .seconds(30)) { (try? store.count()) == count }, "\(notes.withLock { $0.suffix(4) })")
                #expect(ended.withLock { $0 } == nil)
            }
        }
    }

    /// A kept session's backlog comes in bursts: each read of the socket takes every packet that
    /// waits, and stores them in one transaction. Deciding "nothing more waits" by errno stopped
    /// after every message (libmosquitto's wake-up byte into its own full socket pair leaves
    /// EAGAIN after each queued PUBACK): a commit a message, a quarter of the rate.
    @Test("a backlog of verdicts is stored in bursts, not a transaction a message")
    func backlogInBursts() async throws {
        try await PrivateMosquitto.with { broker in
            let store = try FleetStore(path: try temporaryFolder() + "/fleet.sqlite", create: true)
            // Subscribe once (the broker keeps the session), leave, and let 400 verdicts wait.
            try await withCollector(broker, store: store, id: "office-burst") { _ in }
            do {
                let path = try temporaryFolder() + "/session.jsonl"
                let log = try SessionLog(path: path)
                let publisher = try FleetPublisher(
                    settings: try MQTTSettings.parse(
                        address: "mqtt://127.0.0.1:\(broker.port)/tagfix", passwordFile: nil, caFile: nil, version: nil, clientID: "x"),
                    site: "harbour", device: "pi-1", logPath: path)
                publisher.start()
                let fanOut = VerdictFanOut([SessionLogSink(log), publisher])
                let verdicts = try exampleVerdicts()
                for index in 0..<400 { fanOut.send(.verdict(verdicts[index % verdicts.count])) }
                #expect(await publisher.finish(linger: .seconds(60), clock: MonotonicClock()).unsent == 0)
            }
            try await withCollector(broker, store: store, id: "office-burst") { office in
                // The counts follow the commit (the rows are visible to this reader a moment before
                // the collector adds them up): wait for both.
                #expect(await RunningProgram.poll { (try? store.count()) == 400 && office.counts.stored == 400 }, "\(office.counts)")
                #expect(office.counts.commits <= 40, "\(office.counts.commits) transactions for 400 verdicts")
            }
        }
    }
}
