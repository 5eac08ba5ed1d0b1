import Foundation
import Synchronization
public import TagFixCore
import TagFixDevices
public import TagFixStore

/// `tagfix collect`: subscribes to every site's verdicts under a prefix (a shared subscription
/// `$share/GROUP/…` when a group is given, so collectors split one stream) and stores each
/// message once in a `FleetStore`, whatever the broker delivers twice. Its session is kept by
/// the broker (not clean; MQTT 5 with a session expiry), so what is published while it is away
/// waits for it.
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
        /// Transactions that stored messages (one per read of the socket).
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
    ///   - stored: told each newly stored message (its id), on the client's thread.
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

    /// Connects and subscribes, on the client's own thread.
    public func start() { client.start() }

    public var counts: Counts { core.counts.withLock { $0 } }

    /// Waits until the collector ends on its own, and returns why: another client connected with
    /// its client id and the broker gave that one the session (MQTT 5). `nil` when the task is
    /// cancelled first (the collector keeps running).
    public func ended() async -> String? {
        await core.ending.wait()
    }

    /// Stops the client's thread (waiting for it on a thread of its own).
    public func stop() async {
        core.stopRetrying()
        await offThePool("stop mqtt client") { [client] in client.stop() }
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
    /// Messages read since the last commit: stored together at the end of the read (`wake`).
    private let batch = Mutex<[FleetStore.Stored]>([])
    /// How long to wait before storing again, and what was said about the failure.
    private let retry = Mutex(StoreRetry())

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

    func wake(_ link: MQTTLink) { flush(link) }

    /// Stores the messages the last read brought, in one transaction, before their PUBACKs go
    /// out (the client writes them after `wake`). When the store fails (the database down, full,
    /// read-only, a statement timeout, a password refused), nothing is acknowledged: the batch is
    /// tried again on this thread, waiting longer each time (`StoreRetry`, on the collector's
    /// clock), and said once per kind of failure, not per try. A wait that would keep the broker
    /// without a word for too long, or a stop, drops the connection instead with those PUBACKs
    /// unsent: the broker keeps the messages for this collector's session and sends them again
    /// when it connects again (the waiting goes on from there).
    private func flush(_ link: MQTTLink?) {
        let messages = batch.withLock { batch in
            defer { batch = [] }
            return batch
        }
        guard !messages.isEmpty else { return }
        let started = now()
        while true {
            // After a failure, not before its wait is over (a connection dropped meanwhile and
            // made again brings the same messages at once).
            if let due = retry.withLock({ $0.due }), now() < due {
                guard started.duration(to: due) <= StoreRetry.longestHold, wait(until: due) else {
                    if let link {
                        retry.withLock { $0.letGo = true }
                        link.abandon()
                    }
                    return
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
                return
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

    /// Blocks this (the client's) thread until `deadline` on the collector's clock; `false` when
    /// the collector is stopping.
    private func wait(until deadline: Timestamp) -> Bool {
        let woken = DispatchSemaphore(value: 0)
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
        woken.wait()
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

    func published(mid: Int32, reason: Int32, _ link: MQTTLink) {}
    func stopping(_ link: MQTTLink) { flush(link) }

    func ended(_ why: String) {
        flush(nil)
        ending.finish(why)
    }

    func disconnected(_ why: String) {
        // Read before the connection went: their PUBACKs were never written, so the broker sends
        // them again; stored now, the copies are ignored by id.
        flush(nil)
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
