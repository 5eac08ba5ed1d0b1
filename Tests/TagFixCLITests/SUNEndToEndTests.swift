import Foundation
import Synchronization
import TagFixCLI
import TagFixCore
import TagFixCrypto
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixNDEF
import TagFixStore
import Testing

/// Issue 21's "Show it", through the whole field path: an emulated NTAG 424 DNA provisioned with a
/// site's keys, served by the PN532 emulator and read by the real libnfc, a private gpsd reading the
/// NMEA emulator at the tag's spot, the SQLite registry holding the tag's `sun` settings and
/// counters, and `tagfix verify --sun-keys`.
@Suite(
    "SUN end to end: provisioned NTAG 424 DNA on the PN532 emulator + libnfc, NMEA emulator + gpsd", .timeLimit(.minutes(3)),
    .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
struct SUNEndToEndTests {
    static let spot = Coordinate(validLatitude: 53.545, longitude: 9.966)
    static let uid: [UInt8] = [0x04, 0x5A, 0x11, 0x42, 0x9C, 0x3D, 0x80]
    static let otherUID: [UInt8] = [0x04, 0x5A, 0x22, 0x43, 0x9D, 0x3E, 0x80]
    static let copyUID: [UInt8] = [0x04, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22]
    /// The site's SDM meta-read key (one per site) and the master its file-read keys are
    /// AN10922-diversified from, with `UID ‖ 01`.
    static let metaKey = AES128Key(hex: "5D1A0B9C2E3F40516273849506A7B8C9")!
    static let master = AES128Key(hex: "00112233445566778899AABBCCDDEEFF")!
    static let suffix: [UInt8] = [0x01]
    /// PN532 exchanges with the tag before it leaves the field in the interrupted enrolment.
    static let cutAfter = 15
    static let keyFile = """
        # the site's SUN keys
        [site]
        key = 00112233445566778899AABBCCDDEEFF
        meta_key = 5D1A0B9C2E3F40516273849506A7B8C9
        diversify = 01

        """

    /// A factory-fresh emulated NTAG 424 DNA provisioned in-process by enroll --sun's provisioner
    /// (`NTAG424Provisioner`): the URL template for tag `id` written, SDM on (encrypted PICC data
    /// under key 2, SDMMAC under key 1), key 1 the file-read key diversified from `master` with
    /// UID ‖ `suffix`, key 2 `meta`, key 0 last, then one SUN read back (its counter is 1).
    static func provisioned(id: String, uid: [UInt8], master: AES128Key, meta: AES128Key) throws -> EmulatedNTAG424Tag {
        let tag = try EmulatedNTAG424Tag(uid: uid)
        let (url, names) = try NTAG424Provisioner.prepare(
            template:
                "https://tags.example.org/t/\(id)?picc_data=\(NTAG424Provisioner.piccPlaceholder)&cmac=\(NTAG424Provisioner.cmacPlaceholder)"
        )
        let keys = SUNVerifier(metaReadKey: meta, fileReadKey: .diversified(master: master, suffix: suffix), names: names)
        let provisioner = try NTAG424Provisioner(
            uid: uid, url: url, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded(), names: names, keys: keys)
        let readBack = try provisioner.run { apdu in
            guard case .data(let answer) = tag.transceive(apdu) else { throw NTAG424Error.transport("no answer") }
            return answer
        }
        #expect(readBack.counter == 1)
        return tag
    }

    /// The site: a SQLite registry with S1 (the honest tag) and S2 (registered like S1, but the
    /// chip was provisioned with other keys), both SUN tags of key set `site`; and the key file.
    static func site() throws -> (registry: String, keys: String) {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        let registry = folder + "/site.sqlite"
        let entries = try [("S1", Self.uid), ("S2", Self.otherUID)].map { id, uid in
            RegistryEntry(
                id: id, uid: try TagUID(bytes: uid), region: try CircularRegion(center: Self.spot, radius: 25, identifier: id),
                name: "Gate \(id)", sun: SUNSettings(keyName: "site"))
        }
        try SQLiteRegistry.withRegistry(path: registry, mode: .create) { store throws(RegistryStoreError) in
            for entry in entries { try store.add(entry) }
        }
        let keys = folder + "/site.keys"
        try Self.keyFile.write(toFile: keys, atomically: true, encoding: .utf8)
        chmod(keys, 0o600)
        return (registry, keys)
    }

    static func describe(_ verdict: JSONValue) -> String {
        (verdict["verdict"]?.string ?? "?") + (verdict["reason"]?.string.map { "(\($0))" } ?? "")
    }

    @Test("three taps of a provisioned tag are confirmed with rising counters; a copied URL is sun_replayed, other keys sun_invalid")
    func provisionTapReplayForge() async throws {
        try await AttackSuiteTests.Field.with(at: Self.spot) { field in
            let (registry, keys) = try Self.site()
            let tag = try Self.provisioned(id: "S1", uid: Self.uid, master: Self.master, meta: Self.metaKey)
            let reader = try PN532Emulator(tags: [tag])
            defer { reader.stop() }
            let output = CapturedOutput()
            let finished = Finished()
            let session = Task {
                defer { finished.set() }
                return await TagFixCommandLine.run(
                    [
                        "verify", "--reader", "pn532_uart:\(reader.path)", "--gps", field.url, "--registry", registry, "--sun-keys", keys,
                        "--json", "--count", "3", "--timeout", "90", "--fix-timeout", "30",
                    ], output: output)
            }
            // Three taps: after the first and the second verdict the tag is lifted and put back (a new
            // activation, a new read). Not after the third: a read that started before verify stopped
            // would still get its verdict (a fourth), as every scan does.
            for tap in 1...2 {
                while output.stdout.count < tap, !finished.value { try await Task.sleep(for: .milliseconds(20)) }
                reader.lift()
            }
            #expect(await session.value == 0, "\(output.stderr)")
            let verdicts = try output.stdout.map { try JSONValue.parse($0) }
            #expect(verdicts.map(Self.describe) == ["confirmed", "confirmed", "confirmed"], "\(output.stdout) \(output.stderr)")
            let counters = verdicts.compactMap { $0["sun_counter"]?.double.map { Int($0) } }
            // The provisioner's read-back was counter 1.
            #expect(counters == [2, 3, 4], "\(output.stdout)")
            #expect(try SQLiteSUNCounters(path: registry, create: false).lastAccepted(uid: TagUID(bytes: Self.uid)) == 4)
            let urls = verdicts.compactMap { $0["url"]?.string }
            #expect(Set(urls).count == 3, "each read mirrors a new SUN: \(urls)")
            for line in output.stdout + output.stderr {
                #expect(
                    !line.contains("5D1A0B9C2E3F40516273849506A7B8C9") && !line.contains("00112233445566778899AABBCCDDEEFF"),
                    "no key in any line")
            }

            // A URL captured from the second read, written onto a Type 2 tag with another UID.
            let captured = try #require(urls.dropFirst().first)
            let copy = try AttackSuiteTests.tag(captured, uid: Self.copyUID)
            let extra = ["--registry", registry, "--sun-keys", keys]
            #expect(try await AttackSuiteTests.tap(copy, field: field, extra) == "untrusted:sun_replayed")

            // S2's chip, provisioned with another master and meta key than the site's: its SUN does not verify.
            let forged = try Self.provisioned(
                id: "S2", uid: Self.otherUID, master: AES128Key(hex: "FFEEDDCCBBAA99887766554433221100")!,
                meta: AES128Key(hex: "0F0E0D0C0B0A09080706050403020100")!)
            #expect(try await AttackSuiteTests.tap(forged, field: field, extra) == "untrusted:sun_invalid")

            // The honest tag again: its next read (counter 5) is still accepted.
            #expect(try await AttackSuiteTests.tap(tag, field: field, extra) == "confirmed")
            #expect(try SQLiteSUNCounters(path: registry, create: false).lastAccepted(uid: TagUID(bytes: Self.uid)) == 5)
        }
    }

    @Test("enroll --sun provisions a factory tag through libnfc, records it, and verify confirms its taps")
    func enrollSUNThenVerify() async throws {
        try await AttackSuiteTests.Field.with(at: Self.spot) { field in
            let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
            let registry = folder + "/enrolled.sqlite"
            let keys = folder + "/site.keys"
            try Self.keyFile.write(toFile: keys, atomically: true, encoding: .utf8)
            chmod(keys, 0o600)
            let tag = try EmulatedNTAG424Tag(uid: Self.uid)
            let reader = try PN532Emulator(tags: [tag])
            defer { reader.stop() }
            let enrol = [
                "enroll", "--id", "G7", "--reader", "pn532_uart:\(reader.path)", "--gps", field.url, "--registry", registry, "--average",
                "3",
                "--max-accuracy", "15", "--timeout", "60", "--sun", "site", "--sun-keys", keys, "--json", "--write-url",
                "https://tags.example.org/t/{id}?e={picc_data}&c={cmac}",
            ]
            // First the tag is pulled away mid-provisioning: nothing is recorded, the message says to
            // run the same command again, and the tag still opens with the factory key 0.
            reader.removeAfter(exchanges: Self.cutAfter)
            let cut = await run(enrol)
            #expect(cut.code == 69, "\(cut.err)")
            #expect(cut.err.contains { $0.contains("Run the same command again") }, "\(cut.err)")
            #expect(
                tag.snapshot.keys[0] == .zero && tag.snapshot.keys[1] != .zero && tag.snapshot.ndefSettings.sdm != nil,
                "cut after key 1, before key 0: \(tag.snapshot.keys.map { $0 == .zero })")
            #expect(!FileManager.default.fileExists(atPath: registry))
            reader.setPresent(true)
            let result = await run(enrol)
            #expect(result.code == 0, "\(result.err)")
            let report = try JSONValue.parse(try #require(result.out.first))
            #expect(report["uid"]?.string == "045A11429C3D80")
            #expect(report["sun"]?.string == "site;picc=e;cmac=c")
            // The counter read back: the re-run's first read (SDM already on) counted too.
            let enrolled = try #require(report["sun_counter"]?.double.map { UInt32($0) })
            #expect(enrolled >= 1)
            // The tag holds the site's keys: key 1 diversified for its UID, key 2 the site's, key 0 no longer the factory's.
            let snapshot = tag.snapshot
            #expect(snapshot.keys[1] == (try KeyDiversification.aes128(master: Self.master, input: Self.uid + Self.suffix)))
            #expect(snapshot.keys[2] == Self.metaKey && snapshot.keys[0] != .zero)
            let entry = try SQLiteRegistry.withRegistry(path: registry, mode: .readOnly) { store throws(RegistryStoreError) in
                try? store.entry(forID: "G7")
            }
            #expect(entry?.sun == SUNSettings(keyName: "site", names: SUNParameterNames(piccData: "e", cmac: "c")))
            #expect(entry?.uid == (try TagUID(bytes: Self.uid)))
            for line in result.out + result.err {
                #expect(
                    !line.contains("5D1A0B9C2E3F40516273849506A7B8C9") && !line.contains("00112233445566778899AABBCCDDEEFF"),
                    "no key in any line")
            }

            // verify --sun-keys confirms the enrolled tag's taps (its next two reads).
            let extra = ["--registry", registry, "--sun-keys", keys]
            #expect(try await AttackSuiteTests.tap(tag, field: field, extra) == "confirmed")
            #expect(try await AttackSuiteTests.tap(tag, field: field, extra) == "confirmed")
            #expect(try SQLiteSUNCounters(path: registry, create: false).lastAccepted(uid: TagUID(bytes: Self.uid)) == enrolled + 2)
        }
    }
}

/// Set once a task is done.
private final class Finished: Sendable {
    private let flag = Mutex(false)
    var value: Bool { flag.withLock { $0 } }
    func set() { flag.withLock { $0 = true } }
}

/// `enroll --sun`'s options are checked before any waiting: each mistake is one line and its exit code.
@Suite struct EnrollSUNUsageTests {
    static let template = "https://t.example/t/{id}?picc_data={picc_data}&cmac={cmac}"

    @Test(
        arguments: [
            (["--sun", "site"], 64, "--sun-keys"),
            (["--sun-keys", "KEYS", "--write-url", template], 64, "--sun KEYSET"),
            (["--sun", "site", "--sun-keys", "KEYS"], 64, "--write-url"),
            (["--sun", "site", "--sun-keys", "KEYS", "--write-url", "https://t.example/t/{id}?e={picc_data}"], 64, "{cmac}"),
            (["--sun", "other", "--sun-keys", "KEYS", "--write-url", template], 64, "no [other] key set"),
            (["--sun", "site", "--sun-keys", "OPEN", "--write-url", template], 66, "chmod 600"),
        ])
    func mistakes(_ options: [String], code: Int32, says: String) async throws {
        let keys = try temporaryFile("site.keys", SUNEndToEndTests.keyFile)
        chmod(keys, 0o600)
        let open = try temporaryFile("open.keys", SUNEndToEndTests.keyFile)
        chmod(open, 0o644)
        let registry = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/site.sqlite"
        let arguments = options.map { $0 == "KEYS" ? keys : $0 == "OPEN" ? open : $0 }
        let result = await run(
            ["enroll", "--id", "G1", "--reader", "pn532_uart:/nonexistent", "--gps", "gpsd://127.0.0.1:1", "--registry", registry]
                + arguments)
        #expect(result.code == code, "\(result.err)")
        #expect(result.err.count == 1 && result.err.first?.contains(says) == true, "\(result.err)")
        #expect(result.out.isEmpty && !FileManager.default.fileExists(atPath: registry))
    }
}
