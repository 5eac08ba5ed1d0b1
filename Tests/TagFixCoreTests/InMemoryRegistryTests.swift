import Testing

@testable import TagFixCore

/// The in-memory registry's index (`PlacementIndex`) against a plain dictionary kept beside it:
/// every id found, every absent id missed, the placement equal to the entry's fields, through
/// the table's growth and whatever the ids' hashes do.
@Suite("In-memory registry: the placement index")
struct InMemoryRegistryTests {
    /// Entries with a mix of what the index treats specially: ids that are their region's
    /// identifier and ids that are not, names and none, UIDs and none, short and long ids.
    static func entries(_ count: Int, seed: UInt64) -> [RegistryEntry] {
        var random = SeededGenerator(seed: seed)
        return (0..<count).map { index in
            let long = random.next() % 5 == 0
            let id = long ? "site-\(seed)/building-7/floor-3/tag-\(index)" : "T\(index)"
            let identifier = random.next() % 4 == 0 ? "region of \(id)" : id
            let center = Coordinate(validLatitude: -80 + random.unit() * 160, longitude: -180 + random.unit() * 360)
            let region = try! CircularRegion(center: center, radius: 1 + random.unit() * 499, identifier: identifier)
            let uid =
                random.next() % 2 == 0 ? try! TagUID(bytes: [0x04] + (0..<6).map { UInt8(truncatingIfNeeded: index >> ($0 * 8)) }) : nil
            // The trust checks share the slot's flag byte with the key's and the entry's bits.
            let originality: Originality.Status? = random.next() % 7 == 0 ? .genuine : nil
            let sun = random.next() % 11 == 0 ? SUNSettings(keyName: "site") : nil
            return RegistryEntry(
                id: id, uid: uid, region: region, name: random.next() % 3 == 0 ? "Name \(index)" : nil, originality: originality, sun: sun)
        }
    }

    @Test("reserved ahead, the registry answers as one grown entry by entry", arguments: [(1000, 6), (50_000, 7)])
    func reservedAgreesWithGrown(count: Int, seed: UInt64) throws {
        let entries = Self.entries(count, seed: seed)
        let grown = try InMemoryRegistry(entries)
        var reserved = InMemoryRegistry()
        reserved.reserveCapacity(count)
        for entry in entries { try reserved.add(entry) }
        let uid = try TagUID(hex: "0411223344556677")
        #expect(reserved.entries == grown.entries)
        for entry in entries {
            #expect(reserved.placement(forTagID: entry.id, uid: uid) == grown.placement(forTagID: entry.id, uid: uid))
            #expect(reserved.placement(forTagID: entry.id, uid: uid) == Placement(entry))
        }
        #expect(reserved.placement(forTagID: "absent", uid: uid) == nil)
    }

    /// What a million tags held in memory cost: an index slot is one cache line's worth (the
    /// index of a million tags 128 MiB, and 2 MiB of control bytes), its flags in one byte, and
    /// an entry keeps its rarely set fields in one box.
    @Test("an index slot is 64 bytes and an entry 88")
    func layout() {
        #expect(MemoryLayout<PlacementIndex.Slot>.stride == 64)
        #expect(MemoryLayout<RegistryEntry>.stride == 88)
    }

    @Test("an entry's rarely set fields read back as set, and an entry with none set equals one never given them")
    func rareFields() throws {
        let region = try CircularRegion(center: Coordinate(validLatitude: 53.5, longitude: 9.9), radius: 25, identifier: "T1")
        let plain = RegistryEntry(id: "T1", uid: nil, region: region, name: nil)
        var entry = plain
        let enrolment = Enrolment(at: Timestamp(nanosecondsSinceEpoch: 1_778_745_600_000_000_000), by: "ana", accuracy: 2.5, fixes: 30)
        entry.enrolment = enrolment
        entry.notes = "by the door"
        entry.originality = .genuine
        entry.sun = SUNSettings(keyName: "site")
        #expect(entry.enrolment == enrolment && entry.notes == "by the door" && entry.originality == .genuine)
        #expect(entry.sun == SUNSettings(keyName: "site"))
        #expect(entry != plain)
        var copy = entry
        copy.notes = nil
        #expect(entry.notes == "by the door" && copy.notes == nil && copy.enrolment == enrolment)
        copy.enrolment = nil
        copy.originality = nil
        copy.sun = nil
        #expect(copy == plain && copy.hashValue == plain.hashValue)
    }

    @Test("found, missed and equal to the entries", arguments: [(1, 1), (13, 2), (12, 3), (1000, 4), (50_000, 5)])
    func agreesWithDictionary(count: Int, seed: UInt64) throws {
        let entries = Self.entries(count, seed: seed)
        let registry = try InMemoryRegistry(entries)
        let byID = Dictionary(uniqueKeysWithValues: entries.map { ($0.id, $0) })
        #expect(registry.count == count)
        let otherUID = try TagUID(hex: "0411223344556677")
        for entry in entries {
            #expect(registry.entry(forID: entry.id) == entry)
            #expect(registry.placement(forTagID: entry.id, uid: otherUID) == Placement(entry))
            #expect(entry.id.utf8.withSpan { registry.placement(forTagIDUTF8: $0, uid: otherUID) } == Placement(entry))
            if let uid = entry.uid {
                #expect(registry.entry(forUID: uid) == entry)
                // An unknown id falls back to the UID, as `entry(forTagID:uid:)` does.
                #expect(registry.placement(forTagID: "absent-\(entry.id)", uid: uid) == Placement(entry))
                #expect(registry.placement(forTagID: nil, uid: uid) == Placement(entry))
                #expect("absent-\(entry.id)".utf8.withSpan { registry.placement(forTagIDUTF8: $0, uid: uid) } == Placement(entry))
            }
        }
        // Absent ids, including near misses of present ones and region identifiers that are
        // not ids.
        var absent = ["", "T", "t0", "T-1", "T\(count)", "T\(count * 2)"]
        absent += entries.prefix(200).flatMap { [$0.id + " ", String($0.id.dropLast()), $0.region.identifier] }
        for id in absent where byID[id] == nil {
            #expect(registry.entry(forID: id) == nil)
            #expect(registry.placement(forTagID: id, uid: otherUID) == nil)
            #expect(id.utf8.withSpan { registry.placement(forTagIDUTF8: $0, uid: otherUID) } == nil)
        }
    }

    @Test("a repeated id or UID is refused, and the registry is unchanged")
    func conflicts() throws {
        var registry = try InMemoryRegistry(Self.entries(100, seed: 9))
        let first = try #require(registry.entries.first)
        #expect(throws: RegistryConflict.duplicateID(first.id)) { try registry.add(first) }
        let withUID = try #require(registry.entries.first { $0.uid != nil })
        let uid = try #require(withUID.uid)
        var clash = withUID
        clash.id = "new-id"
        #expect(throws: RegistryConflict.duplicateUID(uid, withUID.id)) { try registry.add(clash) }
        #expect(registry.count == 100)
        #expect(registry.entry(forID: "new-id") == nil)
    }
}

/// The index's key comparison and the ASCII flag its hash finds on the way, which together
/// decide whether two ids are one.
@Suite("In-memory registry: which ids are the same")
struct PlacementIndexKeyTests {
    @Test(
        "same bytes, same id; canonically equal spellings are not",
        arguments: [
            ("T17", "T17", true), ("T17", "T18", false), ("T17", "T17 ", false), ("K7", "\u{212A}7", false),
            ("\u{212A}7", "\u{212A}7", true),
            ("Caf\u{E9}", "Cafe\u{301}", false), ("Caf\u{E9}", "Caf\u{E9}", true), ("\u{212B}", "A\u{30A}", false),
            ("\u{212B}", "\u{C5}", false),
            ("site/b\u{FC}ro-4", "site/b\u{FC}ro-4", true), ("", "", true),
        ])
    func same(a: String, b: String, expected: Bool) {
        let aIsASCII = a.utf8.allSatisfy { $0 < 0x80 }, bIsASCII = b.utf8.allSatisfy { $0 < 0x80 }
        #expect(PlacementIndex.same(a, isASCII: aIsASCII, b, isASCII: bIsASCII) == expected)
        #expect(PlacementIndex.same(b, isASCII: bIsASCII, a, isASCII: aIsASCII) == expected)
        #expect(expected == Array(a.utf8).elementsEqual(Array(b.utf8)))
        // The same with the id as bytes, as the verifier passes it from a URL.
        #expect(b.utf8.withSpan { PlacementIndex.same(a, isASCII: aIsASCII, $0, isASCII: bIsASCII) } == expected)
        #expect(a.utf8.withSpan { PlacementIndex.same(b, isASCII: bIsASCII, $0, isASCII: aIsASCII) } == expected)
    }

    @Test("keys and ids as bytes: one byte changed anywhere, in the 8-byte words or the tail, is another id")
    func sameAsBytes() {
        for length in 0...24 {
            // Heap strings from 16 bytes, small strings below: both kinds of key.
            let key = String((0..<length).map { Character(Unicode.Scalar(UInt8(0x41 + $0 % 26))) })
            #expect(key.utf8.withSpan { PlacementIndex.same(key, isASCII: true, $0, isASCII: true) }, "\(length) bytes")
            #expect(!(key + "A").utf8.withSpan { PlacementIndex.same(key, isASCII: true, $0, isASCII: true) }, "one byte longer")
            for position in 0..<length {
                var bytes = Array(key.utf8)
                bytes[position] ^= 0x20
                let changed = bytes.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) }
                #expect(
                    !changed.utf8.withSpan { PlacementIndex.same(key, isASCII: true, $0, isASCII: true) }, "byte \(position) of \(length)")
            }
        }
    }

    /// Every byte feeds the hash, wherever it sits (the 8-byte words, or the tail's four-, two- and
    /// one-byte reads): a byte the hash skipped would send keys that differ only there to one
    /// home, a probe chain for each, which no answer would show.
    @Test("the hash sees every byte: one byte changed anywhere moves the key's hash")
    func hashSeesEveryByte() {
        let index = PlacementIndex()
        for length in 1...24 {
            let key = String((0..<length).map { Character(Unicode.Scalar(UInt8(0x30 + $0 % 40))) })
            let home = index.home(of: key).hash
            for position in 0..<length {
                for flip: UInt8 in [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40] {
                    var bytes = Array(key.utf8)
                    bytes[position] ^= flip
                    let changed = String(decoding: bytes, as: UTF8.self)
                    #expect(index.home(of: changed).hash != home, "bit \(flip) of byte \(position) of \(length)")
                }
            }
        }
    }

    @Test("the hash sees a non-ASCII byte wherever it is, in the 8-byte words and in the tail")
    func asciiFlag() {
        let index = PlacementIndex()
        for length in 0...24 {
            let ascii = String(repeating: "x", count: length)
            #expect(index.home(of: ascii).isASCII, "\(length) ASCII bytes")
            for position in 0...length {
                var scalars = Array(ascii.unicodeScalars)
                scalars.insert("\u{E9}", at: position)
                var text = ""
                text.unicodeScalars.append(contentsOf: scalars)
                #expect(!index.home(of: text).isASCII, "é at \(position) of \(length + 1)")
            }
        }
        // Equal keys hash alike, whichever string object holds them.
        let id = "site-4/building-7/floor-3/tag-12"
        #expect(index.home(of: id).hash == index.home(of: String(decoding: Array(id.utf8), as: UTF8.self)).hash)
    }
}

extension String.UTF8View {
    /// The bytes as a `Span` for the length of `body` (a `Span` cannot be captured by `#expect`).
    func withSpan<R, E: Error>(_ body: (Span<UInt8>) throws(E) -> R) throws(E) -> R { try body(span) }
}
