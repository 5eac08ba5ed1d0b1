import TagFixCore
import Testing

/// Ids match byte for byte everywhere, as the registries match them: two spellings that Unicode
/// calls equal ("Caf\u{E9}", precomposed, and "Cafe\u{301}", with a combining accent) are two tags.
@Suite("Tag ids compared by their bytes")
struct ExactIDTests {
    static let composed = "Caf\u{E9}"
    static let decomposed = "Cafe\u{301}"
    /// The other spelling (chosen by bytes: `==` says they are the same).
    static func other(than id: String) -> String { ExactID(id) == ExactID(composed) ? decomposed : composed }

    @Test("canonically equivalent spellings are two ids; the same bytes are one")
    func equality() {
        #expect(Self.composed == Self.decomposed, "Swift's String equality, which ids must not use")
        #expect(ExactID(Self.composed) != ExactID(Self.decomposed))
        #expect(Set([ExactID(Self.composed), ExactID(Self.decomposed)]).count == 2)
        let rebuilt = String(decoding: Array(Self.decomposed.utf8), as: UTF8.self)
        #expect(ExactID(rebuilt) == ExactID(Self.decomposed))
        #expect(ExactID(rebuilt).hashValue == ExactID(Self.decomposed).hashValue)
        #expect(ExactID("A1") < ExactID("A2") && ExactID("Z") < ExactID("a"), "byte order, like SQLite's")
    }

    @Test("a set of disallowed ids holds both spellings and finds each only by its own bytes", arguments: [composed, decomposed])
    func tagIDSet(id: String) {
        let other = Self.other(than: id)
        var set: TagIDSet = [id]
        #expect(set.contains(id) && !set.contains(other))
        set.insert(other)
        #expect(set.count == 2 && set.contains(other))
        #expect(Array(TagIDSet(["b", "a", "b"])) == ["a", "b"])
    }

    static func registry() throws -> InMemoryRegistry {
        let near = Coordinate(validLatitude: 53.545, longitude: 9.966)
        let far = Coordinate(validLatitude: 53.555, longitude: 9.966)
        return try InMemoryRegistry([
            RegistryEntry(
                id: composed, uid: nil, region: try CircularRegion(center: near, radius: 20, identifier: composed), name: "composed"),
            RegistryEntry(
                id: decomposed, uid: nil, region: try CircularRegion(center: far, radius: 20, identifier: decomposed), name: "decomposed"),
        ])
    }

    @Test("disallowing one spelling leaves the other tag to be verified", arguments: [composed, decomposed])
    func disallowOne(disallowed: String) throws {
        let other = Self.other(than: disallowed)
        var policy = VerificationPolicy()
        policy.disallowedTags = [disallowed]
        let verifier = Verifier(policy: policy, registry: try Self.registry())
        func expectation(_ id: String) -> Verifier.Expectation {
            let encoded = id.utf8.map { $0 < 0x80 ? String(UnicodeScalar($0)) : "%" + String($0, radix: 16, uppercase: true) }.joined()
            let uid = try! TagUID(hex: "04A1B2C3D4E5F6")
            return verifier.expectation(
                for: TagScan(
                    readerID: "r", uid: uid, tagType: .ntag213, url: "https://tags.example.org/t/\(encoded)",
                    time: Timestamp(nanosecondsSinceEpoch: 0)))
        }
        guard case .decided(let verdict) = expectation(disallowed) else {
            Issue.record("\(disallowed.unicodeScalars.map(\.value)) was not disallowed")
            return
        }
        #expect(verdict.kind == .disallowed(.tagDisallowed(disallowed)))
        guard case .region(let region, .registry, let id, let name, _) = expectation(other) else {
            Issue.record("\(other.unicodeScalars.map(\.value)) was not looked up in the registry")
            return
        }
        #expect(ExactID(id ?? "") == ExactID(other) && ExactID(region.identifier) == ExactID(other))
        #expect(name == (ExactID(other) == ExactID(Self.composed) ? "composed" : "decomposed"))
    }
}

@Suite("Names compared by their bytes in JSON objects and geo: URIs")
struct ExactNameTests {
    static let composed = "caf\u{E9}"
    static let decomposed = "cafe\u{301}"

    @Test("two JSON member names that Unicode calls equivalent are two members, each found by its own bytes")
    func jsonMembers() throws {
        let object = try JSONValue.parse("{\"\(Self.composed)\": 1, \"\(Self.decomposed)\": 2}")
        #expect(object.members?.count == 2)
        #expect(object[Self.composed]?.double == 1)
        #expect(object[Self.decomposed]?.double == 2)
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parse("{\"\(Self.composed)\": 1, \"\(Self.composed)\": 2}") }
    }

    @Test("two geo: parameters that Unicode calls equivalent are two parameters; the same one twice is an error")
    func geoParameters() throws {
        let location = try URLLocation(url: "geo:52.52,13.4;u=5;\(Self.composed)=1;\(Self.decomposed)=2")
        #expect(location.region?.radius == 5)
        #expect(throws: URLLocationError.duplicateParameter(Self.composed)) {
            try URLLocation(url: "geo:52.52,13.4;u=5;\(Self.composed)=1;\(Self.composed)=2")
        }
    }
}
