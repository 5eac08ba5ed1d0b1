import Synchronization
import Testing

@testable import TagFixCore

/// The verifier's shortcut for registry tags' URLs (the id looked up from the URL's bytes) must
/// give exactly the answer of the full path (URL decoded, then the registry by `String`), for
/// every URL, policy, registry and UID, and must actually be taken where it applies.
@Suite("Expected region: the URL-bytes shortcut agrees with the full path")
struct ExpectationShortcutTests {
    /// Counts the lookups by bytes, so a test can tell that the shortcut ran.
    final class Counted: TagRegistry {
        let inner: any TagRegistry
        let byBytes = Mutex(0)
        init(_ inner: any TagRegistry) { self.inner = inner }
        func entry(forID id: String) throws(RegistryError) -> RegistryEntry? { try inner.entry(forID: id) }
        func entry(forUID uid: TagUID) throws(RegistryError) -> RegistryEntry? { try inner.entry(forUID: uid) }
        func placement(forTagID id: String?, uid: TagUID) throws(RegistryError) -> Placement? {
            try inner.placement(forTagID: id, uid: uid)
        }
        func placement(forTagIDUTF8 id: Span<UInt8>, uid: TagUID) throws(RegistryError) -> Placement? {
            byBytes.withLock { $0 += 1 }
            return try inner.placement(forTagIDUTF8: id, uid: uid)
        }
    }

    struct Failing: TagRegistry {
        func entry(forID id: String) throws(RegistryError) -> RegistryEntry? { throw RegistryError("disk on fire") }
        func entry(forUID uid: TagUID) throws(RegistryError) -> RegistryEntry? { throw RegistryError("disk on fire") }
    }

    static let registered = try! TagUID(hex: "04A1B2C3D4E5F6")
    static let unregistered = try! TagUID(hex: "04FFFFFFFFFF01")

    /// Ids that are their region's identifier and one that is not, a name and none, a UID and
    /// none, a non-ASCII id and its canonically equivalent spelling as a second id.
    static func registry() -> InMemoryRegistry {
        func entry(_ id: String, identifier: String? = nil, uid: TagUID? = nil, name: String? = nil, east: Double) -> RegistryEntry {
            let center = Coordinate(validLatitude: 53.545, longitude: 9.966 + east / 66_000)
            let region = try! CircularRegion(center: center, radius: 20, identifier: identifier ?? id)
            return RegistryEntry(id: id, uid: uid, region: region, name: name)
        }
        return try! InMemoryRegistry([
            entry("A1", uid: registered, name: "Gate", east: 0), entry("B2", identifier: "region of B2", east: 100),
            entry("Caf\u{E9}", east: 200), entry("Cafe\u{301}", name: "decomposed", east: 300),
            entry("site-4/building-7/floor-3/tag-12", east: 400), entry("tag-12", east: 500),
        ])
    }

    static let urls: [String?] = [
        "https://x.example/t/A1", "https://x.example/t/A1/", "HTTP://X.Example:8080/t/A1", "https://x.example/t/B2",
        "https://x.example/t/region%20of%20B2", "https://x.example/t/tag-12", "https://x.example/site-4/building-7/floor-3/tag-12",
        "https://x.example/t/unknown", "https://x.example/t/a1", "https://x.example/t/A1?lat=1&lon=1&r=5",
        "https://x.example/t/P7?lat=1&lon=1&r=5", "https://x.example/t/P7?lat=100&lon=1&r=5", "https://x.example/t/A1?id=B2",
        "https://x.example/t/A1?", "https://x.example/t/A1#x", "https://x.example/t/%41%31", " https://x.example/t/A1",
        "https://x.example/t/Caf\u{E9}", "https://x.example/t/Cafe\u{301}", "https://x.example/", "https://x.example",
        "https://x.example//", "geo:1,1;u=5", "urn:x:A1", "", nil,
    ]

    static func policies() -> [VerificationPolicy] {
        var off = VerificationPolicy()
        off.locationConfirmation = false
        var byID = VerificationPolicy()
        byID.disallowedTags = ["A1"]
        var byUID = VerificationPolicy()
        byUID.disallowedTags = [registered.hex]
        var other = VerificationPolicy()
        other.disallowedTags = ["nothing here"]
        var withRadius = VerificationPolicy()
        withRadius.defaultURLRadius = 30
        return [VerificationPolicy(), off, byID, byUID, other, withRadius]
    }

    @Test("the same expectation either way", arguments: urls)
    func agree(url: String?) {
        let registries: [any TagRegistry] = [Self.registry(), Failing(), InMemoryRegistry()]
        for registry in registries {
            for policy in Self.policies() {
                let verifier = Verifier(policy: policy, registry: registry)
                for uid in [Self.registered, Self.unregistered] {
                    for source in [ScanSource.nfc, .link] {
                        let scan = TagScan(
                            readerID: "test", uid: uid, tagType: .ntag213, url: url, time: Timestamp(nanosecondsSinceEpoch: 0),
                            source: source)
                        let shortcut = verifier.expectation(for: scan, readingURLBytes: true)
                        let full = verifier.expectation(for: scan, readingURLBytes: false)
                        #expect(shortcut == full, "\(url ?? "no URL"), \(type(of: registry)), \(policy.disallowedTags), \(uid), \(source)")
                    }
                }
            }
        }
    }

    @Test(
        "taken for a registry tag's URL, and only there",
        arguments: [
            ("https://x.example/t/A1", true), ("https://x.example/t/unknown", true), ("HTTP://X.Example:8080/t/A1/", true),
            ("https://x.example/t/A1?lat=1&lon=1&r=5", false), ("https://x.example/t/A1?", false), ("https://x.example/t/A1#x", false),
            ("https://x.example/t/%41", false), ("https://x.example/t/Caf\u{E9}", false), ("https://x.example/", false),
            ("geo:1,1;u=5", false), (" https://x.example/t/A1", false),
        ])
    func taken(url: String, expected: Bool) {
        let registry = Counted(Self.registry())
        let scan = TagScan(readerID: "test", uid: Self.unregistered, tagType: .ntag213, url: url, time: Timestamp(nanosecondsSinceEpoch: 0))
        _ = Verifier(registry: registry).expectation(for: scan)
        #expect(registry.byBytes.withLock { $0 } == (expected ? 1 : 0))
    }
}
