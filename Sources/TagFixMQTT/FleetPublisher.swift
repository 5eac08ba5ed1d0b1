import Foundation
import Glibc
import Synchronization
public import TagFixCore
public import TagFixDevices
import TagFixSystem

/// `verify --publish`: every verdict of the session log, to the broker, once acknowledged
/// (docs/fleet.md). The log is the outbox: this sink is not durable, so the fan-out hands it a
/// verdict only after the log has it on the disk; `receive` notes the verdict's tag and wakes the
/// client's thread, which reads the record's line back from the log (the bytes on the disk, not
/// encoded a second time), publishes it (QoS 1) and records the PUBACKs in `LOG.acks`. A run on a
/// log with unacknowledged records sends them first, in order, with the ids and bytes they had.
public final class FleetPublisher: VerdictSink {
    public let topics: FleetTopics
    public let logPath: String
    let core: PublisherCore
    private let client: MQTTClient

    /// What the session sent, for the closing line.
    public struct Outcome: Sendable, Hashable {
        /// Verdicts the broker acknowledged during this run.
        public var acknowledged: Int
        /// Verdicts of the log still unacknowledged (they go with the next run on the log).
        public var unsent: Int
        /// The last connection problem, if the broker was not reachable at the end.
        public var problem: String?
    }

    /// Reads the log's records and the acknowledgements beside it, and gets ready to publish.
    /// - Parameters:
    ///   - settings: the broker (its client id is replaced by one made from `device`).
    ///   - site, device: the topic levels (refused when not exactly one level each).
    ///   - logPath: the session log (a regular file: the outbox).
    /// - Throws: `FleetPublishError`.
    public init(settings: MQTTSettings, site: String, device: String, logPath: String, window: Int = 32) throws(FleetPublishError) {
        do {
            topics = try FleetTopics(prefix: settings.address.prefix, site: site, device: device)
        } catch {
            throw .topics(error)
        }
        self.logPath = logPath
        guard (try? Stat(logPath))?.type == .regular else {
            throw .needsLog("--publish needs --log FILE, a regular file: the session log is the outbox it publishes from")
        }
        let acks = try AcknowledgementFile(log: logPath, device: device)
        let reader = try LogTail(path: logPath)
        var queue = OutboxQueue(window: window)
        var sequence = 0
        var builder: MessageBuilder?
        // Every whole line now in the log (a line still being written is read with the verdict
        // that announces it).
        for line in reader.readLines(limit: .max) {
            sequence += 1
            if builder == nil { builder = MessageBuilder(topics: topics, session: FleetMessage.session(firstLine: line)) }
            guard !acks.acknowledged.contains(sequence) else { continue }
            let tagID = (try? JSONValue.parse(line))?["tag_id"]?.string
            if let entry = builder?.entry(line: line, tagID: tagID, sequence: sequence) { queue.add(entry) }
        }
        var connection = settings
        connection.clientID = "tagfix-\(device)-\(getpid())"
        connection.cleanSession = true
        connection.will = .init(topic: topics.status, payload: "offline")
        core = PublisherCore(topics: topics, queue: queue, nextSequence: sequence + 1, builder: builder, acks: acks, log: reader)
        // Its session is never yielded (the id is its own), so the client's clock only stamps.
        client = MQTTClient(settings: connection, delegate: core, now: { MonotonicClock().now })
    }

    /// Connects (on the client's own thread) and starts sending what waits.
    public func start() { client.start() }

    /// Verdicts not acknowledged yet (or acknowledged and not yet recorded in `LOG.acks`).
    public var unacknowledged: Int { core.state.withLock { $0.unsettled } }

    /// Verdicts acknowledged during this run.
    public var acknowledged: Int { core.state.withLock { $0.acknowledged } }

    // MARK: - VerdictSink

    /// Notes the verdict the log has just written (its tag, for the topic) and wakes the client,
    /// whose thread reads the record's line from the log: never waits for the network, and never
    /// encodes the record a second time.
    public func receive(_ verdict: Verdict, now: Timestamp?) {
        core.state.withLock { $0.announced.append(verdict.tagID) }
        client.wake()
    }

    // MARK: - The end of a session

    /// Waits until every verdict is acknowledged, `linger` has passed on `clock`, or `interrupt`
    /// returns (a second Ctrl-C), whichever is first, and returns how many are still
    /// unacknowledged.
    public func drain<C: Clock>(within linger: C.Duration, clock: C, interrupt: (@Sendable () async -> Void)? = nil) async -> Int {
        if unacknowledged == 0 { return 0 }
        var racers: [@Sendable () async -> Void] = [{ [core] in await core.allAcknowledged() }]
        if let interrupt { racers.append(interrupt) }
        _ = await race(deadline: clock.now.advanced(by: linger), clock: clock, first: racers)
        return unacknowledged
    }

    /// `drain`, then the client says `offline` and disconnects (its thread stopped off the
    /// cooperative pool).
    public func finish<C: Clock>(linger: C.Duration, clock: C, interrupt: (@Sendable () async -> Void)? = nil) async -> Outcome {
        let unsent = await drain(within: linger, clock: clock, interrupt: interrupt)
        await stop()
        return core.state.withLock { Outcome(acknowledged: $0.acknowledged, unsent: unsent, problem: unsent > 0 ? $0.problem : nil) }
    }

    /// Stops the client's thread (waiting for it on a thread of its own).
    public func stop() async {
        await client.stop()
    }
}

/// The publisher's state and the client's delegate: the queue under a lock the verifier's
/// `receive` shares for a moment; the acknowledgement file only on the client's thread.
final class PublisherCore: MQTTClientDelegate {
    struct State {
        var queue: OutboxQueue
        /// Acknowledged by the broker, not yet on the disk in `LOG.acks`.
        var settled: [Int] = []
        var nextSequence: Int
        /// Builds the session's messages (once the log's first line names the session).
        var builder: MessageBuilder?
        var acknowledged = 0
        /// Verdicts in flight when a connection was lost: each is sent again on the next one.
        var sentAgain = 0
        var problem: String?
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var cancelled: Set<Int> = []
        var nextWaiter = 0
        /// The tags of verdicts `receive` took whose lines the client's thread has not read from
        /// the log yet, in order.
        var announced = AnnouncedTags()

        var unsettled: Int { queue.unacknowledged + settled.count + announced.count }

        /// Whether the acknowledgements gathered so far go to the disk now: when nothing more is
        /// in flight (a verdict at a time: at once), or once `PublisherCore.settleBatch` have
        /// gathered (a burst: one fsync for many). Until then they do not count.
        var settleNow: Bool { !settled.isEmpty && (queue.inFlightCount == 0 || settled.count >= PublisherCore.settleBatch) }
    }

    /// Acknowledgements recorded with one fsync at most, while more are in flight.
    static let settleBatch = 256

    let topics: FleetTopics
    let state: Mutex<State>
    let acks: Mutex<AcknowledgementFile>
    /// The session log, read from where the last read stopped (on the client's thread).
    let log: Mutex<LogTail>

    init(
        topics: FleetTopics, queue: OutboxQueue, nextSequence: Int, builder: MessageBuilder?, acks: sending AcknowledgementFile,
        log: sending LogTail
    ) {
        self.topics = topics
        state = Mutex(State(queue: queue, nextSequence: nextSequence, builder: builder))
        self.acks = Mutex(acks)
        self.log = Mutex(log)
    }

    /// Reads the lines of the verdicts `receive` announced from the log and queues them, each with
    /// the next sequence number. A line not yet whole in the log waits for the next wake.
    func readAnnounced() {
        let wanted = state.withLock { $0.announced.count }
        guard wanted > 0 else { return }
        let lines = log.withLock { $0.readLines(limit: wanted) }
        guard !lines.isEmpty else { return }
        state.withLock { state in
            var builder = state.builder ?? MessageBuilder(topics: topics, session: FleetMessage.session(firstLine: lines[0]))
            for line in lines {
                let tagID = state.announced.removeFirst()
                state.queue.add(builder.entry(line: line, tagID: tagID, sequence: state.nextSequence))
                state.nextSequence += 1
            }
            state.builder = builder
        }
    }

    /// Returns once nothing is unacknowledged (or the task is cancelled).
    func allAcknowledged() async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.unsettled == 0 || state.cancelled.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiting = state.withLock { state in
                let waiting = state.waiters.removeValue(forKey: id)
                if waiting == nil { state.cancelled.insert(id) }
                return waiting
            }
            waiting?.resume()
        }
    }

    /// Sends what waits, as far as the window and the broker's receive maximum allow: for each
    /// verdict, first its tag's retained `last` (QoS 0), then the verdict (QoS 1), on the same
    /// connection. The broker reads a connection's packets in order, so the verdict's PUBACK
    /// also says the `last` before it was taken; a verdict sent again after a reconnect sends its
    /// `last` again first, so the newest one the broker holds is the newest verdict's. The
    /// packets of one call are queued and leave together after `wake` (the client corks the
    /// socket around its write).
    ///
    /// The queue is not locked while publishing: libmosquitto reports a QoS 0 message sent
    /// (`published`) from inside `mosquitto_publish`. Only this thread takes from the queue, and a
    /// PUBACK is read on it too, so the batch is recorded as sent before any can be acknowledged.
    private func send(_ link: MQTTLink) {
        let batch = state.withLock { $0.queue.ready(limit: link.sendMaximum) }
        guard !batch.isEmpty else { return }
        var mids: [Int32] = []
        mids.reserveCapacity(batch.count)
        for message in OutboxQueue.messages(batch) {
            guard case .success(let mid) = link.publish(message.topic, message.payload, qos: message.qos, retain: message.retain) else {
                break
            }
            if case .verdict = message { mids.append(mid) }
        }
        state.withLock { state in
            for (entry, mid) in zip(batch, mids) { state.queue.sent(entry.sequence, mid: mid) }
        }
    }

    func connected(_ link: MQTTLink, sessionPresent: Bool) {
        state.withLock { $0.problem = nil }
        _ = link.publish(topics.status, Array("online".utf8), retain: true)
        readAnnounced()
        send(link)
    }

    func wake(_ link: MQTTLink) {
        if state.withLock({ $0.settleNow }) { settle() }
        readAnnounced()
        send(link)
    }

    func published(mid: Int32, reason: Int32, _ link: MQTTLink) {
        guard reason < 0x80 else {
            // Refused (not authorised, quota…): left in flight, so it is sent again on the next
            // connection, and said at the end.
            state.withLock { $0.problem = "the broker refused a verdict (MQTT reason code \(reason))" }
            return
        }
        state.withLock { state in
            guard let sequence = state.queue.acknowledged(mid: mid) else { return }
            state.acknowledged += 1
            state.settled.append(sequence)
        }
    }

    /// Records the acknowledgements gathered since the last time (one fsync), then wakes a `drain`
    /// waiting for an empty outbox.
    private func settle() {
        acks.withLock { acks in
            let settled = state.withLock { state in
                defer { state.settled = [] }
                return state.settled
            }
            acks.record(settled)
        }
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.unsettled == 0 else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    func received(topic: String, payload: UnsafeRawBufferPointer) {}
    func subscribed(granted: [Int32]) {}

    func disconnected(_ why: String) {
        settle()
        state.withLock { state in
            state.sentAgain += state.queue.inFlightCount
            state.queue.connectionLost()
            state.problem = why
        }
    }

    /// Never called: a publisher's client id is its own (device and process), so it does not
    /// yield its session; were it taken, connecting again is right.
    func ended(_ why: String) { disconnected(why) }

    func stopping(_ link: MQTTLink) {
        settle()
        _ = link.publish(topics.status, Array("offline".utf8), retain: true)
    }
}

/// A session's messages as `FleetMessage` defines them, made with less work per verdict: the
/// topics of each tag are made once and kept, and what `FleetMessage.payload` appends to the
/// log's line (`,"id":"DEVICE:SESSION:` … `","device":"DEVICE"}`) is quoted once per session, the
/// sequence's digits put between (JSON quotes a text a character at a time, and digits as they
/// are). The bytes are `FleetMessage.payload`'s (FleetCostTests compares them).
struct MessageBuilder {
    let topics: FleetTopics
    let session: String
    private let idOpening: [UInt8]
    private let closing: [UInt8]
    private var tagTopics: [String?: (verdict: String, last: String)] = [:]

    init(topics: FleetTopics, session: String) {
        self.topics = topics
        self.session = session
        idOpening = Array(",\"id\":".utf8) + Array(JSONValue.quoted(topics.device + ":" + session + ":").utf8.dropLast())
        closing = Array("\",\"device\":\(JSONValue.quoted(topics.device))}".utf8)
    }

    /// The message for the log's `sequence`th record, `line`, of tag `tagID`.
    mutating func entry(line: some Collection<UInt8>, tagID: String?, sequence: Int) -> OutboxQueue.Entry {
        let topic: (verdict: String, last: String)
        if let known = tagTopics[tagID] {
            topic = known
        } else {
            topic = (topics.verdict(tagID: tagID), topics.last(tagID: tagID))
            // A long session of distinct tags does not keep them all.
            if tagTopics.count >= 4096 { tagTopics.removeAll(keepingCapacity: true) }
            tagTopics[tagID] = topic
        }
        return OutboxQueue.Entry(
            sequence: sequence, topic: topic.verdict, lastTopic: topic.last, payload: payload(line: line, sequence: sequence))
    }

    /// `FleetMessage.payload(line:id:device:)` for the record `sequence` of this session.
    func payload(line: some Collection<UInt8>, sequence: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(line.count + idOpening.count + 20 + closing.count)
        bytes.append(contentsOf: line)
        while let last = bytes.last, last == 0x0A || last == 0x0D || last == 0x20 { bytes.removeLast() }
        guard bytes.count >= 2, bytes.last == UInt8(ascii: "}"), bytes[bytes.count - 2] != UInt8(ascii: "{") else {
            // Not an object, or an empty one (no comma before the id): as FleetMessage makes it.
            return FleetMessage.payload(
                line: line, id: FleetMessage.id(device: topics.device, session: session, sequence: sequence), device: topics.device)
        }
        bytes.removeLast()
        bytes += idOpening
        bytes += String(sequence).utf8
        bytes += closing
        return bytes
    }
}

/// The tags of announced verdicts, first in first out (a head index instead of shifting).
struct AnnouncedTags {
    private var tags: [String?] = []
    private var head = 0

    var count: Int { tags.count - head }

    mutating func append(_ tag: String?) { tags.append(tag) }

    /// The oldest tag (the caller knows there is one).
    mutating func removeFirst() -> String? {
        let tag = tags[head]
        head += 1
        if head == tags.count {
            tags.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024, head * 2 > tags.count {
            tags.removeFirst(head)
            head = 0
        }
        return tag
    }
}

/// The session log read from its start, a few whole lines at a time: where the last read stopped
/// is kept, so each byte is read once. Only whole lines (ending in a newline) are taken; blank
/// lines are passed over as the log's reader does.
final class LogTail {
    let path: String
    private let descriptor: FileDescriptor
    /// The log's offset of `pending`'s first byte.
    private var base: Int64 = 0
    /// Read and not yet taken from `consumed` on (the start of a line, or lines beyond the last
    /// limit); what is before `consumed` was taken, and is dropped once it is most of the buffer.
    private var pending: [UInt8] = []
    private var consumed = 0
    /// pread's buffer, kept from one read to the next.
    private var chunk = [UInt8](repeating: 0, count: 16384)

    /// - Throws: `FleetPublishError.log` when the log cannot be opened.
    init(path: String) throws(FleetPublishError) {
        self.path = path
        do {
            descriptor = try FileDescriptor.open(path, .readOnly, options: .closeOnExec)
        } catch {
            throw .log(path, error.description)
        }
    }

    deinit { _ = try? descriptor.close() }

    /// Up to `limit` whole, non-blank lines after those taken before (without their newlines).
    func readLines(limit: Int) -> [[UInt8]] {
        var lines: [Range<Int>] = []
        var start = consumed
        var scanned = consumed
        while lines.count < limit {
            if let newline = pending[scanned...].firstIndex(of: 0x0A) {
                let line = start..<newline
                start = newline + 1
                scanned = start
                if !pending[line].allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { lines.append(line) }
                continue
            }
            scanned = pending.count
            let offset = base + Int64(pending.count)
            let count = chunk.withUnsafeMutableBytes { (try? descriptor.read(fromAbsoluteOffset: offset, into: $0)) ?? -1 }
            guard count > 0 else { break }
            pending += chunk[..<count]
        }
        let taken = lines.map { Array(pending[$0]) }
        consumed = start
        if consumed == pending.count || (consumed > 65536 && consumed * 2 > pending.count) {
            pending.removeFirst(consumed)
            base += Int64(consumed)
            consumed = 0
        }
        return taken
    }
}
