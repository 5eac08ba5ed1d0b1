public import TagFixCore

/// How `serve` treats phone taps (`--require-sun`, `--keep-phone-positions`).
public struct PhoneTapPolicy: Sendable, Hashable {
    /// A tap whose tag proves nothing with SUN is `untrusted(sun_required)`: a plain tag's URL is
    /// static, and anyone who has seen it can open it anywhere. Logged like any verdict (the
    /// attempt is worth an audit line), not refused.
    public var requireSUN = false
    /// Keep the phone's coordinates in the verdict (its fix, and so the log's `fix` and bearing).
    /// Off: the position decides and is dropped; the verdict keeps the distance and the accuracy.
    public var keepPositions = false
    /// How far the browser's clock may be from the server's and its position still count as
    /// taken now: a position stamped further off is taken at its own time (a cached position is
    /// then `inconclusive(stale_fix)`, as an old fix is for `verify`).
    public var clockSkew: Duration = .seconds(10)

    public init(requireSUN: Bool = false, keepPositions: Bool = false, clockSkew: Duration = .seconds(10)) {
        self.requireSUN = requireSUN
        self.keepPositions = keepPositions
        self.clockSkew = clockSkew
    }
}

/// The decision on one phone tap: a parsed `PhoneTapRequest`, who sent it, and the time on the
/// injected clock in; the verdict of the same verifier `verify` runs out (`Verifier.phoneVerdict`).
///
/// Synchronous, and it may block: the registry is read and a SUN tag's counter is committed
/// to the counter store before it returns (SQLite, fsync). The server calls it off its event
/// loop, for the taps that arrived together at once (`handle(_:)`: one counter transaction),
/// hands their verdicts to the session's sinks (the log first, one fsync) and only then
/// answers their POSTs.
public struct PhoneTapHandler<C: Clock>: Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public let verifier: Verifier
    public let clock: C
    public let policy: PhoneTapPolicy

    public init(verifier: Verifier, clock: C, policy: PhoneTapPolicy = PhoneTapPolicy()) {
        self.verifier = verifier
        self.clock = clock
        self.policy = policy
    }

    /// Decides `request`.
    /// - Parameters:
    ///   - token: the name of the token the tap's cookie carried.
    ///   - client: the client's address; `userAgent`: its `User-Agent` header.
    public func handle(_ request: PhoneTapRequest, token: String, client: String, userAgent: String) -> PhoneTapAnswer {
        let tap = input(PhoneTap(request: request, token: token, client: client, userAgent: userAgent))
        let verdict = verifier.phoneVerdict(
            url: tap.url, time: tap.time, position: tap.position, requireSUN: policy.requireSUN, audit: tap.audit)
        return answer(verdict)
    }

    /// Decides taps that arrived together, in their order, as `handle` decides them one after
    /// another, with their SUN counters committed in one transaction before it returns
    /// (`Verifier.phoneVerdicts`: the second of two taps with one counter is a replay).
    public func handle(_ taps: [PhoneTap]) -> [PhoneTapAnswer] {
        verifier.phoneVerdicts(taps.map(input), requireSUN: policy.requireSUN).map(answer)
    }

    /// A group of taps decided as they come and committed together (`PhoneTapGroups`: the taps
    /// that arrive while a group is decided join it): `handle(_:)` in steps.
    public func group() -> any PhoneTapDecision {
        Group(handler: self, decision: verifier.phoneVerdictGroup(requireSUN: policy.requireSUN))
    }

    private final class Group: PhoneTapDecision {
        let handler: PhoneTapHandler
        let decision: PhoneVerdictGroup

        init(handler: PhoneTapHandler, decision: PhoneVerdictGroup) {
            self.handler = handler
            self.decision = decision
        }

        func add(_ taps: [PhoneTap]) -> [PhoneTapAnswer] { decision.add(taps.map(handler.input)).map(handler.answer) }
        func commit() -> [Int: PhoneTapAnswer] {
            let verdicts = decision.commit()
            return Dictionary(uniqueKeysWithValues: decision.revised.map { ($0, handler.answer(verdicts[$0])) })
        }
    }

    /// A tap as the verifier takes it: the time now, the browser's position on the verifier's axis.
    private func input(_ tap: PhoneTap) -> PhoneTapInput {
        let now = clock.now
        let position: PhonePosition
        switch tap.request.position {
        case .fix(let coordinate, let accuracy):
            position = .fix(coordinate, accuracy: accuracy, time: positionTime(tap.request.timestamp, now: now))
        case .unavailable(.denied), .unavailable(.unavailable):
            position = .denied
        case .unavailable(.timeout):
            position = .timedOut
        }
        return PhoneTapInput(
            url: tap.request.url, time: now, position: position,
            audit: PhoneAudit(token: tap.token, client: tap.client, userAgent: tap.userAgent))
    }

    private func answer(_ verdict: Verdict) -> PhoneTapAnswer {
        var verdict = verdict
        if !policy.keepPositions, verdict.fix != nil { verdict.fix = nil }
        return PhoneTapAnswer(verdict: verdict)
    }

    /// When the browser's position counts as taken: now, unless its own stamp is further than
    /// `clockSkew` from now.
    func positionTime(_ stamp: Timestamp?, now: Timestamp) -> Timestamp {
        guard let stamp else { return now }
        let offset = stamp.duration(to: now)
        return offset <= policy.clockSkew && offset >= .zero - policy.clockSkew ? now : stamp
    }
}

/// Taps decided as they come, their SUN counters committed together at the end
/// (`PhoneTapHandler.group()`); used by one thread, committed once.
public protocol PhoneTapDecision: AnyObject {
    /// Decides `taps`, after those added before (their counters not yet committed): their
    /// answers, as `commit` will give them unless it says it revised them.
    func add(_ taps: [PhoneTap]) -> [PhoneTapAnswer]
    /// Commits the group's counters and gives the answers that may differ from those `add`
    /// gave, by their tap's place in the group (every other tap's answer is the one `add` gave).
    func commit() -> [Int: PhoneTapAnswer]
}

/// One tap for `PhoneTapHandler.handle(_:)`: the parsed request and who sent it.
public struct PhoneTap: Sendable {
    public var request: PhoneTapRequest
    /// The name of the token the tap's cookie carried.
    public var token: String
    /// The client's address; `userAgent`: its `User-Agent` header.
    public var client: String
    public var userAgent: String

    public init(request: PhoneTapRequest, token: String, client: String, userAgent: String) {
        self.request = request
        self.token = token
        self.client = client
        self.userAgent = userAgent
    }
}

/// A phone tap's verdict and what the tap page shows of it.
public struct PhoneTapAnswer: Sendable {
    public var verdict: Verdict

    public init(verdict: Verdict) { self.verdict = verdict }

    /// The tag as `verify` names it: its id (and its registry name), else its proven UID.
    public var tag: String {
        var tag = verdict.tagID ?? verdict.sun?.uid.hex ?? "this tag"
        if let name = verdict.regionName { tag += " (\(name))" }
        return tag
    }

    /// The POST's answer (200, `application/json`): the kind, its symbol and words, the tag and
    /// the message in `verify`'s words, the reason's code, and a SUN tag's accepted counter.
    public var json: String { json(message: verdict.message) }

    /// `json` with the verdict's message made already (its session record's).
    public func json(message: String) -> String {
        var object = JSONObjectWriter(capacity: 512)
        object.add("verdict", verdict.kind.name)
        object.add("reason", verdict.kind.reasonCode)
        object.add("symbol", verdict.kind.symbol)
        object.add("words", verdict.kind.words)
        object.add("tag", tag)
        object.add("message", message)
        object.add("sun_counter", verdict.sun?.counter.map { Int($0) })
        return object.text
    }
}
