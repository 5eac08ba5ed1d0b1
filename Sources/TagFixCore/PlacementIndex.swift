import Foundation

/// What the verifier needs of a registry entry for one scan: the entry's id, its region and its
/// name. The rest of an entry (UID, enrolment, notes) is for people and files, not for verdicts.
///
/// Immutable: with `let` fields the optimiser moves a returned placement's strings into the
/// verifier's expectation instead of copying them.
public struct Placement: Sendable, Hashable {
    public let id: String
    public let region: CircularRegion
    public let name: String?
    /// The UID the tag was enrolled with, when the registry binds one: a scan of this id with
    /// another UID is `untrusted(uid_mismatch)`.
    public let uid: TagUID?
    /// The trust checks the entry asks beyond its UID (a genuine chip, a SUN proof): a scan of
    /// such a tag takes the verifier's full path.
    public let checks: TrustChecks

    public init(id: String, region: CircularRegion, name: String?, uid: TagUID? = nil, checks: TrustChecks = []) {
        self.id = id
        self.region = region
        self.name = name
        self.uid = uid
        self.checks = checks
    }

    public init(_ entry: RegistryEntry) {
        self.init(id: entry.id, region: entry.region, name: entry.name, uid: entry.uid, checks: TrustChecks(entry))
    }
}

/// What a registry entry asks of every scan beyond its UID.
public struct TrustChecks: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Enrolled `genuine`: the chip's NXP originality signature must verify.
    public static let genuine = TrustChecks(rawValue: 1)
    /// An NTAG 424 DNA: the URL's SUN proof must verify, with a counter never seen before.
    public static let sun = TrustChecks(rawValue: 2)

    public init(_ entry: RegistryEntry) {
        var checks: TrustChecks = []
        if entry.originality == .genuine { checks.insert(.genuine) }
        if entry.sun != nil { checks.insert(.sun) }
        self = checks
    }
}

/// An open-addressing hash index from tag id to registry entry that holds what a verdict needs of
/// an entry in the slot itself: a lookup that hits reads one byte of a small control array (which
/// stays in the caches) and one cache line of the slot table, and nothing else, where a
/// dictionary and an entry array cost four or five cache and TLB misses once a large registry no
/// longer fits the caches.
///
/// Linear probing over a power-of-two table kept at most three-quarters full. The probe walks the
/// control bytes (one a slot: 0 for empty, else seven bits of the key's hash with the top bit
/// set), not the slots, so passing another key's slot reads no slot at all. The key is compared
/// in full, byte for byte (with the region's identifier when it is the id, the common case, else
/// with the entry's id), so a hash collision can cost a probe but never give a wrong entry.
struct PlacementIndex: Sendable {
    /// 64 bytes: the entry's name first (read only for an entry that has one), then everything a
    /// lookup and the decision read, in the slot's last 48 bytes. A table above 32 MiB (some
    /// 390 000 tags on) is its own mapping (glibc maps every block above its largest mmap
    /// threshold, 16 bytes into a page, and the array's header takes 32), so its elements start
    /// 48 bytes into a cache line and each slot's last 48 bytes are one whole line: an unnamed
    /// entry's lookup reads exactly one line. A smaller table may come from the heap at another
    /// offset and read two lines now and then; it mostly sits in the caches anyway. (At 48 bytes a slot, half the
    /// slots crossed a line, and each probe past another key's slot read that slot too.)
    struct Slot: Sendable {
        /// The entry's name, when it has one (`hasName`).
        var name: String?
        /// `nil`: the slot is empty.
        var region: CircularRegion?
        /// The entry's position in the registry's entry array.
        var entry: Int32
        /// What the slot knows of its entry and key, one bit each, and the entry's `TrustChecks`
        /// (bits 4 and up).
        var flags: UInt8

        private static let keyIsIdentifierBit: UInt8 = 1, hasNameBit: UInt8 = 2, hasUIDBit: UInt8 = 4, keyIsASCIIBit: UInt8 = 8
        private static let checksShift: UInt8 = 4

        init(
            region: CircularRegion?, name: String?, entry: Int32, keyIsIdentifier: Bool, hasUID: Bool, checks: UInt8, keyIsASCII: Bool
        ) {
            precondition(checks < 1 << (8 - Self.checksShift), "TrustChecks has outgrown the slot's four bits")
            self.name = name
            self.region = region
            self.entry = entry
            self.flags =
                (keyIsIdentifier ? Self.keyIsIdentifierBit : 0) | (name != nil ? Self.hasNameBit : 0) | (hasUID ? Self.hasUIDBit : 0)
                | (keyIsASCII ? Self.keyIsASCIIBit : 0) | checks << Self.checksShift
        }

        /// The region's identifier is the entry's id, so the slot alone can check the key.
        var keyIsIdentifier: Bool { flags & Self.keyIsIdentifierBit != 0 }
        var hasName: Bool { flags & Self.hasNameBit != 0 }
        /// The entry binds a UID, which the placement then carries (read from the entry only then).
        var hasUID: Bool { flags & Self.hasUIDBit != 0 }
        /// The key is plain ASCII (nearly every tag id), so `==` compares its bytes.
        var keyIsASCII: Bool { flags & Self.keyIsASCIIBit != 0 }
        /// The entry's `TrustChecks`.
        var checks: UInt8 { flags >> Self.checksShift }

        static let empty = Slot(region: nil, name: nil, entry: -1, keyIsIdentifier: false, hasUID: false, checks: 0, keyIsASCII: false)
    }

    private var slots = Self.table(count: 16)
    /// One byte a slot: 0 for an empty slot, else `tag(of:)` of its key's hash. The probe reads
    /// these; a slot is read only where its byte matches. 2 MiB for a million tags, so it stays
    /// in the caches while the table (128 MiB) does not.
    private var control = [UInt8](repeating: 0, count: 16)
    /// Random per index, so that no registry file can be written to collide in every index.
    private let seed = UInt64.random(in: .min ... .max)
    /// The ids of entries whose region's identifier is not their id (rare: files always name the
    /// region after the tag), by entry position.
    private var otherKeys: [Int32: String] = [:]
    private(set) var count = 0

    private func key(of slot: Slot) -> String? {
        guard let region = slot.region else { return nil }
        return slot.keyIsIdentifier ? region.identifier : otherKeys[slot.entry]
    }

    /// The position in the registry's entry array of the entry for `id`, or `nil`.
    func entry(for id: String) -> Int? { position(of: id).map { Int(slots[$0].entry) } }

    /// The placement for `id`, built once from its slot in place (no copy of the slot, so no
    /// reference counting of a region's identifier that is not kept), with the entry's id and
    /// name from `entries` where the slot does not hold them.
    func placement(for id: String, entries: [RegistryEntry]) -> Placement? {
        placement(inSlot: position(of: id), entries: entries)
    }

    /// `placement(for:entries:)` for an id given as its UTF-8 bytes: the verifier's tag id, read
    /// straight from the URL without a `String` made of it.
    func placement(forUTF8 id: Span<UInt8>, entries: [RegistryEntry]) -> Placement? {
        let (hash, idIsASCII) = id.withUnsafeBufferPointer { home(of: $0) }
        let position = probe(from: hash) { key, keyIsASCII in Self.same(key, isASCII: keyIsASCII, id, isASCII: idIsASCII) }
        return placement(inSlot: position, entries: entries)
    }

    @inline(__always)
    private func placement(inSlot position: Int?, entries: [RegistryEntry]) -> Placement? {
        guard let i = position, let region = slots[i].region else { return nil }
        return Placement(
            id: slots[i].keyIsIdentifier ? region.identifier : entries[Int(slots[i].entry)].id, region: region,
            name: slots[i].hasName ? slots[i].name : nil, uid: slots[i].hasUID ? entries[Int(slots[i].entry)].uid : nil,
            checks: TrustChecks(rawValue: slots[i].checks))
    }

    private func position(of id: String) -> Int? {
        let (hash, idIsASCII) = home(of: id)
        return probe(from: hash) { key, keyIsASCII in Self.same(key, isASCII: keyIsASCII, id, isASCII: idIsASCII) }
    }

    /// Linear probing from `hash` to the slot whose key `matches` (given the key and whether it is
    /// ASCII), or to the first empty slot: `nil`. The walk reads control bytes; only a slot whose
    /// byte is the hash's tag is read and its key compared.
    @inline(__always)
    private func probe(from hash: Int, matches: (String, Bool) -> Bool) -> Int? {
        let mask = control.count - 1
        let tag = Self.tag(of: hash)
        var i = hash & mask
        while true {
            let byte = control[i]
            if byte == 0 { return nil }
            if byte == tag, let region = slots[i].region,
                let key = slots[i].keyIsIdentifier ? region.identifier : otherKeys[slots[i].entry], matches(key, slots[i].keyIsASCII)
            {
                return i
            }
            i = (i + 1) & mask
        }
    }

    /// A slot's control byte: the hash's top seven bits, with the top bit set (never 0, which is
    /// an empty slot's).
    private static func tag(of hash: Int) -> UInt8 { UInt8(truncatingIfNeeded: UInt64(bitPattern: Int64(hash)) >> 57) | 0x80 }

    /// Ids are the same when their UTF-8 bytes are, as in the SQLite registry's `id` column
    /// (SQLite's binary collation), so both stores answer alike: "Caf\u{E9}" and "Cafe\u{301}" are
    /// two ids, though Swift's `==` calls them equal. Comparing bytes is also what lets `home` hash
    /// bytes: a hash over bytes would send two canonically equivalent spellings to different
    /// homes while `==` took them for one key.
    ///
    /// Two ASCII strings are equal under `==` exactly when their bytes are (ASCII text is its own
    /// normal form), and `==` is the fast comparison; an ASCII string never has the bytes of one
    /// that is not; only two non-ASCII keys need their bytes compared.
    static func same(_ a: String, isASCII aIsASCII: Bool, _ b: String, isASCII bIsASCII: Bool) -> Bool {
        if aIsASCII && bIsASCII { return a == b }
        if aIsASCII != bIsASCII { return false }
        return sameBytes(a.utf8.span, b.utf8.span)
    }

    /// `same` for a key and an id given as bytes.
    static func same(_ key: String, isASCII keyIsASCII: Bool, _ id: Span<UInt8>, isASCII idIsASCII: Bool) -> Bool {
        keyIsASCII == idIsASCII && sameBytes(key.utf8.span, id)
    }

    /// Whether two byte spans are equal: their counts, then their bytes, a word at a time (not
    /// `utf8.elementsEqual`, which walks the views' iterators). `ExactID` compares ids with it too.
    @inline(__always)
    static func sameBytes(_ a: Span<UInt8>, _ b: Span<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                let (x, y) = (UnsafeRawBufferPointer(a), UnsafeRawBufferPointer(b))
                var i = 0
                while i + 8 <= a.count {
                    if x.loadUnaligned(fromByteOffset: i, as: UInt64.self) != y.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
                        return false
                    }
                    i += 8
                }
                return tailWord(x, from: i) == tailWord(y, from: i)
            }
        }
    }

    /// The bytes from `start` to the end (fewer than eight) as one little-endian word, read four,
    /// two and one at a time rather than in a byte loop.
    @inline(__always)
    private static func tailWord(_ bytes: UnsafeRawBufferPointer, from start: Int) -> UInt64 {
        let remaining = bytes.count - start
        var word: UInt64 = 0
        var offset = 0
        if remaining & 4 != 0 {
            word = UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt32.self)))
            offset = 4
        }
        if remaining & 2 != 0 {
            word |= UInt64(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: start + offset, as: UInt16.self))) << (8 * offset)
            offset += 2
        }
        if remaining & 1 != 0 { word |= UInt64(bytes[start + offset]) << (8 * offset) }
        return word
    }

    /// Where probing for `key` starts, and whether the key is ASCII (found on the way): a
    /// multiply-and-fold hash of its UTF-8 bytes, eight at a time. `String.hashValue` (SipHash,
    /// through `Hasher`) was a quarter of a lookup's instructions; a table that compares whole keys
    /// needs spread, not a keyed hash's resistance to forgery, and the random seed keeps crafted
    /// ids from colliding in every run.
    func home(of key: String) -> (hash: Int, isASCII: Bool) {
        // Native and small strings alike give their bytes in place; `nil` only for a bridged
        // string, which Linux does not have, and then the bytes are copied out.
        key.utf8.withContiguousStorageIfAvailable { home(of: $0) } ?? Array(key.utf8).withUnsafeBufferPointer { home(of: $0) }
    }

    private func home(of bytes: UnsafeBufferPointer<UInt8>) -> (hash: Int, isASCII: Bool) {
        let m: UInt64 = 0x9E37_79B9_7F4A_7C15
        var h = seed ^ UInt64(bytes.count) &* m
        var high: UInt64 = 0
        var i = 0
        while i + 8 <= bytes.count {
            let word = UInt64(littleEndian: UnsafeRawBufferPointer(bytes).loadUnaligned(fromByteOffset: i, as: UInt64.self))
            high |= word
            h = (h ^ word) &* m
            h ^= h >> 29
            i += 8
        }
        let tail = Self.tailWord(UnsafeRawBufferPointer(bytes), from: i)
        high |= tail
        h = (h ^ tail) &* m
        h ^= h >> 32
        h = h &* 0xBF58_476D_1CE4_E5B9
        h ^= h >> 29
        return (Int(truncatingIfNeeded: h), high & 0x8080_8080_8080_8080 == 0)
    }

    /// Adds `entry`, found at `position` of the registry's entry array. The caller has checked
    /// that its id is new.
    mutating func insert(_ entry: RegistryEntry, at position: Int) {
        if (count + 1) * 4 > slots.count * 3 { grow(to: slots.count * 2) }
        let home = home(of: entry.id)
        let slot = Slot(
            region: entry.region, name: entry.name, entry: Int32(position),
            keyIsIdentifier: Self.sameBytes(entry.region.identifier.utf8.span, entry.id.utf8.span),
            hasUID: entry.uid != nil, checks: TrustChecks(entry).rawValue, keyIsASCII: home.isASCII)
        if !slot.keyIsIdentifier { otherKeys[slot.entry] = entry.id }
        place(slot, home: home.hash)
        count += 1
    }

    /// Makes room for `total` entries in all, so that adding them never grows the table on the
    /// way: each doubling held the old table and the new one, twice its size, at once (at a
    /// million tags, 64 and 128 MiB).
    mutating func reserve(_ total: Int) {
        var size = slots.count
        while total * 4 > size * 3 { size *= 2 }
        if size > slots.count { grow(to: size) }
    }

    private mutating func grow(to size: Int) {
        let old = slots
        slots = Self.table(count: size)
        control = [UInt8](repeating: 0, count: size)
        for slot in old { if let key = key(of: slot) { place(slot, home: home(of: key).hash) } }
    }

    /// An empty table of `count` slots. One of 4 MiB or more (from some 24 600 tags, where the
    /// table doubles to 65 536 slots of 64 bytes) is asked for transparent huge pages before its first write,
    /// so the kernel backs it with 2 MiB pages: a lookup into a table far bigger than the caches
    /// then misses the cache but not the TLB, where 4 KiB pages cost a page walk as well.
    /// `madvise` is a hint, like the math functions the core already calls: no I/O, and its
    /// failure (a kernel with THP off) changes nothing but speed.
    static func table(count: Int) -> [Slot] {
        [Slot](unsafeUninitializedCapacity: count) { buffer, initialized in
            if count * MemoryLayout<Slot>.stride >= hugePageThreshold { adviseHugePages(UnsafeMutableRawBufferPointer(buffer)) }
            buffer.initialize(repeating: .empty)
            initialized = count
        }
    }

    /// Tables from this size on are advised (`table(count:)`).
    static let hugePageThreshold = 4 << 20

    /// `madvise(MADV_HUGEPAGE)` over the whole pages inside `memory`; the result is ignored.
    private static func adviseHugePages(_ memory: UnsafeMutableRawBufferPointer) {
        guard let base = memory.baseAddress else { return }
        let page = Int(getpagesize())
        let start = (Int(bitPattern: base) + page - 1) & ~(page - 1)
        let end = (Int(bitPattern: base) + memory.count) & ~(page - 1)
        guard end > start else { return }
        _ = madvise(UnsafeMutableRawPointer(bitPattern: start), end - start, MADV_HUGEPAGE)
    }

    /// The table's memory, for tests that check how the kernel backs it and where its lines fall.
    func withTableMemory<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R { slots.withUnsafeBytes(body) }

    /// Puts `slot` in the first free slot from `home`, its key's hash.
    private mutating func place(_ slot: Slot, home: Int) {
        let mask = slots.count - 1
        var i = home & mask
        while control[i] != 0 { i = (i + 1) & mask }
        slots[i] = slot
        control[i] = Self.tag(of: home)
    }
}
