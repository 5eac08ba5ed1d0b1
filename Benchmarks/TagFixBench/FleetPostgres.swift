import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixMQTT
import TagFixPostgres
import TagFixStore
import TagFixSystem
import TagFixTestDaemons

/// The fleet store on PostgreSQL (a private cluster and a private mosquitto, loopback): what one
/// collector and two (a shared subscription) store per second into one database, beside
/// `mosquitto_sub` writing the same stream to a file, in one run; verdict → row committed, p50/p99.
/// Each collector is a `tagfix collect` process of its own (the built binary beside this one, or
/// `TAGFIX_BENCH_TAGFIX`), as a fleet runs them; the cores each part used while they drain are
/// read from /proc. The stream is 5 × `count` verdicts: 20,000 drain in under a second, too short
/// beside a process's start.
func fleetPostgresBenchmark(verdicts count: Int, latencyRounds: Int) async -> [String] {
    do {
        return try await PrivatePostgres.with { database in
            var options = PrivateMosquitto.Options()
            options.persistence = false
            return try await PrivateMosquitto.with(options: options) { broker in
                try await fleetPostgresRuns(database, broker, count: count * 5, latencyRounds: latencyRounds)
            }
        }
    } catch {
        return [#"{"bench":"fleet-postgres","error":"\#(error)"}"#]
    }
}

/// The `tagfix` binary the collectors run.
private var tagfixBinary: String {
    ProcessInfo.processInfo.environment["TAGFIX_BENCH_TAGFIX"]
        ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tagfix").path
}

/// CPU time (clock ticks) of this process's descendants, by their command name, and the
/// machine's busy and total ticks (/proc/stat).
struct CPUSample {
    var byName: [String: Int] = [:]
    var machineBusy = 0
    var machineTotal = 0

    static func take() -> CPUSample {
        var sample = CPUSample()
        if let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8), let line = stat.split(separator: "\n").first {
            let fields = line.split(separator: " ").dropFirst().compactMap { Int($0) }
            sample.machineTotal = fields.prefix(8).reduce(0, +)
            sample.machineBusy = sample.machineTotal - (fields.count > 4 ? fields[3] + fields[4] : 0)
        }
        var parent: [Int32: Int32] = [:]
        var ticks: [Int32: (String, Int)] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let process = process(entry) else { continue }
            parent[pid] = process.parent
            ticks[pid] = (process.name, process.ticks)
        }
        let me = getpid()
        for (pid, (name, used)) in ticks {
            var ancestor = parent[pid]
            while let next = ancestor, next != me, next > 1 { ancestor = parent[next] }
            // The collectors by their binary's name (tagfix, or a copy's: the kernel keeps 15 bytes).
            let part = pid == me ? "bench" : name.lowercased().contains("tagfix") ? "tagfix" : name
            if ancestor == me || pid == me { sample.byName[part, default: 0] += used }
        }
        return sample
    }

    /// A process's name, its parent, and its CPU time so far (user + system, and user alone:
    /// clock ticks), from /proc/PID/stat; `nil` once it has gone.
    static func process(_ pid: String) -> (name: String, parent: Int32, ticks: Int, user: Int)? {
        guard let status = Int32(pid).flatMap(Processes.status(of:)), status.fields.count > 13, let parent = status.parent,
            // utime and stime are fields 14 and 15 of the line.
            let user = Int(status.fields[11]), let system = Int(status.fields[12])
        else { return nil }
        return (status.name, parent, user + system, user)
    }

    /// The cores each part kept busy between `self` and `later`, `seconds` apart.
    func cores(until later: CPUSample, seconds: Double) -> String {
        let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
        func share(_ name: String) -> String {
            String(format: "%.2f", Double((later.byName[name] ?? 0) - (byName[name] ?? 0)) / hz / seconds)
        }
        let total = later.machineTotal - machineTotal
        let busy = Double(later.machineBusy - machineBusy) / Double(max(1, total)) * Double(ProcessInfo.processInfo.activeProcessorCount)
        return #"{"collectors":\#(share("tagfix")),"postgres":\#(share("postgres")),"mosquitto":\#(share("mosquitto")),"#
            + #""bench":\#(share("bench")),"machine":\#(String(format: "%.2f", busy))}"#
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
    let stores = [try await store()]

    // 1. The stream, queued in the broker for the kept sessions: mosquitto_sub's, one collector's,
    // and a shared subscription's two (the broker deals its messages between them). The sessions
    // are made here, with the client ids the collect processes then take up.
    let subscriber = ["-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-c", "-i", "bench-sub", "-t", "bench/+/verdict/+"]
    try run("/usr/bin/mosquitto_sub", subscriber + ["-E"])
    let sessions: [(id: String, group: String?)] = [("bench-pg-one", nil), ("bench-pg-a", "pg"), ("bench-pg-b", "pg")]
    for session in sessions {
        let collector = try FleetCollector(
            settings: withID(settings, session.id), group: session.group, store: stores[0], clock: MonotonicClock())
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
    let subLines = (try? String(contentsOfFile: file, encoding: .utf8))?.split(separator: "\n") ?? []
    let received = subLines.count
    // The stream's last ids: each session's queue drains in order, and the broker deals the shared
    // subscription's in turn, so once these are stored the rest nearly always are.
    let lastIDs = subLines.suffix(64).compactMap { line -> String? in
        (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String
    }

    func rows(_ sql: String, _ parameters: [String?] = []) async -> Int {
        await offThePool { Int((try? admin.execute(sql, parameters))?.rows.first?.first??.description ?? "") ?? 0 }
    }
    /// Starts a `tagfix collect` process for each of `sessions` at once and times them until every
    /// verdict is in the database: the rows, the seconds from the first row committed (and from
    /// the processes' start), each one's share, the cores each part kept busy meanwhile, and what
    /// their backends waited on.
    func drain(_ sessions: ArraySlice<(id: String, group: String?)>) async throws -> (Int, Double, Double, [Int], String, String) {
        let start = clock.now
        let startedAt = Date().timeIntervalSince1970
        let before = CPUSample.take()
        var processes: [(ChildProcess, String)] = []
        for session in sessions {
            let output = folder + "/\(session.id).out"
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            guard let handle = FileHandle(forWritingAtPath: output) else { throw BenchFailure("cannot write \(output)") }
            defer { try? handle.close() }
            let process = try BenchChildren.start(
                executable: tagfixBinary,
                arguments: [
                    "collect", "mqtt://127.0.0.1:\(broker.port)/bench", "--db", database.address, "--db-password-file",
                    database.passwordFile, "--client-id", session.id,
                ] + (session.group.map { ["--group", $0] } ?? []),
                standardOutput: handle.fileDescriptor, standardError: handle.fileDescriptor)
            processes.append((process, output))
        }
        let ids =
            "{"
            + lastIDs.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
            .joined(separator: ",") + "}"
        // Meanwhile, what the collectors' backends wait on, sampled: running, the collector's next
        // statement (idle/ClientRead), or a lock, the WAL, the disk (what would serialize them).
        // Every 5 ms: the polling's own CPU (its backend's too) stays near 0.05 of a core.
        var waits: [String: Int] = [:]
        while await rows("SELECT count(*) FROM fleet_verdict WHERE id = ANY($1::text[])", [ids]) < lastIDs.count {
            if clock.now - start > .seconds(300) { throw BenchTimeout() }
            let states = await offThePool {
                (try? admin.execute(
                    "SELECT state || '/' || coalesce(wait_event, 'running') FROM pg_stat_activity WHERE application_name = 'tagfix collect'"
                ))?.rows.compactMap { $0.first ?? nil } ?? []
            }
            for state in states { waits[state, default: 0] += 1 }
            try await Task.sleep(for: .milliseconds(5))
        }
        while await rows("SELECT count(*) FROM fleet_verdict") < count {
            if clock.now - start > .seconds(300) { throw BenchTimeout() }
            try await Task.sleep(for: .milliseconds(10))
        }
        let fromStart = (clock.now - start).seconds
        let endedAt = Date().timeIntervalSince1970
        let after = CPUSample.take()
        let first =
            Double(
                await offThePool {
                    (try? admin.execute("SELECT extract(epoch FROM min(stored_at)) FROM fleet_verdict"))?.rows.first?.first??.description
                        ?? ""
                }) ?? startedAt
        var split: [Int] = []
        for (process, output) in processes {
            await process.stop(grace: .seconds(30))
            // collect's summary: "stored N verdicts" on its last line.
            let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            let stored = said.split(separator: "\n").compactMap { line -> Int? in
                guard line.hasPrefix("stored ") else { return nil }
                return Int(line.split(separator: " ")[1])
            }.last
            split.append(stored ?? -1)
        }
        let seconds = endedAt - first
        return (
            await rows("SELECT count(*) FROM fleet_verdict"), seconds, fromStart, split,
            before.cores(until: after, seconds: endedAt - startedAt),
            "{" + waits.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",") + "}"
        )
    }
    let (one, oneSeconds, oneFromStart, _, oneCores, oneWaits) = try await drain(sessions[0..<1])
    _ = try await offThePool { try admin.execute("TRUNCATE fleet_verdict") }
    let (two, twoSeconds, twoFromStart, split, twoCores, twoWaits) = try await drain(sessions[1...])
    let oneRate = Double(one) / oneSeconds
    let twoRate = Double(two) / twoSeconds
    let subRate = Double(received) / subSeconds
    var lines = [
        #"{"bench":"fleet-postgres","collectors":"processes","verdicts":\#(count),"one_stored":\#(one),"one_per_s":\#(Int(oneRate)),"one_per_s_from_start":\#(Int(Double(one) / oneFromStart)),"two_stored":\#(two),"two_per_s":\#(Int(twoRate)),"two_per_s_from_start":\#(Int(Double(two) / twoFromStart)),"two_split":\#(split),"mosquitto_sub_received":\#(received),"mosquitto_sub_per_s":\#(Int(subRate)),"one_ratio":\#(String(format: "%.2f", oneRate / subRate)),"two_over_one":\#(String(format: "%.2f", twoRate / oneRate)),"one_cores":\#(oneCores),"two_cores":\#(twoCores),"one_waits":\#(oneWaits),"two_waits":\#(twoWaits),"load":"\#(loadAverage())"}"#
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

/// The load average (1, 5, 15 minutes), as /proc/loadavg says it.
private func loadAverage() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ").prefix(3).joined(separator: " ")
}
