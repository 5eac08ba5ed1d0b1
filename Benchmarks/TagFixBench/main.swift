// TagFixBench: the benchmarks bench/run runs beside their peers. Each prints one JSON object per
// measurement on standard output.
//   TagFixBench verifier [SIZES…]     verifier throughput (in memory and SQLite), latency, scaling
//   TagFixBench tag-read [ROUNDS]     tag placed → verdict on the PN532 emulator at 115200 baud
//   TagFixBench fix-latency [SECONDS] NMEA epoch written → fix delivered, TagFix against gpspipe -w (exit 1: no epoch)
//   TagFixBench verifier-loop TAGS SECONDS   only the verifier's hot loop, for `perf record`
//   TagFixBench serve-fan-out [N] [threads|process]  a VERDICT to 1 and 100 tagfix serve clients, beside gpsd's
//                                     TPV fan-out; clients on threads here, or in one poll loop in a child (both by default)
//   TagFixBench sun [ROUNDS]          checking one NTAG 424 DNA SUN URL (AES, CMAC), µs per URL
//   TagFixBench sun-tap [ROUNDS]      an NTAG 424 DNA SUN tap → verdict on the PN532 emulator at 115200 baud
//   TagFixBench phone-tap [TAPS] [--serve TAGFIX] [--rate N] [--loads L,…] [--floor PROGRAM] [--tokens N]  phone taps verified
//                                     per second and POST → answer p50/p99, 200 phones at once (back to back, in
//                                     bursts, and paced at N taps/s), beside bench/sun_peer_flask.py (Flask) on the
//                                     same SUN URLs and, with --floor, a server that only answers (bench/floor.c)
//   TagFixBench sun-state [TAPS]      SUN counter commits per second on one PostgreSQL --state, from one and two servers
//   TagFixBench fleet [VERDICTS] [ROUNDS]  MQTT: collector vs mosquitto_sub, publisher CPU, verdict → stored
//   TagFixBench fleet-postgres [VERDICTS] [ROUNDS]  one and two collectors into PostgreSQL vs mosquitto_sub, verdict → row
//   TagFixBench pcsc-read [ROUNDS] [MODEL]  tag placed → verdict through a private pcscd (vpcd), beside pyscard;
//                                     MODEL: the reader family the card answers as (default virtual; acr1552u…)
//   TagFixBench refine [TAGS]         placements refined from 10 confirmed taps on 10 days (correlated GNSS errors)
//   TagFixBench fleet-store PATH [N]  a fleet store of N verdicts at three sites (for the report benchmark)
//   TagFixBench enrol [N]             N simulated enrolments on the correlated sky: enroll's stopping rule beside
//                                     the old 30 s average, on the same streams (time, true error, coverage, refusals)
import Foundation
import TagFixEmulators

let arguments = Array(CommandLine.arguments.dropFirst())
BenchChildren.stopOnTerm()
switch arguments.first {
case "fleet":
    let count = arguments.dropFirst().first.flatMap { Int($0) } ?? 20_000
    let rounds = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 200
    for line in await fleetBenchmark(verdicts: count, latencyRounds: rounds) { print(line) }
case "fleet-postgres":
    let count = arguments.dropFirst().first.flatMap { Int($0) } ?? 20_000
    let rounds = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 200
    for line in await fleetPostgresBenchmark(verdicts: count, latencyRounds: rounds) { print(line) }
case "fix-latency":
    // Measuring nothing is a failure, not a row of NaNs.
    if await !fixLatencyBenchmark(seconds: arguments.dropFirst().first.flatMap { Int($0) } ?? 20) { exit(1) }
case "serve-fan-out":
    await fanOutBenchmark(
        verdicts: arguments.dropFirst().first.flatMap { Int($0) } ?? 500,
        harnesses: arguments.dropFirst(2).first.flatMap { FanOutHarness(rawValue: $0) }.map { [$0] } ?? FanOutHarness.allCases)
case "serve-fan-out-clients":
    fanOutClients(Array(arguments.dropFirst()))
case "tag-read":
    await tagReadBenchmark(
        rounds: arguments.dropFirst().first.flatMap { Int($0) } ?? 15, python: ProcessInfo.processInfo.environment["TAGFIX_BENCH_PYTHON"])
case "pcsc-read":
    await pcscReadBenchmark(
        rounds: arguments.dropFirst().first.flatMap { Int($0) } ?? 15,
        model: arguments.dropFirst(2).first.flatMap { PCSCPart3Reader.Model(rawValue: $0) } ?? .virtual)
case "refine":
    for share in [0.1, 0] {
        for line in refineBenchmark(tags: arguments.dropFirst().first.flatMap { Int($0) } ?? 1000, multipath: share) { print(line) }
    }
case "fleet-store":
    guard let path = arguments.dropFirst().first else { fatalError("usage: TagFixBench fleet-store PATH [VERDICTS]") }
    print(try makeFleetStore(path: path, verdicts: arguments.dropFirst(2).first.flatMap { Int($0) } ?? 36_000))
case "enrol":
    for line in enrolBenchmark(enrolments: arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000) { print(line) }
case "sun":
    for line in sunBenchmark(rounds: arguments.dropFirst().first.flatMap { Int($0) } ?? 15) { print(line) }
case "sun-tap":
    print(await sunTapBenchmark(rounds: arguments.dropFirst().first.flatMap { Int($0) } ?? 15))
case "phone-tap":
    phoneTapBenchmark(arguments: Array(arguments.dropFirst()))
case "sun-state":
    for line in await sunStateBenchmark(taps: arguments.dropFirst().first.flatMap { Int($0) } ?? 5_000) { print(line) }
case "sun-state-worker":
    sunStateWorker(Array(arguments.dropFirst()))
case "verifier-loop":
    let tags = arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000_000
    let seconds = arguments.dropFirst(2).first.flatMap { Double($0) } ?? 10
    print(verifierLoop(tags: tags, seconds: seconds))
default:
    // verifier [SIZES…] [--sqlite SIZES…]: in-memory registries of each size, then SQLite ones.
    let rest = Array(arguments.drop { $0 == "verifier" })
    let split = rest.firstIndex(of: "--sqlite") ?? rest.endIndex
    let memory = rest[..<split].compactMap { Int($0) }
    let sqlite = rest[split...].compactMap { Int($0) }
    let runs = (memory.isEmpty && sqlite.isEmpty ? [1_000, 100_000, 1_000_000] : memory).map { ($0, false) } + sqlite.map { ($0, true) }
    for (size, store) in runs {
        let result = measure(tags: size, verdicts: 200_000, rounds: 5, sqlite: store)
        let body = result.keys.sorted().map { "\"\($0)\":\(result[$0]!)" }.joined(separator: ",")
        print(#"{"bench":"verifier","# + body + "}")
    }
}
