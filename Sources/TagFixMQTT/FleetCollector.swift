import Foundation
import Synchronization
public import TagFixCore
import TagFixDevices
public import TagFixStore

/// `tagfix collect`: subscribes to every site's verdicts under a prefix (a shared subscription
/// `$share/GROUP/…` when a group is given, so collectors split one stream) and stores each
/// message once in a `FleetStore`, whatever the broker delivers twice. Its session is kept by
/// the broker (not clean; MQTT 5 with a session expiry), so what is published while it is away
/// waits for it. What the client reads is committed on the collector's own thread (a
/// `DeviceThread`), never on the MQTT loop that every client of the process shares, so a slow or
/// failing store holds back this collector's PUBACKs and nobody else.
public final class FleetCollector: Sendable {
    public let filter: String
    public let store: any FleetVerdictStore
    private let core: CollectorCore
    private let client: MQTTClient

    /// What a collector did.
    public struct Counts: Sendable, Hashable {
        /// Messages stored (first copies).
        public var stored = 0
        /// Copies of messages stored before (QoS 1's at-least-once), ignored.
        public var duplicates = 0
        /// Messages that are not TagFix verdicts (no `id`, not JSON), ignored.
        public var rejected = 0
        /// Connections the broker accepted (1 + reconnections).
        public var connections = 0
        /// Subscriptions the broker granted (one per connection).
        public var subscriptions = 0
        /// Transactions that stored messages (one per read of the socket, or fewer: reads that
        /// came while a commit was under way are stored together).
        public var commits = 0
        /// Tries to store a batch that failed (the store down, full, refusing): each retried later.
        public var storeFailures = 0

        /// "stored 9 verdicts (2 copies ignored)".
        public var summary: String {
            var parts: [String] = []
            if duplicates > 0 { parts.append("\(duplicates) cop\(duplicates == 1 ? "y" : "ies") ignored") }
            if rejected > 0 { parts.append("\(rejected) message\(rejected == 1 ? "" : "s") that are not TagFix verdicts ignored") }
            return "stored \(stored) verdict\(stored == 1 ? "" : "s")" + (parts.isEmpty ? "" : " (\(parts.joined(separator: ", ")))")
        }
    }

    /// - Parameters:
    ///   - settings: the broker and the client id (stable across runs, so the broker keeps the
    ///     session: what arrives while the collector is away waits for it).
    ///   - group: the shared subscription's group, if any (one level: no `/`, `+`, `#`).
    ///   - note: told about connections and problems, for a person.
    ///   - stored: told each newly stored message (its id), on the committing thread.
    ///   - clock: stamps each message's arrival (`received_ns`).
    public init<C: Clock>(
        settings: MQTTSettings, group: String?, store: any FleetVerdictStore, clock: C,
        note: @escaping @Sendable (String) -> Void = { _ in },
        stored: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(FleetTopicError) where C.Instant == Timestamp {
        if let group { try FleetTopics.checkLevel(group, what: "group") }
        filter = FleetTopics.collectorFilter(prefix: settings.address.prefix, group: group)
        self.store = store
        var connection = settings
        connection.cleanSession = false
        // Two collectors with one client id would take the session from each other for ever,
        // each connection ending the other's: the one that loses it ends (`ended()`).
        connection.yieldsSession = true
        connection.receiveMaximum = connection.receiveMaximum ?? 500
        core = CollectorCore(
            filter: filter, store: store, now: { clock.now }, sleep: { try await clock.sleep(until: $0, tolerance: nil) }, note: note,
            stored: stored)
        client = MQTTClient(settings: connection, delegate: core, now: { clock.now })
    }

    /// Starts the thread that commits what the client reads, then connects and subscribes on
    /// the client's loop.
    public func start() {
        core.startCommitting { [weak client] in client?.wake() }
        client.start()
    }

    public var counts: Counts { core.counts.withLock { $0 } }

    /// Waits until the collector ends on its own, and returns why: another client connected with
    /// its client id and the broker gave that one the session (MQTT 5). `nil` when the task is
    /// cancelled first (the collector keeps running).
    public func ended() async -> String? {
        await core.ending.wait()
    }

    /// Stops the client (waiting for its loop on a thread of its own), then lets the committing
    /// thread store what was read and end. What is not committed when the client goes keeps its
    /// PUBACKs unsent: the broker sends those messages again on the next run.
    public func stop() async {
        core.stopRetrying()
        await client.stop()
        await core.finishCommitting()
    }
}

final class CollectorCore: MQTTClientDelegate {
    let filter: String
    let store: any FleetVerdictStore
    let note: @Sendable (String) -> Void
    let stored: @Sendable (String) -> Void
    let now: @Sendable () -> Timestamp
    /// Sleeps until an instant of the collector's clock (the injected one in tests).
    let sleep: @Sendable (Timestamp) async throws -> Void
    let counts = Mutex(FleetCollector.Counts())
    private let lostBefore = Mutex(false)
    /// Why the collector ended on its own, once it has.
    let ending = OneShot<String>()
    /// Messages read since the last hand-over to the committing thread (the loop's thread only).
    private let batch = Mutex<[FleetStore.Stored]>([])
    /// How long to wait before storing again, and what was said about the failure.
    private let retry = Mutex(StoreRetry())
    /// What the loop handed to the committing thread, and what of the connection's reads is not
    /// committed yet (their PUBACKs wait).
    private let queue = Mutex(CommitQueue())
    /// Wakes the committing thread: a batch handed over, or the collector finishing.
    private let work = DeviceThread.Wakeup()
    /// Asks the client's loop for a turn (`MQTTClient.wake`): after a commit, to write the
    /// PUBACKs that waited for it, or to let the connection go.
    private let wakeLoop = Mutex<@Sendable () -> Void>({})
    /// Set once the committing thread has ended (or was never started).
    private let committerEnded = OneShot<Bool>()

    /// The batches between the loop and the committing thread.
    struct CommitQueue {
        struct Batch {
            /// The connection the messages were read on (`CommitQueue.connection` then).
            let connection: Int
            let messages: [FleetStore.Stored]
        }
        var batches: [Batch] = []
        /// The connection messages are read on now: one more each time one ends.
        var connection = 0
        /// Messages read on that connection and not yet committed (or given up on): while there
        /// are, nothing is written to it, so no PUBACK leaves before its message is stored.
        var unsettled = 0
        /// The connection the committing thread gave up on (a store failing for longer than the
        /// broker may wait): the loop drops it at its next turn, its PUBACKs unsent.
        var letGo: Int?
        var started = false
        var finishing = false
    }

    init(
        filter: String, store: any FleetVerdictStore, now: @escaping @Sendable () -> Timestamp,
        sleep: @escaping @Sendable (Timestamp) async throws -> Void, note: @escaping @Sendable (String) -> Void,
        stored: @escaping @Sendable (String) -> Void
    ) {
        self.filter = filter
        self.now = now
        self.sleep = sleep
        self.store = store
        self.note = note
        self.stored = stored
    }

    /// Starts the committing thread (once); `wake` asks the client's loop for a turn.
    func startCommitting(wake: @escaping @Sendable () -> Void) {
        let first = queue.withLock { queue in
            defer { queue.started = true }
            return !queue.started && !queue.finishing
        }
        guard first else { return }
        wakeLoop.withLock { $0 = wake }
        DeviceThread.detach(name: "tagfix-collect-commit") { [self] in commitLoop() }
    }

    /// Lets the committing thread commit what is left and end, and waits for it.
    func finishCommitting() async {
        let started = queue.withLock { queue in
            queue.finishing = true
            return queue.started
        }
        guard started else { return }
        work.signal()
        _ = await committerEnded.wait()
    }

    // MARK: - On the client's loop thread

    func connected(_ link: MQTTLink, sessionPresent: Bool) {
        counts.withLock { $0.connections += 1 }
        let result = link.subscribe(filter)
        if result != .success { note("cannot subscribe to \(filter): \(result)") }
        // Not said when the collector let the connection go itself, waiting on its store (said).
        if lostBefore.withLock({ $0 }), !retry.withLock({ $0.letGo }) { note("connected again") }
    }

    func subscribed(granted: [Int32]) {
        if granted.allSatisfy({ $0 < 0x80 }) {
            counts.withLock { $0.subscriptions += 1 }
            note("subscribed to \(filter)")
        } else {
            note(
                "the broker refused the subscription to \(filter) (reason code \(granted.first ?? 0x80)): is this user allowed to read it?")
        }
    }

    /// Hands what the last read brought to the committing thread; the client writes nothing
    /// (`holdsWrites`) until it is committed, and is woken then. Drops the connection when the
    /// committing thread gave up on it.
    func wake(_ link: MQTTLink) {
        handOver()
        let drop = queue.withLock { queue in
            guard queue.letGo == queue.connection else { return false }
            queue.letGo = nil
            return true
        }
        if drop {
            retry.withLock { $0.letGo = true }
            link.abandon()
        }
    }

    /// Whether messages read on this connection wait for their commit: their PUBACKs (queued in
    /// libmosquitto's handle with anything else to send) stay unwritten until it is done; or
    /// whether the committing thread gave up on them (the loop drops the connection unwritten).
    var holdsWrites: Bool { queue.withLock { $0.unsettled > 0 || $0.letGo == $0.connection } }

    /// The batch read so far, to the committing thread.
    private func handOver() {
        let messages = batch.withLock { batch in
            defer { batch = [] }
            return batch
        }
        guard !messages.isEmpty else { return }
        queue.withLock { queue in
            queue.batches.append(CommitQueue.Batch(connection: queue.connection, messages: messages))
            queue.unsettled += messages.count
        }
        work.signal()
    }

    /// The connection is gone: what was read on it is still committed (its PUBACKs went with
    /// it, so the broker sends those messages again; stored now, the copies are ignored by id),
    /// and the next connection writes freely.
    private func connectionGone() {
        handOver()
        queue.withLock { queue in
            queue.connection += 1
            queue.unsettled = 0
            queue.letGo = nil
        }
    }

    func published(mid: Int32, reason: Int32, _ link: MQTTLink) {}

    /// Stopping: what was read goes to the committing thread; whatever of it is not committed yet
    /// keeps its PUBACKs unsent (the client then closes without writing: `holdsWrites`).
    func stopping(_ link: MQTTLink) { handOver() }

    func ended(_ why: String) {
        connectionGone()
        ending.finish(why)
    }

    func disconnected(_ why: String) {
        connectionGone()
        let first = lostBefore.withLock { lost in
            defer { lost = true }
            return !lost
        }
        if first, !retry.withLock({ $0.letGo }) { note("\(why); trying again") }
    }

    func received(topic: String, payload: UnsafeRawBufferPointer) {
        guard let site = FleetTopics.site(ofVerdictTopic: topic),
            let fields = MessageScan.fields(payload) ?? FleetMessageFields.parsed(payload),
            let id = fields.id, !id.isEmpty, let device = fields.device, SessionLog.isRecord(time: fields.time, verdict: fields.verdict)
        else {
            counts.withLock { $0.rejected += 1 }
            return
        }
        let message = FleetStore.Stored(id: id, site: site, device: device, payload: String(decoding: payload, as: UTF8.self))
        batch.withLock { $0.append(message) }
    }

    // MARK: - On the committing thread

    /// Commits what the loop hands over, everything that waits at once in one transaction, until
    /// the collector finishes and nothing is left.
    private func commitLoop() {
        while true {
            let (batches, finishing) = queue.withLock { queue in
                defer { queue.batches = [] }
                return (queue.batches, queue.finishing)
            }
            if batches.isEmpty {
                if finishing { break }
                work.block()
                continue
            }
            commit(batches)
        }
        committerEnded.finish(true)
    }

    /// Stores `batches` in one transaction, then lets the loop write their PUBACKs. When the store
    /// fails (the database down, full, read-only, a statement timeout, a password refused),
    /// nothing is acknowledged: the batch is tried again, waiting longer each time (`StoreRetry`,
    /// on the collector's clock), and said once per kind of failure, not per try. A wait that
    /// would keep the broker without a word for too long, or a stop, gives the batch up: the
    /// connection it was read on is dropped with those PUBACKs unsent, and the broker sends the
    /// messages again to this collector's session when it connects again (the waiting goes on
    /// from there).
    private func commit(_ batches: [CommitQueue.Batch]) {
        let messages = batches.count == 1 ? batches[0].messages : batches.flatMap(\.messages)
        let started = now()
        while true {
            // After a failure, not before its wait is over (a connection dropped meanwhile and
            // made again brings the same messages at once).
            if let due = retry.withLock({ $0.due }), now() < due {
                guard started.duration(to: due) <= StoreRetry.longestHold, wait(until: due) else {
                    return settle(batches, committed: false)
                }
            }
            let failure: String
            do {
                let stored = try store.store(messages, receivedNanoseconds: now().nanosecondsSinceEpoch)
                let new = stored.filter { $0 }.count
                counts.withLock {
                    $0.commits += 1
                    $0.stored += new
                    $0.duplicates += stored.count - new
                }
                retry.withLock { $0.succeeded() }
                for (message, isNew) in zip(messages, stored) where isNew { self.stored(message.id) }
                return settle(batches, committed: true)
            } catch {
                failure = "\(error)"
            }
            counts.withLock { $0.storeFailures += 1 }
            if retry.withLock({ $0.failed(failure, at: now()) }) {
                note(
                    "cannot store \(messages.count) verdict(s) in \(store.location): \(failure); nothing is acknowledged (the broker keeps them): trying again, at most \(StoreRetry.longest.components.seconds) s apart"
                )
            }
        }
    }

    /// `batches` are done with: committed (their PUBACKs may go), or given up on (the connection
    /// they were read on is let go). The loop is woken when it reads on that connection still.
    private func settle(_ batches: [CommitQueue.Batch], committed: Bool) {
        let current = queue.withLock { queue in
            var current = false
            for batch in batches where batch.connection == queue.connection {
                queue.unsettled -= batch.messages.count
                current = true
            }
            if current, !committed { queue.letGo = queue.connection }
            return current
        }
        if current { wakeLoop.withLock { $0 }() }
    }

    /// Blocks the committing thread until `deadline` on the collector's clock; `false` when the
    /// collector is stopping.
    private func wait(until deadline: Timestamp) -> Bool {
        let woken = DeviceThread.Wakeup()
        let sleeper = Task { [sleep] in
            try? await sleep(deadline)
            woken.signal()
        }
        guard
            retry.withLock({ state in
                state.sleeper = sleeper
                return !state.stopping
            })
        else {
            sleeper.cancel()
            return false
        }
        woken.block()
        return retry.withLock { state in
            state.sleeper = nil
            return !state.stopping
        }
    }

    /// Ends a wait to store again, and any later one: the collector is stopping (the batch stays
    /// unacknowledged, with the broker).
    func stopRetrying() {
        retry.withLock { state in
            state.stopping = true
            return state.sleeper
        }?.cancel()
    }
}

/// When a collector tries again to store a batch the store refused, and what it said: waits of
/// 250 ms doubling to 15 s, kept across connections until a store succeeds; a failure said once
/// while it lasts (the same kind of error again is not said again).
struct StoreRetry: Sendable {
    static let first: Duration = .milliseconds(250)
    static let longest: Duration = .seconds(15)
    /// The longest one read may keep the broker waiting (its keep-alive is 20 s: 1.5× that and
    /// the broker drops the connection) before the collector lets the connection go.
    static let longestHold: Duration = .seconds(15)

    var delay: Duration = first
    /// When to try again (nil: at once).
    var due: Timestamp?
    /// What was said about the failure going on (nil: none).
    var said: String?
    var stopping = false
    /// Whether the collector let its connection go while the store fails (so its coming and
    /// going is not said: the failure was).
    var letGo = false
    var sleeper: Task<Void, Never>?

    /// A try failed with `failure` at `now`: the next is due a wait later, longer each time.
    /// - Returns: whether to say it (a new kind of failure).
    mutating func failed(_ failure: String, at now: Timestamp) -> Bool {
        let kind = Self.kind(failure)
        let say = said != kind
        said = kind
        due = now.advanced(by: delay)
        delay = min(delay * 2, Self.longest)
        return say
    }

    mutating func succeeded() {
        delay = Self.first
        due = nil
        said = nil
        letGo = false
    }

    /// The failure without its details (what differs between tries of one outage: which
    /// connection attempt, the server starting up or refusing): its first words.
    static func kind(_ failure: String) -> String {
        String(failure.prefix { $0 != ":" })
    }
}

/// What a collector reads from a message: its top-level `id`, `device`, `time` and `verdict`
/// strings (nil: missing, or not a string).
package struct FleetMessageFields: Sendable, Hashable {
    package var id: String?
    package var device: String?
    package var time: String?
    package var verdict: String?

    /// By the JSON parser (nil: not JSON, or not an object): what `MessageScan` is not sure of.
    package static func parsed(_ payload: UnsafeRawBufferPointer) -> FleetMessageFields? {
        guard let value = try? JSONValue.parse(payload) else { return nil }
        return FleetMessageFields(
            id: value["id"]?.string, device: value["device"]?.string, time: value["time"]?.string, verdict: value["verdict"]?.string)
    }
}
