/// A tag id compared by its UTF-8 bytes, as both registries compare ids (the in-memory index byte
/// for byte, SQLite by its binary collation): "Caf\u{E9}" and "Cafe\u{301}" are two tags there,
/// so they are two here. Swift's `String` equality takes canonically equivalent spellings for one,
/// so a `Set<String>` or a `[String: …]` keyed by id merged two tags the registry keeps apart.
public struct ExactID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let id: String

    public init(_ id: String) { self.id = id }

    /// The index's own byte comparison, so ids are the same here exactly when they are there.
    public static func == (a: ExactID, b: ExactID) -> Bool { PlacementIndex.sameBytes(a.id.utf8.span, b.id.utf8.span) }

    public func hash(into hasher: inout Hasher) { id.utf8.span.withUnsafeBytes { hasher.combine(bytes: $0) } }

    /// Byte order, like SQLite's `ORDER BY id`.
    public static func < (a: ExactID, b: ExactID) -> Bool { a.id.utf8.lexicographicallyPrecedes(b.id.utf8) }

    public var description: String { id }
}

/// Tag ids (or UIDs in hex) as a set compared byte for byte (`ExactID`): what
/// `VerificationPolicy.disallowedTags` holds. Written and read as strings.
///
/// A member that reads as a UID (`TagUID(hex:)`: hex in either case, with or without `:`, `-` or
/// space separators) also stands for that UID, matched by its bytes (`contains(uid:)`): the
/// string `04:a1:b2:c3:d4:e5:f6`, as a reader tool prints it, disallows the tag whose UID TagFix
/// prints as `04A1B2C3D4E5F6`. Compared as a string only, a UID typed in lower case or with
/// separators matched nothing, and the tag it meant to disallow was confirmed.
public struct TagIDSet: Sendable, Hashable, ExpressibleByArrayLiteral, Sequence, CustomStringConvertible {
    private var members: Set<ExactID> = []
    /// The members that read as UIDs, as UIDs.
    private var uids: Set<TagUID> = []

    public init() {}
    public init(arrayLiteral ids: String...) { formUnion(ids) }
    public init(_ ids: some Sequence<String>) { formUnion(ids) }

    public var isEmpty: Bool { members.isEmpty }
    public var count: Int { members.count }
    public func contains(_ id: String) -> Bool { members.contains(ExactID(id)) }
    /// Whether a member reads as `uid`, in whatever case and with whatever separators.
    public func contains(uid: TagUID) -> Bool { uids.contains(uid) }
    public mutating func insert(_ id: String) {
        members.insert(ExactID(id))
        if let uid = try? TagUID(hex: id) { uids.insert(uid) }
    }
    public mutating func formUnion(_ ids: some Sequence<String>) { for id in ids { insert(id) } }

    /// The ids in byte order.
    public func makeIterator() -> IndexingIterator<[String]> { members.sorted().map(\.id).makeIterator() }

    public var description: String { "[" + map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
}
