import Foundation
import TagFixDevices
import TagFixTestDaemons
import TagFixTesting
import Testing

/// `tagfix collect --db postgresql://…` end to end: the real tagfix, a private mosquitto and a
/// private PostgreSQL cluster, each stopped however the test ends.
@Suite(
    "collect into PostgreSQL, end to end",
    .enabled(
        if: PrivatePostgres.available && PrivateMosquitto.installedPath != nil && TestBinaries.isTagfixBuilt,
        "needs PostgreSQL, mosquitto and the built tagfix"))
struct CollectIntoPostgresTests {
    @Test(
        "the demo published twice (the second run sends the first's verdicts again, its acknowledgements gone, and its own) is stored once each in PostgreSQL, and reported from there"
    )
    func demoTwiceOnce() async throws {
        try await PrivatePostgres.with { database in
            try await PrivateMosquitto.with { broker in
                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-pg-collect-\(UUID().uuidString)").path
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(atPath: folder) }
                let broker = "mqtt://127.0.0.1:\(broker.port)/tagfix"
                let db = ["--db", database.address, "--db-password-file", database.passwordFile]
                try await TestProgram.withRunning(TestBinaries.tagfix, ["collect", broker, "--client-id", "office-pg"] + db) { collect in
                    #expect(
                        await collect.waitFor("subscribed to", onStandardError: true), "the collector never subscribed: \(collect.stderr)")
                    #expect(collect.stderr.contains("into postgresql://tagfix@127.0.0.1:\(database.port)/tagfix"), "\(collect.stderr)")
                    #expect(!collect.stderr.contains(database.password), "the password reached the log")
                    let environment = ["STATE_DIRECTORY": folder + "/state"]
                    let publish = ["verify", "--demo", "--json", "--publish", broker, "--site", "harbour", "--device-id", "van-1"]
                    let first = try await TestProgram.run(TestBinaries.tagfix, publish, environment: environment)
                    #expect(first.status == 0, "\(first.err)")
                    #expect(first.err.contains("9 verdicts acknowledged"), "\(first.err)")
                    // The acknowledgements lost: the next run sends the first run's verdicts again.
                    let outbox = folder + "/state/outbox/harbour/van-1.jsonl"
                    try FileManager.default.removeItem(atPath: outbox + ".acks")
                    let second = try await TestProgram.run(TestBinaries.tagfix, publish, environment: environment)
                    #expect(second.status == 0, "\(second.err)")
                    #expect(second.err.contains("18 verdicts acknowledged"), "sent again, and its own: \(second.err)")

                    // Each verdict once: 18, however often it arrived.
                    let report = ["report", database.address, "--db-password-file", database.passwordFile, "--format", "csv"]
                    var rows = 0
                    _ = await RunningProgram.poll(upTo: .seconds(60)) {
                        rows = (try? await TestProgram.run(TestBinaries.tagfix, report))?.out.count ?? 0
                        return rows >= 19
                    }
                    let csv = try await TestProgram.run(TestBinaries.tagfix, report)
                    #expect(csv.status == 0, "\(csv.err)")
                    #expect(csv.out.count == 19, "a header and 18 verdicts, each once: \(csv.out.count - 1)")
                    collect.signal(SIGTERM)
                    #expect(await collect.exit() == .exited(0), "\(collect.stderr)")
                    #expect(collect.stdout.contains("stored 18 verdicts"), "\(collect.stdout)")
                }
            }
        }
    }

    @Test(
        "PostgreSQL killed under a running collector and started again: what arrived meanwhile is not acknowledged, the broker sends it again, and every verdict is stored exactly once"
    )
    func databaseRestarted() async throws {
        try await PrivatePostgres.with { database in
            try await PrivateMosquitto.with { broker in
                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-pg-restart-\(UUID().uuidString)").path
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(atPath: folder) }
                let broker = "mqtt://127.0.0.1:\(broker.port)/tagfix"
                let db = ["--db", database.address, "--db-password-file", database.passwordFile]
                let report = ["report", database.address, "--db-password-file", database.passwordFile, "--format", "csv"]
                func stored() async -> Int { max(0, ((try? await TestProgram.run(TestBinaries.tagfix, report))?.out.count ?? 0) - 1) }
                try await TestProgram.withRunning(TestBinaries.tagfix, ["collect", broker, "--client-id", "office-restart"] + db) {
                    collect in
                    #expect(await collect.waitFor("subscribed to", onStandardError: true), "\(collect.stderr)")
                    let environment = ["STATE_DIRECTORY": folder + "/state"]
                    let publish = ["verify", "--demo", "--json", "--publish", broker, "--site", "yard", "--device-id", "van-2"]
                    let first = try await TestProgram.run(TestBinaries.tagfix, publish, environment: environment)
                    #expect(first.status == 0, "\(first.err)")
                    #expect(await RunningProgram.poll { await stored() == 9 }, "the first run was not stored: \(collect.stderr)")

                    await database.kill()
                    // The broker takes the second run's verdicts; the collector cannot store them.
                    let second = try await TestProgram.run(TestBinaries.tagfix, publish, environment: environment)
                    #expect(second.status == 0, "\(second.err)")
                    #expect(second.err.contains("9 verdicts acknowledged"), "the broker acknowledges the publisher: \(second.err)")
                    #expect(
                        await collect.waitFor("cannot store", onStandardError: true),
                        "the collector never met the dead database: \(collect.stderr)")

                    try await database.start()
                    #expect(await RunningProgram.poll(upTo: .seconds(90)) { await stored() == 18 }, "\(collect.stderr)")
                    #expect(await stored() == 18, "each verdict exactly once")
                    let failures = collect.stderr.components(separatedBy: "cannot store").count - 1
                    #expect(failures == 1, "the outage said once, not once a try: \(collect.stderr)")
                    #expect(collect.isRunning, "the collector kept going: \(collect.stderr)")
                }
            }
        }
    }
}
