import Foundation
import TagFixDevices
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixPostgres

/// `tagfix collect --db-password-file FILE` reads the file again each time it connects to
/// PostgreSQL again: a password rotated (the role's password changed, the file rewritten) while
/// the collector runs is taken at its next connection, without a restart.
@Suite(
    "collect reads its PostgreSQL password file again when it reconnects",
    .enabled(
        if: PrivatePostgres.available && PrivateMosquitto.installedPath != nil && TestBinaries.isTagfixBuilt,
        "needs PostgreSQL, mosquitto and the built tagfix"))
struct CollectPasswordRotationTests {
    @Test("the password rotated in the file and on the server while collect runs: the next connection uses the new one, and stores on")
    func rotated() async throws {
        try await PrivatePostgres.with { database in
            try await PrivateMosquitto.with { broker in
                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-pg-rotate-\(UUID().uuidString)").path
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(atPath: folder) }
                let passwordFile = folder + "/pg.pw"
                #expect(
                    FileManager.default.createFile(
                        atPath: passwordFile, contents: Data((database.password + "\n").utf8), attributes: [.posixPermissions: 0o600]))
                let address = try PostgresAddress(database.address)
                let admin = try await offThePool { try PostgresConnection(address, password: database.password) }
                defer { admin.close() }

                let broker = "mqtt://127.0.0.1:\(broker.port)/tagfix"
                let report = ["report", database.address, "--db-password-file", passwordFile, "--format", "csv"]
                func stored() async -> Int { max(0, ((try? await TestProgram.run(TestBinaries.tagfix, report))?.out.count ?? 0) - 1) }
                let collect = [
                    "collect", broker, "--client-id", "office-rotate", "--db", database.address, "--db-password-file", passwordFile,
                ]
                try await TestProgram.withRunning(TestBinaries.tagfix, collect) { collect in
                    #expect(await collect.waitFor("subscribed to", onStandardError: true), "\(collect.stderr)")
                    let environment = ["STATE_DIRECTORY": folder + "/state"]
                    let publish = ["verify", "--demo", "--json", "--publish", broker, "--site", "yard", "--device-id", "van-3"]
                    let first = try await TestProgram.run(TestBinaries.tagfix, publish, environment: environment)
                    #expect(first.status == 0, "\(first.err)")
                    #expect(await RunningProgram.poll { await stored() == 9 }, "the first run was not stored: \(collect.stderr)")

                    // Rotated: the role's new password, the file rewritten in place, and the
                    // collector's connection gone (a restart of the server would do the same).
                    let rotated = "rotated-\(UUID().uuidString.prefix(8))"
                    _ = try await offThePool { () throws(PostgresError) in try admin.execute("ALTER ROLE tagfix PASSWORD '\(rotated)'") }
                    try Data((rotated + "\n").utf8).write(to: URL(fileURLWithPath: passwordFile))
                    _ = try await offThePool { () throws(PostgresError) in
                        try admin.execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tagfix collect'")
                    }

                    let second = try await TestProgram.run(TestBinaries.tagfix, publish, environment: environment)
                    #expect(second.status == 0, "\(second.err)")
                    #expect(
                        await RunningProgram.poll { await stored() == 18 },
                        "the collector did not take the rotated password: \(collect.stderr)")
                    #expect(!collect.stderr.contains("refused the login"), "\(collect.stderr)")
                    #expect(!collect.stderr.contains(rotated), "the password reached the log")
                    #expect(collect.isRunning, "\(collect.stderr)")
                }
            }
        }
    }
}
