import Foundation
import Glibc
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixMQTT
import TagFixScenarios
import TagFixStore
import TagFixTestDaemons

/// Fleets over MQTT on a private mosquitto (loopback): what a collector stores per second beside
/// `mosquitto_sub` writing the same stream to a file, in the same run; a publisher's CPU per
/// verdict; verdict (on the log's disk) → stored at the collector, p50/p99.
func fleetBenchmark(verdicts count: Int, latencyRounds: Int) async -> [String] {
    var lines: [String] = []
    do {
        var options = PrivateMosquitto.Options()
        options.persistence = false
        try await PrivateMosquitto.with(options: options) { broker in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-fleet-bench-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let address = "mqtt://127.0.0.1:\(broker.port)/bench"
            let settings = try MQTTSettings.parse(address: address, passwordFile: nil, caFile: nil, version: nil, clientID: "bench")
            let sample = try exampleRecords()

            // 1. The stream, queued in the broker for two kept sessions (the collector's and
            // mosquitto_sub's), then drained by each in turn.
            let storePath = folder + "/fleet.sqlite"
            let store = try FleetStore(path: storePath, create: true)
            var collector = try FleetCollector(
                settings: withID(settings, "bench-collector"), group: nil, store: store, clock: MonotonicClock())
            collector.start()
            try waitFor(60) { collector.counts.subscriptions >= 1 }
            await collector.stop()
            let subscriber = ["-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-c", "-i", "bench-sub", "-t", "bench/+/verdict/+"]
            try run("/usr/bin/mosquitto_sub", subscriber + ["-E"])
            let log = folder + "/stream.jsonl"
            try writeLog(log, records: sample, count: count)
            let publisher = try FleetPublisher(settings: settings, site: "yard", device: "bench-pub", logPath: log, window: 64)
            publisher.start()
            let queued = await publisher.finish(linger: .seconds(300), clock: MonotonicClock())
            guard queued.unsent == 0 else {
                lines = [#"{"bench":"fleet","error":"the stream was not queued"}"#]
                return
            }

            let clock = ContinuousClock()
            let subStart = clock.now
            let file = folder + "/sub.out"
            try run("/usr/bin/sh", ["-c", "/usr/bin/mosquitto_sub " + subscriber.joined(separator: " ") + " -C \(count) -W 300 > \(file)"])
            let subSeconds = (clock.now - subStart).seconds
            let received = (try? String(contentsOfFile: file, encoding: .utf8))?.split(separator: "\n").count ?? 0

            collector = try FleetCollector(settings: withID(settings, "bench-collector"), group: nil, store: store, clock: MonotonicClock())
            let collectStart = clock.now
            collector.start()
            try waitFor(300) { collector.counts.stored + collector.counts.duplicates >= count }
            let collectSeconds = (clock.now - collectStart).seconds
            await collector.stop()
            let stored = try store.count()
            lines.append(
                #"{"bench":"fleet-collect","verdicts":\#(count),"collector_stored":\#(stored),"collector_per_s":\#(Int(Double(stored) / collectSeconds)),"mosquitto_sub_received":\#(received),"mosquitto_sub_per_s":\#(Int(Double(received) / subSeconds)),"ratio":\#(String(format: "%.2f", (Double(stored) / collectSeconds) / (Double(received) / subSeconds)))}"#
            )

            // 2. What publishing adds per verdict: receive (the tag noted), the record's line read
            // back from the log, publish, PUBACK, `LOG.acks` (the broker has no subscriber: its work
            // is not in this process). The log's own work (encoding, append, fsync) is done without
            // publishing too: the records are in the log before the clock starts, as the fan-out
            // writes each before the publisher hears of it.
            let cpuLog = folder + "/cpu.jsonl"
            _ = FileManager.default.createFile(atPath: cpuLog, contents: Data(Array(sample[0].utf8) + [0x0A]))
            let cpuPublisher = try FleetPublisher(settings: settings, site: "yard", device: "bench-cpu", logPath: cpuLog, window: 64)
            cpuPublisher.start()
            _ = await cpuPublisher.drain(within: .seconds(30), clock: MonotonicClock())
            let verdicts = try exampleVerdicts()
            let appended = FileHandle(forWritingAtPath: cpuLog)
            appended?.seekToEndOfFile()
            var records = ""
            for index in 0..<count { records += SessionRecord(verdicts[index % verdicts.count]).encoded() + "\n" }
            appended?.write(Data(records.utf8))
            try appended?.close()
            let before = processCPU()
            for index in 0..<count { cpuPublisher.receive(verdicts[index % verdicts.count], now: nil) }
            let cpuOutcome = await cpuPublisher.finish(linger: .seconds(300), clock: MonotonicClock())
            let cpu = processCPU() - before
            lines.append(
                #"{"bench":"fleet-publish-cpu","verdicts":\#(count),"unsent":\#(cpuOutcome.unsent),"cpu_us_per_verdict":\#(String(format: "%.1f", cpu * 1e6 / Double(count)))}"#
            )

            // 3. Verdict → stored: from the fan-out (the log's append and fsync first) to the
            // collector's committed row, one verdict at a time.
            let latencyLog = folder + "/latency.jsonl"
            let sessionLog = try SessionLog(path: latencyLog)
            let latencyStore = try FleetStore(path: folder + "/latency.sqlite", create: true)
            let arrived = Mutex<[String: ContinuousClock.Instant]>([:])
            let office = try FleetCollector(
                settings: withID(settings, "bench-latency"), group: nil, store: latencyStore, clock: MonotonicClock(),
                stored: { id in arrived.withLock { $0[id] = ContinuousClock.now } })
            office.start()
            try waitFor(60) { office.counts.subscriptions >= 1 }
            let latencyPublisher = try FleetPublisher(settings: settings, site: "yard", device: "bench-lat", logPath: latencyLog)
            latencyPublisher.start()
            let fanOut = VerdictFanOut([SessionLogSink(sessionLog), latencyPublisher])
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
            samples.sort()
            func percentile(_ p: Double) -> String {
                String(format: "%.2f", samples[min(samples.count - 1, Int(Double(samples.count) * p))])
            }
            lines.append(
                #"{"bench":"fleet-latency","rounds":\#(samples.count),"p50_ms":\#(percentile(0.5)),"p99_ms":\#(percentile(0.99)),"max_ms":\#(percentile(1))}"#
            )
        }
    } catch {
        lines.append(#"{"bench":"fleet","error":"\#(error)"}"#)
    }
    return lines
}

func withID(_ settings: MQTTSettings, _ id: String) -> MQTTSettings {
    var copy = settings
    copy.clientID = id
    return copy
}

struct BenchTimeout: Error {}

func waitFor(_ seconds: Double, _ condition: () throws -> Bool) throws {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if try condition() { return }
        usleep(2000)
    }
    throw BenchTimeout()
}

/// Runs a program to its end (started as the product starts programs).
func run(_ path: String, _ arguments: [String]) throws {
    let process = try BenchChildren.start(executable: path, arguments: arguments)
    blockUntilExit(process)
}

/// User + system CPU of this process, seconds.
private func processCPU() -> Double {
    var usage = rusage()
    _ = getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func exampleVerdicts() throws -> [Verdict] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    let scenario = try ScenarioLoader.load(path: root + "/Examples/site/scenario.json")
    let registry = try RegistryFile.parse(try TextFile.read(root + "/Examples/site/" + (scenario.registryPath ?? "")))
    return ScenarioReplay.verdicts(scenario, verifier: Verifier(policy: scenario.policy, registry: registry))
}

func exampleRecords() throws -> [String] { try exampleVerdicts().map { SessionRecord($0).encoded() } }

/// A log of `count` records, the example's repeated.
func writeLog(_ path: String, records: [String], count: Int) throws {
    var text = ""
    for index in 0..<count { text += records[index % records.count] + "\n" }
    try text.write(toFile: path, atomically: true, encoding: .utf8)
}
