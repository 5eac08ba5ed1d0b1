import Foundation
import TagFixCore
import TagFixDevices
import TagFixPostgres
import TagFixStore
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixMQTT

/// The PostgreSQL fleet store keeps what the SQLite one keeps, byte for byte, for real verdicts.
@Suite("the fleet store on PostgreSQL keeps what SQLite keeps", .enabled(if: PrivatePostgres.available, "needs PostgreSQL"))
struct PostgresMatchesSQLiteTests {
    /// The verdicts' session-log lines: the demo's (the built tagfix's `verify --demo --log`) or
    /// the example site's (Examples/site, as the fleet tests replay it).
    static func lines(_ source: String) async throws -> [[UInt8]] {
        switch source {
        case "demo":
            guard TestBinaries.isTagfixBuilt else { return [] }
            let log = try temporaryFolder() + "/demo.jsonl"
            let run = try await TestProgram.run(TestBinaries.tagfix, ["verify", "--demo", "--json", "--log", log])
            #expect(run.status == 0, "\(run.err)")
            return Array(try Data(contentsOf: URL(fileURLWithPath: log))).split(separator: 0x0A).map(Array.init)
        default:
            return try exampleVerdicts().map { Array(SessionRecord($0).encoded().utf8) }
        }
    }

    @Test(
        "a batch (with copies, within it and of an earlier one) leaves the same rows and the same new/copy answers in both stores",
        arguments: ["demo", "example site"])
    func sameRows(source: String) async throws {
        let lines = try await Self.lines(source)
        try #require(!lines.isEmpty || !TestBinaries.isTagfixBuilt, "no verdicts from \(source)")
        guard let firstLine = lines.first else { return }
        let session = FleetMessage.session(firstLine: firstLine)
        let messages = lines.enumerated().map { index, line in
            let id = FleetMessage.id(device: "van-1", session: session, sequence: index + 1)
            let payload = FleetMessage.payload(line: line, id: id, device: "van-1")
            return FleetStore.Stored(
                id: id, site: index % 2 == 0 ? "harbour" : "yard", device: "van-1", payload: String(decoding: payload, as: UTF8.self))
        }
        let half = messages.count / 2
        // The first half; then all of it, with the first message twice more (the broker's copies).
        let batches = [Array(messages[..<half]), messages + [messages[0], messages[0]]]
        try await PrivatePostgres.with { server in
            let address = try PostgresAddress(server.address)
            let password = server.password
            // libpq blocks: each of its calls on a thread of its own, the test on its task.
            let postgres = try await offThePool { try PostgresFleetStore(address: address, password: password) }
            let sqlite = try FleetStore(path: try temporaryFolder() + "/fleet.sqlite", create: true)
            for (index, batch) in batches.enumerated() {
                let received = Int64(1_778_745_600_000_000_000 + index)
                let fromSQLite = try sqlite.store(batch, receivedNanoseconds: received)
                #expect(try await offThePool { try postgres.store(batch, receivedNanoseconds: received) } == fromSQLite, "batch \(index)")
            }
            let kept = try sqlite.all().sorted { $0.id < $1.id }
            let rows = try await offThePool { try postgres.all() }.sorted { $0.id < $1.id }
            #expect(rows.count == messages.count)
            #expect(rows == kept)
            #expect(rows.map { Array($0.payload.utf8) } == kept.map { Array($0.payload.utf8) }, "the payloads' bytes")
            let stamps = try await offThePool {
                let admin = try PostgresConnection(address, password: password)
                defer { admin.close() }
                return try admin.execute("SELECT received_ns, count(*) FROM fleet_verdict GROUP BY 1 ORDER BY 1").rows
            }
            #expect(stamps == [["1778745600000000000", String(half)], ["1778745600000000001", String(messages.count - half)]])
            await offThePool { postgres.close() }
        }
    }
}
