import Synchronization
public import TagFixCore

/// A place verdicts go: the session log, the tally, the terminal; a socket server or an MQTT
/// publisher is one more type that conforms. Sinks are put together in a `VerdictFanOut`, which
/// hands them each verdict in order and keeps the promise that a verdict is on the disk before
/// it is shown or sent anywhere (docs/architecture.md, "The sink seam").
public protocol VerdictSink: Sendable {
    /// Whether the session stands or falls with this sink (the session log). The fan-out hands a
    /// verdict to every durable sink before any other sink sees it, and when a durable sink fails
    /// it passes on no verdict from then on. Default: `false`.
    var isDurable: Bool { get }

    /// Takes one verdict. Verdicts come one at a time, in the order they were decided, and each
    /// only after every durable sink has it. `now` is the session clock's time when a live run
    /// knows it.
    /// - Throws: `VerdictSinkError` when the verdict could not be kept or passed on (see
    ///   `VerdictFanOut` for what happens next).
    func receive(_ verdict: Verdict, now: Timestamp?) throws(VerdictSinkError)

    /// Takes verdicts decided together (phone taps committed as a group), in order: a durable
    /// sink keeps them all at once (the session log: one write, one fsync). Default: `receive`
    /// each in turn.
    /// - Throws: `VerdictSinkError` when they could not all be kept.
    func receive(_ verdicts: [Verdict], now: Timestamp?) throws(VerdictSinkError)

    /// Whether this sink writes verdicts' session records (`SessionRecord.encoded()`): the fan-out
    /// then encodes each verdict's record once (`RecordedVerdict`) and hands the same line to
    /// every such sink through `receive(recorded:now:)`. Default: `false`.
    var usesRecords: Bool { get }

    /// `receive(_:now:)` with the verdict's record already encoded, for a sink that
    /// `usesRecords`. Default: `receive(recorded.verdict, now:)`.
    /// - Throws: `VerdictSinkError` as `receive(_:now:)` does.
    func receive(recorded: RecordedVerdict, now: Timestamp?) throws(VerdictSinkError)

    /// `receive(_:now:)` of verdicts decided together, with their records already encoded, for a
    /// sink that `usesRecords`. Default: `receive(recorded:now:)` each in turn (not the group's
    /// `receive(_:now:)` of verdicts: a sink that uses records and keeps a group together, as the
    /// log does with one fsync, implements this one).
    /// - Throws: `VerdictSinkError` as `receive(_:now:)` does.
    func receive(recorded: [RecordedVerdict], now: Timestamp?) throws(VerdictSinkError)

    /// A reader, GPS or clock event, for a sink that shows the devices' state. Default: ignored.
    func observe(_ event: VerifierEvent, now: Timestamp?)

    /// The session is over: flush, clear a status line. Default: nothing.
    func finish()
}

extension VerdictSink {
    public var isDurable: Bool { false }
    public func receive(_ verdicts: [Verdict], now: Timestamp?) throws(VerdictSinkError) {
        for verdict in verdicts { try receive(verdict, now: now) }
    }
    public var usesRecords: Bool { false }
    public func receive(recorded: RecordedVerdict, now: Timestamp?) throws(VerdictSinkError) {
        try receive(recorded.verdict, now: now)
    }
    public func receive(recorded: [RecordedVerdict], now: Timestamp?) throws(VerdictSinkError) {
        for verdict in recorded { try receive(recorded: verdict, now: now) }
    }
    public func observe(_ event: VerifierEvent, now: Timestamp?) {}
    public func finish() {}
}

/// A sink that could not take a verdict.
public struct VerdictSinkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The sink, for a person: "the session log", "MQTT broker mqtt://…".
    public var sink: String
    /// What went wrong and what to do, for a person.
    public var message: String

    public init(sink: String, message: String) {
        self.sink = sink
        self.message = message
    }

    public var description: String { message }
}

/// What the fan-out did about a sink's failure.
public enum VerdictSinkFailure: Sendable, Hashable {
    /// A durable sink failed: no verdict is passed on from now (none is shown that is not on the
    /// disk); the command ends with exit 74.
    case stopped(VerdictSinkError)
    /// A sink that is not durable failed: it gets no more verdicts; the others, and the
    /// session, go on.
    case dropped(VerdictSinkError)
}

/// The sinks of a session, in order: every durable sink first (in the order given), then the
/// others (in the order given). A verdict sent alone goes to all of them before the next one goes
/// to any; a group decided together goes to each of them whole, sink after sink, in order.
public final class VerdictFanOut: Sendable {
    private let sinks: [any VerdictSink]
    /// Whether any sink writes records: then each verdict's is encoded once, for all of them.
    private let usesRecords: Bool
    private let onFailure: @Sendable (VerdictSinkFailure) -> Void
    private let state = Mutex(State())

    private struct State {
        var stopped: VerdictSinkError?
        var dropped: Set<Int> = []
    }

    /// - Parameter onFailure: told, once per failing sink, what the fan-out did about it.
    public init(_ sinks: [any VerdictSink], onFailure: @escaping @Sendable (VerdictSinkFailure) -> Void = { _ in }) {
        self.sinks = sinks.filter(\.isDurable) + sinks.filter { !$0.isDurable }
        usesRecords = sinks.contains { $0.usesRecords }
        self.onFailure = onFailure
    }

    /// Why a durable sink stopped the session, if one did.
    public var stopped: VerdictSinkError? { state.withLock { $0.stopped } }

    /// Hands `event` on: a verdict to every sink's `receive` (durable ones first), any other event
    /// to every sink's `observe`.
    public func send(_ event: VerifierEvent, now: Timestamp? = nil) {
        guard case .verdict(let verdict) = event else {
            for sink in sinks { sink.observe(event, now: now) }
            return
        }
        // Encoded once, outside the lock, for every sink that writes the record.
        let recorded = usesRecords ? RecordedVerdict(verdict) : nil
        // One verdict at a time, to every sink, in order.
        let failures = state.withLock { state -> [VerdictSinkFailure] in
            guard state.stopped == nil else { return [] }
            var failures: [VerdictSinkFailure] = []
            for (index, sink) in sinks.enumerated() where !state.dropped.contains(index) {
                do throws(VerdictSinkError) {
                    if let recorded, sink.usesRecords {
                        try sink.receive(recorded: recorded, now: now)
                    } else {
                        try sink.receive(verdict, now: now)
                    }
                } catch {
                    if sink.isDurable {
                        state.stopped = error
                        failures.append(.stopped(error))
                        break
                    }
                    state.dropped.insert(index)
                    failures.append(.dropped(error))
                }
            }
            return failures
        }
        for failure in failures { onFailure(failure) }
    }

    /// Hands on verdicts decided together (phone taps committed as a group), in order: every
    /// durable sink takes them all at once (the session log: one fsync), then each other sink
    /// takes them all at once in turn (`receive(recorded:now:)` with the group: the terminal's
    /// lines in one write, the live page's in one broadcast). Returns whether the durable
    /// sinks kept them (false: the session has stopped, and none was passed on). It blocks (the
    /// log's fsync; a large group's records are encoded on two threads, `DeviceThread.map`):
    /// call it from a thread that may block, never the cooperative pool.
    ///
    /// - Parameter whenKept: called once with that answer as soon as the durable sinks have
    ///   it, before any other sink takes a verdict (so a tap is answered without waiting for the
    ///   live page and the terminal). Called with the fan-out's lock held: it must not block,
    ///   nor send to this fan-out.
    @discardableResult
    public func send(verdicts: [Verdict], now: Timestamp? = nil, whenKept: (Bool) -> Void = { _ in }) -> Bool {
        // Encoded once, outside the lock, for every sink that writes the records: a large group
        // (phone taps that came together) on two threads.
        let recorded = usesRecords ? DeviceThread.map(verdicts, splitFrom: 64, RecordedVerdict.init) : []
        return send(verdicts: verdicts, recorded: recorded, now: now, whenKept: whenKept)
    }

    /// `send(verdicts:now:whenKept:)` of verdicts whose records the caller has made already:
    /// `serve`'s phone taps (`PhoneTapGroups` makes each beside the tap's answer, on two threads).
    @discardableResult
    public func send(recorded: [RecordedVerdict], now: Timestamp? = nil, whenKept: (Bool) -> Void = { _ in }) -> Bool {
        send(verdicts: recorded.map(\.verdict), recorded: recorded, now: now, whenKept: whenKept)
    }

    private func send(verdicts: [Verdict], recorded: [RecordedVerdict], now: Timestamp?, whenKept: (Bool) -> Void) -> Bool {
        guard !verdicts.isEmpty else {
            let kept = stopped == nil
            whenKept(kept)
            return kept
        }
        let (kept, failures) = state.withLock { state -> (Bool, [VerdictSinkFailure]) in
            guard state.stopped == nil else {
                whenKept(false)
                return (false, [])
            }
            var failures: [VerdictSinkFailure] = []
            for sink in sinks where sink.isDurable {
                do throws(VerdictSinkError) {
                    try hand(verdicts, recorded, to: sink, now: now)
                } catch {
                    state.stopped = error
                    whenKept(false)
                    return (false, [.stopped(error)])
                }
            }
            whenKept(true)
            // The group to each sink at once (the terminal's lines in one write, the live page's
            // in one broadcast), in order; a sink that fails part-way is dropped from then on.
            for (index, sink) in sinks.enumerated() where !sink.isDurable && !state.dropped.contains(index) {
                do throws(VerdictSinkError) {
                    try hand(verdicts, recorded, to: sink, now: now)
                } catch {
                    state.dropped.insert(index)
                    failures.append(.dropped(error))
                }
            }
            return (true, failures)
        }
        for failure in failures { onFailure(failure) }
        return kept
    }

    /// A group to one sink: with their records, when it writes them.
    private func hand(
        _ verdicts: [Verdict], _ recorded: [RecordedVerdict], to sink: any VerdictSink, now: Timestamp?
    ) throws(VerdictSinkError) {
        if sink.usesRecords {
            try sink.receive(recorded: recorded, now: now)
        } else {
            try sink.receive(verdicts, now: now)
        }
    }

    /// Tells every sink the session is over, once a `send` still handing verdicts on has done
    /// (a phone tap is answered before the sinks that are not durable have its verdict).
    public func finish() {
        state.withLock { _ in }
        for sink in sinks { sink.finish() }
    }
}

/// The durable sink: each verdict appended to the session log and flushed to the disk
/// (`SessionLog.append`) before any other sink sees it; verdicts decided together with one fsync.
public struct SessionLogSink: VerdictSink {
    public let log: SessionLog

    public init(_ log: SessionLog) { self.log = log }

    public var isDurable: Bool { true }
    public var usesRecords: Bool { true }

    public func receive(_ verdict: Verdict, now: Timestamp?) throws(VerdictSinkError) {
        try receive(recorded: RecordedVerdict(verdict), now: now)
    }

    /// The verdicts' records with one write and one fsync (`SessionLog.append(contentsOf:)`).
    public func receive(_ verdicts: [Verdict], now: Timestamp?) throws(VerdictSinkError) {
        try receive(recorded: verdicts.map(RecordedVerdict.init), now: now)
    }

    /// The record's line, encoded by the fan-out once for every sink that writes it.
    public func receive(recorded: RecordedVerdict, now: Timestamp?) throws(VerdictSinkError) {
        do {
            try log.append(recorded.line)
        } catch {
            throw VerdictSinkError(sink: "the session log \(log.path)", message: error.description)
        }
    }

    /// The records' lines with one write and one fsync (`SessionLog.append(contentsOf:)`).
    public func receive(recorded: [RecordedVerdict], now: Timestamp?) throws(VerdictSinkError) {
        do {
            try log.append(contentsOf: recorded.map(\.line))
        } catch {
            throw VerdictSinkError(sink: "the session log \(log.path)", message: error.description)
        }
    }
}

/// Counts of each verdict kind, for the closing summary.
public struct VerdictTally: Sendable, Hashable {
    public var counts: [String: Int] = [:]
    public var total = 0

    public init() {}

    public mutating func add(_ verdict: Verdict) {
        counts[verdict.kind.name, default: 0] += 1
        total += 1
    }

    /// "5 scans: 3 confirmed, 1 outside, 1 inconclusive".
    public var summary: String {
        let order = [
            ("confirmed", "confirmed"), ("outside", "outside"), ("inconclusive", "inconclusive"), ("notRegistered", "not registered"),
            ("disallowed", "disallowed"), ("untrusted", "untrusted"),
        ]
        let parts = order.compactMap { key, label in counts[key].map { "\($0) \(label)" } }
        return "\(total) scan\(total == 1 ? "" : "s"): " + (parts.isEmpty ? "none" : parts.joined(separator: ", "))
    }
}

/// The tally as a sink: counts the verdicts that reached it (after the log has them).
public final class TallySink: VerdictSink {
    private let tally = Mutex(VerdictTally())

    public init() {}

    public var counts: VerdictTally { tally.withLock { $0 } }

    public func receive(_ verdict: Verdict, now: Timestamp?) {
        tally.withLock { $0.add(verdict) }
    }
}
