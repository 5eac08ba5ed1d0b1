import Foundation
import TagFixCore
import TagFixCrypto
import TagFixDaemons
import TagFixEmulators
import TagFixNDEF
import TagFixStore
import TagFixTestDaemons
import TagFixTesting
import Testing

/// Issue 35's "two `serve` instances on one `--state`": the built tagfix twice, each with its own
/// PN532 emulator read by libnfc, one private gpsd on the NMEA emulator, one SQLite registry with
/// a SUN tag, and a private PostgreSQL holding the SUN read counters; each stopped however the
/// test ends.
@Suite(
    "two serve instances on one PostgreSQL --state",
    .enabled(
        if: PrivatePostgres.available && PrivateGPSD.installedPath != nil && TestBinaries.isTagfixBuilt,
        "needs PostgreSQL, gpsd and the built tagfix"))
struct SharedStateEndToEndTests {
    /// A serve on its own reader; its verdicts are its standard output's lines (--json).
    struct Server {
        let program: RunningProgram
        let reader: PN532Emulator
        /// The other server's reader: the SUN tag is one chip (one counter) in both readers'
        /// slots, so a tap here takes it out of that field first. Left there (lifted for a few
        /// more polls after its tap), the other reader's polls reselected the chip in the middle
        /// of this reader's read: a read with no URL, `untrusted(sun_invalid)`, once in 5 runs
        /// beside two CPU hogs. One chip is in one field at a time.
        var other: PN532Emulator?

        var verdicts: [String] { program.stdoutLines.compactMap { try? JSONValue.parse($0) }.map(SUNEndToEndTests.describe) }

        /// Taps tag `index` (the other out of the field; lifted first, so the reader sees a new
        /// tap even of the tag it last read) and waits for one more verdict; that verdict.
        func tap(_ index: Int) async -> String? {
            let before = verdicts.count
            for slot in 0..<2 { other?.setPresent(false, tag: slot) }
            for slot in 0..<2 where slot != index { reader.setPresent(false, tag: slot) }
            reader.lift(tag: index)
            let came = await RunningProgram.poll { verdicts.count > before || !program.isRunning }
            return came ? verdicts.dropFirst(before).first : nil
        }
    }

    /// A blank NTAG215 with the SUN tag's UID, and the pages that write `url` onto it.
    static func copy(of url: String, onto tag: EmulatedType2Tag) throws {
        let template = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded(), uid: tag.uid)
        let pages = template.pages
        for page in 4..<130 {
            _ = tag.transceive([0xA2, UInt8(page)] + Array(pages[page * 4..<page * 4 + 4]))
        }
    }

    @Test(
        "a SUN URL the NTAG 424 DNA made, tapped through each server: accepted by one, a replay at the other; the database killed: inconclusive with a line saying why; started again: confirmed without restarting serve"
    )
    func oneServiceOfTwo() async throws {
        try await PrivatePostgres.with { database in
            try await AttackSuiteTests.Field.with(at: SUNEndToEndTests.spot) { field in
                let (registry, keys) = try SUNEndToEndTests.site()
                let tag = try SUNEndToEndTests.provisioned(
                    id: "S1", uid: SUNEndToEndTests.uid, master: SUNEndToEndTests.master, meta: SUNEndToEndTests.metaKey)
                // On each reader: the tag itself (slot 0) and a tag that will carry a copy of one of its URLs (slot 1).
                let copies = try (0..<2).map { _ in
                    try EmulatedType2Tag.ntag(
                        215, message: NDEFMessage(records: [NDEFRecord.uri("https://tags.example.org/")]).encoded(),
                        uid: SUNEndToEndTests.uid)
                }
                let readers = try copies.map { copy in try PN532Emulator(tags: [tag, copy]) }
                defer { for reader in readers { reader.stop() } }
                for reader in readers { for slot in 0..<2 { reader.setPresent(false, tag: slot) } }
                let folder = (registry as NSString).deletingLastPathComponent
                func arguments(_ index: Int) -> [String] {
                    [
                        "serve", "--reader", "pn532_uart:\(readers[index].path)", "--gps", field.url, "--socket",
                        "\(folder)/serve-\(index).sock",
                        "--registry", registry, "--sun-keys", keys, "--state", database.address, "--db-password-file",
                        database.passwordFile,
                        "--json", "--quiet", "--fix-timeout", "30",
                    ]
                }
                try await TestProgram.withRunning(TestBinaries.tagfix, arguments(0)) { first in
                    try await TestProgram.withRunning(TestBinaries.tagfix, arguments(1)) { second in
                        let servers = [
                            Server(program: first, reader: readers[0], other: readers[1]),
                            Server(program: second, reader: readers[1], other: readers[0]),
                        ]
                        for server in servers {
                            #expect(
                                await RunningProgram.poll { server.program.stderr.contains("reader: ") || !server.program.isRunning },
                                "\(server.program.stderr)")
                            #expect(server.program.isRunning, "\(server.program.stderr)")
                        }
                        // The tag's next URL, tapped at the first server: accepted.
                        #expect(await servers[0].tap(0) == "confirmed", "\(first.stdout) \(first.stderr)")
                        let line = try #require(first.stdoutLines.last)
                        let url = try #require(try JSONValue.parse(line)["url"]?.string)
                        // The same URL on a tag at each server: a replay at both, the one that accepted it too.
                        for copy in copies { try Self.copy(of: url, onto: copy) }
                        #expect(await servers[1].tap(1) == "untrusted(sun_replayed)", "\(second.stdout) \(second.stderr)")
                        #expect(await servers[0].tap(1) == "untrusted(sun_replayed)", "\(first.stdout) \(first.stderr)")
                        // The tag's next URL at the second server: accepted there.
                        #expect(await servers[1].tap(0) == "confirmed", "\(second.stdout) \(second.stderr)")

                        await database.kill()
                        #expect(await servers[1].tap(0) == "inconclusive(registry_unavailable)", "\(second.stdout) \(second.stderr)")
                        #expect(second.stderr.contains("the SUN read counters in \(database.address) cannot be used"), "\(second.stderr)")
                        #expect(!second.stderr.contains(database.password))

                        try await database.start()
                        // The first server's connection broke unseen: its next tap is made on a new one.
                        #expect(await servers[0].tap(0) == "confirmed", "\(first.stdout) \(first.stderr)")
                        // The second tried and failed: it tries again on a tap once its backoff (0.5 s) is over;
                        // a tap before that is inconclusive, never confirmed.
                        var outcome: String?
                        for _ in 0..<8 {
                            outcome = await servers[1].tap(0)
                            if outcome != "inconclusive(registry_unavailable)" { break }
                        }
                        #expect(outcome == "confirmed", "\(second.stdout) \(second.stderr)")
                        #expect(second.stderr.contains("answer again"), "\(second.stderr)")
                        #expect(first.isRunning && second.isRunning)
                        // Each counter accepted once, by one server or the other.
                        let accepted = (first.stdoutLines + second.stdoutLines).compactMap { line -> Int? in
                            guard let verdict = try? JSONValue.parse(line), verdict["verdict"]?.string == "confirmed" else { return nil }
                            return verdict["sun_counter"]?.double.map { Int($0) }
                        }
                        #expect(accepted.count == 4 && Set(accepted).count == 4, "\(accepted)")
                    }
                }
            }
        }
    }
}

/// `verify --state` through the command line, on scenario taps (`SUNVerifyTests`' URLs): a SQLite
/// file as `--sun-counters` is, and PostgreSQL shared by two runs; the options' mistakes.
@Suite("verify --state")
struct StateOptionTests {
    @Test("--state FILE keeps the counters in a SQLite file, as --sun-counters does: a URL accepted in one run is a replay in the next")
    func sqliteState() async throws {
        let (folder, registry, keys) = try SUNVerifyTests.setUp()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let state = folder + "/state.sqlite"
        let first = try temporaryFile("st1.json", SUNVerifyTests.scenario([try SUNVerifyTests.mint(counter: 3)], registry: registry))
        let run1 = await run(["verify", "--scenario", first, "--sun-keys", keys, "--state", state, "--json"])
        #expect(SUNVerifyTests.verdicts(run1.out) == ["confirmed #3"], "\(run1.err)")
        let run2 = await run(["verify", "--scenario", first, "--sun-keys", keys, "--state", state, "--json"])
        #expect(SUNVerifyTests.verdicts(run2.out) == ["untrusted(sun_replayed)"])
        #expect(try SQLiteSUNCounters(path: state, create: false).lastAccepted(uid: TagUID(hex: SUNVerifyTests.uid)) == 3)
        #expect(try SQLiteSUNCounters(path: registry, create: false).lastAccepted(uid: TagUID(hex: SUNVerifyTests.uid)) == nil)
    }

    @Test(
        "--state postgresql://…: two runs share the counters there, not in the registry file",
        .enabled(if: PrivatePostgres.available, "needs PostgreSQL (apt-get install postgresql)"))
    func postgresState() async throws {
        let (folder, registry, keys) = try SUNVerifyTests.setUp()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await PrivatePostgres.with { database in
            let state = ["--state", database.address, "--db-password-file", database.passwordFile]
            let first = try temporaryFile(
                "pg1.json",
                SUNVerifyTests.scenario([try SUNVerifyTests.mint(counter: 3), try SUNVerifyTests.mint(counter: 4)], registry: registry))
            let run1 = await run(["verify", "--scenario", first, "--sun-keys", keys, "--json"] + state)
            #expect(SUNVerifyTests.verdicts(run1.out) == ["confirmed #3", "confirmed #4"], "\(run1.err)")
            let second = try temporaryFile(
                "pg2.json",
                SUNVerifyTests.scenario([try SUNVerifyTests.mint(counter: 5), try SUNVerifyTests.mint(counter: 4)], registry: registry))
            let run2 = await run(["verify", "--scenario", second, "--sun-keys", keys, "--json"] + state)
            #expect(SUNVerifyTests.verdicts(run2.out) == ["confirmed #5", "untrusted(sun_replayed)"], "\(run2.err)")
            #expect(try SQLiteSUNCounters(path: registry, create: false).lastAccepted(uid: TagUID(hex: SUNVerifyTests.uid)) == nil)
            #expect(!(run1.err + run2.err).joined().contains(database.password))
        }
    }

    @Test(
        "--state and --db-password-file mistakes are one line and exit 64",
        arguments: [
            (["--state", "STATE"], "--state keeps the SUN read counters: it needs --sun-keys"),
            (["--state", "STATE", "--sun-counters", "STATE", "--sun-keys", "KEYS"], "give --state or --sun-counters, not both"),
            (["--db-password-file", "KEYS", "--sun-keys", "KEYS", "--state", "STATE"], "--db-password-file is for a PostgreSQL"),
            (["--state", "postgresql://u:secret@h/db", "--sun-keys", "KEYS"], "--state: a password in the database address"),
        ])
    func mistakes(_ options: [String], says: String) async throws {
        let (folder, registry, keys) = try SUNVerifyTests.setUp()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let scenario = try temporaryFile("st3.json", SUNVerifyTests.scenario([try SUNVerifyTests.mint(counter: 3)], registry: registry))
        let arguments = options.map { $0 == "KEYS" ? keys : $0 == "STATE" ? folder + "/state.sqlite" : $0 }
        let result = await run(["verify", "--scenario", scenario, "--json"] + arguments)
        #expect(result.code == 64, "\(result.err)")
        #expect(result.err.count == 1 && result.err.first?.contains(says) == true, "\(result.err)")
        #expect(!result.err.joined().contains("secret") && result.out.isEmpty)
    }
}
