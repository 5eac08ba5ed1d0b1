import Synchronization
public import TagFixCore
import TagFixDevices

/// Phone taps committed in groups (issue 34: "group commits, not one fsync a tap").
///
/// A tap is queued on the server's loop (`submit`, which never waits). One committer at a time
/// takes every tap waiting, in arrival order, and on a thread of its own (`DeviceThread`: it
/// blocks on SQLite and fsync) decides them (`PhoneTapHandler.handle(_:)`: their SUN counters in
/// one transaction), hands their verdicts to the session (`deliver`: the log, one write and one
/// fsync) and only then answers them. Taps that arrive meanwhile wait for the next group, so a
/// commit's cost is shared by every tap waiting on it, and nothing waits on a timer: a lone tap
/// is committed at once. When the queue is empty the committer's thread ends; the next tap
/// starts another.
///
/// A tap's answer never leaves before its counter and its record are durable. A group whose
/// counters cannot be committed gets `inconclusive(registry_unavailable)` for each tap that
/// needed one (`Verifier.phoneVerdicts`); a group the log could not keep is answered 503, every
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
        var sink: (@Sendable ([Verdict]) -> Bool)?
        var counts = Counts()
    }

    private let decide: @Sendable ([PhoneTap]) -> [PhoneTapAnswer]
    private let state = Mutex(State())

    /// - Parameter decide: the group's verdicts, in order, their SUN counters committed
    ///   (`PhoneTapHandler.handle(_:)`).
    public init(decide: @escaping @Sendable ([PhoneTap]) -> [PhoneTapAnswer]) {
        self.decide = decide
    }

    /// Where a group's verdicts go (the session's fan-out, the log first); it says whether they
    /// were recorded. Taps submitted before it is set (the server listens a moment before the
    /// log is open) wait for it, and are committed once it is.
    public func deliver(to sink: @escaping @Sendable ([Verdict]) -> Bool) {
        let start = state.withLock { state -> Bool in
            state.sink = sink
            guard !state.waiting.isEmpty, !state.committing else { return false }
            state.committing = true
            return true
        }
        if start { startCommitter() }
    }

    public var counts: Counts { state.withLock { $0.counts } }

    /// Queues `tap`, answered through `reply` once its group is committed; starts a committer
    /// when none is running (and there is somewhere to deliver). Never waits.
    public func submit(_ tap: PhoneTap, reply: HTTPReplyHandle) {
        let start = state.withLock { state -> Bool in
            state.waiting.append(Waiting(tap: tap, reply: reply))
            guard state.sink != nil, !state.committing else { return false }
            state.committing = true
            return true
        }
        if start { startCommitter() }
    }

    private func startCommitter() {
        DeviceThread.detach(name: "tagfix-phone-commit") { [self] in commitWhileWaiting() }
    }

    /// Commits group after group until no tap is waiting.
    private func commitWhileWaiting() {
        while true {
            let next = state.withLock { state -> (group: [Waiting], sink: @Sendable ([Verdict]) -> Bool)? in
                guard !state.waiting.isEmpty, let sink = state.sink else {
                    state.committing = false
                    return nil
                }
                let group = state.waiting
                state.waiting.removeAll(keepingCapacity: true)
                return (group, sink)
            }
            guard let next else { return }
            commit(next.group, sink: next.sink)
        }
    }

    /// One group: decided with its counters committed, recorded, then answered, in order.
    private func commit(_ group: [Waiting], sink: @Sendable ([Verdict]) -> Bool) {
        let answers = decide(group.map(\.tap))
        let recorded = sink(answers.map(\.verdict))
        state.withLock { state in
            state.counts.taps += group.count
            state.counts.groups += 1
            state.counts.largest = max(state.counts.largest, group.count)
        }
        for (waiting, answer) in zip(group, answers) {
            waiting.reply.send(recorded ? Self.response(answer) : Self.notRecorded)
        }
    }

    /// A recorded tap's answer: 200 with the verdict.
    static func response(_ answer: PhoneTapAnswer) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: "application/json", body: answer.json + "\n")
    }

    /// The answer of every tap of a group the log could not keep.
    static let notRecorded = HTTPResponse(
        status: 503, body: "the server could not record this tap (its log failed): nothing was confirmed; tell the site lead\n")
}
