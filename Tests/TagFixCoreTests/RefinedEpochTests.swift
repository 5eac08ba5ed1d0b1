import TagFixCore
import TagFixTesting
import Testing

/// gpsd's refinement of an epoch (`FixEvent.refined`) in the session: it replaces the fix of its
/// time for later decisions, and is never a new epoch.
@Suite("A refined epoch in the verification session")
struct RefinedEpochTests {
    static func session() -> VerificationSession { VerificationSession(verifier: Verifier(registry: Site.registry())) }

    @Test("a scan between two epochs is decided with the refined first one: its accuracy, not the first report's none")
    func laterDecisionUsesTheRefinement() throws {
        for refine in [false, true] {
            var session = Self.session()
            #expect(session.receive(Site.fix(0, east: 2, accuracy: nil, mode: .twoD)).isEmpty)
            #expect(session.receive(Site.scan(0.5), now: Site.time(0.5)).isEmpty, "waits for the next epoch")
            if refine {
                // gpsd's 3D report of the same epoch, with its error estimate: decides nothing itself.
                #expect(session.refine(Site.fix(0, east: 2, accuracy: 4)).isEmpty)
                #expect(session.pendingCount == 1)
            }
            let verdicts = session.receive(Site.fix(1, east: 2, accuracy: 4))
            let verdict = try #require(verdicts.first)
            #expect(verdicts.count == 1)
            #expect(verdict.kind.name == (refine ? "confirmed" : "inconclusive"), "\(verdict.kind)")
            #expect(verdict.fix?.mode == (refine ? .threeD : .twoD))
        }
    }

    @Test("a refinement is the same epoch: the latest fix is the refined one, and a scan after it waits for the next epoch")
    func notANewEpoch() throws {
        var session = Self.session()
        _ = session.receive(Site.fix(0, mode: .twoD))
        _ = session.refine(Site.fix(0))
        #expect(session.latestFix?.mode == .threeD)
        #expect(session.receive(Site.scan(0.5), now: Site.time(0.5)).isEmpty)
        let verdicts = session.advance(to: Site.time(0.5).advanced(by: VerificationPolicy().interpolationWait))
        #expect(verdicts.count == 1)
        #expect(verdicts.first?.fix?.time == Site.time(0), "the refined epoch, once")
    }

    @Test("a refinement that gives a no-fix epoch its position is taken as a fix: a scan waiting at that time is decided")
    func noFixGainsPosition() throws {
        var session = Self.session()
        #expect(session.receive(Site.scan(0), now: Site.time(0)).isEmpty)
        let early = session.receive(Site.fix(-0.1, mode: .noFix))
        #expect(early.isEmpty)
        let verdicts = session.refine(Site.fix(-0.1, east: 1))
        // Not decided by it (it is before the scan), but it counts as the scan's fresh fix before.
        #expect(verdicts.isEmpty)
        #expect(session.latestFix?.hasPosition == true)
    }
}
