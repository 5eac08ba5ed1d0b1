import Foundation
import TagFixCore
import Testing

@testable import TagFixCrypto

/// A phone tap on an NTAG 424 DNA SUN tag (issue 34): the URL the phone opened is checked with
/// the run's keys exactly as `verify --sun-keys` checks a reader's (the same `SUNKeyring`, the
/// same counter store), the proof gives the UID, and the counter is accepted before the verdict
/// is returned.
@Suite("Phone taps on SUN tags")
struct PhoneSUNTests {
    typealias Tags = SUNVerdictTests
    static let now = Timestamp(nanosecondsSinceEpoch: 100_000_000_000)
    static let here = PhonePosition.fix(Tags.centre, accuracy: 6, time: now)

    func verifier(_ counters: any SUNCounterStore, keys: Bool = true) throws -> Verifier {
        Verifier(
            registry: try Tags.registry(),
            sun: keys ? .init(authenticator: Tags.keyring(), counters: counters) : nil)
    }

    func tap(_ url: String, _ verifier: Verifier, _ position: PhonePosition = here, requireSUN: Bool = false) -> Verdict {
        verifier.phoneVerdict(url: url, time: Self.now, position: position, requireSUN: requireSUN)
    }

    @Test("a fresh SUN URL is confirmed with its counter; the same URL opened again is a replay")
    func replay() throws {
        let counters = InMemorySUNCounters()
        let verifier = try verifier(counters)
        let url = try Tags.mint(counter: 7)
        let first = tap(url, verifier, requireSUN: true)
        #expect(first.kind == .confirmed)
        #expect(first.sun == SUNEvidence(uid: Tags.uid, counter: 7))
        #expect(first.scan.uid == Tags.uid, "the proof gives the UID")
        #expect(SessionRecord(first).uid == Tags.uid.hex)
        #expect(SessionRecord(first).sunCounter == 7)
        #expect(counters.lastAccepted(uid: Tags.uid) == 7)
        #expect(tap(url, verifier).kind == .untrusted(.sunReplayed(tag: "T01", counter: 7, last: 7)))
        #expect(tap(try Tags.mint(counter: 8), verifier).kind == .confirmed)
    }

    @Test("a denied position still spends the counter: the URL has been presented")
    func deniedSpendsTheCounter() throws {
        let counters = InMemorySUNCounters()
        let verifier = try verifier(counters)
        let url = try Tags.mint(counter: 3)
        #expect(tap(url, verifier, .denied).kind == .disallowed(.positionDenied))
        #expect(counters.lastAccepted(uid: Tags.uid) == 3)
        #expect(tap(url, verifier).kind == .untrusted(.sunReplayed(tag: "T01", counter: 3, last: 3)))
    }

    @Test("an altered URL, a wrong key, missing keys and a counter store that fails")
    func failures() throws {
        let url = try Tags.mint(counter: 5)
        let altered = url.replacingOccurrences(of: "&c=", with: "&c=0").dropLast()
        #expect(tap(String(altered), try verifier(InMemorySUNCounters())).kind.reasonCode == "sun_invalid")
        let forged = try Tags.mint(counter: 5, key: try #require(AES128Key([UInt8](repeating: 7, count: 16))))
        #expect(tap(forged, try verifier(InMemorySUNCounters())).kind.reasonCode == "sun_invalid")
        #expect(
            tap(url, try verifier(InMemorySUNCounters(), keys: false)).kind == .inconclusive(.sunUnchecked(tag: "T01", keyName: "site")))
        struct Broken: SUNCounterStore {
            func lastAccepted(uid: TagUID) throws(RegistryError) -> UInt32? { nil }
            func accept(uid: TagUID, counter: UInt32, tagID: String) throws(RegistryError) -> Bool { throw RegistryError("disk full") }
        }
        #expect(tap(url, try verifier(Broken())).kind == .inconclusive(.registryUnavailable(RegistryError("disk full"))))
    }

    @Test("the SUN proof's UID must be the enrolled one")
    func otherChip() throws {
        let other = try TagUID(hex: "04DE5F1EACC041")
        let verdict = tap(try Tags.mint(uid: other, counter: 9), try verifier(InMemorySUNCounters()))
        #expect(verdict.kind == .untrusted(.uidMismatch(read: other, enrolled: Tags.uid, tagID: "T01")))
    }
}
