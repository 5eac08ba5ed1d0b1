import TagFixCore
import TagFixTesting
import Testing

@Suite("Untrusted verdicts: originality signatures under --require-genuine")
struct TrustVerdictTests {
    func kind(_ scan: TagScan, _ configure: (inout VerificationPolicy) -> Void = { _ in }) -> String {
        var policy = VerificationPolicy()
        configure(&policy)
        switch Verifier(policy: policy, registry: Site.registry()).expectation(for: scan) {
        case .decided(let verdict): return verdict.kind.name + (verdict.kind.reasonCode.map { ":" + $0 } ?? "")
        case .region(_, let source, let id, _, _): return "\(source.rawValue):\(id ?? "-")"
        }
    }

    func scan(_ status: Originality.Status?, url: String? = "https://tags.example.org/t/A1") -> TagScan {
        var scan = Site.scan(0, url: url)
        scan.originality = status.map { Originality(status: $0, key: "NXP NTAG21x") }
        return scan
    }

    @Test(
        "require-genuine: genuine passes; invalid, absent, unchecked and unsigned chips are untrusted",
        arguments: [
            (Originality.Status?.some(.genuine), "registry:A1"), (.invalid, "untrusted:signature_invalid"),
            (.absent, "untrusted:signature_missing"), (.unsupported, "untrusted:signature_missing"), (nil, "untrusted:signature_missing"),
        ])
    func requireGenuine(status: Originality.Status?, expected: String) {
        #expect(kind(scan(status)) { $0.requireGenuine = true } == expected)
        // Also for a tag known only by the location in its URL.
        let urlTag = "https://x.example/t/P7?lat=53.545&lon=9.966&r=20"
        var other = scan(status, url: urlTag)
        other.uid = try! TagUID(hex: "04FFFFFFFFFF01")
        #expect(kind(other) { $0.requireGenuine = true } == (status == .genuine ? "url:P7" : expected))
    }

    @Test("allow-unsigned-tags lets chips without a signature pass, never an invalid or missing one")
    func allowUnsigned() {
        let policy: (inout VerificationPolicy) -> Void = {
            $0.requireGenuine = true
            $0.allowUnsignedTags = true
        }
        #expect(kind(scan(.unsupported), policy) == "registry:A1")
        #expect(kind(scan(.invalid), policy) == "untrusted:signature_invalid")
        #expect(kind(scan(.absent), policy) == "untrusted:signature_missing")
    }

    @Test("without the policy the signature changes nothing (and a disallowed tag stays disallowed)")
    func defaultPolicy() {
        for status in Originality.Status.allCases {
            #expect(kind(scan(status)) == "registry:A1")
        }
        #expect(kind(scan(.invalid)) { $0.locationConfirmation = false } == "disallowed:confirmation_disabled")
    }

    /// Swift's runtime describes enum values by their layout: a sixth kind whose payload left the
    /// no-payload kinds in the wrong spare bits crashed every parameterised test that names a kind.
    @Test("every kind, with and without a payload, describes itself")
    func kindsDescribe() throws {
        let kinds: [Verdict.Kind] = [
            .confirmed, .outside, .notRegistered, .inconclusive(.noFix), .disallowed(.notPhysicalTag),
            .untrusted(.uidMismatch(read: try TagUID(hex: "04A1B2C3D4E5F6"), enrolled: try TagUID(hex: "04B8313A307380"), tagID: "T04")),
            .untrusted(.signatureMissing(status: nil, tag: "T04")),
        ]
        for kind in kinds {
            let text = String(describing: kind)
            #expect(text.hasPrefix(kind.name == "notRegistered" ? "notRegistered" : kind.name))
        }
    }

    @Test("each reason says what to do and names the tag, never the signature")
    func messages() throws {
        let read = try TagUID(hex: "04A1B2C3D4E5F6")
        let enrolled = try TagUID(hex: "04B8313A307380")
        let mismatch = UntrustedReason.uidMismatch(read: read, enrolled: enrolled, tagID: "T04")
        #expect(
            mismatch.description
                == "this tag's UID 04A1B2C3D4E5F6 is not the enrolled 04B8313A307380: a copy or a replaced tag; check the tag at T04")
        #expect(mismatch.code == "uid_mismatch")
        let invalid = UntrustedReason.signatureInvalid(key: "NXP NTAG21x", tag: "T04")
        #expect(invalid.code == "signature_invalid")
        #expect(invalid.description.contains("check the tag at T04"))
        #expect(UntrustedReason.signatureMissing(status: .unsupported, tag: "T04").description.contains("--allow-unsigned-tags"))
        #expect(Verdict.Kind.untrusted(invalid).name == "untrusted")
        #expect(Verdict.Kind.untrusted(invalid).reasonCode == "signature_invalid")
    }
}

@Suite("UID binding: a registry tag read with another UID is untrusted(uid_mismatch)")
struct UIDBindingTests {
    static let copy = try! TagUID(hex: "04FFFFFFFFFF01")

    func verdict(_ scan: TagScan, registry: any TagRegistry = Site.registry(), shortcut: Bool = true) -> Verdict? {
        if case .decided(let verdict) = Verifier(registry: registry).expectation(for: scan) { return verdict }
        return nil
    }

    @Test("the registry's URL read from a tag with another UID: untrusted, naming both UIDs and the tag")
    func copiedURL() throws {
        let found = try #require(verdict(Site.scan(0, uid: Self.copy)))
        #expect(found.kind == .untrusted(.uidMismatch(read: Self.copy, enrolled: Site.uid, tagID: "A1")))
        #expect(found.kind.reasonCode == "uid_mismatch")
        #expect(found.tagID == "A1")
        // The full path (a URL with a query takes it) says the same.
        let slow = try #require(verdict(Site.scan(0, url: "https://tags.example.org/t/A1?src=nfc", uid: Self.copy)))
        #expect(slow.kind.reasonCode == "uid_mismatch")
        // The enrolled UID is still the registry tag.
        #expect(verdict(Site.scan(0)) == nil)
    }

    @Test("an entry without a UID binds none: any tag with its URL is verified as before")
    func unbound() throws {
        let region = try CircularRegion(center: Site.origin, radius: 20, identifier: "A1")
        let registry = try InMemoryRegistry([RegistryEntry(id: "A1", uid: nil, region: region, name: "Gate")])
        #expect(verdict(Site.scan(0, uid: Self.copy), registry: registry) == nil)
    }
}
