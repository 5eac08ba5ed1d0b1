import Testing

@testable import TagFixCore

/// A phone's tap through the verifier (issue 34): the same kinds and reasons as a reader's scan,
/// no UID compared, a position not given is `disallowed`, and the record says `source: "phone"`.
@Suite("Phone taps in the verifier")
struct PhoneVerdictTests {
    static let centre = Coordinate(validLatitude: 53.545, longitude: 9.966)
    static let enrolled = try! TagUID(hex: "04A1B2C3D4E5F6")
    static let now = Timestamp(iso8601: "2026-06-01T09:14:03Z")!

    static func registry(checks genuine: Bool = false) -> InMemoryRegistry {
        let region = try! CircularRegion(center: centre, radius: 25, identifier: "E1")
        var entry = RegistryEntry(id: "E1", uid: enrolled, region: region, name: "Pump house")
        if genuine { entry.originality = .genuine }
        return try! InMemoryRegistry([entry])
    }

    static func at(north metres: Double, accuracy: Double = 8) -> PhonePosition {
        .fix(Coordinate(validLatitude: centre.latitude + metres / 111_320, longitude: centre.longitude), accuracy: accuracy, time: now)
    }

    func verdict(
        _ url: String = "https://tags.example.org/t/E1", _ position: PhonePosition = at(north: 3), policy: VerificationPolicy = .init(),
        requireSUN: Bool = false, trust: (any LocationSignatureChecker)? = nil, genuine: Bool = false
    ) -> Verdict {
        Verifier(policy: policy, registry: Self.registry(checks: genuine), locationTrust: trust)
            .phoneVerdict(
                url: url, time: Self.now, position: position, requireSUN: requireSUN,
                audit: PhoneAudit(token: "anna", client: "203.0.113.7", userAgent: "Mozilla/5.0 (Linux; Android 14)\n"))
    }

    @Test("a registry tag enrolled with a UID: the phone reads none, so none is compared")
    func registryTag() {
        #expect(verdict().kind == .confirmed)
        #expect(verdict(Self.centreURL, Self.at(north: 200)).kind == .outside)
        #expect(verdict(Self.centreURL, Self.at(north: 3, accuracy: 800)).kind == .inconclusive(.poorAccuracy(accuracy: 800, limit: 50)))
        #expect(verdict(Self.centreURL, Self.at(north: 20, accuracy: 10)).kind == .inconclusive(.straddlesBoundary))
        let confirmed = verdict()
        #expect(confirmed.tagID == "E1")
        #expect(confirmed.regionName == "Pump house")
        #expect(confirmed.scan.source == .phone)
        #expect(confirmed.accuracy == 8)
    }
    static let centreURL = "https://tags.example.org/t/E1"

    @Test("a position not given is disallowed, never outside; a timeout is no fix")
    func noPosition() {
        #expect(verdict(Self.centreURL, .denied).kind == .disallowed(.positionDenied))
        #expect(verdict(Self.centreURL, .timedOut).kind == .inconclusive(.noFix))
        #expect(verdict(Self.centreURL, .denied).distance == nil)
    }

    @Test("a cached position, older than the policy allows, is stale")
    func stale() {
        let old = PhonePosition.fix(Self.centre, accuracy: 5, time: Self.now.advanced(by: .seconds(-60)))
        #expect(verdict(Self.centreURL, old).kind == .inconclusive(.staleFix(age: .seconds(60), limit: .seconds(2))))
    }

    @Test(
        "a phone whose clock is wrong is told to set it, not to wait for a fresh fix (a reader's stale fix still is)",
        arguments: [-3600.0, -60, 45, 86_400])
    func staleMessage(offset: Double) {
        let stamped = PhonePosition.fix(Self.centre, accuracy: 5, time: Self.now.advanced(by: .seconds(offset)))
        let phone = verdict(Self.centreURL, stamped)
        guard case .inconclusive(.staleFix(let age, _)) = phone.kind else {
            Issue.record("\(phone.kind)")
            return
        }
        #expect(age == .seconds(abs(offset)))
        #expect(
            phone.message.contains("set the phone's date and time") && !phone.message.contains("wait for a fresh fix"), "\(phone.message)")
        #expect(phone.message.contains("\(Coordinate.format(abs(offset), 1)) s"), "\(phone.message)")
        var reader = phone
        reader.scan.source = .nfc
        #expect(reader.message.contains("wait for a fresh fix"), "\(reader.message)")
    }

    @Test("unknown tags, URL locations, signatures, policy: as for a reader's scan")
    func others() {
        #expect(verdict("https://tags.example.org/t/X9").kind == .notRegistered)
        let url = "https://tags.example.org/t/V1?lat=53.545&lon=9.966&r=30"
        #expect(verdict(url).kind == .confirmed)
        #expect(verdict(url).regionSource == .url)
        #expect(verdict(url, trust: RefuseAll()).kind == .untrusted(.locationUnsigned(tag: "V1")))
        #expect(verdict(url + "&sig=AAAA", trust: RefuseAll()).kind == .untrusted(.locationSignatureInvalid(tag: "V1")))
        #expect(verdict("https://tags.example.org/t/V1?lat=5x&lon=9").kind.reasonCode == "invalid_tag_location")
        var off = VerificationPolicy()
        off.locationConfirmation = false
        #expect(verdict(policy: off).kind == .disallowed(.confirmationDisabled))
        var one = VerificationPolicy()
        one.disallowedTags = ["E1"]
        #expect(verdict(policy: one).kind == .disallowed(.tagDisallowed("E1")))
        var genuine = VerificationPolicy()
        genuine.requireGenuine = true
        #expect(verdict(policy: genuine).kind == .untrusted(.signatureMissing(status: nil, tag: "E1")))
        #expect(verdict(genuine: true).kind == .untrusted(.signatureMissing(status: nil, tag: "E1")), "a phone proves no chip")
    }

    @Test("--require-sun: a tag without a SUN proof is untrusted, with what to do")
    func requireSUN() {
        #expect(verdict(requireSUN: true).kind == .untrusted(.sunRequired(tag: "E1")))
        #expect(
            verdict("https://tags.example.org/t/V1?lat=53.545&lon=9.966&r=30", requireSUN: true).kind == .untrusted(.sunRequired(tag: "V1"))
        )
        #expect(verdict("https://tags.example.org/t/X9", requireSUN: true).kind == .notRegistered)
        #expect(Verdict.Kind.untrusted(.sunRequired(tag: "E1")).reasonCode == "sun_required")
    }

    @Test("the UID lookup is never used: a tag enrolled under the phone's placeholder UID is not found by it")
    func noUIDLookup() throws {
        let region = try CircularRegion(center: Self.centre, radius: 25, identifier: "Z")
        let registry = try InMemoryRegistry([RegistryEntry(id: "Z", uid: .phoneUnknown, region: region, name: nil)])
        let kind = Verifier(registry: registry).phoneVerdict(url: "https://t.example/t/Q", time: Self.now, position: Self.at(north: 0)).kind
        #expect(kind == .notRegistered)
    }

    @Test("the record: source phone, the audit, no UID, the accuracy; old readers and reader records unchanged")
    func record() throws {
        let record = SessionRecord(verdict())
        let text = record.encoded()
        #expect(record.uid == nil)
        #expect(record.source == "phone")
        #expect(record.phone == SessionRecord.Phone(token: "anna", client: "203.0.113.7", userAgent: "Mozilla/5.0 (Linux; Android 14)?"))
        #expect(
            text.hasSuffix(
                #","source":"phone","phone":{"token":"anna","client":"203.0.113.7","user_agent":"Mozilla/5.0 (Linux; Android 14)?"}}"#))
        #expect(text.contains(#""accuracy_m":8"#))
        let read = try SessionRecord(JSONValue.parse(text), line: 1)
        #expect(read.encoded() == text)
        #expect(read.source == "phone" && read.phone == record.phone && read.uid == nil)
        // A reader's record has neither member.
        let reader = SessionRecord(VerdictSamples.all[0].verdict).encoded()
        #expect(!reader.contains(#""source":"phone""#) && !reader.contains(#""phone":{"#))
    }
}

/// Trusted site keys that verify nothing.
private struct RefuseAll: LocationSignatureChecker {
    func verifies(signature: [UInt8], message: [UInt8]) -> Bool { false }

    /// The audit keeps a browser's user agent as it came, up to 256 characters, with control
    /// characters (a newline that would split a log line, DEL) made `?`: the same whether it is
    /// printable ASCII (kept without a walk by Characters) or not.
    @Test(
        "a phone's user agent in the audit: printable kept, control characters ?, at most 256",
        arguments: [
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (Android 14; Mobile; rv:125.0) Gecko/125.0 Firefox/125.0", "", "a\nb", "tab\there", "del\u{7F}",
            "Überphone/1.0 (Linux; Android 14) ÄÖÜ", String(repeating: "x", count: 300), String(repeating: "é", count: 200),
            String(repeating: "é", count: 300), String(repeating: "x", count: 255) + "\n",
        ])
    func userAgent(_ given: String) {
        let expected = String(given.unicodeScalars.prefix(256).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
        let kept = PhoneAudit(token: "anna", client: "203.0.113.7", userAgent: given).userAgent
        #expect(kept == expected)
        #expect(kept.unicodeScalars.count <= 256 && !kept.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
    }
}
