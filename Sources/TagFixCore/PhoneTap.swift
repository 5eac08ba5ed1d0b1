import Synchronization

// A phone as reader and GPS (issue 34): the phone opens a tag's URL, its browser gives a position,
// and `tagfix serve` asks the same verifier as `verify`. What differs from a reader's scan, and
// nothing else: a phone reads no UID (so none is compared, and a URL whose location is signed for
// one UID cannot be proved), it proves no chip (`requireGenuine` needs a SUN proof instead), and
// its position comes with the tap, so there is nothing to wait for.

/// Who made a phone tap, kept with its verdict for the audit: the token's name, the client's
/// address and the browser's user agent. Immutable, one reference: a reader's scan pays a nil.
public final class PhoneAudit: Sendable, Hashable {
    /// The name of the token the phone's cookie carried (`serve`'s token file).
    public let token: String
    /// The client's address as the server saw it (`203.0.113.7`, `[2001:db8::1]:443`).
    public let client: String
    /// The browser's `User-Agent`, at most 256 characters.
    public let userAgent: String

    public init(token: String, client: String, userAgent: String) {
        self.token = token
        self.client = client
        // A browser's user agent is some 100–150 bytes without a control character: kept as it
        // is, without a walk by Characters (9 % of serve's work on a tap with a phone's real
        // head); the walk gives the same string for it.
        if userAgent.utf8.count <= 256, !userAgent.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            self.userAgent = userAgent
        } else {
            self.userAgent = String(userAgent.unicodeScalars.prefix(256).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
        }
    }

    public static func == (lhs: PhoneAudit, rhs: PhoneAudit) -> Bool {
        lhs.token == rhs.token && lhs.client == rhs.client && lhs.userAgent == rhs.userAgent
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(token)
        hasher.combine(client)
        hasher.combine(userAgent)
    }
}

/// What a phone's browser said of its position for a tap.
public enum PhonePosition: Sendable, Hashable {
    /// A position, its accuracy (metres, 95 %), and when the browser took it, on the verifier's axis.
    case fix(Coordinate, accuracy: Double, time: Timestamp)
    /// The person declined the browser's prompt, or the phone has no position to give: the tap is
    /// `disallowed(position_denied)`.
    case denied
    /// The browser gave up waiting for a position: `inconclusive(no_fix)`, tap again.
    case timedOut
}

extension TagUID {
    /// The UID a phone tap's scan carries until a SUN proof gives the tag's own: seven zero bytes,
    /// which no NXP chip has (their first byte is the manufacturer's, 04). Never logged: a phone
    /// record without a SUN proof has no `uid`.
    public static let phoneUnknown = TagUID(checkedBytes: [0, 0, 0, 0, 0, 0, 0])
}

extension Verifier {
    /// The verdict on one phone tap: `url` the URL the phone opened, received at `time` (on the
    /// verifier's axis), with the browser's `position`.
    ///
    /// The same verifier as a reader's scan, with the same kinds and reasons: the policy, the
    /// registry by the URL's tag id (never by UID: a phone reads none), a SUN registry tag's CMAC
    /// and counter (accepted before this returns, as `VerificationSession` accepts it: a replay is
    /// `untrusted(sun_replayed)`, a counter that cannot be stored `inconclusive`), the URL's own
    /// location and its signature under `--trust-key`, then `decide` with the phone's position as
    /// the one fix. A position that was not given is `disallowed(position_denied)`, never `outside`.
    /// - Parameters:
    ///   - requireSUN: a tap without a SUN proof is `untrusted(sun_required)` (`serve --require-sun`).
    ///   - audit: who tapped, carried in the scan for the record.
    public func phoneVerdict(
        url: String, time: Timestamp, position: PhonePosition, requireSUN: Bool = false, audit: PhoneAudit? = nil
    ) -> Verdict {
        var scan = TagScan(readerID: "phone", uid: .phoneUnknown, tagType: .unknown, url: url, time: time, source: .phone)
        scan.phone = audit
        switch phoneExpectation(for: scan, requireSUN: requireSUN) {
        case .decided(let verdict):
            return verdict
        case .region(let region, let source, let tagID, let name, let sun):
            if let sun { scan.uid = sun.uid }
            var verdict: Verdict
            switch position {
            case .denied, .timedOut:
                verdict = Verdict(
                    kind: position == .denied ? .disallowed(.positionDenied) : .inconclusive(.noFix), scan: scan, tagID: tagID,
                    region: region, regionSource: source, regionName: name, interpolated: false)
            case .fix(let coordinate, let accuracy, let fixTime):
                let fix = Fix(time: fixTime, mode: .twoD, coordinate: coordinate, horizontalAccuracy: accuracy, status: .unknown)
                verdict = decide(scan: scan, region: region, source: source, tagID: tagID, name: name, before: fix, after: nil)
            }
            // The URL has been presented, whatever the verdict: its counter is never accepted again.
            if let sun { accept(sun, into: &verdict) }
            return verdict
        }
    }

    /// What a phone tap is checked against (see `phoneVerdict`).
    func phoneExpectation(for scan: TagScan, requireSUN: Bool) -> Expectation {
        let (location, locationError) = urlLocation(of: scan)
        let tagID = location?.tagID
        func verdict(_ kind: Verdict.Kind, id: String? = tagID) -> Expectation {
            .decided(Verdict(kind: kind, scan: scan, tagID: id, interpolated: false))
        }
        guard policy.locationConfirmation else { return verdict(.disallowed(.confirmationDisabled)) }
        if let tagID, !policy.disallowedTags.isEmpty, policy.disallowedTags.contains(tagID) {
            return verdict(.disallowed(.tagDisallowed(tagID)))
        }
        let placement: Placement?
        do {
            // By the id alone: the scan's UID is no tag's, and a placement found by it is not this tag's.
            placement = try tagID.flatMap { id throws(RegistryError) in
                try registry.placement(forTagID: id, uid: scan.uid).flatMap { $0.id == id ? $0 : nil }
            }
        } catch {
            return verdict(.inconclusive(.registryUnavailable(error)))
        }
        if let placement {
            if !policy.disallowedTags.isEmpty, policy.disallowedTags.contains(placement.id) {
                return verdict(.disallowed(.tagDisallowed(placement.id)), id: placement.id)
            }
            var evidence: SUNEvidence?
            if placement.checks.contains(.sun) {
                // The CMAC, the counter against the last accepted, the decrypted UID against the enrolled.
                switch checkSUN(scan, placement: placement) {
                case .proven(let proof): evidence = proof
                case .failed(let kind): return verdict(kind, id: placement.id)
                }
            } else if requireSUN {
                return verdict(.untrusted(.sunRequired(tag: placement.id)), id: placement.id)
            }
            // A genuine chip is proved by a reader's originality check, or by the chip's SUN: a
            // phone gives only the second.
            if evidence == nil, policy.requireGenuine || placement.checks.contains(.genuine) {
                return verdict(.untrusted(.signatureMissing(status: nil, tag: placement.id)), id: placement.id)
            }
            return Expectation(consume placement, sun: evidence)
        }
        if let locationError { return verdict(.inconclusive(.invalidTagLocation(locationError))) }
        if let location, let region = location.region {
            if requireSUN { return verdict(.untrusted(.sunRequired(tag: tagID ?? "?"))) }
            if policy.requireGenuine { return verdict(.untrusted(.signatureMissing(status: nil, tag: tagID ?? "?"))) }
            if let locationTrust, let reason = untrustedLocation(location, region: region, scan: scan, trust: locationTrust) {
                return verdict(.untrusted(reason))
            }
            return .region(region, .url, tagID: tagID, name: nil, sun: nil)
        }
        return verdict(.notRegistered)
    }

    /// Accepts a SUN tag's read counter into `verdict` before it leaves the verifier (and so before
    /// it is logged or shown): a counter another scan accepted meanwhile makes this one a replay;
    /// a store that cannot be written makes it inconclusive, never confirmed. `VerificationSession`
    /// accepts a reader's scans through it too.
    func accept(_ sun: SUNEvidence, into verdict: inout Verdict) {
        verdict.sun = sun
        guard let counter = sun.counter, let store = self.sun?.counters else { return }
        let tag = verdict.tagID ?? verdict.scan.uid.hex
        do {
            if try !store.accept(uid: sun.uid, counter: counter, tagID: tag) {
                let last = (try? store.lastAccepted(uid: sun.uid)) ?? counter
                verdict.kind = .untrusted(.sunReplayed(tag: tag, counter: counter, last: last))
            }
        } catch {
            verdict.kind = .inconclusive(.registryUnavailable(error))
        }
    }
}

// MARK: - Taps decided in a group

/// One phone tap for `Verifier.phoneVerdicts`: what `phoneVerdict` takes.
public struct PhoneTapInput: Sendable {
    public var url: String
    public var time: Timestamp
    public var position: PhonePosition
    public var audit: PhoneAudit?

    public init(url: String, time: Timestamp, position: PhonePosition, audit: PhoneAudit? = nil) {
        self.url = url
        self.time = time
        self.position = position
        self.audit = audit
    }
}

extension Verifier {
    /// The verdicts on taps that arrived together, in their order, as `phoneVerdict` gives them
    /// one after another, but with their SUN counters accepted together (`SUNCounterStore.acceptAll`:
    /// one transaction) before this returns: a tap's counter is checked against the counters the
    /// taps before it in the group accepted, so the second of two taps with one counter is
    /// `untrusted(sun_replayed)`. A counter another scan accepted before the group's commit makes
    /// its tap a replay; a commit that fails makes every tap that accepted a counter, or was
    /// judged against one the group accepted, `inconclusive(registry_unavailable)`, never confirmed.
    public func phoneVerdicts(_ taps: [PhoneTapInput], requireSUN: Bool = false) -> [Verdict] {
        let group = phoneVerdictGroup(requireSUN: requireSUN)
        group.add(taps)
        return group.commit()
    }

    /// A group of phone taps decided batch by batch as they come (`add`), their counters
    /// committed together at the end (`commit`): `phoneVerdicts` for a committer that takes the
    /// taps arriving while it decides into the same commit.
    public func phoneVerdictGroup(requireSUN: Bool = false) -> PhoneVerdictGroup {
        PhoneVerdictGroup(self, requireSUN: requireSUN)
    }
}

/// Phone taps decided as they come and committed together (`Verifier.phoneVerdictGroup`): each
/// `add` decides its taps against the counters the group has accepted so far (over the store's),
/// and `commit` accepts the group's counters in one `acceptAll` and gives every verdict, final.
/// What `add` gives is what `commit` gives, but for the taps `revised` names: a caller may make
/// each tap's record as it is decided, and make again only those. Used by one thread (the
/// group's committer), and committed once.
public final class PhoneVerdictGroup {
    private let verifier: Verifier
    private let requireSUN: Bool
    /// The run's counter store and the group's counters over it (nil without SUN keys).
    private let counters: (store: any SUNCounterStore, group: SUNCounterGroup)?
    private var verdicts: [Verdict] = []
    /// Which tap accepted each counter, and which taps were judged against one of the group's.
    private var owners: [Int] = []
    private var leaning: [(index: Int, uid: TagUID, counter: UInt32)] = []
    /// The taps whose verdict `commit` may have changed from what `add` gave (their counter was
    /// taken by another scan meanwhile; or the commit failed, and they needed a counter or were
    /// judged against one of the group's), in no order; empty before it.
    public private(set) var revised: Set<Int> = []

    init(_ verifier: Verifier, requireSUN: Bool) {
        self.requireSUN = requireSUN
        guard let store = verifier.sun?.counters else {
            self.verifier = verifier
            counters = nil
            return
        }
        let group = SUNCounterGroup(store)
        var grouped = verifier
        grouped.sun?.counters = group
        self.verifier = grouped
        counters = (store, group)
    }

    /// The taps decided so far.
    public var count: Int { verdicts.count }

    /// Decides `taps`, after those added before, in their order (a counter store that reads
    /// many at once is asked for their tags' counters in one call first): their verdicts, as
    /// `commit` will give them unless it `revised` them.
    @discardableResult
    public func add(_ taps: [PhoneTapInput]) -> ArraySlice<Verdict> {
        let first = verdicts.count
        verdicts.reserveCapacity(verdicts.count + taps.count)
        defer { assert(verdicts.count == first + taps.count) }
        guard let (store, group) = counters else {
            for tap in taps {
                verdicts.append(
                    verifier.phoneVerdict(url: tap.url, time: tap.time, position: tap.position, requireSUN: requireSUN, audit: tap.audit))
            }
            return verdicts[first...]
        }
        if store.readsManyAtOnce { group.prefetch(readingCountersOf: taps.compactMap { verifier.sunTagUID(url: $0.url) }) }
        for tap in taps {
            let index = verdicts.count
            let before = group.beginTap()
            let verdict = verifier.phoneVerdict(
                url: tap.url, time: tap.time, position: tap.position, requireSUN: requireSUN, audit: tap.audit)
            verdicts.append(verdict)
            let (accepted, leaned) = group.endTap(since: before)
            owners += repeatElement(index, count: accepted)
            if let leaned, case .untrusted(.sunReplayed(_, let counter, _)) = verdict.kind {
                leaning.append((index, leaned, counter))
            }
        }
        return verdicts[first...]
    }

    /// Commits the counters the group accepted (one `acceptAll`) and gives every tap's verdict,
    /// in order; call it once, after the last `add`.
    public func commit() -> [Verdict] {
        guard let (store, group) = counters else { return verdicts }
        let pending = group.pending
        guard !pending.isEmpty else { return verdicts }
        do {
            let accepted = try store.acceptAll(pending)
            for (item, (owner, taken)) in zip(pending, zip(owners, accepted)) where !taken {
                // Another scan accepted this counter, or a higher one, meanwhile.
                let last = (try? store.lastAccepted(uid: item.uid)) ?? item.counter
                verdicts[owner].kind = .untrusted(.sunReplayed(tag: item.tagID, counter: item.counter, last: last))
                revised.insert(owner)
            }
        } catch {
            revised.formUnion(owners)
            revised.formUnion(leaning.map(\.index))
            for index in Set(owners) { verdicts[index].kind = .inconclusive(.registryUnavailable(error)) }
            // A replay of a counter the group failed to store: still a replay if the store's own
            // last counter makes it one (as it would have, tap by tap), else inconclusive.
            for tap in leaning {
                if let last = try? store.lastAccepted(uid: tap.uid), tap.counter <= last,
                    case .untrusted(.sunReplayed(let tag, _, _)) = verdicts[tap.index].kind
                {
                    verdicts[tap.index].kind = .untrusted(.sunReplayed(tag: tag, counter: tap.counter, last: last))
                } else {
                    verdicts[tap.index].kind = .inconclusive(.registryUnavailable(error))
                }
            }
        }
        return verdicts
    }
}

extension Verifier {
    /// The UID enrolled for the SUN registry tag a phone tap's URL names, if it names one: whose
    /// counter the tap's check will read (a tag whose SUN decrypts to another UID is read then).
    func sunTagUID(url: String) -> TagUID? {
        let scan = TagScan(
            readerID: "phone", uid: .phoneUnknown, tagType: .unknown, url: url, time: Timestamp(nanosecondsSinceEpoch: 0), source: .phone)
        guard let tagID = urlLocation(of: scan).0?.tagID,
            let placement = try? registry.placement(forTagID: tagID, uid: scan.uid), placement.id == tagID,
            placement.checks.contains(.sun)
        else { return nil }
        return placement.uid
    }
}

/// The counters a group of taps accepts, kept in memory over the run's store until the group's
/// one commit: a counter is above the last one the group accepted for its UID, else the store's
/// (read up front for the group's tags when the store reads many at once, else tag by tag).
/// Used by one thread at a time (the group's), behind a lock all the same.
final class SUNCounterGroup: SUNCounterStore {
    private struct State {
        var last: [TagUID: UInt32] = [:]
        /// The store's counters of the UIDs read from it (up front, or at a tap's first ask): a
        /// UID present has been read; `.some(nil)`: none accepted.
        var stored: [TagUID: UInt32?] = [:]
        var pending: [SUNCounterAcceptance] = []
        /// The UID whose counter of the group's the tap being decided was judged against.
        var leaned: TagUID?
    }

    private let base: any SUNCounterStore
    private let state = Mutex(State())

    init(_ base: any SUNCounterStore) { self.base = base }

    /// Reads the store's counters of `uids` in one call; a store that cannot is asked tag by tag
    /// later, as without this.
    func prefetch(readingCountersOf uids: [TagUID]) {
        guard !uids.isEmpty, let stored = try? base.lastAccepted(uids: uids) else { return }
        state.withLock { state in
            for uid in uids { state.stored[uid] = .some(stored[uid]) }
        }
    }

    /// The counters to commit, in the order they were accepted.
    var pending: [SUNCounterAcceptance] { state.withLock { $0.pending } }

    /// A tap's decision begins: how many counters were pending.
    func beginTap() -> Int {
        state.withLock { state in
            state.leaned = nil
            return state.pending.count
        }
    }

    /// A tap's decision ended: how many counters it accepted, and the UID whose counter of the
    /// group's it was judged against, if any.
    func endTap(since before: Int) -> (accepted: Int, leaned: TagUID?) {
        state.withLock { ($0.pending.count - before, $0.leaned) }
    }

    func lastAccepted(uid: TagUID) throws(RegistryError) -> UInt32? {
        enum Known { case group(UInt32), store(UInt32?), unread }
        let known = state.withLock { state -> Known in
            if let last = state.last[uid] {
                state.leaned = uid
                return .group(last)
            }
            return state.stored[uid].map { .store($0) } ?? .unread
        }
        switch known {
        case .group(let last): return last
        case .store(let last): return last
        case .unread:
            // Read once a group: the tap's check and its accept ask for it in turn.
            let last = try base.lastAccepted(uid: uid)
            state.withLock { $0.stored[uid] = .some(last) }
            return last
        }
    }

    func accept(uid: TagUID, counter: UInt32, tagID: String) throws(RegistryError) -> Bool {
        let last = try lastAccepted(uid: uid)
        if let last, counter <= last { return false }
        state.withLock { state in
            state.last[uid] = counter
            state.pending.append(SUNCounterAcceptance(uid: uid, counter: counter, tagID: tagID))
        }
        return true
    }
}

extension Verdict.Kind {
    /// The kind's symbol as `verify` prints it (and the tap page shows it): ✓ ✗ ? – ⊘ ⚠.
    public var symbol: String {
        switch self {
        case .confirmed: "✓"
        case .outside: "✗"
        case .inconclusive: "?"
        case .notRegistered: "–"
        case .disallowed: "⊘"
        case .untrusted: "⚠"
        }
    }

    /// The kind in `verify`'s words: its name, but `not registered` for `notRegistered`.
    public var words: String {
        if case .notRegistered = self { return "not registered" }
        return name
    }
}
