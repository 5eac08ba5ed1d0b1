import Foundation
import Synchronization
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixMQTT
@testable import TagFixStore

@Suite(
    "tagfix verify --publish, collect and report of a fleet store",
    .enabled(if: FileManager.default.isExecutableFile(atPath: tagfixBinary), "needs the built tagfix"), .timeLimit(.minutes(3)))
struct FleetCommandTests {
    static let scenario = packageRoot + "/Examples/site/scenario.json"

    @Test(
        "a publish that cannot work is one clear line and exit 64, before anything runs",
        arguments: [
            (["--publish", "mqtt://127.0.0.1/tagfix", "--log", "L", "--site", "north/yard"], "the site \"north/yard\""),
            (["--publish", "mqtt://127.0.0.1/tagfix", "--log", "L", "--device-id", "van#7"], "device id"),
            (["--publish", "mqtt://127.0.0.1/a/b", "--log", "L"], "prefix"),
            (["--publish", "http://127.0.0.1/tagfix", "--log", "L"], "not an MQTT broker address"),
            (["--publish", "mqtt://u:pw@127.0.0.1/tagfix", "--log", "L"], "--mqtt-password-file"),
            (["--site", "yard"], "only applies with --publish"),
        ])
    func usage(arguments: [String], says: String) async throws {
        let folder = try temporaryFolder()
        let result = try await TestProgram.run(
            tagfixBinary, ["verify", "--scenario", Self.scenario] + arguments.map { $0 == "L" ? folder + "/log.jsonl" : $0 })
        #expect(result.status == 64, "\(result.err)")
        #expect(result.err.contains(says), "\(result.err)")
        #expect(result.err.split(separator: "\n").count <= 2, "one clear line (and the usage hint)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/log.jsonl.acks"))
    }

    /// The example registry (and `extra` rows) as CSV and as SQLite (`tagfix registry import`) in
    /// `folder`.
    static func registries(_ folder: String, extra: String = "") async throws -> (sqlite: String, csv: String) {
        let csv = folder + "/site.csv"
        let example = try String(contentsOfFile: packageRoot + "/Examples/site/registry.csv", encoding: .utf8)
        try (example + extra).write(toFile: csv, atomically: true, encoding: .utf8)
        let sqlite = folder + "/site.sqlite"
        let imported = try await TestProgram.run(tagfixBinary, ["registry", "import", csv, "--registry", sqlite])
        #expect(imported.status == 0, "\(imported.err)")
        return (sqlite, csv)
    }

    @Test(
        "collect --db with a registry (SQLite, CSV, a symlink to one) or a session log refuses it and leaves it as it was",
        arguments: ["sqlite", "csv", "symlink", "log"])
    func wrongDatabase(kind: String) async throws {
        let folder = try temporaryFolder()
        let (sqlite, csv) = try await Self.registries(folder)
        var target = kind == "csv" ? csv : sqlite
        var db = target
        if kind == "symlink" {
            db = folder + "/fleet.sqlite"
            try FileManager.default.createSymbolicLink(atPath: db, withDestinationPath: target)
        } else if kind == "log" {
            target = folder + "/day.jsonl"
            db = target
            let run = try await TestProgram.run(tagfixBinary, ["verify", "--scenario", Self.scenario, "--log", target])
            #expect(run.status == 0, "\(run.err)")
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: target))
        let database = db
        // Given as the registry too: read, never written.
        let result = try await TestProgram.run(
            tagfixBinary, ["collect", "mqtt://127.0.0.1:1/tagfix", "--db", database, "--registry", "harbour=" + sqlite])
        #expect(result.status == 64, "\(result.err)")
        #expect(result.err.contains("not a TagFix fleet store"), "\(result.err)")
        #expect(result.err.split(separator: "\n").count <= 2, "one clear line (and the usage hint)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == before)
        #expect(!FleetStore.isFleetStore(target))
        #expect(
            try await TestProgram.run(tagfixBinary, ["registry", "list", "--registry", sqlite]).status == 0, "the registry still opens")
    }

    @Test(
        "collect --registry that cannot be used is one clear line and its exit code, before any store is made or anything subscribed",
        arguments: [
            ("MISSING", 66, "missing.csv: no such file"), ("BROKEN", 65, "broken.csv:2: tag \"T01\": latitude 93.5"),
            ("harbour=FLEET", 65, "not a TagFix registry"),
            ("a+b=CSV", 64, "the site \"a+b\""), ("harbour=", 64, "give SITE=FILE or FILE"),
        ] as [(String, Int32, String)])
    func unusableRegistry(registry: String, status: Int32, says: String) async throws {
        let folder = try temporaryFolder()
        let (_, csv) = try await Self.registries(folder)
        try "id,uid,lat,lon,radius_m,name\nT01,04A224B2C56480,93.5,9.966,25,Main gate\n".write(
            toFile: folder + "/broken.csv", atomically: true, encoding: .utf8)
        let fleet = folder + "/other-fleet.sqlite"
        _ = try FleetStore(path: fleet, create: true)
        let argument = registry.replacingOccurrences(of: "MISSING", with: folder + "/missing.csv")
            .replacingOccurrences(of: "BROKEN", with: folder + "/broken.csv").replacingOccurrences(of: "FLEET", with: fleet)
            .replacingOccurrences(of: "CSV", with: csv)
        let db = folder + "/fleet.sqlite"
        let result = try await TestProgram.run(tagfixBinary, ["collect", "mqtt://127.0.0.1:1/tagfix", "--db", db, "--registry", argument])
        #expect(result.status == status, "\(result.err)")
        #expect(result.err.contains(says), "\(result.err)")
        #expect(result.err.split(separator: "\n").count <= 2, "one clear line (and the usage hint): \(result.err)")
        #expect(!result.err.contains("collecting"), "never subscribed")
        #expect(!FileManager.default.fileExists(atPath: db), "no store made")
    }

    @Test("collect --registry FILE is the site default (verify's without --site); a path with = in its name is a file, not SITE=")
    func defaultSite() async throws {
        let dead = try DeadPort()
        defer { withExtendedLifetime(dead) {} }
        let folder = try temporaryFolder()
        let (_, csv) = try await Self.registries(folder)
        let equals = folder + "/north=yard.csv"
        try FileManager.default.copyItem(atPath: csv, toPath: equals)
        let db = folder + "/fleet.sqlite"
        // Nothing listens on the port: the placements are stored before the first connection.
        let arguments = [
            "collect", "mqtt://127.0.0.1:\(dead.port)/tagfix", "--db", db, "--registry", equals, "--registry", "yard=" + csv,
        ]
        try await TestProgram.withRunning(tagfixBinary, arguments) { collect in
            #expect(await collect.waitFor("collecting ", onStandardError: true), "\(collect.stderr)")
            #expect(collect.stderrLines.contains("registry: 20 tags of 2 sites stored in \(db)"), "\(collect.stderr)")
            collect.signal(SIGTERM)
            #expect(await collect.exit(upTo: .seconds(30)) == .exited(0), "\(collect.stderr)")
        }
        let placements = try FleetStore(path: db, create: false).placements()
        #expect(Set(placements.map(\.site)) == ["default", "yard"])
        #expect(placements.filter { $0.site == "default" }.allSatisfy { $0.registry == equals })
    }

    @Test(
        "a second collect with a running one's client id stops with exit 69 and one line; the first keeps the session and stores what follows, instead of the two taking it from each other for ever",
        .enabled(if: haveBroker, "needs mosquitto and mosquitto-clients"))
    func sessionTakenOver() async throws {
        try await PrivateMosquitto.with { broker in
            let folder = try temporaryFolder()
            try await TestProgram.withRunning(
                tagfixBinary,
                ["collect", "mqtt://127.0.0.1:\(broker.port)/tagfix", "--db", folder + "/first.sqlite", "--client-id", "office"]
            ) { first in
                #expect(await first.waitFor("subscribed to", onStandardError: true), "\(first.stderr)")
                // The first has held its session for a while, as a collector that runs does, when
                // the second (the same id) comes. mosquitto 2.0.11 closes the first one's connection
                // without a DISCONNECT 0x8E, so this is TakeoverWatch at work: the newcomer stops.
                try await Task.sleep(for: .seconds(2.5))
                try await TestProgram.withRunning(
                    tagfixBinary,
                    ["collect", "mqtt://127.0.0.1:\(broker.port)/tagfix", "--db", folder + "/second.sqlite", "--client-id", "office"]
                ) { second in
                    #expect(
                        await RunningProgram.poll(upTo: .seconds(30)) { !first.isRunning || !second.isRunning },
                        "neither stopped: \(first.stderrLines.suffix(6)) \(second.stderrLines.suffix(6))")
                    #expect(first.isRunning, "the one that was there stopped: \(first.stderr)")
                    #expect(second.termination == .exited(69), "\(second.stderr)")
                    // Its stderr may still be on the way when the exit is seen.
                    #expect(await second.waitFor("so this one stops", onStandardError: true), "\(second.stderr)")
                    let said = second.stderrLines.filter { $0.contains("so this one stops") }
                    #expect(
                        said.count == 1 && said[0].contains("client id (office)") && said[0].contains("its own --client-id"),
                        "\(second.stderr)")
                }

                // The other keeps the session: a verdict published now is stored there.
                let verdict = try exampleVerdicts()[0]
                let payload = FleetMessage.payload(
                    line: Array(SessionRecord(verdict).encoded().utf8), id: "pi:0123456789abcdef:1", device: "pi")
                let sent = try await TestProgram.run(
                    "/usr/bin/mosquitto_pub",
                    [
                        "-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", "tagfix/harbour/verdict/T01", "-m",
                        String(decoding: payload, as: UTF8.self),
                    ])
                #expect(sent.status == 0, "\(sent.err)")
                let db = folder + "/first.sqlite"
                #expect(await RunningProgram.poll { (try? FleetStore(path: db, create: false).count()) == 1 }, "\(first.stderr)")
                #expect(first.isRunning, "\(first.stderr)")
                first.signal(SIGTERM)
                #expect(await first.exit(upTo: .seconds(30)) == .exited(0), "\(first.stderr)")
            }
        }
    }

    /// A broker that says "session taken over" (DISCONNECT 0x8E, as mosquitto from 2.0.15, EMQX
    /// and HiveMQ do; Debian 12's 2.0.11 does not): `Tests/Interop/taking_broker.py`.
    @Test(
        "a broker's DISCONNECT 0x8E: a young connection stops collect (exit 69, one line); an old one connects once more first",
        arguments: [
            ("the newcomer: taken over 0.1 s after connecting", [0.1], 1),
            ("the one that was there: taken over after 3 s, then again at once", [3, 0.1], 2),
        ] as [(String, [Double], Int)])
    func brokerSaysTakenOver(_ what: String, after: [Double], connections: Int) async throws {
        // Started as the product starts programs (signals unblocked, its own output only).
        try await TestProgram.withRunning(
            "/usr/bin/python3", [packageRoot + "/Tests/Interop/taking_broker.py"] + after.map { String($0) }, standardError: .standardOutput
        ) { broker in
            #expect(await broker.waitFor("port "))
            let port = try #require(broker.stdoutLines.first { $0.hasPrefix("port ") }.flatMap { Int($0.dropFirst(5)) })
            let db = try temporaryFolder() + "/fleet.sqlite"
            try await TestProgram.withRunning(
                tagfixBinary, ["collect", "mqtt://127.0.0.1:\(port)/tagfix", "--db", db, "--client-id", "office"]
            ) { collect in
                #expect(await collect.exit(upTo: .seconds(30)) == .exited(69), "\(what): \(collect.stderr)")
                #expect(await collect.waitFor("so this one stops", onStandardError: true), "\(what): \(collect.stderr)")
                let stop = collect.stderrLines.filter { $0.contains("so this one stops") }
                #expect(stop.count == 1 && stop[0].contains("and the broker gave it the session"), "\(what): \(collect.stderr)")
            }
            #expect(broker.stdoutLines.filter { $0.hasPrefix("connection ") }.count == connections, "\(what): \(broker.stdout)")
        }
    }

    /// A fleet store as collect wrote it before the schema was versioned (`fleet_verdict` only,
    /// `user_version` `version`), holding the example's verdicts from van-1 at the harbour.
    static func oldStore(_ path: String, version: Int = 0) throws -> Int {
        let db = try SQLiteConnection(path: path, mode: .create)
        try db.execute("PRAGMA application_id = \(FleetStore.applicationID)")
        try db.execute("PRAGMA journal_mode = WAL")
        try db.execute(OldFleetStore.unversionedSchema)
        let verdicts = try exampleVerdicts()
        for (index, verdict) in verdicts.enumerated() {
            try db.query(
                "INSERT INTO fleet_verdict VALUES (?1, 'harbour', 'van-1', ?2, 1)",
                [.text("van-1:old:\(index + 1)"), .text(SessionRecord(verdict).encoded())])
        }
        try db.execute("PRAGMA user_version = \(version)")
        try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return verdicts.count
    }

    @Test("report of a store written before placements were kept: every verdict and the overview, exit 0, the file as it was")
    func oldStoreReports() async throws {
        let folder = try temporaryFolder()
        let db = folder + "/fleet.sqlite"
        let count = try Self.oldStore(db)
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        let html = try await TestProgram.run(tagfixBinary, ["report", db])
        #expect(html.status == 0, "\(html.err)")
        let page = html.out.joined(separator: "\n")
        #expect(page.contains("<p>\(count) verdicts from 1 device(s) on 1 site(s).</p>"))
        #expect(page.contains("<section id=\"overview\">") && page.contains("<tr data-device=\"van-1\">"))
        #expect(page.contains("<g class=\"tag\" data-site=\"harbour\" data-tag=\"T01\" data-status=\"confirmed\">"))
        #expect(!page.contains("never_tapped") && !page.contains("never-tapped"), "no registry stored: no tag is known untapped")
        let csv = try await TestProgram.run(tagfixBinary, ["report", db, "--format", "csv"])
        #expect(csv.out.count == 1 + count)
        #expect(try Data(contentsOf: URL(fileURLWithPath: db)) == before, "report never migrates")
    }

    @Test("a fleet store from a newer tagfix: report and collect say so, exit 64, and leave it as it was")
    func newerStore() async throws {
        let folder = try temporaryFolder()
        let db = folder + "/fleet.sqlite"
        _ = try Self.oldStore(db, version: FleetStore.schemaVersion + 1)
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        for arguments in [["report", db], ["collect", "mqtt://127.0.0.1:1/tagfix", "--db", db]] {
            let result = try await TestProgram.run(tagfixBinary, arguments)
            #expect(result.status == 64, "\(arguments[0]): \(result.err)")
            #expect(result.err.contains("newer than this tagfix's \(FleetStore.schemaVersion)"), "\(arguments[0]): \(result.err)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: db)) == before)
    }

    @Test("a password file others may read is refused, and the password never reaches the message")
    func openPasswordFile() async throws {
        let folder = try temporaryFolder()
        try SecretFile.create(folder + "/pw", "hunter2-secret\n", mode: 0o644)
        let result = try await TestProgram.run(
            tagfixBinary,
            [
                "verify", "--scenario", Self.scenario, "--log", folder + "/log.jsonl", "--publish", "mqtt://tech@127.0.0.1/tagfix",
                "--mqtt-password-file", folder + "/pw",
            ])
        #expect(result.status == 66, "\(result.err)")
        #expect(result.err.contains("chmod 600"))
        #expect(!result.err.contains("hunter2"))
    }

    @Test(
        "the broker down for the whole run: the verdicts are shown and logged, the run says how many are unsent, and the next run sends them",
        .enabled(if: haveBroker, "needs mosquitto"))
    func brokerDownThenUp() async throws {
        let folder = try temporaryFolder()
        let log = folder + "/day.jsonl"
        let dead = try DeadPort()
        defer { withExtendedLifetime(dead) {} }
        let port = dead.port
        let publish = ["--publish", "mqtt://127.0.0.1:\(port)/tagfix", "--site", "harbour", "--device-id", "van-1"]
        let down = try await TestProgram.run(
            tagfixBinary, ["verify", "--scenario", Self.scenario, "--json", "--log", log, "--publish-linger", "1"] + publish)
        #expect(down.status == 0, "\(down.err)")
        let shown = down.out.count
        #expect(shown > 0)
        #expect(down.err.contains("\(shown) unsent"), "\(down.err)")
        #expect(try SessionLog.read(path: log).records.count == shown, "publishing never held a verdict back")

        // Started mid-test; stopped and removed however the test ends.
        try await PrivateMosquitto.with { broker in
            let store = try FleetStore(path: folder + "/fleet.sqlite", create: true)
            let office = try await startedCollector(broker, store: store, id: "office-late")
            let up = try await TestProgram.run(
                tagfixBinary,
                ["verify", "--scenario", Self.scenario, "--json", "--log", log, "--publish", "mqtt://127.0.0.1:\(broker.port)/tagfix"]
                    + ["--site", "harbour", "--device-id", "van-1"])
            #expect(up.status == 0, "\(up.err)")
            #expect(up.err.contains("\(2 * shown) verdicts acknowledged"), "\(up.err)")
            #expect(await RunningProgram.poll { (try? store.count()) == 2 * shown })
            await office.stop()
        }
    }

    @Test("SIGINT during the linger ends it at once: exit 0, and the closing line says how many are unsent")
    func interruptedLinger() async throws {
        let dead = try DeadPort()
        defer { withExtendedLifetime(dead) {} }
        let folder = try temporaryFolder()
        let expected = try exampleVerdicts().count
        // Nothing listens on the port: the linger would last ten minutes.
        let arguments = [
            "verify", "--scenario", Self.scenario, "--json", "--log", folder + "/day.jsonl", "--publish",
            "mqtt://127.0.0.1:\(dead.port)/tagfix", "--publish-linger", "600",
        ]
        try await TestProgram.withRunning(tagfixBinary, arguments) { run in
            #expect(await RunningProgram.poll { run.stdoutLines.count == expected }, "the replay's verdicts, shown before the linger")
            #expect(run.isRunning, "lingering for the broker")
            run.signal(SIGINT)
            #expect(await run.exit(upTo: .seconds(30)) != nil)
            #expect(await run.waitFor("\(expected) unsent", onStandardError: true), "\(run.stderr)")
        }
    }

    @Test(
        "SIGINT during a publishing replay ends it as it ends a live session: exit 0, every verdict decided on the disk and counted unsent in the closing line",
        arguments: [false, true])
    func interruptedReplay(slowDisk: Bool) async throws {
        let dead = try DeadPort()
        defer { withExtendedLifetime(dead) {} }
        let folder = try temporaryFolder()
        // 3 000 taps: the replay is still going when its first verdict line is read.
        let scenario = folder + "/long.json"
        try LongScenario.json(taps: 3000).write(toFile: scenario, atomically: true, encoding: .utf8)
        let log = folder + "/day.jsonl"
        let arguments = [
            "verify", "--scenario", scenario, "--json", "--log", log, "--publish", "mqtt://127.0.0.1:\(dead.port)/tagfix",
            "--publish-linger", "600",
        ]
        // On a disk whose fsync takes 10 ms (each verdict is on the disk before it is shown) the
        // replay takes 30 s: the signal held until its end, before the fix.
        if slowDisk { try #require(FileManager.default.fileExists(atPath: TestBinaries.slowFsync), "libTagFixSlowFsync.so is not built") }
        try await TestProgram.withRunning(tagfixBinary, arguments, environment: slowDisk ? TestBinaries.slowDisk() : [:]) { run in
            #expect(await RunningProgram.poll { !run.stdoutLines.isEmpty })
            run.signal(SIGINT)
            let ended = await run.exit(upTo: .seconds(30))
            #expect(ended == .exited(0), "\(String(describing: ended)): \(run.stderr)")
            // Its outputs read to their end (on another thread) before they are looked at.
            #expect(await RunningProgram.poll { run.outputClosed })
            // Nothing lost: every verdict the replay decided is in the log, shown, and unsent.
            let logged = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n").count
            #expect(run.stdoutLines.count == logged)
            #expect(run.stderr.contains(" \(logged) unsent, a signal ended the run before the broker had them"), "\(run.stderr)")
            if slowDisk { #expect(logged < 3000, "the replay went on to its end after the signal") }
        }
    }

    @Test(
        "collect stores what a fleet publishes and its sites' registries (SIGHUP reads them again), stops on SIGTERM, and report shows the fleet, each site and device",
        .enabled(if: haveBroker, "needs mosquitto"))
    func collectAndReport() async throws {
        try await PrivateMosquitto.with { broker in
            let folder = try temporaryFolder()
            let db = folder + "/fleet.sqlite"
            // T11: a tag no scenario taps.
            let (sqlite, depot) = try await Self.registries(folder, extra: "T11,,53.5449,9.9655,15,Never tapped\n")
            let arguments = [
                "collect", "mqtt://127.0.0.1:\(broker.port)/tagfix", "--db", db, "--group", "office", "--client-id", "office-cli",
                "--registry", "harbour=" + sqlite, "--registry", "depot=" + depot,
            ]
            let verdicts = try exampleVerdicts()
            try await TestProgram.withRunning(tagfixBinary, arguments) { collect in
                let settings = try MQTTSettings.parse(
                    address: "mqtt://127.0.0.1:\(broker.port)/tagfix", passwordFile: nil, caFile: nil, version: nil, clientID: "x")
                // The collector's session must exist before the first message: wait for its store.
                #expect(await collect.waitFor("subscribed to $share/office/tagfix/+/verdict/+", onStandardError: true), "\(collect.stderr)")
                for (site, device) in [("harbour", "van-1"), ("harbour", "van-2"), ("depot", "pi-9")] {
                    let log = folder + "/\(device).jsonl"
                    let sessionLog = try SessionLog(path: log)
                    let publisher = try FleetPublisher(settings: settings, site: site, device: device, logPath: log)
                    publisher.start()
                    let fanOut = VerdictFanOut([SessionLogSink(sessionLog), publisher])
                    for verdict in verdicts { fanOut.send(.verdict(verdict)) }
                    #expect(await publisher.finish(linger: .seconds(60), clock: MonotonicClock()).unsent == 0)
                }
                let store = try FleetStore(path: db, create: false)
                #expect(await RunningProgram.poll { (try? store.count()) == 3 * verdicts.count })
                #expect(collect.stderrLines.contains("registry: 22 tags of 2 sites stored in \(db)"), "\(collect.stderr)")
                #expect(try store.placements().filter { $0.site == "depot" }.count == 11)

                // The depot's registry shrinks to three tags: SIGHUP stores that, the harbour's stays.
                let lines = try String(contentsOfFile: depot, encoding: .utf8).split(separator: "\n")
                try (lines.prefix(5).joined(separator: "\n") + "\n").write(toFile: depot, atomically: true, encoding: .utf8)
                collect.signal(SIGHUP)
                #expect(
                    await collect.waitFor("SIGHUP: registry read again: 14 tags of 2 sites", onStandardError: true), "\(collect.stderr)")
                #expect(try store.placements().filter { $0.site == "depot" }.map(\.entry.id) == ["T01", "T02", "T03"])
                #expect(try store.placements().filter { $0.site == "harbour" }.count == 11)
                // A registry broken meanwhile: said, and the stored placements stay.
                try "id,uid,lat,lon,radius_m,name\nT01,zz,1,2,3,x\n".write(toFile: depot, atomically: true, encoding: .utf8)
                collect.signal(SIGHUP)
                #expect(await collect.waitFor("SIGHUP: the registries were not read again", onStandardError: true), "\(collect.stderr)")
                #expect(try store.placements().count == 14)
                #expect(collect.isRunning, "a broken registry on SIGHUP does not stop the collector")
                collect.signal(SIGTERM)
                #expect(await collect.exit(upTo: .seconds(30)) == .exited(0), "\(collect.stderr)")
                #expect(await RunningProgram.poll { collect.outputClosed })
                #expect(collect.stdout.contains("stored \(3 * verdicts.count) verdicts"), "\(collect.stdout)")
            }

            let html = try await TestProgram.run(tagfixBinary, ["report", db])
            #expect(html.status == 0, "\(html.err)")
            let page = html.out.joined(separator: "\n")
            #expect(page.contains("data-site=\"harbour\"") && page.contains("data-site=\"depot\""))
            for device in ["van-1", "van-2", "pi-9"] { #expect(page.contains("data-device=\"\(device)\"")) }
            // The overview: every site's tags (its registry's and any tapped), coloured by the last
            // verdict any of its devices gave, the registry's tags never tapped as such.
            let overview = try #require(
                page.components(separatedBy: "<section id=\"overview\">").dropFirst().first?
                    .components(separatedBy: "</section>").first)
            let drawn = try overview.matches(
                of: Regex(#"<g class="tag" data-site="([^"]*)" data-tag="([^"]*)" data-status="([^"]*)">"#)
            )
            .map {
                (
                    site: String($0.output[1].substring ?? ""), tag: String($0.output[2].substring ?? ""),
                    status: String($0.output[3].substring ?? "")
                )
            }
            let records = verdicts.map { SessionRecord($0) }
            var last: [String: String] = [:]
            for record in records.sorted(by: { $0.time < $1.time }) { last[record.tagKey] = record.verdict }
            // A tag the map can place: in the registry, or a verdict that named its region.
            let placed = Set(records.filter { $0.region != nil }.map(\.tagKey))
            let registered = ["harbour": (1...11).map { String(format: "T%02d", $0) }, "depot": ["T01", "T02", "T03"]]
            for (site, ids) in registered {
                let tags = drawn.filter { $0.site == site }
                #expect(Set(tags.map(\.tag)) == Set(ids).union(placed), "\(site)")
                #expect(tags.count == Set(ids).union(placed).count, "each tag once: \(site)")
                for tag in tags { #expect(tag.status == (last[tag.tag] ?? "never_tapped"), "\(site) \(tag.tag)") }
                #expect(tags.contains { $0.status == "never_tapped" } == !Set(ids).subtracting(last.keys).isEmpty)
            }
            #expect(drawn.filter { $0.status == "never_tapped" }.map { "\($0.site) \($0.tag)" } == ["harbour T11"])
            #expect(page.contains("<ul class=\"never-tapped\"><li>T11 — Never tapped</li></ul>"))
            let withRegistry = try await TestProgram.run(tagfixBinary, ["report", db, "--registry", sqlite])
            #expect(withRegistry.status == 64 && withRegistry.err.contains("collect --registry"), "\(withRegistry.err)")
            let csv = try await TestProgram.run(tagfixBinary, ["report", db, "--format", "csv"])
            #expect(csv.out.count == 1 + 3 * verdicts.count)
            #expect(
                csv.out.dropFirst().filter { $0.hasPrefix("\"depot\",\"pi-9\",") || $0.hasPrefix("depot,pi-9,") }.count
                    == verdicts.count)
        }
    }
}
