/// The storage of a value type with many or large fields (`TagScan`, `Fix`, `Verdict`): copies
/// share one immutable heap box, so handing a value on costs one reference count, not a copy of
/// every field; a write builds a new box (writes are rare). Why, measured: docs/benchmarks.md#7-why-the-core-is-shaped-as-it-is.
struct ImmutableBox<Fields: Sendable & Hashable>: Sendable, Hashable {
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

    static func == (a: ImmutableBox, b: ImmutableBox) -> Bool { a.box === b.box || a.box.fields == b.box.fields }
    func hash(into hasher: inout Hasher) { box.fields.hash(into: &hasher) }
}
