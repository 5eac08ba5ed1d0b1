/// The storage of a value type with many or large fields (`TagScan`, `Fix`, `Verdict`): copies
/// share one heap box, so handing a value on costs one reference count instead of a copy of every
/// field (measured: copies of scans, fixes and verdicts were most of the verdict path's time).
/// The box is immutable: a write builds a new box with the changed fields, so no two values ever
/// see each other's changes, and the box is `Sendable` without `@unchecked`. Immutable fields also
/// let the optimiser read them in place: with a mutable box each read of a scan's URL or a
/// placement's region copied it defensively (measured: 99 of a verdict's 2 627 instructions).
/// Writes are rare (a value is built whole; a setter runs once a scan, for its NDEF problem), so
/// the allocation a write now always makes costs nothing that shows.
struct CopyOnWrite<Fields: Sendable & Hashable>: Sendable, Hashable {
    private final class Box: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    init(_ fields: Fields) { box = Box(fields) }

    var fields: Fields { box.fields }

    mutating func update(_ change: (inout Fields) -> Void) {
        var fields = box.fields
        change(&fields)
        box = Box(fields)
    }

    static func == (a: CopyOnWrite, b: CopyOnWrite) -> Bool { a.box === b.box || a.box.fields == b.box.fields }
    func hash(into hasher: inout Hasher) { box.fields.hash(into: &hasher) }
}
