import Foundation
import Glibc
import Synchronization
public import TagFixCore
public import TagFixDevices

/// `verify --publish`: every verdict of the session log, to the broker, once acknowledged
/// (docs/fleet.md). The log is the outbox: this sink is not durable, so the fan-out hands it a
/// verdict only after the log has it on the disk; `receive` queues and wakes the client's thread,
/// which publishes (QoS 1) and records each PUBACK in `LOG.acks`. A run on a log with
/// unacknowledged records sends them first, in order, with the ids and bytes they had.
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
        var status = stat()
        guard stat(logPath, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw .needsLog("--publish needs --log FILE, a regular file: the session log is the outbox it publishes from")
        }
        let acks = try AcknowledgementFile(log: logPath, device: device)
        guard let data = FileManager.default.contents(atPath: logPath) else { throw .log(logPath, "cannot read it") }
        var queue = OutboxQueue(window: window)
        var sequence = 0
        var session: String?
        for line in Array(data).split(separator: 0x0A, omittingEmptySubsequences: true) {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { continue }
            sequence += 1
            if session == nil { session = FleetMessage.session(firstLine: line) }
            guard let session, !acks.acknowledged.contains(sequence) else { continue }
            let tagID = (try? JSONValue.parse(line))?["tag_id"]?.string
            queue.add(Self.entry(line: line, tagID: tagID, sequence: sequence, session: session, topics: topics))
        }
        var connection = settings
        connection.clientID = "tagfix-\(device)-\(getpid())"
        connection.cleanSession = true
        connection.will = .init(topic: topics.status, payload: "offline")
        core = PublisherCore(topics: topics, queue: queue, nextSequence: sequence + 1, session: session, acks: acks)
        client = MQTTClient(settings: connection, delegate: core)
    }

    static func entry(line: some Collection<UInt8>, tagID: String?, sequence: Int, session: String, topics: FleetTopics)
        -> OutboxQueue.Entry
    {
        let id = FleetMessage.id(device: topics.device, session: session, sequence: sequence)
        return OutboxQueue.Entry(
            sequence: sequence, topic: topics.verdict(tagID: tagID), lastTopic: topics.last(tagID: tagID),
            payload: FleetMessage.payload(line: line, id: id, device: topics.device))
    }

    /// Connects (on the client's own thread) and starts sending what waits.
    public func start() { client.start() }

    /// Verdicts not acknowledged yet (or acknowledged and not yet recorded in `LOG.acks`).
    public var unacknowledged: Int { core.state.withLock { $0.unsettled } }

    /// Verdicts acknowledged during this run.
    public var acknowledged: Int { core.state.withLock { $0.acknowledged } }

    // MARK: - VerdictSink

    /// Queues the verdict the log has just written and wakes the client: never waits for the
    /// network.
    public func receive(_ verdict: Verdict, now: Timestamp?) {
        let line = Array(SessionRecord(verdict).encoded().utf8)
        core.state.withLock { state in
            let sequence = state.nextSequence
            state.nextSequence += 1
            let session = state.session ?? FleetMessage.session(firstLine: line)
            state.session = session
            state.queue.add(Self.entry(line: line, tagID: verdict.tagID, sequence: sequence, session: session, topics: topics))
        }
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
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread { [client] in
                client.stop()
                continuation.resume()
            }
            thread.start()
        }
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
        var session: String?
        var acknowledged = 0
        var problem: String?
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var cancelled: Set<Int> = []
        var nextWaiter = 0

        var unsettled: Int { queue.unacknowledged + settled.count }
    }

    let topics: FleetTopics
    let state: Mutex<State>
    let acks: Mutex<AcknowledgementFile>

    init(topics: FleetTopics, queue: OutboxQueue, nextSequence: Int, session: String?, acks: sending AcknowledgementFile) {
        self.topics = topics
        state = Mutex(State(queue: queue, nextSequence: nextSequence, session: session))
        self.acks = Mutex(acks)
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

    private func send(_ link: MQTTLink) {
        state.withLock { state in
            while let entry = state.queue.next() {
                guard case .success(let mid) = link.publish(entry.topic, entry.payload) else { return }
                state.queue.sent(entry.sequence, mid: mid)
                _ = link.publish(entry.lastTopic, entry.payload, retain: true)
            }
        }
    }

    func connected(_ link: MQTTLink, sessionPresent: Bool) {
        state.withLock { $0.problem = nil }
        _ = link.publish(topics.status, Array("online".utf8), retain: true)
        send(link)
    }

    func wake(_ link: MQTTLink) {
        settle()
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

    /// Records the acknowledgements the last read brought (one fsync), then wakes a `drain`
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
            state.queue.connectionLost()
            state.problem = why
        }
    }

    func stopping(_ link: MQTTLink) {
        settle()
        _ = link.publish(topics.status, Array("offline".utf8), retain: true)
    }
}
