/// The real-time verifier as a state machine: scans and fixes go in, verdicts come out, and
/// `nextDeadline` says when the driver must call `advance(to:)`. No I/O, no clock reads: the
/// drivers (`LiveVerifier` on real or mock devices, `ScenarioReplay`) own time.
///
/// Every scan gets exactly one verdict:
/// - a scan that needs no fix (not registered, disallowed…) is decided on arrival;
/// - otherwise it waits for the first fix at or after the scan time, up to
///   `policy.interpolationWait` when a fresh fix before it is already known, else up to
///   `policy.fixTimeout`; then `Verifier.decide` picks the closest fix or interpolates.
///
/// Decisions depend only on timestamps, not on the order in which a scan and the fixes around it
/// arrive: a fix later than a scan's deadline never decides it, whether it arrives before or after
/// the deadline passes.
public struct VerificationSession: Sendable {
    public let verifier: Verifier
    private var history = FixHistory()
    private var pending: [Pending] = []
    /// Why the fix source cannot be reached, while it cannot.
    private var gpsOutage: String?
    /// GPS jumps seen among the fixes received, by time (`GPSJump`), pruned with the history.
    private var jumps: [GPSJump] = []

    private struct Pending: Sendable {
        var scan: TagScan
        var region: CircularRegion
        var source: RegionSource
        var tagID: String?
        var name: String?
        var sun: SUNEvidence?
    }

    public init(verifier: Verifier) {
        self.verifier = verifier
    }

    private var policy: VerificationPolicy { verifier.policy }

    /// Scans waiting for a fix.
    public var pendingCount: Int { pending.count }

    /// The most recent fix received.
    public var latestFix: Fix? { history.latest }

    /// The earliest time at which a waiting scan must be decided.
    public var nextDeadline: Timestamp? {
        pending.lazy.map { self.deadline(for: $0) }.min()
    }

    /// A scan arrives at `now` (on the driver's clock).
    public mutating func receive(_ scan: TagScan, now: Timestamp) -> [Verdict] {
        switch verifier.expectation(for: scan) {
        case .decided(var verdict):
            // An unknown tag (not registered, or unreadable) keeps where it was found: the fix at
            // the scan, if a fresh one is known. It decides nothing.
            if case .notRegistered = verdict.kind {
                attachFix(to: &verdict)
            } else if case .inconclusive(.readFailed) = verdict.kind {
                attachFix(to: &verdict)
            }
            return [verdict]
        case .region(let region, let source, let tagID, let name, let sun):
            let waiting = Pending(scan: scan, region: region, source: source, tagID: tagID, name: name, sun: sun)
            if history.first(after: scan.time, orAt: true) != nil {
                // A fix at or after the scan is already known: no later fix can change the outcome.
                return [decide(waiting)] + advance(to: now)
            }
            pending.append(waiting)
            return advance(to: now)
        }
    }

    /// The fix source (gpsd) cannot be reached (`why`), or is back (`nil`). While it is down, a
    /// verdict without a usable fix says that gpsd is unreachable, not that the sky is poor.
    public mutating func gpsUnavailable(_ why: String?) {
        gpsOutage = why
    }

    /// A fix arrives.
    public mutating func receive(_ fix: Fix) -> [Verdict] {
        gpsOutage = nil
        history.insert(fix, keeping: retention)
        if let limit = policy.maximumSpeed, fix.hasPosition { noteJumps(around: fix, limit: limit) }
        var decided: [Verdict] = []
        var still: [Pending] = []
        for waiting in pending {
            let deadline = deadline(for: waiting)
            if fix.time > deadline || fix.time >= waiting.scan.time {
                decided.append(decide(waiting))
            } else {
                still.append(waiting)
            }
        }
        pending = still
        return decided.sorted { $0.scan.time < $1.scan.time }
    }

    /// A more complete report of a fix already received, at the same time (gpsd refines an epoch
    /// as its sentences arrive: `FixEvent.refined`): it replaces that fix for every later
    /// decision. It is the same epoch, not a new one: scans decided on the first report keep
    /// their verdicts, and a refinement that keeps the position decides nothing and notes no jump
    /// the first report did not. One that gives a no-fix epoch its position, or whose first
    /// report this session never saw, is taken as `receive(_:)` takes a fix.
    public mutating func refine(_ fix: Fix) -> [Verdict] {
        guard let known = history.first(after: fix.time, orAt: true), known.time == fix.time, known.coordinate == fix.coordinate
        else { return receive(fix) }
        gpsOutage = nil
        history.insert(fix, keeping: retention)
        return []
    }

    /// Time has reached `now`: decide every scan whose deadline has passed.
    public mutating func advance(to now: Timestamp) -> [Verdict] {
        var decided: [Verdict] = []
        var still: [Pending] = []
        for waiting in pending {
            if deadline(for: waiting) <= now {
                decided.append(decide(waiting))
            } else {
                still.append(waiting)
            }
        }
        pending = still
        return decided.sorted { $0.scan.time < $1.scan.time }
    }

    /// The session ends: decide every waiting scan with the fixes known now.
    public mutating func finish() -> [Verdict] {
        let decided = pending.map { decide($0) }
        pending = []
        return decided.sorted { $0.scan.time < $1.scan.time }
    }

    // MARK: - Internals

    /// Records a jump between `fix` and the positioned fixes on either side of it in time (a fix
    /// may arrive late and land between two others).
    private mutating func noteJumps(around fix: Fix, limit: Double) {
        let window = policy.gpsJumpWindow
        if let previous = history.positioned(before: fix.time), let jump = GPSJump.between(previous, fix, limit: limit, window: window) {
            jumps.append(jump)
        }
        if let next = history.positioned(after: fix.time), let jump = GPSJump.between(fix, next, limit: limit, window: window) {
            jumps.append(jump)
        }
        guard !jumps.isEmpty else { return }
        jumps.sort { $0.time < $1.time }
        let horizon = (history.latest?.time ?? fix.time).advanced(by: .zero - retention)
        jumps.removeAll { $0.time < horizon }
    }

    /// The latest jump that makes a scan at `t`, decided with fixes up to `until`, untrusted: one
    /// at most `gpsJumpWindow` before the scan, or between the scan and the last fix it used.
    private func jump(forScanAt t: Timestamp, until: Timestamp) -> GPSJump? {
        guard !jumps.isEmpty else { return nil }
        let from = t.advanced(by: .zero - policy.gpsJumpWindow)
        return jumps.last { $0.time >= from && $0.time <= max(t, until) }
    }

    private func attachFix(to verdict: inout Verdict) {
        let t = verdict.scan.time
        guard let fix = history.before(t), fix.hasPosition else { return }
        let age = fix.time.duration(to: t)
        guard age <= policy.maximumFixAge else { return }
        verdict.fix = fix
        verdict.fixAge = age
    }

    private var retention: Duration {
        policy.maximumFixAge + policy.fixTimeout + policy.interpolationWait + .seconds(60)
    }

    private func deadline(for waiting: Pending) -> Timestamp {
        let t = waiting.scan.time
        if let before = history.before(t), before.hasPosition,
            before.time.duration(to: t) <= policy.maximumFixAge
        {
            return t.advanced(by: policy.interpolationWait)
        }
        return t.advanced(by: policy.fixTimeout)
    }

    private func decide(_ waiting: Pending) -> Verdict {
        let t = waiting.scan.time
        let deadline = deadline(for: waiting)
        let after = history.first(after: t, orAt: false).flatMap { $0.time <= deadline ? $0 : nil }
        var verdict = verifier.decide(
            scan: waiting.scan, region: waiting.region, source: waiting.source, tagID: waiting.tagID,
            name: waiting.name, before: history.before(t), after: after)
        // A GPS that jumped decides nothing, whatever it says now: the verdict of a scan decided
        // with a fix is untrusted.
        if !jumps.isEmpty, verdict.fix != nil,
            let jump = jump(forScanAt: t, until: after?.time ?? t)
        {
            switch verdict.kind {
            case .inconclusive(.noFix), .inconclusive(.staleFix): break
            default: verdict.kind = .untrusted(.gpsJump(jump))
            }
        }
        if let gpsOutage, case .inconclusive(let reason) = verdict.kind {
            switch reason {
            case .noFix, .staleFix: verdict.kind = .inconclusive(.gpsUnavailable(gpsOutage))
            default: break
            }
        }
        // The counter is accepted before the verdict leaves the session (`Verifier.accept`).
        if let sun = waiting.sun { verifier.accept(sun, into: &verdict) }
        return verdict
    }
}

/// Recent fixes sorted by time, one per epoch (a later report for the same time replaces the
/// earlier one, as gpsd refines the first epoch).
struct FixHistory: Sendable {
    private var fixes: [Fix] = []
    private static let capacity = 8192

    var latest: Fix? { fixes.last }

    mutating func insert(_ fix: Fix, keeping retention: Duration) {
        let index = firstIndex(after: fix.time, orAt: true)
        if index < fixes.count, fixes[index].time == fix.time {
            fixes[index] = fix
        } else {
            fixes.insert(fix, at: index)
        }
        // Prune in batches so the amortised cost stays constant.
        guard let newest = fixes.last?.time else { return }
        let horizon = newest.advanced(by: .zero - retention)
        if fixes.count > Self.capacity || (fixes.count > 64 && fixes[fixes.count / 4].time < horizon) {
            let cut = min(firstIndex(after: horizon, orAt: true), fixes.count - 1)
            let overflow = max(0, fixes.count - Self.capacity)
            fixes.removeFirst(max(cut, overflow))
        }
    }

    /// The last fix at or before `time`.
    func before(_ time: Timestamp) -> Fix? {
        let index = firstIndex(after: time, orAt: false)
        return index > 0 ? fixes[index - 1] : nil
    }

    /// The last fix with a position strictly before `time`.
    func positioned(before time: Timestamp) -> Fix? {
        var index = firstIndex(after: time, orAt: true) - 1
        while index >= 0 {
            if fixes[index].hasPosition { return fixes[index] }
            index -= 1
        }
        return nil
    }

    /// The first fix with a position strictly after `time`.
    func positioned(after time: Timestamp) -> Fix? {
        var index = firstIndex(after: time, orAt: false)
        while index < fixes.count {
            if fixes[index].hasPosition { return fixes[index] }
            index += 1
        }
        return nil
    }

    /// The first fix after `time` (or at it, when `orAt`).
    func first(after time: Timestamp, orAt: Bool) -> Fix? {
        let index = firstIndex(after: time, orAt: orAt)
        return index < fixes.count ? fixes[index] : nil
    }

    /// Index of the first fix with time > `time` (≥ when `orAt`).
    private func firstIndex(after time: Timestamp, orAt: Bool) -> Int {
        var low = 0, high = fixes.count
        while low < high {
            let middle = (low + high) / 2
            let t = fixes[middle].time
            if orAt ? t < time : t <= time { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
