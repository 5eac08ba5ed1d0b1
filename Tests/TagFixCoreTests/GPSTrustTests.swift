import TagFixCore
import TagFixTesting
import Testing

@Suite("A GPS that lies: jumps and simulated fixes are untrusted")
struct GPSTrustTests {
    /// Feeds `fixes` to a session, then a registry scan at `scanAt`; returns its verdict.
    func verdict(_ fixes: [Fix], scanAt: Double, _ configure: (inout VerificationPolicy) -> Void = { _ in }) -> Verdict? {
        var policy = VerificationPolicy()
        configure(&policy)
        var session = VerificationSession(verifier: Verifier(policy: policy, registry: Site.registry()))
        var verdicts: [Verdict] = []
        for fix in fixes where fix.time <= Site.time(scanAt) { verdicts += session.receive(fix) }
        verdicts += session.receive(Site.scan(scanAt), now: Site.time(scanAt))
        for fix in fixes where fix.time > Site.time(scanAt) { verdicts += session.receive(fix) }
        verdicts += session.finish()
        return verdicts.first
    }

    func name(_ verdict: Verdict?) -> String {
        guard let verdict else { return "none" }
        return verdict.kind.name + (verdict.kind.reasonCode.map { ":" + $0 } ?? "")
    }

    /// Fixes every 0.2 s from `from` to `to` seconds, at `east` metres (a function of time).
    func walk(_ from: Double, _ to: Double, accuracy: Double = 3, east: (Double) -> Double) -> [Fix] {
        stride(from: from, through: to, by: 0.2).map { Site.fix($0, east: east($0), accuracy: accuracy) }
    }

    @Test(
        "a walk, a run and a drive are confirmed; a hop beyond speed × time + both accuracies is gps_jump",
        arguments: [
            // (metres per second, expected)
            (1.4, "confirmed"), (10, "confirmed"), (60, "confirmed"),
        ])
    func honestMotion(speed: Double, expected: String) {
        // Moving fast towards the tag and standing still at it for the tap.
        let fixes = walk(-40, -0.2) { min(0, $0) * speed } + walk(0, 3) { _ in 0 }
        #expect(name(verdict(fixes, scanAt: 1)) == expected)
    }

    @Test("a teleport into the circle: the tap after it is gps_jump, for gpsJumpWindow; the taps before and long after are confirmed")
    func teleport() throws {
        // Standing 2 km east, then at the tag from t = 10 s on.
        let fixes = walk(0, 9.8) { _ in 2000 } + walk(10, 60) { _ in 0 }
        let found = try #require(verdict(fixes, scanAt: 12))
        #expect(name(found) == "untrusted:gps_jump")
        guard case .untrusted(.gpsJump(let jump)) = found.kind else { return }
        #expect(abs(jump.distance - 2000) < 10)  // Site.at's metres are approximate
        #expect(abs(jump.seconds - 0.2) < 1e-9)
        #expect(jump.time == Site.time(10))
        #expect(found.kind.reasonCode == "gps_jump")
        #expect("\(UntrustedReason.gpsJump(jump))".contains("jumped \(Coordinate.format(jump.distance, 1)) m in 0.2 s"))
        #expect("\(UntrustedReason.gpsJump(jump))".contains("limit 70 m/s"))
        #expect("\(UntrustedReason.gpsJump(jump))".contains("tap again once its position has been steady for 30 s"))
        #expect(name(verdict(fixes, scanAt: 39.9)) == "untrusted:gps_jump")
        #expect(name(verdict(fixes, scanAt: 40.5)) == "confirmed", "30 s after the jump")
        #expect(name(verdict(fixes, scanAt: 12) { $0.gpsJumpWindow = .seconds(1) }) == "confirmed")
        #expect(name(verdict(fixes, scanAt: 12) { $0.maximumSpeed = nil }) == "confirmed", "the check turned off")
    }

    @Test("a jump right after the tap, in the fix that would be interpolated, is gps_jump too")
    func jumpAfterScan() {
        let fixes = walk(0, 5) { _ in 0 } + walk(5.2, 8) { _ in 900 }
        #expect(name(verdict(fixes, scanAt: 5.1)) == "untrusted:gps_jump")
    }

    @Test(
        "the rule: distance > limit × seconds + accuracy₁ + accuracy₂",
        arguments: [
            // (metres apart, seconds, accuracy each, limit, jump?)
            (20.0, 0.2, 3.0, 70.0, true),  // 20 > 14 + 6
            (19.9, 0.2, 3.0, 70.0, false),  // 19.9 < 20: the accuracies explain it
            (70, 0.2, 30, 70, false),  // ±30 m fixes: 70 < 14 + 60
            (200, 1, 10, 70, true),
            (200, 1, 10, 200, false),  // --max-speed 200
            (5000, 100, 3, 70, false),  // 5 km in 100 s (a gap in the fixes) is 50 m/s
        ])
    func rule(distance: Double, seconds: Double, accuracy: Double, limit: Double, jump: Bool) {
        let a = Site.fix(0, accuracy: accuracy)
        let b = Site.fix(seconds, east: distance, accuracy: accuracy)
        #expect((GPSJump.between(a, b, limit: limit, window: .seconds(30)) != nil) == jump)
        #expect((GPSJump.between(b, a, limit: limit, window: .seconds(30)) != nil) == jump, "in either order")
    }

    @Test("fixes without a position, between two that agree, are no jump; the gap counts")
    func noFixGap() {
        let lost = (0..<50).map { Site.fix(1 + Double($0) * 0.2, mode: .noFix) }
        let fixes = walk(0, 0.8) { _ in 0 } + lost + walk(11, 15) { _ in 600 }
        // 600 m in 10.2 s is 59 m/s: within the limit.
        #expect(GPSJump.between(Site.fix(0.8), Site.fix(11, east: 600), limit: 70, window: .seconds(30)) == nil)
        #expect(name(verdict(fixes, scanAt: 13)) != "untrusted:gps_jump")
    }

    @Test("a simulated fix (gpsd status 8) is untrusted(gps_simulated); --allow-simulated lets it decide")
    func simulated() {
        let fixes = (0..<20).map { Site.fix(Double($0) * 0.2, status: .simulated) }
        let found = verdict(fixes, scanAt: 2)
        #expect(name(found) == "untrusted:gps_simulated")
        #expect(found.map { "\($0.kind)" } != nil)
        #expect("\(UntrustedReason.gpsSimulated)".contains("use a real receiver"))
        #expect(name(verdict(fixes, scanAt: 2) { $0.allowSimulatedFixes = true }) == "confirmed")
    }
}
