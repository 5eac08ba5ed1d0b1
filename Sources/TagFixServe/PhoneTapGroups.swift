import Synchronization
public import TagFixCore
import TagFixDevices

/// Phone taps committed in groups (issue 34: "group commits, not one fsync a tap").
///
/// A tap is queued on the server's loop (`submit`, which never waits). One committer at a time,
/// on a thread that may block (`DeviceThread.Worker`: SQLite and fsync), takes every tap
/// waiting, in arrival order, and decides them (`PhoneTapDecision.add`); taps that arrived while
/// it decided join the group, again and again, until none is waiting (or the group holds
/// `largestGroup`). Then it commits their SUN counters (`commit`: one transaction), hands their
/// verdicts to the session (`deliver`: the log, one write and one fsync) and answers them as
/// soon as the log has them (in one hand-over to the server's loop), before the live page and
/// the terminal take them. Each tap's record and answer are begun as it is decided, by the map
/// worker beside the committer once 8 wait for it (`DeviceThread.feed`; the committer makes
/// those the worker has not, after the commit), and made again for the taps the commit changed
/// (`PhoneTapDecision.commit`): little but the commits and the writes is left once the last tap
/// of a burst has come. Taps that arrive
/// during the commits wait for the next group. So a commit's cost is shared by every tap that
/// came while the group was decided (200 phones tapping at once are one group or two, not a
/// lone first tap and then the rest), and nothing waits on a timer: a lone tap is committed at
/// once. When the queue is empty the committer is done; its thread waits for the next tap, and
/// ends after a second without one.
///
/// A tap's answer never leaves before its counter and its record are durable. A group whose
/// counters cannot be committed gets `inconclusive(registry_unavailable)` for each tap that
/// needed one (`PhoneVerdictGroup.commit`); a group the log could not keep is answered 503, every
/// tap of it, and none is confirmed.
public final class PhoneTapGroups: Sendable {
    /// What the groups have come to (for the tests and the benchmark).
    public struct Counts: Sendable, Hashable {
        /// Taps committed (answered after a commit).
        public var taps = 0
        /// Groups committed: one counter transaction and one log write each.
        public var groups = 0
        /// The most taps one group held.
        public var largest = 0
    }

    private struct Waiting: Sendable {
        var tap: PhoneTap
        var reply: HTTPReplyHandle
    }

    private struct State: Sendable {
        var waiting: [Waiting] = []
        var committing = false
        var sink: Sink?
        var counts = Counts()
        /// `finish()` was called: taps are refused from then on.
        var finished = false
        /// Who waits for the committer to be done (`finish()`).
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let start: @Sendable () -> any PhoneTapDecision
    private let state = Mutex(State())

    /// The most taps one group takes: a committer that always finds more taps waiting still
    /// commits, and answers, at this many (so under a load that never lets up, a group's first
    /// tap waits for up to this many taps' decisions before its commit).
    public static var largestGroup: Int { 512 }

    /// - Parameter start: a new group's decision (`PhoneTapHandler.group()`).
    public init(_ start: @escaping @Sendable () -> any PhoneTapDecision) {
        self.start = start
    }

    /// Where a group's verdicts go, with their records made: the session's fan-out
    /// (`VerdictFanOut.send(recorded:now:whenKept:)`), which says through its second argument,
    /// once, whether the durable sinks recorded them (and may hand them to the others after
    /// that). That second argument must not block.
    public typealias Sink = @Sendable (_ verdicts: [RecordedVerdict], _ whenKept: (Bool) -> Void) -> Void

    /// Where a group's verdicts go (the session's fan-out, the log first). Taps submitted before
    /// it is set (the server listens a moment before the log is open) wait for it, and are
    /// committed once it is.
    public func deliver(to sink: @escaping Sink) {
        let start = state.withLock { state -> Bool in
            state.sink = sink
            guard !state.waiting.isEmpty, !state.committing else { return false }
            state.committing = true
            return true
        }
        if start { startCommitter() }
    }

    public var counts: Counts { state.withLock { $0.counts } }

    /// Whether taps are taken (`finish()` not yet called).
    var isTakingTaps: Bool { state.withLock { !$0.finished } }

    /// Queues `tap`, answered through `reply` once its group is committed; starts a committer
    /// when none is running (and there is somewhere to deliver). Never waits.
    public func submit(_ tap: PhoneTap, reply: HTTPReplyHandle) {
        let (start, refused) = state.withLock { state -> (Bool, Bool) in
            guard !state.finished else { return (false, true) }
            state.waiting.append(Waiting(tap: tap, reply: reply))
            guard state.sink != nil, !state.committing else { return (false, false) }
            state.committing = true
            return (true, false)
        }
        if refused { reply.send(Self.stopping) }
        if start { startCommitter() }
    }

    /// Stops taking taps, for a server that stops: the taps queued are committed and answered,
    /// later ones answered 503 at once (nothing recorded). Returns once no group is being
    /// committed, so the session's log may close: a group committed after it would be written
    /// to a closed log (and answered 503 as the log's failure).
    public func finish() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let (idle, unsent) = state.withLock { state -> (Bool, [Waiting]) in
                state.finished = true
                // Never delivered anywhere (no session began, so no committer ran): answered, not
                // kept waiting.
                guard state.sink != nil else {
                    defer { state.waiting = [] }
                    return (true, state.waiting)
                }
                guard state.committing || !state.waiting.isEmpty else { return (true, []) }
                state.idleWaiters.append(done)
                return (false, [])
            }
            for waiting in unsent { waiting.reply.send(Self.stopping) }
            if idle { done.resume() }
        }
    }

    /// Wakes `finish()` once the committer has ended.
    private func committerEnded() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.committing else { return [] }
            defer { state.idleWaiters = [] }
            return state.idleWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The answer to a tap that comes while the server stops.
    static let stopping = HTTPResponse(
        status: 503, body: "the server is stopping: nothing was recorded; tap again once it is back\n", headers: [("Retry-After", "5")])

    /// The committer's thread: woken for each burst of taps, not started anew (a new thread
    /// ran 2 to 3.4 ms late on a busy machine, in every burst's path).
    private let committer = DeviceThread.Worker(name: "tagfix-phone-commit")

    private func startCommitter() {
        committer.run { [self] in commitWhileWaiting() }
    }

    /// Commits group after group until no tap is waiting.
    private func commitWhileWaiting() {
        while true {
            guard let first = take(ending: true), let sink = state.withLock({ $0.sink }) else { return committerEnded() }
            let decision = start()
            // Each tap's record and answer are made as it is decided, by the map worker beside
            // this thread, and those the commit revises made again after it.
            let prepared = DeviceThread.feed(splitFrom: Self.splitFrom, Self.prepare)
            var group = first
            prepared.add(decision.add(first.map(\.tap)))
            // The taps that came while these were decided join them, until none is waiting.
            while group.count < Self.largestGroup, let more = take(ending: false, room: Self.largestGroup - group.count) {
                prepared.add(decision.add(more.map(\.tap)))
                group += more
            }
            commit(group, decision: decision, prepared: prepared, sink: sink)
        }
    }

    /// The taps waiting, in order, as many as a group has room for; `nil` when none waits (and,
    /// `ending`, the committer ends: the next `submit` starts another).
    private func take(ending: Bool, room: Int = largestGroup) -> [Waiting]? {
        state.withLock { state in
            guard !state.waiting.isEmpty, state.sink != nil else {
                if ending { state.committing = false }
                return nil
            }
            guard state.waiting.count > room else {
                // The taps leave with their buffer: emptied in place, a buffer the caller still
                // holds would be copied anew (a large allocation, and glibc's consolidation of
                // its free lists, at every turn of a group's decision).
                var taken: [Waiting] = []
                swap(&taken, &state.waiting)
                return taken
            }
            defer { state.waiting.removeFirst(room) }
            return Array(state.waiting.prefix(room))
        }
    }

    /// How many decided taps, waiting to be prepared, wake the map worker to prepare them.
    static let splitFrom = 8

    /// A tap's record and its answer, made together (the answer's message is the record's).
    @Sendable static func prepare(_ answer: PhoneTapAnswer) -> (RecordedVerdict, HTTPResponse) {
        let recorded = RecordedVerdict(answer.verdict)
        return (recorded, response(answer, message: recorded.record.message))
    }

    /// One group: its counters committed, recorded, then answered, in order. Each tap's record
    /// and response were begun as it was decided (`prepared`); those of the taps the commit
    /// revised are made again. All are made before the sink is called: it answers with the
    /// fan-out's lock held.
    private func commit(
        _ group: [Waiting], decision: any PhoneTapDecision,
        prepared feed: DeviceThread.Feed<PhoneTapAnswer, (RecordedVerdict, HTTPResponse)>,
        sink: Sink
    ) {
        let revised = decision.commit()
        var prepared = feed.finish()
        for (index, answer) in revised { prepared[index] = Self.prepare(answer) }
        let responses = prepared.map(\.1)
        state.withLock { state in
            state.counts.taps += group.count
            state.counts.groups += 1
            state.counts.largest = max(state.counts.largest, group.count)
        }
        var answered = false
        sink(prepared.map(\.0)) { recorded in
            guard !answered else { return }
            answered = true
            HTTPReplyHandle.send(zip(group.lazy.map(\.reply), responses.lazy.map { recorded ? $0 : Self.notRecorded }))
        }
        // A sink that never said: nothing is known to be recorded.
        if !answered {
            for waiting in group { waiting.reply.send(Self.notRecorded) }
        }
    }

    /// A recorded tap's answer: 200 with the verdict.
    static func response(_ answer: PhoneTapAnswer, message: String) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: "application/json", body: answer.json(message: message) + "\n")
    }

    /// The answer of every tap of a group the log could not keep.
    static let notRecorded = HTTPResponse(
        status: 503, body: "the server could not record this tap (its log failed): nothing was confirmed; tell the site lead\n")
}
