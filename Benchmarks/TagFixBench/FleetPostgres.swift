import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixMQTT
import TagFixPostgres
import TagFixStore
import TagFixTestDaemons

/// The fleet store on PostgreSQL (a private cluster and a private mosquitto, loopback): what one
/// collector and two (a shared subscription) store per second into one database, beside
/// `mosquitto_sub` writing the same stream to a file, in one run; verdict → row committed, p50/p99.
func fleetPostgresBenchmark(verdicts count: Int, latencyRounds: Int) async -> [String] {
    do {
        return try await PrivatePostgres.with { database in
            var options = PrivateMosquitto.Options()
            options.persistence = false
            return try await PrivateMosquitto.with(options: options) { broker in
                try await fleetPostgresRuns(database, broker, count: count, latencyRounds: latencyRounds)
            }
        }
    } catch {
        return [#"{"bench":"fleet-postgres","error":"\#(error)"}"#]
    }
}

private func fleetPostgresRuns(_ database: PrivatePostgres, _ broker: PrivateMosquitto, count: Int, latencyRounds: Int) async throws
    -> [String]
{
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-fleet-pg-bench-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let settings = try MQTTSettings.parse(
        address: "mqtt://127.0.0.1:\(broker.port)/bench", passwordFile: nil, caFile: nil, version: nil, clientID: "bench")
    let address = try PostgresAddress(database.address)
    let password = database.password
    func store() async throws -> PostgresFleetStore {
        try await offThePool { try PostgresFleetStore(address: address, password: password) }
    }
    let admin = try await offThePool { try PostgresConnection(address, password: password) }
    defer { admin.close() }
    let stores = [try await store(), try await store(), try await store()]

    // 1. The stream, queued in the broker for the kept sessions: mosquitto_sub's, one collector's,
    // and a shared subscription's two (the broker deals its messages between them).
    let subscriber = ["-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-c", "-i", "bench-sub", "-t", "bench/+/verdict/+"]
    try run("/usr/bin/mosquitto_sub", subscriber + ["-E"])
    let sessions: [(id: String, group: String?, store: PostgresFleetStore)] = [
        ("bench-pg-one", nil, stores[0]), ("bench-pg-a", "pg", stores[1]), ("bench-pg-b", "pg", stores[2]),
    ]
    for session in sessions {
        let collector = try FleetCollector(
            settings: withID(settings, session.id), group: session.group, store: session.store, clock: MonotonicClock())
        collector.start()
        try waitFor(60) { collector.counts.subscriptions >= 1 }
        await collector.stop()
    }
    let log = folder + "/stream.jsonl"
    try writeLog(log, records: try exampleRecords(), count: count)
    let publisher = try FleetPublisher(settings: settings, site: "yard", device: "bench-pub", logPath: log, window: 64)
    publisher.start()
    guard await publisher.finish(linger: .seconds(300), clock: MonotonicClock()).unsent == 0 else {
        return [#"{"bench":"fleet-postgres","error":"the stream was not queued"}"#]
    }

    let clock = ContinuousClock()
    let subStart = clock.now
    let file = folder + "/sub.out"
    try run("/usr/bin/sh", ["-c", "/usr/bin/mosquitto_sub " + subscriber.joined(separator: " ") + " -C \(count) -W 300 > \(file)"])
    let subSeconds = (clock.now - subStart).seconds
    let received = (try? String(contentsOfFile: file, encoding: .utf8))?.split(separator: "\n").count ?? 0

    func stored() async -> Int {
        await offThePool { Int((try? admin.execute("SELECT count(*) FROM fleet_verdict"))?.rows.first?.first??.description ?? "") ?? 0 }
    }
    /// Starts `sessions`' collectors at once and times them until every verdict is in the database;
    /// the rows, the seconds, each one's share, and their transactions.
    func drain(_ sessions: ArraySlice<(id: String, group: String?, store: PostgresFleetStore)>) async throws -> (
        Int, Double, [Int], Int
    ) {
        let collectors = try sessions.map {
            try FleetCollector(settings: withID(settings, $0.id), group: $0.group, store: $0.store, clock: MonotonicClock())
        }
        let start = clock.now
        for collector in collectors { collector.start() }
        try waitFor(300) { collectors.map { $0.counts.stored + $0.counts.duplicates }.reduce(0, +) >= count }
        let seconds = (clock.now - start).seconds
        for collector in collectors { await collector.stop() }
        return (await stored(), seconds, collectors.map { $0.counts.stored }, collectors.map { $0.counts.commits }.reduce(0, +))
    }
    let (one, oneSeconds, _, oneCommits) = try await drain(sessions[0..<1])
    _ = try await offThePool { try admin.execute("TRUNCATE fleet_verdict") }
    let (two, twoSeconds, split, twoCommits) = try await drain(sessions[1...])
    let oneRate = Double(one) / oneSeconds
    let twoRate = Double(two) / twoSeconds
    let subRate = Double(received) / subSeconds
    var lines = [
        #"{"bench":"fleet-postgres","verdicts":\#(count),"one_stored":\#(one),"one_per_s":\#(Int(oneRate)),"two_stored":\#(two),"two_per_s":\#(Int(twoRate)),"two_split":\#(split),"one_commits":\#(oneCommits),"two_commits":\#(twoCommits),"mosquitto_sub_received":\#(received),"mosquitto_sub_per_s":\#(Int(subRate)),"one_ratio":\#(String(format: "%.2f", oneRate / subRate)),"two_over_one":\#(String(format: "%.2f", twoRate / oneRate))}"#
    ]

    // 2. Verdict → row committed in PostgreSQL: from the fan-out (the session log's append and
    // fsync first) to the collector's commit, one verdict at a time.
    let latencyLog = folder + "/latency.jsonl"
    let sessionLog = try SessionLog(path: latencyLog)
    let arrived = Mutex<[String: ContinuousClock.Instant]>([:])
    let office = try FleetCollector(
        settings: withID(settings, "bench-pg-latency"), group: nil, store: stores[0], clock: MonotonicClock(),
        stored: { id in arrived.withLock { $0[id] = ContinuousClock.now } })
    office.start()
    try waitFor(60) { office.counts.subscriptions >= 1 }
    let latencyPublisher = try FleetPublisher(settings: settings, site: "yard", device: "bench-pg-lat", logPath: latencyLog)
    latencyPublisher.start()
    let fanOut = VerdictFanOut([SessionLogSink(sessionLog), latencyPublisher])
    let verdicts = try exampleVerdicts()
    var samples: [Double] = []
    for index in 0..<latencyRounds {
        let start = clock.now
        fanOut.send(.verdict(verdicts[index % verdicts.count]))
        let records = index + 1
        try waitFor(10) { arrived.withLock { $0.count } >= records }
        guard let end = arrived.withLock({ $0.values.max() }) else { continue }
        samples.append((end - start).seconds * 1000)
        try await Task.sleep(for: .milliseconds(20))
    }
    _ = await latencyPublisher.finish(linger: .seconds(10), clock: MonotonicClock())
    await office.stop()
    for store in stores { store.close() }
    samples.sort()
    func percentile(_ p: Double) -> String {
        samples.isEmpty ? "null" : String(format: "%.2f", samples[min(samples.count - 1, Int(Double(samples.count) * p))])
    }
    lines.append(
        #"{"bench":"fleet-postgres-latency","rounds":\#(samples.count),"p50_ms":\#(percentile(0.5)),"p99_ms":\#(percentile(0.99)),"max_ms":\#(percentile(1))}"#
    )
    return lines
}
