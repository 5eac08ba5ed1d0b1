import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixTesting
import Testing

@testable import TagFixServe

/// What happened, in order, across the committer's thread and the test: counters committed,
/// records logged, answers sent.
final class CommitEvents: Sendable {
    private let events = Mutex<[String]>([])
    func add(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
}

/// A SUN check that believes the URL: the counter is `picc_data`'s value, the UID the tag's (its
/// id's last character in the last byte).
struct CounterInURL: SUNAuthenticator {
    func hasKeys(named name: String) -> Bool { true }
    func verify(url: String, settings: SUNSettings) -> SUNResult? {
        let parts = url.split(separator: "?")
        guard let value = parts.last?.split(separator: "&").first(where: { $0.hasPrefix("picc_data=") }),
            let counter = UInt32(value.dropFirst("picc_data=".count)), let tag = parts.first?.utf8.last
        else { return .invalid(.missingParameter("picc_data")) }
        return .verified(uid: [0x04, 0x5A, 0x00, 0x01, 0x9C, 0x3D, tag], counter: counter)
    }

    /// The UID `verify` gives the tag `tag`'s URLs.
    static func uid(tag: String) -> TagUID { try! TagUID(bytes: [0x04, 0x5A, 0x00, 0x01, 0x9C, 0x3D, tag.utf8.last!]) }
}

/// Counters in memory whose commits are recorded, and that fail (a full disk) when told to.
final class RecordedCounters: SUNCounterStore {
    let base = InMemorySUNCounters()
    let events: CommitEvents
    let failing: Bool
    /// Runs at the first commit, before it (another scan accepting a counter meanwhile).
    let before = Mutex<(@Sendable (RecordedCounters) -> Void)?>(nil)

    init(events: CommitEvents, failing: Bool = false) {
        self.events = events
        self.failing = failing
    }

    func lastAccepted(uid: TagUID) throws(RegistryError) -> UInt32? { base.lastAccepted(uid: uid) }

    func accept(uid: TagUID, counter: UInt32, tagID: String) throws(RegistryError) -> Bool {
        try acceptAll([SUNCounterAcceptance(uid: uid, counter: counter, tagID: tagID)])[0]
    }

    func acceptAll(_ counters: [SUNCounterAcceptance]) throws(RegistryError) -> [Bool] {
        guard !failing else { throw RegistryError("cannot commit the SUN counters (disk full)") }
        before.withLock { $0.take() }?(self)
        events.add("counters " + counters.map { "\($0.counter)" }.joined(separator: ","))
        return counters.map { base.accept(uid: $0.uid, counter: $0.counter, tagID: $0.tagID) }
    }
}

@Suite("Phone taps committed in groups: one counter transaction and one log write, then the answers")
struct PhoneTapGroupTests {
    static let centre = try! Coordinate(latitude: 53.545, longitude: 9.966)

    static func handler(_ counters: any SUNCounterStore) throws -> PhoneTapHandler<ManualClock> {
        let names = SUNParameterNames(piccData: "picc_data", cmac: "cmac")
        let entries = try ["S1", "S2"].map { id in
            RegistryEntry(
                id: id, uid: nil, region: try CircularRegion(center: centre, radius: 25, identifier: id), name: nil,
                sun: SUNSettings(keyName: "site", names: names))
        }
        let verifier = Verifier(
            registry: try InMemoryRegistry(entries), sun: Verifier.SUNCheck(authenticator: CounterInURL(), counters: counters))
        return PhoneTapHandler(verifier: verifier, clock: ManualClock())
    }

    static func tap(_ tag: String = "S1", counter: UInt32, client: String = "192.0.2.4") -> PhoneTap {
        PhoneTap(
            request: PhoneTapRequest(
                url: "https://tags.example.org/t/\(tag)?picc_data=\(counter)&cmac=00", position: .fix(centre, accuracy: 6)),
            token: "anna", client: client, userAgent: "Mozilla/5.0 (iPhone)")
    }

    static func kinds(_ answers: [PhoneTapAnswer]) -> [String] {
        answers.map { "\($0.verdict.kind.name)" + ($0.verdict.kind.reasonCode.map { "(\($0))" } ?? "") }
    }

    @Test("in one group: the second tap with a counter is a replay; rising counters both count; one commit for all, in order")
    func replayWithinAGroup() throws {
        let events = CommitEvents()
        let handler = try Self.handler(RecordedCounters(events: events))
        let answers = handler.handle([
            Self.tap(counter: 5), Self.tap(counter: 5), Self.tap("S2", counter: 5), Self.tap(counter: 7), Self.tap(counter: 6),
        ])
        #expect(
            Self.kinds(answers) == [
                "confirmed", "untrusted(sun_replayed)", "confirmed", "confirmed", "untrusted(sun_replayed)",
            ])
        #expect(answers[1].verdict.message.contains("5"))
        #expect(answers.map { $0.verdict.sun?.counter } == [5, nil, 5, 7, nil])
        // One transaction, the accepted counters in the taps' order.
        #expect(events.all == ["counters 5,5,7"])
        // The next group sees the committed counters: 7 is a replay now, 8 is not.
        #expect(Self.kinds(handler.handle([Self.tap(counter: 7), Self.tap(counter: 8)])) == ["untrusted(sun_replayed)", "confirmed"])
    }

    @Test("a group decides as the same taps one by one would")
    func sameAsOneByOne() throws {
        let taps = [5, 5, 4, 9, 9, 10].map { Self.tap(counter: UInt32($0)) } + [Self.tap("S2", counter: 1)]
        let grouped = try Self.handler(RecordedCounters(events: CommitEvents())).handle(taps)
        let single = try Self.handler(InMemorySUNCounters())
        let oneByOne = taps.map { single.handle($0.request, token: $0.token, client: $0.client, userAgent: $0.userAgent) }
        #expect(Self.kinds(grouped) == Self.kinds(oneByOne))
        #expect(grouped.map(\.verdict.message) == oneByOne.map(\.verdict.message))
        #expect(grouped.map(\.json) == oneByOne.map(\.json))
    }

    /// Counters in memory that read many at once (as PostgreSQL's do), counting the reads.
    final class BatchReadCounters: SUNCounterStore {
        let base: InMemorySUNCounters
        let reads = Mutex((oneTag: 0, many: [[TagUID]]()))

        init(_ initial: [TagUID: UInt32]) { base = InMemorySUNCounters(initial) }

        var readsManyAtOnce: Bool { true }

        func lastAccepted(uid: TagUID) throws(RegistryError) -> UInt32? {
            reads.withLock { $0.oneTag += 1 }
            return base.lastAccepted(uid: uid)
        }

        func lastAccepted(uids: [TagUID]) throws(RegistryError) -> [TagUID: UInt32] {
            reads.withLock { $0.many.append(uids) }
            return try base.lastAccepted(uids: uids)
        }

        func accept(uid: TagUID, counter: UInt32, tagID: String) throws(RegistryError) -> Bool {
            base.accept(uid: uid, counter: counter, tagID: tagID)
        }
    }

    /// S1 and S2 enrolled with the UIDs `CounterInURL` decrypts for them; S3 without one.
    static func enrolledHandler(_ counters: any SUNCounterStore) throws -> PhoneTapHandler<ManualClock> {
        let names = SUNParameterNames(piccData: "picc_data", cmac: "cmac")
        let entries = try ["S1", "S2", "S3"].map { id in
            RegistryEntry(
                id: id, uid: id == "S3" ? nil : try TagUID(bytes: [0x04, 0x5A, 0x00, 0x01, 0x9C, 0x3D, id.utf8.last!]),
                region: try CircularRegion(center: centre, radius: 25, identifier: id), name: nil,
                sun: SUNSettings(keyName: "site", names: names))
        }
        let verifier = Verifier(
            registry: try InMemoryRegistry(entries), sun: Verifier.SUNCheck(authenticator: CounterInURL(), counters: counters))
        return PhoneTapHandler(verifier: verifier, clock: ManualClock())
    }

    @Test(
        "a store that reads many at once is read once for a group's enrolled tags, up front; the verdicts are those of one by one",
        arguments: [[5, 5, 4, 9, 9, 10], [3, 4], [4], [7, 6, 8, 8]])
    func countersReadUpFront(_ counters: [Int]) throws {
        let s1 = try TagUID(bytes: [0x04, 0x5A, 0x00, 0x01, 0x9C, 0x3D, UInt8(ascii: "1")])
        let taps = counters.map { Self.tap(counter: UInt32($0)) } + [Self.tap("S2", counter: 1), Self.tap("S3", counter: 2)]
        let store = BatchReadCounters([s1: 4])
        let grouped = try Self.enrolledHandler(store).handle(taps)
        let single = try Self.enrolledHandler(InMemorySUNCounters([s1: 4]))
        let oneByOne = taps.map { single.handle($0.request, token: $0.token, client: $0.client, userAgent: $0.userAgent) }
        #expect(Self.kinds(grouped) == Self.kinds(oneByOne))
        #expect(grouped.map(\.json) == oneByOne.map(\.json))
        let reads = store.reads.withLock { $0 }
        #expect(reads.many.count == 1, "one read for the group: \(reads.many)")
        #expect(Set(reads.many.first ?? []).count == 2, "S1 and S2, the enrolled SUN tags")
        // S3 has no enrolled UID, so it is read when its tap is decided: once (its check and its
        // accept both ask; the group keeps the first answer).
        #expect(reads.oneTag == 1, "only the tag with no enrolled UID is read on its own, once")
    }

    @Test("counters that cannot be committed: every tap that needed one is inconclusive, never confirmed; a plain answer stays")
    func counterCommitFails() throws {
        let region = try CircularRegion(center: Self.centre, radius: 25, identifier: "P1")
        let names = SUNParameterNames(piccData: "picc_data", cmac: "cmac")
        let entries = [
            RegistryEntry(id: "S1", uid: nil, region: region, name: nil, sun: SUNSettings(keyName: "site", names: names)),
            RegistryEntry(id: "P1", uid: nil, region: region, name: nil),
        ]
        let verifier = Verifier(
            registry: try InMemoryRegistry(entries),
            sun: Verifier.SUNCheck(authenticator: CounterInURL(), counters: RecordedCounters(events: CommitEvents(), failing: true)))
        let handler = PhoneTapHandler(verifier: verifier, clock: ManualClock())
        let plain = PhoneTap(
            request: PhoneTapRequest(url: "https://tags.example.org/t/P1", position: .fix(Self.centre, accuracy: 6)), token: "anna",
            client: "192.0.2.4", userAgent: "")
        let answers = handler.handle([Self.tap(counter: 5), Self.tap(counter: 5), plain, Self.tap(counter: 6)])
        #expect(
            Self.kinds(answers) == [
                "inconclusive(registry_unavailable)", "inconclusive(registry_unavailable)", "confirmed",
                "inconclusive(registry_unavailable)",
            ])
        #expect(answers[0].verdict.message.contains("disk full"))
    }

    /// Answers collected from the committer's thread.
    static func replies(_ events: CommitEvents, count: Int) -> (handles: [HTTPReplyHandle], answers: AsyncStream<(Int, HTTPResponse)>) {
        let (stream, continuation) = AsyncStream<(Int, HTTPResponse)>.makeStream()
        let handles = (0..<count).map { index in
            HTTPReplyHandle { response in
                events.add("answer \(index) \(response.status)")
                continuation.yield((index, response))
            }
        }
        return (handles, stream)
    }

    static func collect(_ stream: AsyncStream<(Int, HTTPResponse)>, count: Int) async -> [Int: HTTPResponse] {
        var answers: [Int: HTTPResponse] = [:]
        for await (index, response) in stream {
            answers[index] = response
            if answers.count == count { break }
        }
        return answers
    }

    /// Delivers `groups` to a log whose every write waits at `gate` (`entered` says one has
    /// begun), then records `logged KINDS` in `events`.
    static func logWriteHeld(_ groups: PhoneTapGroups, events: CommitEvents) -> (entered: AsyncStream<Void>, gate: Gate) {
        let (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
        let gate = Gate()
        groups.deliver { verdicts, whenKept in
            enteredContinuation.yield()
            gate.block()
            events.add("logged " + verdicts.map { "\($0.verdict.kind.name)" }.joined(separator: ","))
            whenKept(true)
        }
        return (entered, gate)
    }

    @Test("no answer leaves before its group's counters and records are committed; taps that wait form the next group")
    func durableBeforeAnswer() async throws {
        let events = CommitEvents()
        let handler = try Self.handler(RecordedCounters(events: events))
        let groups = PhoneTapGroups { handler.group() }
        // The first group's log write is held until the next taps are queued: they must wait and
        // go together, in one commit, and nobody is answered before the log has them.
        let (entered, gate) = Self.logWriteHeld(groups, events: events)
        let (handles, stream) = Self.replies(events, count: 3)
        groups.submit(Self.tap(counter: 1), reply: handles[0])
        var waiting = entered.makeAsyncIterator()
        _ = await waiting.next()
        // The committer is inside the first group's log write: these two wait for the next group.
        groups.submit(Self.tap(counter: 2), reply: handles[1])
        groups.submit(Self.tap(counter: 2), reply: handles[2])
        #expect(!events.all.contains { $0.hasPrefix("answer") }, "a tap was answered before its record was logged")
        gate.open()
        let answers = await Self.collect(stream, count: 3)
        #expect(
            events.all == [
                "counters 1", "logged confirmed", "answer 0 200", "counters 2", "logged confirmed,untrusted", "answer 1 200",
                "answer 2 200",
            ])
        #expect(String(decoding: answers[2]!.body, as: UTF8.self).contains(#""reason":"sun_replayed""#))
        #expect(groups.counts == PhoneTapGroups.Counts(taps: 3, groups: 2, largest: 2))
    }

    /// A server that stops closes its log after `finish()`: a group still being committed then
    /// was written to a closed log ("Bad file descriptor", its taps answered 503 as the log's
    /// failure), and taps kept coming in while it stopped.
    @Test("finish(): the taps taken are committed and answered before it returns; a tap after it gets 503 at once, never logged")
    func finishCommitsFirst() async throws {
        let events = CommitEvents()
        let handler = try Self.handler(RecordedCounters(events: events))
        let groups = PhoneTapGroups { handler.group() }
        let (entered, gate) = Self.logWriteHeld(groups, events: events)
        let (handles, stream) = Self.replies(events, count: 2)
        groups.submit(Self.tap(counter: 1), reply: handles[0])
        var waiting = entered.makeAsyncIterator()
        _ = await waiting.next()
        // The first group's log write is held: finish() waits for it.
        let finishing = Task {
            await groups.finish()
            events.add("finished")
        }
        #expect(await eventually { !groups.isTakingTaps })
        groups.submit(Self.tap(counter: 2), reply: handles[1])
        #expect(!events.all.contains("finished"))
        gate.open()
        await finishing.value
        let answers = await Self.collect(stream, count: 2)
        #expect(events.all == ["counters 1", "answer 1 503", "logged confirmed", "answer 0 200", "finished"])
        #expect(String(decoding: answers[1]!.body, as: UTF8.self).contains("the server is stopping"))
        #expect(groups.counts == PhoneTapGroups.Counts(taps: 1, groups: 1, largest: 1))
        // Nothing waits: finish() again returns at once.
        await groups.finish()
    }

    /// Groups whose first group's first decision waits at `gate` (`entered` says it has
    /// begun): the taps submitted meanwhile are waiting when the committer goes on.
    static func firstDecisionHeld(_ handler: PhoneTapHandler<ManualClock>) -> (
        groups: PhoneTapGroups, entered: AsyncStream<Void>, gate: Gate
    ) {
        let (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
        let gate = Gate()
        let first = Mutex(true)
        let groups = PhoneTapGroups {
            let held = first.withLock { first in
                defer { first = false }
                return first
            }
            return HeldDecision(handler.group()) {
                guard held else { return }
                enteredContinuation.yield()
                gate.block()
            }
        }
        return (groups, entered, gate)
    }

    @Test("taps that come while a group is decided join it: one counter commit and one log write for all, then every answer")
    func joinWhileDeciding() async throws {
        let events = CommitEvents()
        let handler = try Self.handler(RecordedCounters(events: events))
        // The first tap's decision is held until two more taps are queued: before, they waited
        // for a group of their own (two counter commits, two log writes for three taps).
        let (groups, entered, gate) = Self.firstDecisionHeld(handler)
        groups.deliver { verdicts, whenKept in
            events.add("logged " + verdicts.map { "\($0.verdict.kind.name)" }.joined(separator: ","))
            whenKept(true)
        }
        let (handles, stream) = Self.replies(events, count: 3)
        groups.submit(Self.tap(counter: 1), reply: handles[0])
        var waiting = entered.makeAsyncIterator()
        _ = await waiting.next()
        groups.submit(Self.tap(counter: 2), reply: handles[1])
        groups.submit(Self.tap(counter: 2), reply: handles[2])
        gate.open()
        let answers = await Self.collect(stream, count: 3)
        #expect(
            events.all == ["counters 1,2", "logged confirmed,confirmed,untrusted", "answer 0 200", "answer 1 200", "answer 2 200"])
        #expect(String(decoding: answers[2]!.body, as: UTF8.self).contains(#""reason":"sun_replayed""#))
        #expect(groups.counts == PhoneTapGroups.Counts(taps: 3, groups: 1, largest: 3))
    }

    @Test("a group takes at most largestGroup taps: the ones that came while it was decided beyond that are the next group")
    func largestGroup() async throws {
        let events = CommitEvents()
        let handler = try Self.handler(RecordedCounters(events: events))
        let (groups, entered, gate) = Self.firstDecisionHeld(handler)
        groups.deliver { _, whenKept in whenKept(true) }
        let count = PhoneTapGroups.largestGroup + 2
        let (handles, stream) = Self.replies(events, count: count)
        groups.submit(Self.tap("S0", counter: 1), reply: handles[0])
        var waiting = entered.makeAsyncIterator()
        _ = await waiting.next()
        // Each tap another tag's, so none is a replay of another.
        for index in 1..<count { groups.submit(Self.tap("S\(index)", counter: 1), reply: handles[index]) }
        gate.open()
        let answers = await Self.collect(stream, count: count)
        #expect(answers.values.allSatisfy { $0.status == 200 })
        #expect(groups.counts == PhoneTapGroups.Counts(taps: count, groups: 2, largest: PhoneTapGroups.largestGroup))
    }

    @Test("a group the log cannot keep: every tap of it is answered 503, none confirmed, and later groups are tried again")
    func logFails() async throws {
        let events = CommitEvents()
        let handler = try Self.handler(RecordedCounters(events: events))
        let groups = PhoneTapGroups { handler.group() }
        let (handles, stream) = Self.replies(events, count: 2)
        // A tap before there is somewhere to deliver waits (the server listens before the log is
        // open), and is committed with the first group.
        groups.submit(Self.tap(counter: 1), reply: handles[0])
        #expect(events.all.isEmpty)
        groups.deliver { _, whenKept in whenKept(false) }
        groups.submit(Self.tap("S2", counter: 1), reply: handles[1])
        let answers = await Self.collect(stream, count: 2)
        for answer in answers.values {
            #expect(answer.status == 503)
            let body = String(decoding: answer.body, as: UTF8.self)
            #expect(body.contains("could not record this tap") && !body.contains("confirmed\""))
        }
    }

    @Test("a sink that never says whether it recorded a group: its taps are answered 503, as not recorded")
    func sinkNeverSays() async throws {
        let events = CommitEvents()
        let handler = try Self.handler(RecordedCounters(events: events))
        let groups = PhoneTapGroups { handler.group() }
        groups.deliver { _, _ in }
        let (handles, stream) = Self.replies(events, count: 2)
        groups.submit(Self.tap(counter: 1), reply: handles[0])
        groups.submit(Self.tap("S2", counter: 1), reply: handles[1])
        let answers = await Self.collect(stream, count: 2)
        #expect(answers.values.allSatisfy { $0.status == 503 })
    }

    /// 24 taps, 12 a tag (S1 and S2 in turn) with rising counters.
    static let rising: [PhoneTap] = (0..<24).map { (index: Int) -> PhoneTap in
        tap(index % 2 == 0 ? "S1" : "S2", counter: UInt32(1 + index / 2))
    }

    /// `taps` submitted before there is somewhere to deliver (so they are one group, its records
    /// begun by the map worker as they are decided), through `counters`: what the log was handed
    /// and what each tap was answered.
    static func group(_ counters: any SUNCounterStore, taps: [PhoneTap] = rising) async throws -> (
        logged: [RecordedVerdict], answers: [Int: HTTPResponse]
    ) {
        let handler = try Self.handler(counters)
        let groups = PhoneTapGroups { handler.group() }
        let (handles, stream) = Self.replies(CommitEvents(), count: taps.count)
        for (tap, handle) in zip(taps, handles) { groups.submit(tap, reply: handle) }
        let logged = Mutex<[RecordedVerdict]>([])
        groups.deliver { verdicts, whenKept in
            logged.withLock { $0 += verdicts }
            whenKept(true)
        }
        let answers = await Self.collect(stream, count: taps.count)
        return (logged.withLock { $0 }, answers)
    }

    @Test("counters another scan took while a group was decided: those taps are logged and answered as replays, not as decided")
    func revisedAtCommit() async throws {
        // Another serve on the same counter file took S2's counter 50 meanwhile: the group's
        // commit of S2's counters 1 to 12 is refused, so those taps are replays. Their records
        // and answers were made as they were decided (confirmed); they must be made again.
        let counters = RecordedCounters(events: CommitEvents())
        counters.before.withLock { $0 = { _ = $0.base.accept(uid: CounterInURL.uid(tag: "S2"), counter: 50, tagID: "S2") } }
        let (logged, answers) = try await Self.group(counters)
        #expect(logged.count == 24)
        for (index, recorded) in logged.enumerated() {
            let expected = index % 2 == 0 ? "confirmed" : "untrusted"
            #expect(recorded.verdict.kind.name == expected, "tap \(index)")
            #expect(recorded.record == SessionRecord(recorded.verdict), "tap \(index): its record is not its verdict's")
            #expect(recorded.line.contains(index % 2 == 0 ? #""verdict":"confirmed""# : #""reason":"sun_replayed""#), "tap \(index)")
            let body = String(decoding: answers[index]!.body, as: UTF8.self)
            #expect(body.contains(#""verdict":"\#(expected)""#), "tap \(index): \(body)")
        }
    }

    @Test("counters a group cannot commit: every record and answer says inconclusive, none the confirmed made as it was decided")
    func revisedWhenCommitFails() async throws {
        // Each counter twice: the second tap is judged a replay against the group's own counter,
        // which the failed commit never stored, so it is inconclusive too.
        let taps: [PhoneTap] = (0..<24).map { (index: Int) -> PhoneTap in
            Self.tap(index % 4 < 2 ? "S1" : "S2", counter: UInt32(1 + index / 4))
        }
        let (logged, answers) = try await Self.group(RecordedCounters(events: CommitEvents(), failing: true), taps: taps)
        #expect(logged.count == 24)
        for (index, recorded) in logged.enumerated() {
            #expect(recorded.verdict.kind.reasonCode == "registry_unavailable", "tap \(index)")
            #expect(recorded.record == SessionRecord(recorded.verdict), "tap \(index)")
            #expect(!recorded.line.contains("confirmed"), "tap \(index)")
            #expect(String(decoding: answers[index]!.body, as: UTF8.self).contains(#""reason":"registry_unavailable""#), "tap \(index)")
        }
    }

    @Test("a group's decision says which taps its commit changed from what it gave as they were decided")
    func decisionRevised() throws {
        let counters = RecordedCounters(events: CommitEvents())
        counters.before.withLock { $0 = { _ = $0.base.accept(uid: CounterInURL.uid(tag: "S2"), counter: 3, tagID: "S2") } }
        let decision = try Self.handler(counters).group()
        let decided = decision.add([Self.tap(counter: 1), Self.tap("S2", counter: 2), Self.tap("S2", counter: 4)])
        let decided2 = decision.add([Self.tap("S2", counter: 2), Self.tap(counter: 1)])
        #expect(
            Self.kinds(decided + decided2) == ["confirmed", "confirmed", "confirmed", "untrusted(sun_replayed)", "untrusted(sun_replayed)"])
        // S2's 2 is below the 3 taken meanwhile; its 4 is above it and stands.
        let revised = decision.commit()
        #expect(Array(revised.keys) == [1])
        #expect(Self.kinds(revised.sorted { $0.key < $1.key }.map(\.value)) == ["untrusted(sun_replayed)"])
        guard case .untrusted(.sunReplayed(_, let counter, let last)) = revised[1]?.verdict.kind else {
            Issue.record("tap 1 is not a replay: \(String(describing: revised[1]?.verdict.kind))")
            return
        }
        // The store's last counter once the group's 4 is in.
        #expect(counter == 2 && last == 4)

        // A commit that fails: the tap that needed a counter and the one judged against it.
        let failing = try Self.handler(RecordedCounters(events: CommitEvents(), failing: true)).group()
        #expect(Self.kinds(failing.add([Self.tap(counter: 5), Self.tap(counter: 5)])) == ["confirmed", "untrusted(sun_replayed)"])
        let failed = failing.commit()
        #expect(Set(failed.keys) == [0, 1])
        #expect(
            Self.kinds(failed.sorted { $0.key < $1.key }.map(\.value)) == Array(repeating: "inconclusive(registry_unavailable)", count: 2))
    }

    @Test("through the session's fan-out: a group is answered once the log holds it, before the live page and the terminal take it")
    func answeredBeforeOtherSinks() async throws {
        let events = CommitEvents()
        let handler = try Self.handler(RecordedCounters(events: events))
        let groups = PhoneTapGroups { handler.group() }
        let path = NSTemporaryDirectory() + "tagfix-answered-\(UUID().uuidString).jsonl"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = try SessionLog(path: path)
        defer { log.close() }
        let fanOut = VerdictFanOut([ShownSink(events: events, logPath: path), SessionLogSink(log)])
        let (handles, stream) = Self.replies(events, count: 2)
        // Both wait for somewhere to deliver, so they are one group.
        groups.submit(Self.tap(counter: 1), reply: handles[0])
        groups.submit(Self.tap("S2", counter: 1), reply: handles[1])
        groups.deliver { fanOut.send(recorded: $0, whenKept: $1) }
        _ = await Self.collect(stream, count: 2)
        // The last event is added after the answers: wait for it on the fan-out's lock.
        _ = fanOut.stopped
        #expect(events.all == ["counters 1,1", "answer 0 200", "answer 1 200", "shown 2 logged", "shown 2 logged"])
    }
}

/// A sink that is not durable (the live page, the terminal): notes each verdict it takes, with
/// how many records the session log held then.
private struct ShownSink: VerdictSink {
    let events: CommitEvents
    let logPath: String

    func receive(_ verdict: Verdict, now: Timestamp?) {
        let logged = (try? SessionLog.read(path: logPath))?.records.count ?? 0
        events.add("shown \(logged) logged")
    }
}

/// A gate the committer's thread waits at until the test opens it (a blocking wait: the
/// committer runs on a thread of its own, never the cooperative pool).
final class Gate: Sendable {
    private let opened = Mutex(false)
    private let semaphore = DeviceThread.Wakeup()

    func block() {
        guard !opened.withLock({ $0 }) else { return }
        semaphore.block()
    }

    func open() {
        opened.withLock { $0 = true }
        semaphore.signal()
    }
}

/// A group's decision whose first `add` runs `hold` first (a test holds the committer there).
final class HeldDecision: PhoneTapDecision {
    private let decision: any PhoneTapDecision
    private var hold: (() -> Void)?

    init(_ decision: any PhoneTapDecision, hold: @escaping () -> Void) {
        self.decision = decision
        self.hold = hold
    }

    func add(_ taps: [PhoneTap]) -> [PhoneTapAnswer] {
        hold?()
        hold = nil
        return decision.add(taps)
    }

    func commit() -> [Int: PhoneTapAnswer] { decision.commit() }
}
