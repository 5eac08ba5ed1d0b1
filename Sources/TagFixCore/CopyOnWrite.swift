/// The storage of a value type with many or large fields (`TagScan`, `Fix`, `Verdict`): copies
/// share one heap box, so handing a value on costs one reference count instead of a copy of every
/// field (measured: copies of scans, fixes and verdicts were most of the verdict path's time).
/// A write copies the box first unless this value holds the only reference, so no two values
/// ever see each other's changes.
struct CopyOnWrite<Fields: Sendable & Hashable>: Sendable, Hashable {
    /// `@unchecked`: the box is mutated only through `update`, while uniquely referenced.
    private final class Box: @unchecked Sendable {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    init(_ fields: Fields) { box = Box(fields) }

    var fields: Fields { box.fields }

    mutating func update(_ change: (inout Fields) -> Void) {
        if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
        change(&box.fields)
    }

    static func == (a: CopyOnWrite, b: CopyOnWrite) -> Bool { a.box === b.box || a.box.fields == b.box.fields }
    func hash(into hasher: inout Hasher) { box.fields.hash(into: &hasher) }
}
