import Foundation
import TagFixCore
import Testing

@testable import TagFixCrypto

/// A SUN tag in the verifier (issue 21, "In the verifier"): the registry names the key set and
/// the parameters, the keyring checks the CMAC, the counter store refuses a counter not above the
/// last, and the decrypted UID must be the enrolled one. URLs are minted here the way an NTAG 424
/// DNA writes them (AES-CBC PICCData under the meta-read key, SDMMAC from the session key), and
/// AN12196's published URL is among them.
@Suite struct SUNVerdictTests {
    static let uid = try! TagUID(hex: "04DE5F1EACC040")
    static let centre = try! Coordinate(latitude: 53.545, longitude: 9.966)
    static let settings = SUNSettings(keyName: "site", names: SUNParameterNames(piccData: "e", cmac: "c"))

    /// A URL as the tag writes it on read number `counter`, with `key` as both SDM keys.
    static func mint(uid: TagUID = uid, counter: UInt32, key: AES128Key = .zero, padding: [UInt8] = [1, 2, 3, 4, 5]) throws -> String {
        let plain = [0xC7] + uid.bytes + [UInt8(counter & 0xFF), UInt8(counter >> 8 & 0xFF), UInt8(counter >> 16 & 0xFF)] + padding
        let picc = try AES128.cbcEncrypt(key: key, plain)
        let verifier = SUNVerifier(metaReadKey: key, fileReadKey: .fixed(key))
        let mac = try #require(verifier.sdmMAC(PICCData(uid: uid.bytes, counter: counter), input: []))
        return "https://tags.example/t/T01?e=\(SUNHex.encode(picc))&c=\(SUNHex.encode(mac))"
    }

    static func registry(enrolled: TagUID? = uid, sun: SUNSettings? = settings) throws -> InMemoryRegistry {
        let region = try CircularRegion(center: centre, radius: 25, identifier: "T01")
        return try InMemoryRegistry([RegistryEntry(id: "T01", uid: enrolled, region: region, name: "Gate", sun: sun)])
    }

    static func keyring(_ key: AES128Key = .zero) -> SUNKeyring {
        SUNKeyring(sets: ["site": SUNVerifier(metaReadKey: key, fileReadKey: .fixed(key))])
    }

    static func scan(_ url: String, uid: TagUID = uid, at seconds: Int64 = 100) -> TagScan {
        TagScan(readerID: "r", uid: uid, tagType: .type4, url: url, time: Timestamp(nanosecondsSinceEpoch: seconds * 1_000_000_000))
    }

    static func fix(at seconds: Int64) -> Fix {
        Fix(time: Timestamp(nanosecondsSinceEpoch: seconds * 1_000_000_000), mode: .threeD, coordinate: centre, horizontalAccuracy: 3)
    }

    /// Every scan through a session with a fix around it; the verdicts in order.
    static func verdicts(_ scans: [TagScan], verifier: Verifier) -> [Verdict] {
        var session = VerificationSession(verifier: verifier)
        var out: [Verdict] = []
        for scan in scans {
            let t = scan.time.nanosecondsSinceEpoch / 1_000_000_000
            out += session.receive(fix(at: t - 1))
            out += session.receive(scan, now: scan.time)
            out += session.receive(fix(at: t + 1))
        }
        return out + session.finish()
    }

    @Test func an12196URLIsConfirmedOnceThenAReplay() throws {
        let url = "https://tags.example/t/T01?e=EF963FF7828658A599F3041510671E88&c=94EED9EE65337086"
        let counters = InMemorySUNCounters()
        let verifier = Verifier(registry: try Self.registry(), sun: .init(authenticator: Self.keyring(), counters: counters))
        let verdicts = Self.verdicts([Self.scan(url, at: 100), Self.scan(url, at: 200)], verifier: verifier)
        #expect(verdicts.map(\.kind) == [.confirmed, .untrusted(.sunReplayed(tag: "T01", counter: 61, last: 61))])
        #expect(verdicts[0].sun == SUNEvidence(uid: Self.uid, counter: 61))
        #expect(counters.lastAccepted(uid: Self.uid) == 61)
    }

    @Test func risingCountersAreConfirmedAndAnOldOneIsAReplay() throws {
        let counters = InMemorySUNCounters()
        let verifier = Verifier(registry: try Self.registry(), sun: .init(authenticator: Self.keyring(), counters: counters))
        let urls = try [7, 8, 12, 9].map { try Self.mint(counter: $0) }
        let verdicts = Self.verdicts(urls.enumerated().map { Self.scan($1, at: Int64(100 + 10 * $0)) }, verifier: verifier)
        #expect(
            verdicts.map(\.kind) == [.confirmed, .confirmed, .confirmed, .untrusted(.sunReplayed(tag: "T01", counter: 9, last: 12))])
        #expect(verdicts.compactMap(\.sun?.counter) == [7, 8, 12])
    }

    /// A captured URL written onto another chip (a Type 2 tag with its own UID): the replay is
    /// what the verdict names, before the UID.
    @Test func aReplayOnAnotherChipIsAReplay() throws {
        let counters = InMemorySUNCounters([Self.uid: 40])
        let verifier = Verifier(registry: try Self.registry(), sun: .init(authenticator: Self.keyring(), counters: counters))
        let copy = try TagUID(hex: "04112233445566")
        let verdicts = Self.verdicts([Self.scan(try Self.mint(counter: 40), uid: copy)], verifier: verifier)
        #expect(verdicts.map(\.kind) == [.untrusted(.sunReplayed(tag: "T01", counter: 40, last: 40))])
    }

    /// A fresh (never seen) URL from the genuine tag, copied onto another chip before the genuine
    /// tag was tapped: the SUN verifies, the chip's UID is not the enrolled one.
    @Test func aFreshURLOnAnotherChipIsAUIDMismatch() throws {
        let verifier = Verifier(registry: try Self.registry(), sun: .init(authenticator: Self.keyring(), counters: InMemorySUNCounters()))
        let copy = try TagUID(hex: "04112233445566")
        let verdicts = Self.verdicts([Self.scan(try Self.mint(counter: 3), uid: copy)], verifier: verifier)
        #expect(verdicts.map(\.kind) == [.untrusted(.uidMismatch(read: copy, enrolled: Self.uid, tagID: "T01"))])
    }

    /// The tag that wrote the URL is not the one enrolled (its decrypted UID says so).
    @Test func anotherTagsProofIsAUIDMismatch() throws {
        let other = try TagUID(hex: "04A1B2C3D4E5F6")
        let verifier = Verifier(registry: try Self.registry(), sun: .init(authenticator: Self.keyring(), counters: InMemorySUNCounters()))
        let verdicts = Self.verdicts([Self.scan(try Self.mint(uid: other, counter: 3), uid: other)], verifier: verifier)
        #expect(verdicts.map(\.kind) == [.untrusted(.uidMismatch(read: other, enrolled: Self.uid, tagID: "T01"))])
    }

    @Test(arguments: ["wrong key", "CMAC bit", "PICC bit", "no SUN"])
    func anAlteredOrForeignProofIsInvalid(attack: String) throws {
        let good = try Self.mint(counter: 5)
        let url: String
        switch attack {
        case "wrong key": url = try Self.mint(counter: 5, key: try #require(AES128Key(hex: "00112233445566778899AABBCCDDEEFF")))
        case "CMAC bit": url = String(good.dropLast()) + (good.hasSuffix("0") ? "1" : "0")
        case "PICC bit":
            let index = good.index(good.firstIndex(of: "=")!, offsetBy: 1)
            url = good.replacingCharacters(in: index...index, with: good[index] == "0" ? "1" : "0")
        default: url = "https://tags.example/t/T01"
        }
        let counters = InMemorySUNCounters()
        let verifier = Verifier(registry: try Self.registry(), sun: .init(authenticator: Self.keyring(), counters: counters))
        let verdicts = Self.verdicts([Self.scan(url)], verifier: verifier)
        guard case .untrusted(.sunInvalid(let tag, _)) = verdicts.first?.kind else {
            Issue.record("\(attack): \(verdicts.map(\.kind))")
            return
        }
        #expect(tag == "T01")
        #expect(verdicts.first?.sun == nil)
        #expect(counters.lastAccepted(uid: Self.uid) == nil, "a proof that failed accepts no counter")
    }

    @Test func withoutKeysASUNTagIsUnchecked() throws {
        let verifier = Verifier(registry: try Self.registry())
        let verdicts = Self.verdicts([Self.scan(try Self.mint(counter: 5))], verifier: verifier)
        #expect(verdicts.map(\.kind) == [.inconclusive(.sunUnchecked(tag: "T01", keyName: "site"))])
        let other = Verifier(
            registry: try Self.registry(sun: SUNSettings(keyName: "other")),
            sun: .init(authenticator: Self.keyring(), counters: InMemorySUNCounters()))
        #expect(
            Self.verdicts([Self.scan(try Self.mint(counter: 5))], verifier: other).map(\.kind) == [
                .inconclusive(.sunUnchecked(tag: "T01", keyName: "other"))
            ])
    }

    /// Two taps of the same URL waiting for their fixes at once: both pass the first look (the
    /// counter is not yet accepted); the store accepts the first, the second is a replay.
    @Test func twoWaitingScansOfOneURLAcceptOne() throws {
        let counters = InMemorySUNCounters()
        let verifier = Verifier(registry: try Self.registry(), sun: .init(authenticator: Self.keyring(), counters: counters))
        let url = try Self.mint(counter: 9)
        var session = VerificationSession(verifier: verifier)
        var verdicts = session.receive(Self.fix(at: 99))
        verdicts += session.receive(Self.scan(url, at: 100), now: Self.scan(url, at: 100).time)
        verdicts += session.receive(Self.scan(url, at: 100), now: Self.scan(url, at: 100).time)
        #expect(verdicts.isEmpty && session.pendingCount == 2)
        verdicts += session.receive(Self.fix(at: 101))
        #expect(verdicts.map(\.kind) == [.confirmed, .untrusted(.sunReplayed(tag: "T01", counter: 9, last: 9))])
    }

    /// A counter store that cannot be written never lets a verdict be confirmed.
    @Test func aFailingCounterStoreIsInconclusive() throws {
        struct Broken: SUNCounterStore {
            func lastAccepted(uid: TagUID) throws(RegistryError) -> UInt32? { nil }
            func accept(uid: TagUID, counter: UInt32, tagID: String) throws(RegistryError) -> Bool { throw RegistryError("disk full") }
        }
        let verifier = Verifier(registry: try Self.registry(), sun: .init(authenticator: Self.keyring(), counters: Broken()))
        let verdicts = Self.verdicts([Self.scan(try Self.mint(counter: 5))], verifier: verifier)
        #expect(verdicts.map(\.kind) == [.inconclusive(.registryUnavailable(RegistryError("disk full")))])
    }

    /// The evidence keeps a UID in two integers (no reference on the verdict path): every length
    /// a UID can have comes back byte for byte.
    @Test(arguments: ["04A1B2C3", "04DE5F1EACC040", "04112233445566778899", "FFFFFFFFFFFFFFFFFFFF", "00000000"])
    func evidenceKeepsTheUID(hex: String) throws {
        let uid = try TagUID(hex: hex)
        let evidence = SUNEvidence(uid: uid, counter: 0xFF_FFFF)
        #expect(evidence.uid == uid)
        #expect(evidence.counter == 0xFF_FFFF)
        #expect(SUNEvidence(uid: uid, counter: 1) != SUNEvidence(uid: try TagUID(hex: "04DE5F1EACC041"), counter: 1))
    }

    /// Messages never carry key material or the MAC.
    @Test func messagesCarryNoSecrets() throws {
        let url = try Self.mint(counter: 5)
        let mac = String(url.suffix(16))
        for reason in [UntrustedReason.sunInvalid(tag: "T01", problem: .macMismatch), .sunReplayed(tag: "T01", counter: 5, last: 7)] {
            #expect(!reason.description.contains(mac))
            #expect(!reason.description.contains("00000000000000000000000000000000"))
        }
    }
}

/// A tag enrolled genuine must read genuine on every scan, with or without --require-genuine,
/// on the fast path (plain registry URL) as on the full one.
@Suite struct EnrolledGenuineTests {
    static let uid = try! TagUID(hex: "04A224B2C56480")

    static func verdict(_ originality: Originality?, enrolled: Originality.Status?, url: String) throws -> Verdict.Kind? {
        let region = try CircularRegion(center: SUNVerdictTests.centre, radius: 25, identifier: "T01")
        let registry = try InMemoryRegistry([RegistryEntry(id: "T01", uid: uid, region: region, name: nil, originality: enrolled)])
        var scan = TagScan(readerID: "r", uid: uid, tagType: .ntag215, url: url, time: Timestamp(nanosecondsSinceEpoch: 100_000_000_000))
        scan.originality = originality
        return SUNVerdictTests.verdicts([scan], verifier: Verifier(registry: registry)).first?.kind
    }

    @Test(arguments: ["https://tags.example/t/T01", "https://tags.example/t/T01?src=tap"])
    func enrolledGenuineThenNot(url: String) throws {
        #expect(try Self.verdict(Originality(status: .genuine, key: "NXP NTAG21x"), enrolled: .genuine, url: url) == .confirmed)
        #expect(
            try Self.verdict(Originality(status: .invalid, key: "NXP NTAG21x"), enrolled: .genuine, url: url)
                == .untrusted(.signatureInvalid(key: "NXP NTAG21x", tag: "T01")))
        #expect(
            try Self.verdict(Originality(status: .absent), enrolled: .genuine, url: url)
                == .untrusted(.signatureMissing(status: .absent, tag: "T01")))
        #expect(try Self.verdict(nil, enrolled: .genuine, url: url) == .untrusted(.signatureMissing(status: nil, tag: "T01")))
        // Enrolled without a signature: nothing is asked of it.
        #expect(try Self.verdict(Originality(status: .absent), enrolled: .absent, url: url) == .confirmed)
        #expect(try Self.verdict(nil, enrolled: nil, url: url) == .confirmed)
    }
}
