import TagFixCore
import Testing

@testable import TagFixStore

/// Which ids are the same id: both stores match them byte for byte (SQLite's binary collation,
/// and the in-memory index since it hashes bytes), so a registry answers alike whether it was
/// loaded from CSV or opened as SQLite. Swift's `==` would call each pair below equal.
@Suite("Registries: an id is its bytes, in memory and in SQLite alike")
struct RegistryIdentityTests {
    /// Canonically equivalent spellings: precomposed and decomposed, and singletons whose
    /// canonical form is plain ASCII (KELVIN SIGN, GREEK QUESTION MARK) or another letter
    /// (ANGSTROM SIGN).
    @Test(
        "canonically equivalent spellings are two ids, each found by its own bytes only",
        arguments: [
            ("Caf\u{E9}-1", "Cafe\u{301}-1", "Caf\u{E9}\u{300}-1"), ("\u{212A}7", "K7", "k7"), ("T\u{37E}1", "T;1", "T:1"),
            ("\u{212B}-3", "\u{C5}-3", "A\u{30A}-3"),
        ])
    func spellings(first: String, second: String, absent: String) throws {
        #expect(first == second, "the pair must be one that Swift's == takes for equal")
        let entries = [try entry(first, lat: 53.5, name: "first"), try entry(second, lat: 53.6, name: "second")]
        let memory = try InMemoryRegistry(entries)
        let path = try scratchPath("ids.sqlite")
        let sqlite = try SQLiteRegistry(path: path, mode: .create)
        try sqlite.add(entries)
        let uid = try TagUID(hex: "04000000000001")
        for registry in [memory as any TagRegistry, sqlite] {
            for expected in entries {
                let found = try #require(try registry.entry(forID: expected.id))
                #expect(Array(found.id.utf8) == Array(expected.id.utf8))
                #expect(found.name == expected.name)
                #expect(try registry.placement(forTagID: expected.id, uid: uid) == Placement(expected))
                // As the verifier looks it up, from the bytes of a URL.
                #expect(
                    try expected.id.utf8.withSpan { id throws(RegistryError) in try registry.placement(forTagIDUTF8: id, uid: uid) }
                        == Placement(expected))
            }
            #expect(try registry.entry(forID: absent) == nil)
            #expect(try absent.utf8.withSpan { id throws(RegistryError) in try registry.placement(forTagIDUTF8: id, uid: uid) } == nil)
        }
    }
}

extension RegistryIdentityTests {
    @Test("bytes that are not UTF-8 name no id, in either store, though decoding would repair them into one")
    func invalidUTF8() throws {
        let repaired = "T\u{FFFD}1"
        let entry = try entry(repaired, lat: 53.5, name: "repaired")
        let memory = try InMemoryRegistry([entry])
        let sqlite = try SQLiteRegistry(path: try scratchPath("utf8.sqlite"), mode: .create)
        try sqlite.add([entry])
        let uid = try TagUID(hex: "04000000000002")
        let invalid: [UInt8] = [0x54, 0xFF, 0x31]
        #expect(String(decoding: invalid, as: UTF8.self) == repaired, "the bytes must decode to the stored id")
        for registry in [memory as any TagRegistry, sqlite] {
            let found = try registry.placement(forTagIDUTF8: invalid.span, uid: uid)
            #expect(found == nil, "\(type(of: registry))")
            #expect(try registry.placement(forTagID: repaired, uid: uid) == Placement(entry))
        }
    }
}

extension String.UTF8View {
    /// The bytes as a `Span` for the length of `body` (a `Span` cannot be captured by `#expect`).
    fileprivate func withSpan<R, E: Error>(_ body: (Span<UInt8>) throws(E) -> R) throws(E) -> R { try body(span) }
}
