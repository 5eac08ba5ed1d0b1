// Verifier throughput: verdicts per second on one core, with registries of increasing size.
import Foundation
import TagFixCore
import TagFixStore

/// A registry of `count` tags spread over a 10 km square, ids T0…, regions of 25 m.
func registry(_ count: Int) -> InMemoryRegistry {
    var random = SeededGenerator(seed: 42)
    var entries: [RegistryEntry] = []
    entries.reserveCapacity(count)
    for index in 0..<count {
        let center = Coordinate(validLatitude: 53.5 + random.unit() * 0.09, longitude: 9.9 + random.unit() * 0.15)
        let region = try! CircularRegion(center: center, radius: 25, identifier: "T\(index)")
        entries.append(RegistryEntry(id: "T\(index)", uid: nil, region: region, name: nil))
    }
    return try! InMemoryRegistry(entries)
}

/// Scans of random registered tags, each with a fresh fix near its region.
func scans(of registry: InMemoryRegistry, count: Int) -> [(TagScan, CircularRegion, Fix)] {
    let tags = registry.count
    let uid = try! TagUID(hex: "04A1B2C3D4E5F6")
    let t0 = Timestamp(nanosecondsSinceEpoch: 1_778_745_600_000_000_000)
    var random = SeededGenerator(seed: 7)
    var inputs: [(TagScan, CircularRegion, Fix)] = []
    inputs.reserveCapacity(count)
    for _ in 0..<count {
        let id = "T\(Int(random.next() % UInt64(tags)))"
        let entry = registry.entry(forID: id)!
        let scan = TagScan(readerID: "bench", uid: uid, tagType: .ntag213, url: "https://tags.example.org/t/\(id)", time: t0)
        let position = Coordinate(
            validLatitude: entry.region.center.latitude + (random.unit() - 0.5) * 0.0004,
            longitude: entry.region.center.longitude + (random.unit() - 0.5) * 0.0006)
        let fix = Fix(time: t0.advanced(by: .milliseconds(-300)), mode: .threeD, coordinate: position, horizontalAccuracy: 4)
        inputs.append((scan, entry.region, fix))
    }
    return inputs
}

/// The throughput loop alone, over and over for `seconds`: what `perf record` should see.
func verifierLoop(tags: Int, seconds: Double) -> String {
    let registry = registry(tags)
    let verifier = Verifier(registry: registry)
    let inputs = scans(of: registry, count: 200_000)
    var verdicts = 0
    let start = ContinuousClock.now
    repeat { verdicts += verifyRound(verifier, inputs) } while (ContinuousClock.now - start).seconds < seconds
    return "\(verdicts) verdicts, \(Int(Double(verdicts) / (ContinuousClock.now - start).seconds)) per second"
}

/// The path a live scan takes once its fix is there: region lookup (URL → id → registry), then the
/// decision with the geodesic distance. `nil` when the scan finds no region.
@inline(__always)
func liveVerdict(_ verifier: Verifier, _ scan: consuming TagScan, _ fix: Fix) -> Verdict? {
    guard case .region(let region, let source, let id, let name, _) = verifier.expectation(for: scan) else { return nil }
    return verifier.decide(scan: scan, region: region, source: source, tagID: id, name: name, before: fix, after: nil)
}

/// One pass of the live path over `inputs`. Returns the number of verdicts. Not inlined, so that
/// profilers can single it out (`valgrind --tool=callgrind --toggle-collect='*verifyRound*'`).
@inline(never)
func verifyRound(_ verifier: Verifier, _ inputs: [(TagScan, CircularRegion, Fix)]) -> Int {
    var verdicts = 0
    for (scan, _, fix) in inputs {
        // Every scan has a fresh fix, so every verdict must have measured its distance (a
        // `Double?` read: checking the kind instead copied the enum out of the verdict, a
        // fiftieth of the loop's instructions spent by the benchmark, not the verifier).
        guard liveVerdict(verifier, scan, fix)?.distance != nil else { continue }
        verdicts &+= 1
    }
    return verdicts
}

func measure(tags: Int, verdicts: Int, rounds: Int, sqlite: Bool = false) -> [String: Double] {
    let registry = registry(tags)
    var storeSetup = 0.0
    var store: SQLiteRegistry?
    if sqlite {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString).sqlite").path
        let started = ContinuousClock.now
        store = try! SQLiteRegistry(path: path, mode: .create)
        try! store!.add(registry.entries)
        storeSetup = (ContinuousClock.now - started).seconds
        store = try! SQLiteRegistry(path: path, mode: .readOnly)
    }
    let verifier = Verifier(registry: store.map { $0 as any TagRegistry } ?? registry)
    let inputs = scans(of: registry, count: verdicts)
    var perSecond: [Double] = []
    var checksum = 0
    for _ in 0..<rounds {
        let start = ContinuousClock.now
        let verdicts = verifyRound(verifier, inputs)
        perSecond.append(Double(inputs.count) / (ContinuousClock.now - start).seconds)
        precondition(verdicts == inputs.count, "\(inputs.count - verdicts) scans found no region or no fix")
        checksum &+= verdicts
    }
    perSecond.sort()
    // Latency of one verdict once its fix is there: each timed alone.
    var latencies: [Double] = []
    latencies.reserveCapacity(inputs.count)
    for (scan, _, fix) in inputs {
        let start = ContinuousClock.now
        if case .confirmed? = liveVerdict(verifier, scan, fix)?.kind { checksum &+= 1 }
        latencies.append((ContinuousClock.now - start).seconds)
    }
    latencies.sort()
    // Latency of a live scan: its scan and fix just made, as the reader and gpsd hand them over
    // (so in the caches, unlike the 200 000 prepared ones above), against a registry as cold as
    // its size makes it.
    let ids = inputs.map { String($0.0.url!.split(separator: "/").last!) }
    let coordinates = inputs.map { $0.2.coordinate! }
    let (uid, scanTime, fixTime) = (inputs[0].0.uid, inputs[0].0.time, inputs[0].2.time)
    var fresh: [Double] = []
    fresh.reserveCapacity(ids.count)
    for i in ids.indices {
        let scan = TagScan(readerID: "bench", uid: uid, tagType: .ntag213, url: "https://tags.example.org/t/" + ids[i], time: scanTime)
        let fix = Fix(time: fixTime, mode: .threeD, coordinate: coordinates[i], horizontalAccuracy: 4)
        let start = ContinuousClock.now
        if case .confirmed? = liveVerdict(verifier, scan, fix)?.kind { checksum &+= 1 }
        fresh.append((ContinuousClock.now - start).seconds)
    }
    fresh.sort()
    // Where the time goes: the same inputs through the lookup alone and the geodesic alone.
    var start = ContinuousClock.now
    var found = 0
    for (scan, _, _) in inputs {
        if case .region = verifier.expectation(for: scan) { found &+= 1 }
    }
    let lookup = (ContinuousClock.now - start).seconds / Double(inputs.count)
    start = ContinuousClock.now
    for (scan, _, _) in inputs {
        if (try? URLLocation(url: scan.url!))?.tagID != nil { found &+= 1 }
    }
    let url = (ContinuousClock.now - start).seconds / Double(inputs.count)
    start = ContinuousClock.now
    // The ids alone, in a small dense array, and one UID: the index's own cost, without the
    // walk through 200 000 scans that the full path and the URL loop both pay.
    for id in ids {
        if (try? verifier.registry.placement(forTagID: id, uid: uid)) != nil { found &+= 1 }
    }
    let registryOnly = (ContinuousClock.now - start).seconds / Double(inputs.count)
    start = ContinuousClock.now
    var total = 0.0
    for (_, region, fix) in inputs {
        // The distance as the verifier works it out (the bearing is left to a verdict's reader).
        total += Geodesic.fastDistance(from: region.center, to: fix.coordinate!)
    }
    let geodesic = (ContinuousClock.now - start).seconds / Double(inputs.count)
    precondition(found == 3 * inputs.count && total > 0)
    return [
        "tags": Double(tags), "verdicts_per_second_median": perSecond[perSecond.count / 2],
        "verdicts_per_second_min": perSecond.first!, "verdicts_per_second_max": perSecond.last!,
        "microseconds_per_verdict_median": 1e6 / perSecond[perSecond.count / 2],
        "microseconds_lookup": lookup * 1e6, "microseconds_url": url * 1e6, "microseconds_registry": registryOnly * 1e6,
        "microseconds_geodesic": geodesic * 1e6, "microseconds_p50": latencies[latencies.count / 2] * 1e6,
        "microseconds_p99": latencies[latencies.count * 99 / 100] * 1e6, "microseconds_fresh_p50": fresh[fresh.count / 2] * 1e6,
        "microseconds_fresh_p99": fresh[fresh.count * 99 / 100] * 1e6, "sqlite": sqlite ? 1 : 0, "store_setup_seconds": storeSetup,
    ]
}
