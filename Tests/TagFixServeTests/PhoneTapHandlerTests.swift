import TagFixCore
import TagFixServe
import TagFixTesting
import Testing

@Suite("The phone tap's decision: request, clock and policy in, verdict and answer out")
struct PhoneTapHandlerTests {
    static let centre = try! Coordinate(latitude: 53.545, longitude: 9.966)

    static func handler(_ policy: PhoneTapPolicy = PhoneTapPolicy(), clock: ManualClock = ManualClock()) throws -> PhoneTapHandler<
        ManualClock
    > {
        let region = try CircularRegion(center: centre, radius: 25, identifier: "E1")
        let registry = try InMemoryRegistry([RegistryEntry(id: "E1", uid: nil, region: region, name: "Gate")])
        return PhoneTapHandler(verifier: Verifier(registry: registry), clock: clock, policy: policy)
    }

    static func request(north: Double = 2, accuracy: Double = 6, stamp: Timestamp? = nil) -> PhoneTapRequest {
        PhoneTapRequest(
            url: "https://tags.example.org/t/E1",
            position: .fix(try! Coordinate(latitude: centre.latitude + north / 111_320, longitude: centre.longitude), accuracy: accuracy),
            timestamp: stamp)
    }

    func handle(_ request: PhoneTapRequest, _ handler: PhoneTapHandler<ManualClock>) -> PhoneTapAnswer {
        handler.handle(request, token: "anna", client: "192.0.2.4", userAgent: "Mozilla/5.0 (iPhone)")
    }

    @Test("at the tag's spot: confirmed, in verify's words, the position dropped from the verdict")
    func confirmed() throws {
        let clock = ManualClock()
        let answer = handle(Self.request(), try Self.handler(clock: clock))
        #expect(answer.verdict.kind == .confirmed)
        #expect(answer.verdict.scan.time == clock.now)
        #expect(answer.verdict.fix == nil, "the coordinates are not kept")
        #expect(answer.verdict.distance != nil && answer.verdict.accuracy == 6)
        let record = SessionRecord(answer.verdict)
        #expect(record.loggedFix == nil && record.bearing == nil && record.source == "phone")
        #expect(record.phone == SessionRecord.Phone(token: "anna", client: "192.0.2.4", userAgent: "Mozilla/5.0 (iPhone)"))
        #expect(
            answer.json.hasPrefix(#"{"verdict":"confirmed","reason":null,"symbol":"✓","words":"confirmed","tag":"E1 (Gate)","message":"#))
        #expect(!answer.json.contains("53.5"))
        // The server answers with its record's message (made once): the same bytes.
        #expect(answer.json(message: record.message) == answer.json)
    }

    @Test("--keep-phone-positions keeps them")
    func keep() throws {
        let answer = handle(Self.request(north: 200), try Self.handler(PhoneTapPolicy(keepPositions: true)))
        #expect(answer.verdict.kind == .outside)
        #expect(answer.verdict.fix?.coordinate != nil)
        #expect(SessionRecord(answer.verdict).loggedFix?.coordinate != nil)
        #expect(answer.verdict.message.contains(" N of where it should be"))
    }

    @Test("200 m away is outside without a direction; ±800 m is poor accuracy; denied is disallowed")
    func kinds() throws {
        let handler = try Self.handler()
        let outside = handle(Self.request(north: 200), handler)
        #expect(outside.verdict.kind == .outside)
        #expect(!outside.verdict.message.contains(" N of"), "a bearing would say where the phone was")
        #expect(
            outside.verdict.message.hasPrefix("the tag is 200") && outside.verdict.message.contains(" m from where it should be"),
            "\(outside.verdict.message)")
        #expect(handle(Self.request(accuracy: 800), handler).verdict.kind.reasonCode == "poor_accuracy")
        let denied = PhoneTapRequest(url: "https://tags.example.org/t/E1", position: .unavailable(.denied))
        #expect(handle(denied, handler).verdict.kind == .disallowed(.positionDenied))
        let none = PhoneTapRequest(url: "https://tags.example.org/t/E1", position: .unavailable(.unavailable))
        #expect(handle(none, handler).verdict.kind == .disallowed(.positionDenied))
        let late = PhoneTapRequest(url: "https://tags.example.org/t/E1", position: .unavailable(.timeout))
        #expect(handle(late, handler).verdict.kind == .inconclusive(.noFix))
        #expect(handle(late, handler).json.contains(#""words":"inconclusive""#))
    }

    @Test("the browser's stamp: within the skew it counts as now; a cached position is stale")
    func stamps() throws {
        let clock = ManualClock()
        let handler = try Self.handler(clock: clock)
        #expect(handle(Self.request(stamp: clock.now.advanced(by: .seconds(-8))), handler).verdict.kind == .confirmed)
        #expect(handle(Self.request(stamp: clock.now.advanced(by: .seconds(9))), handler).verdict.kind == .confirmed)
        let cached = handle(Self.request(stamp: clock.now.advanced(by: .seconds(-90))), handler)
        #expect(cached.verdict.kind == .inconclusive(.staleFix(age: .seconds(90), limit: .seconds(2))))
        clock.advance(by: .seconds(30))
        #expect(handle(Self.request(), handler).verdict.scan.time == clock.now, "the tap is stamped on the injected clock")
    }

    @Test("--require-sun: a plain tag's tap is untrusted(sun_required), logged, with what to do")
    func requireSUN() throws {
        let answer = handle(Self.request(), try Self.handler(PhoneTapPolicy(requireSUN: true)))
        #expect(answer.verdict.kind == .untrusted(.sunRequired(tag: "E1")))
        #expect(answer.json.contains(#""reason":"sun_required""#))
    }
}
