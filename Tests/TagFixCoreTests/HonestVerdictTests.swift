import Foundation
import TagFixCore
import Testing

/// Verdicts that say what is true (issue 18, "Messages that mislead").
@Suite("Verdicts that say what is true")
struct HonestVerdictTests {
    static let unknownUID = try! TagUID(hex: "04C0FFEE123481")

    /// A scan whose NDEF could not be read, as a reader reports it.
    static func unreadable(uid: TagUID) -> TagScan {
        var scan = Site.scan(0, url: nil, uid: uid)
        scan.ndefProblem = "bad capability container: CCLEN 17 is below 15 or beyond the 15 bytes read"
        scan.ndefReadFailed = true
        return scan
    }

    @Test("a tag whose NDEF could not be read is inconclusive (read_failed) and says what to do, never not registered")
    func readFailed() throws {
        var session = VerificationSession(verifier: Verifier(registry: Site.registry()))
        _ = session.receive(Site.fix(-0.5, east: 7))
        let verdict = try #require(session.receive(Self.unreadable(uid: Self.unknownUID), now: Site.time(0)).first)
        #expect(verdict.fix?.time == Site.time(-0.5), "where the unreadable tag was found")
        #expect(verdict.kind.name == "inconclusive")
        #expect(verdict.kind.reasonCode == "read_failed")
        guard case .inconclusive(let reason) = verdict.kind else { return }
        #expect(reason.description.contains("CCLEN 17"))
        #expect(reason.description.contains("tap again"))

        // A tag without NDEF at all (a blank tag) is still not registered.
        var blank = Site.scan(0, url: nil, uid: Self.unknownUID)
        blank.ndefProblem = "no NDEF message TLV"
        #expect(session.receive(blank, now: Site.time(0)).first?.kind == .notRegistered)
    }

    @Test("an unreadable tag whose UID is registered is still verified by its UID")
    func readFailedButRegisteredUID() {
        var session = VerificationSession(verifier: Verifier(registry: Site.registry()))
        _ = session.receive(Site.fix(-0.2, east: 2))
        let verdicts = session.receive(Self.unreadable(uid: Site.uid), now: Site.time(0)) + session.receive(Site.fix(0.8, east: 2))
        #expect(verdicts.map(\.kind) == [.confirmed])
        #expect(verdicts.first?.tagID == "A1")
    }

    @Test("while gpsd cannot be reached, a verdict without a fix says so instead of 'move to open sky'")
    func gpsUnavailable() throws {
        var session = VerificationSession(verifier: Verifier(registry: Site.registry()))
        let why = "gpsd at localhost:2947 does not answer (cannot connect: nothing listens there)"
        session.gpsUnavailable(why)
        #expect(session.receive(Site.scan(0), now: Site.time(0)).isEmpty)
        let verdict = try #require(session.advance(to: Site.time(10)).first)
        #expect(verdict.kind.reasonCode == "gps_unavailable")
        guard case .inconclusive(let reason) = verdict.kind else { return }
        #expect(reason.description.contains(why))
        #expect(!reason.description.contains("open sky"))

        // Back: a scan without a fix is the sky's fault again.
        session.gpsUnavailable(nil)
        _ = session.receive(Site.scan(20), now: Site.time(20))
        #expect(session.advance(to: Site.time(30)).first?.kind == .inconclusive(.noFix))

        // A fix also means gpsd answers again.
        session.gpsUnavailable(why)
        _ = session.receive(Site.fix(39.5, mode: .noFix))
        _ = session.receive(Site.scan(40), now: Site.time(40))
        #expect(session.advance(to: Site.time(50)).first?.kind == .inconclusive(.noFix))
    }

    @Test("a not-registered verdict keeps the fix where the unknown tag was found")
    func notRegisteredKeepsItsFix() throws {
        var session = VerificationSession(verifier: Verifier(registry: Site.registry()))
        _ = session.receive(Site.fix(-0.4, east: 30, north: 40))
        let verdict = try #require(
            session.receive(Site.scan(0, url: "https://other.example/x", uid: Self.unknownUID), now: Site.time(0)).first)
        #expect(verdict.kind == .notRegistered)
        let fix = try #require(verdict.fix)
        #expect(fix.time == Site.time(-0.4))
        #expect(verdict.fixAge == .milliseconds(400))

        // A fix too old to say where the tag was is left out.
        _ = session.receive(Site.fix(10))
        let late = try #require(
            session.receive(Site.scan(20, url: "https://other.example/x", uid: Self.unknownUID), now: Site.time(20)).first)
        #expect(late.kind == .notRegistered)
        #expect(late.fix == nil)
    }

    @Test("enroll's refusal of a poor average names the limit and the option that changes it, and no advice that cannot help")
    func refusalNamesTheLimit() throws {
        let spot = Coordinate(validLatitude: 53.545, longitude: 9.966)
        let fixes = (0..<30).map { second in
            Fix(
                time: Site.time(Double(second)), mode: .threeD, coordinate: spot, horizontalAccuracy: 17.1, status: .gps,
                satellitesUsed: 9)
        }
        guard case .failure(let refusal) = PositionAverager().average(fixes), case .tooInaccurate(let result, _) = refusal else {
            Issue.record("±17.1 m fixes for 30 s must be refused at the 10 m limit")
            return
        }
        let text = refusal.description
        #expect(text.contains("limit of ±10 m (--max-accuracy)"), "\(text)")
        // The value to pass is one that accepts this average.
        let suggested = Int(result.accuracy.rounded(.up))
        #expect(Double(suggested) >= result.accuracy)
        #expect(text.contains("accept it with --max-accuracy \(suggested)"), "\(text)")
        #expect(!text.contains("average longer"), "\(text)")

        let none = PositionAverager().average([])
        #expect((try? none.get()) == nil)
        if case .failure(let empty) = none {
            #expect(empty.description.contains("no fixes at all"), "\(empty)")
            #expect(!empty.description.contains("open sky"))
        }
    }
}
