import Foundation
import TagFixCore
import TagFixTesting
import Testing

/// Builders on a small local grid: metres east/north of an origin, seconds after t0.
enum Site {
    static let origin = Coordinate(validLatitude: 53.545, longitude: 9.966)
    static let t0 = Timestamp(iso8601: "2026-05-14T08:00:00Z")!
    static let uid = try! TagUID(hex: "04A1B2C3D4E5F6")

    static func at(east: Double, north: Double) -> Coordinate {
        Coordinate(
            validLatitude: origin.latitude + north / 111_320,
            longitude: origin.longitude + east / (111_320 * cos(origin.latitude * .pi / 180)))
    }

    static func time(_ seconds: Double) -> Timestamp { t0.advanced(by: .seconds(exactly: seconds)!) }

    static func fix(
        _ seconds: Double, east: Double = 0, north: Double = 0, accuracy: Double? = 4, mode: Fix.Mode = .threeD,
        status: Fix.Status = .gps
    ) -> Fix {
        Fix(
            time: time(seconds), mode: mode, coordinate: at(east: east, north: north), horizontalAccuracy: accuracy, status: status,
            satellitesUsed: 8)
    }

    static func scan(_ seconds: Double, url: String? = "https://tags.example.org/t/A1", uid: TagUID = Site.uid, source: ScanSource = .nfc)
        -> TagScan
    {
        TagScan(readerID: "test", uid: uid, tagType: .ntag213, url: url, time: time(seconds), source: source)
    }

    /// The default verifier's verdict for a scan at `scan` against the site's 20 m region.
    static func decide(before: Fix?, after: Fix? = nil, scan: TagScan = Site.scan(0)) -> Verdict {
        Verifier(registry: registry()).decide(
            scan: scan, region: try! CircularRegion(center: origin, radius: 20, identifier: "A1"), source: .registry, tagID: "A1",
            name: nil, before: before, after: after)
    }

    static func registry(radius: Double = 20) -> InMemoryRegistry {
        let region = try! CircularRegion(center: origin, radius: radius, identifier: "A1")
        return try! InMemoryRegistry([RegistryEntry(id: "A1", uid: uid, region: region, name: "Gate")])
    }
}

@Suite("Verifier decisions")
struct VerifierDecisionTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var before: Fix?
        var after: Fix?
        var expected: String
        var reason: String?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "close and accurate", before: Site.fix(-0.5, east: 3), after: nil, expected: "confirmed", reason: nil),
        Case(name: "far away", before: Site.fix(-0.5, east: 300), after: nil, expected: "outside", reason: nil),
        Case(name: "across the edge", before: Site.fix(-0.5, east: 18), after: nil, expected: "inconclusive", reason: "straddles_boundary"),
        Case(name: "no fix at all", before: nil, after: nil, expected: "inconclusive", reason: "no_fix"),
        Case(name: "receiver reports no fix", before: Site.fix(-0.5, mode: .noFix), after: nil, expected: "inconclusive", reason: "no_fix"),
        Case(name: "old fix", before: Site.fix(-10), after: nil, expected: "inconclusive", reason: "stale_fix"),
        Case(name: "late fix", before: nil, after: Site.fix(3), expected: "inconclusive", reason: "stale_fix"),
        Case(name: "poor accuracy", before: Site.fix(-0.5, accuracy: 80), after: nil, expected: "inconclusive", reason: "poor_accuracy"),
        Case(
            name: "no accuracy estimate", before: Site.fix(-0.5, accuracy: nil), after: nil, expected: "inconclusive",
            reason: "unknown_accuracy"),
        Case(name: "simulated", before: Site.fix(-0.5, status: .simulated), after: nil, expected: "untrusted", reason: "gps_simulated"),
        Case(
            name: "nearest is the later one", before: Site.fix(-2.5, east: 300), after: Site.fix(0.2, east: 1, accuracy: 1),
            expected: "confirmed", reason: nil),
        Case(
            name: "both fresh: interpolated, not nearest", before: Site.fix(-1.9, east: 300), after: Site.fix(0.2, east: 1, accuracy: 1),
            expected: "outside", reason: nil),
    ]

    @Test("every verdict and inconclusive reason", arguments: cases)
    func decide(_ c: Case) {
        let verifier = Verifier(registry: Site.registry())
        let region = try! CircularRegion(center: Site.origin, radius: 20, identifier: "A1")
        let verdict = verifier.decide(
            scan: Site.scan(0), region: region, source: .registry, tagID: "A1", name: "Gate", before: c.before, after: c.after)
        #expect(verdict.kind.name == c.expected)
        #expect(verdict.kind.reasonCode == c.reason)
        if c.expected == "confirmed" || c.expected == "outside" {
            #expect(verdict.distance != nil && verdict.accuracy != nil && verdict.fixAge != nil && verdict.fix != nil)
        }
    }

    @Test("on the edge: distance + accuracy equal to the radius confirms, a hair more does not")
    func edge() throws {
        let verifier = Verifier(registry: Site.registry())
        let region = try CircularRegion(center: Site.origin, radius: 20, identifier: "A1")
        let position = Site.at(east: 16, north: 0)
        func decided(accuracy: Double) -> Verdict {
            let fix = Fix(time: Site.time(-0.5), mode: .threeD, coordinate: position, horizontalAccuracy: accuracy)
            return verifier.decide(scan: Site.scan(0), region: region, source: .registry, tagID: "A1", name: nil, before: fix, after: nil)
        }
        func verdict(accuracy: Double) -> Verdict.Kind { decided(accuracy: accuracy).kind }
        // The distance the verifier measured (the short-line solution), within 0.1 mm of Vincenty's.
        let distance = try #require(decided(accuracy: 1).distance)
        #expect(abs(distance - Geodesic.distance(from: Site.origin, to: position)) < 1e-4)
        #expect(verdict(accuracy: 20 - distance) == .confirmed)
        #expect(verdict(accuracy: 20 - distance + 1e-6) == .inconclusive(.straddlesBoundary))
    }

    @Test("simulated fixes decide when the policy allows them")
    func simulatedAllowed() {
        var policy = VerificationPolicy()
        policy.allowSimulatedFixes = true
        let verifier = Verifier(policy: policy, registry: Site.registry())
        let region = try! CircularRegion(center: Site.origin, radius: 20, identifier: "A1")
        let verdict = verifier.decide(
            scan: Site.scan(0), region: region, source: .registry, tagID: "A1", name: nil, before: Site.fix(-0.5, status: .simulated),
            after: nil)
        #expect(verdict.kind == .confirmed)
    }

    @Test("interpolates between the fixes around the scan")
    func interpolation() throws {
        let verifier = Verifier(registry: Site.registry())
        let region = try CircularRegion(center: Site.origin, radius: 20, identifier: "A1")
        // Walking east at 20 m/s: 10 m east half a second before the scan, 30 m after.
        let verdict = verifier.decide(
            scan: Site.scan(0), region: region, source: .registry, tagID: "A1", name: nil,
            before: Site.fix(-0.5, east: -10, accuracy: 2), after: Site.fix(0.5, east: 10, accuracy: 3))
        #expect(verdict.interpolated)
        #expect(verdict.kind == .confirmed)
        #expect(try #require(verdict.distance) < 0.01)
        #expect(verdict.accuracy == 3)
        #expect(verdict.fixAge == .milliseconds(500))
        #expect(verdict.fix?.time == Site.time(0))
    }

    @Test("outside reports the direction from where the tag should be")
    func direction() throws {
        let verifier = Verifier(registry: Site.registry())
        let region = try CircularRegion(center: Site.origin, radius: 20, identifier: "A1")
        let verdict = verifier.decide(
            scan: Site.scan(0), region: region, source: .registry, tagID: "A1", name: nil, before: Site.fix(-0.2, north: 120), after: nil)
        #expect(verdict.kind == .outside)
        #expect(Geodesic.compassPoint(forAzimuth: try #require(verdict.bearing)) == "N")
        #expect(abs(try #require(verdict.distance) - 120) < 0.5)
    }
}

@Suite("Expected region of a scan")
struct ExpectationTests {
    func kind(_ scan: TagScan, policy: VerificationPolicy = VerificationPolicy(), registry: any TagRegistry = Site.registry()) -> String {
        switch Verifier(policy: policy, registry: registry).expectation(for: scan) {
        case .decided(let verdict): return verdict.kind.name + (verdict.kind.reasonCode.map { ":" + $0 } ?? "")
        case .region(_, let source, let id, _, _): return "\(source.rawValue):\(id ?? "-")"
        }
    }

    @Test("registry by id, then by UID, then the URL's location, else not registered")
    func order() throws {
        let other = try TagUID(hex: "04FFFFFFFFFF01")
        #expect(kind(Site.scan(0, url: "https://x.example/t/A1")) == "registry:A1")
        // A1 is enrolled with Site.uid: its URL on another tag is a copy (issue 20, UIDBindingTests).
        #expect(kind(Site.scan(0, url: "https://x.example/t/A1", uid: other)) == "untrusted:uid_mismatch")
        #expect(kind(Site.scan(0, url: "https://x.example/t/unknown")) == "registry:A1")
        #expect(kind(Site.scan(0, url: nil)) == "registry:A1")
        // The registry wins over a location written in the URL.
        #expect(kind(Site.scan(0, url: "https://x.example/t/A1?lat=1&lon=1&r=5")) == "registry:A1")
        #expect(kind(Site.scan(0, url: "https://x.example/t/A1?lat=1&lon=1&r=5", uid: other)) == "untrusted:uid_mismatch")
        #expect(kind(Site.scan(0, url: "https://x.example/t/P7?lat=1&lon=1&r=5", uid: other)) == "url:P7")
        #expect(kind(Site.scan(0, url: "geo:1,1;u=5", uid: other)) == "url:-")
        #expect(kind(Site.scan(0, url: "https://x.example/t/X9", uid: other)) == "notRegistered")
        #expect(kind(Site.scan(0, url: nil, uid: other)) == "notRegistered")
    }

    @Test("a broken URL location is inconclusive, not unregistered")
    func brokenURL() throws {
        let other = try TagUID(hex: "04FFFFFFFFFF01")
        #expect(kind(Site.scan(0, url: "https://x.example/t/P7?lat=100&lon=1&r=5", uid: other)) == "inconclusive:invalid_tag_location")
    }

    @Test("disallowed by the run, by tag id, by UID, or when not from a physical tag")
    func disallowed() {
        var off = VerificationPolicy()
        off.locationConfirmation = false
        #expect(kind(Site.scan(0), policy: off) == "disallowed:confirmation_disabled")
        var byID = VerificationPolicy()
        byID.disallowedTags = ["A1"]
        #expect(kind(Site.scan(0, url: nil), policy: byID) == "disallowed:tag_disallowed")
        var byUID = VerificationPolicy()
        byUID.disallowedTags = [Site.uid.hex]
        #expect(kind(Site.scan(0), policy: byUID) == "disallowed:tag_disallowed")
        #expect(kind(Site.scan(0, source: .link)) == "disallowed:not_physical_tag")
    }

    @Test(
        "a UID is disallowed however it is written; a UID one byte off is not",
        arguments: [
            ("04A1B2C3D4E5F6", true), ("04a1b2c3d4e5f6", true), ("04:a1:b2:c3:d4:e5:f6", true), ("04 A1 B2 C3 D4 E5 F6", true),
            ("04-A1-B2-C3-D4-E5-F6", true), ("04:a1:b2:c3:d4:e5:f7", false), ("04a1b2c3d4e5", false), ("04a1b2c3d4e5f6 ", false),
        ])
    func disallowedUIDSpellings(written: String, disallows: Bool) {
        var policy = VerificationPolicy()
        policy.disallowedTags = [written]
        // A scan with no URL and an unregistered UID: only the policy can decide it, else it is
        // not registered.
        let scan = Site.scan(0, url: nil)
        let expected = disallows ? "disallowed:tag_disallowed" : kind(scan, registry: InMemoryRegistry())
        #expect(kind(scan, policy: policy, registry: InMemoryRegistry()) == expected)
        #expect(policy.disallowedTags.contains(uid: Site.uid) == disallows)
    }

    struct FailingRegistry: TagRegistry {
        func entry(forID id: String) throws(RegistryError) -> RegistryEntry? { throw RegistryError("disk on fire") }
        func entry(forUID uid: TagUID) throws(RegistryError) -> RegistryEntry? { throw RegistryError("disk on fire") }
    }

    @Test("a registry that fails makes the verdict inconclusive")
    func registryFailure() {
        #expect(kind(Site.scan(0), registry: FailingRegistry()) == "inconclusive:registry_unavailable")
    }
}

@Suite("Verification session (real-time state machine)")
struct VerificationSessionTests {
    func session(_ configure: (inout VerificationPolicy) -> Void = { _ in }) -> VerificationSession {
        var policy = VerificationPolicy()
        configure(&policy)
        return VerificationSession(verifier: Verifier(policy: policy, registry: Site.registry()))
    }

    @Test("with a fresh fix before the scan it waits for the next one and interpolates")
    func waitsToInterpolate() {
        var s = session()
        #expect(s.receive(Site.fix(-0.4, east: -2)).isEmpty)
        #expect(s.receive(Site.scan(0), now: Site.time(0)).isEmpty)
        #expect(s.nextDeadline == Site.time(1.5))
        let verdicts = s.receive(Site.fix(0.6, east: 3))
        #expect(verdicts.count == 1)
        #expect(verdicts.first?.interpolated == true)
        #expect(verdicts.first?.kind == .confirmed)
        #expect(s.pendingCount == 0)
    }

    @Test("without a fresh fix it waits up to the timeout, then decides")
    func timeout() {
        var s = session()
        _ = s.receive(Site.fix(-30))
        #expect(s.receive(Site.scan(0), now: Site.time(0)).isEmpty)
        #expect(s.nextDeadline == Site.time(5))
        #expect(s.advance(to: Site.time(4.9)).isEmpty)
        let verdicts = s.advance(to: Site.time(5))
        #expect(verdicts.map(\.kind.reasonCode) == ["stale_fix"])
    }

    @Test("a fix arriving within the wait decides at once")
    func fixArrives() {
        var s = session()
        #expect(s.receive(Site.scan(0), now: Site.time(0)).isEmpty)
        let verdicts = s.receive(Site.fix(1.2, east: 1))
        #expect(verdicts.map(\.kind) == [.confirmed])
        #expect(verdicts.first?.fixAge == .milliseconds(1200))
    }

    @Test("a fix after the deadline never decides the scan")
    func lateFix() {
        var s = session()
        #expect(s.receive(Site.scan(0), now: Site.time(0)).isEmpty)
        let verdicts = s.receive(Site.fix(6, east: 1))
        #expect(verdicts.map(\.kind.reasonCode) == ["no_fix"])
    }

    @Test("scans that need no fix are decided on arrival")
    func immediate() throws {
        var s = session()
        let verdicts = s.receive(Site.scan(0, url: "https://x.example/t/none", uid: try TagUID(hex: "04000000000001")), now: Site.time(0))
        #expect(verdicts.map(\.kind) == [.notRegistered])
        #expect(s.pendingCount == 0)
    }

    @Test("finish decides every waiting scan exactly once")
    func finish() {
        var s = session()
        _ = s.receive(Site.scan(0), now: Site.time(0))
        _ = s.receive(Site.scan(0.5), now: Site.time(0.5))
        #expect(s.pendingCount == 2)
        #expect(s.finish().count == 2)
        #expect(s.finish().isEmpty)
        #expect(s.advance(to: Site.time(100)).isEmpty)
    }

    @Test("a repeated report for the same epoch replaces the earlier one")
    func sameEpoch() {
        var s = session()
        _ = s.receive(Site.fix(-0.5, east: 300))
        _ = s.receive(Site.fix(-0.5, east: 2))
        _ = s.receive(Site.scan(0), now: Site.time(0))
        #expect(s.advance(to: Site.time(2)).map(\.kind) == [.confirmed])
    }

    /// Property: verdicts depend on timestamps only. Whatever the interleaving of the scan stream
    /// and the fix stream (each in its own order; a scan up to 10 s before or 30 s after the fixes
    /// around it), with the clock never ahead of the fixes delivered (no GPS lag), the verdicts
    /// equal those of the in-order replay.
    @Test("arrival order never changes a verdict", arguments: 1...25)
    func orderInsensitive(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var fixes: [Fix] = []
        var t = 0.0
        while t < 120 {
            let gap = random.unit() < 0.08 ? 3 + random.unit() * 8 : 1  // dropouts
            t += gap
            let mode: Fix.Mode = random.unit() < 0.1 ? .noFix : .threeD
            fixes.append(
                Site.fix(t, east: random.unit() * 40 - 20, north: random.unit() * 40 - 20, accuracy: 1 + random.unit() * 8, mode: mode))
        }
        let scans = (0..<12).map { _ in Site.scan(random.unit() * 120) }.sorted { $0.time < $1.time }

        /// Delivers scan i after `positions[i]` fixes have been delivered.
        func run(_ positions: [Int], tickChance: Double) -> [String] {
            var s = session()
            var verdicts: [Verdict] = []
            var latest = Site.time(-1000)
            var next = 0
            for (fi, fix) in fixes.enumerated() {
                while next < scans.count, positions[next] <= fi {
                    verdicts += s.receive(scans[next], now: latest)
                    next += 1
                }
                latest = fix.time
                verdicts += s.receive(fix)
                if random.unit() < tickChance { verdicts += s.advance(to: latest) }
            }
            while next < scans.count {
                verdicts += s.receive(scans[next], now: latest)
                next += 1
            }
            verdicts += s.finish()
            return verdicts.sorted { $0.scan.time < $1.scan.time }.map { "\($0.kind)|\($0.distance ?? -1)|\($0.interpolated)" }
        }

        // Reference: each scan delivered right after the last fix at or before its time.
        let reference = scans.map { scan in fixes.firstIndex { $0.time > scan.time } ?? fixes.count }
        let expected = run(reference, tickChance: 1)
        #expect(expected.count == scans.count)
        for _ in 0..<8 {
            var positions = scans.map { scan -> Int in
                let earliest = fixes.firstIndex { $0.time > scan.time.advanced(by: .seconds(-10)) } ?? fixes.count
                let latestAllowed = fixes.firstIndex { $0.time > scan.time.advanced(by: .seconds(30)) } ?? fixes.count
                return Int.random(in: earliest...latestAllowed, using: &random)
            }
            // Each stream stays in its own order.
            for i in positions.indices.dropFirst() { positions[i] = max(positions[i], positions[i - 1]) }
            #expect(run(positions, tickChance: 0.5) == expected)
        }
    }

    /// The bearing is worked out when read, from the verdict's region and fix: it must be the
    /// geodesic's azimuth for short lines (tangent plane) and long ones (full solution) alike.
    @Test(
        "a verdict's bearing is the geodesic azimuth from the region's centre to the fix",
        arguments: [0.0, 45, 90, 135, 180, 225, 270, 315], [30.0, 400, 2_000])
    func bearingOnRead(degrees: Double, metres: Double) throws {
        let east = metres * sin(degrees * .pi / 180), north = metres * cos(degrees * .pi / 180)
        let fix = Site.fix(-0.2, east: east, north: north)
        let verdict = Site.decide(before: fix)
        let line = Geodesic.inverse(from: Site.origin, to: try #require(fix.coordinate))
        var error = abs(try #require(verdict.bearing) - line.initialAzimuth)
        if error > 180 { error = 360 - error }
        #expect(error < 1e-5)
        #expect(abs(try #require(verdict.distance) - line.distance) < 1e-4)
        #expect(verdict.kind == .outside)
    }

    @Test("no bearing without a measured distance, or at the region's centre")
    func noBearing() throws {
        let atCentre = Site.decide(before: Site.fix(-0.2))
        #expect(atCentre.distance == 0)
        #expect(atCentre.bearing == nil)
        let stale = Site.decide(before: Site.fix(-30, north: 50))
        #expect(stale.distance == nil)
        #expect(stale.bearing == nil)
        #expect(Site.decide(before: nil).bearing == nil)
    }

    /// Fix ages are compared as attoseconds: the limit itself is fresh, a nanosecond more is
    /// stale, on either side of the scan, and the age reported is exact.
    @Test(
        "the fix-age limit, to the nanosecond, before and after the scan",
        arguments: [
            (Int64(0), true), (2_000_000_000, true), (1_999_999_999, true), (2_000_000_001, false), (-2_000_000_000, true),
            (-2_000_000_001, false), (Int64.max / 2, false), (Int64.min / 2, false),
        ])
    func fixAgeLimit(offset: Int64, fresh: Bool) throws {
        let scan = Site.scan(0)
        let fix = Fix(
            time: Timestamp(nanosecondsSinceEpoch: scan.time.nanosecondsSinceEpoch &+ offset), mode: .threeD, coordinate: Site.origin,
            horizontalAccuracy: 4, status: .gps, satellitesUsed: 8)
        let verdict = Site.decide(before: offset <= 0 ? fix : nil, after: offset > 0 ? fix : nil, scan: scan)
        #expect(verdict.kind == (fresh ? .confirmed : .inconclusive(.staleFix(age: .nanoseconds(offset.magnitude), limit: .seconds(2)))))
        #expect(verdict.fixAge == .nanoseconds(offset.magnitude))
    }
}
