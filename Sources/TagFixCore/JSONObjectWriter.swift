/// Builds one JSON object in key order: TagFix's JSON Lines stay stable and readable. Numbers
/// are written with `JSONValue.number` (a non-finite one as `null`: never NaN).
///
/// Members are written as bytes straight into one buffer, made a string once at the end: a
/// record is built for every verdict (`serve` builds hundreds a burst), and appending to a
/// `String` piece by piece, or joining a list of pieces, costs more than the bytes themselves.
public struct JSONObjectWriter: Sendable {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    /// No member is written yet in the innermost object open (`add(_:object:)` writes one inside).
    private var empty = true

    /// - Parameter capacity: bytes to reserve, when the caller knows about how long the object is.
    public init(capacity: Int = 0) {
        if capacity > 0 { bytes.reserveCapacity(capacity) }
    }

    private mutating func key(_ key: String) {
        if !empty { bytes.append(UInt8(ascii: ",")) }
        empty = false
        JSONValue.appendQuoted(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    /// A member whose value is an object, its members written by `members` straight into this
    /// one's bytes.
    public mutating func add(_ key: String, object members: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        bytes.append(UInt8(ascii: "{"))
        empty = true
        members(&self)
        bytes.append(UInt8(ascii: "}"))
        empty = false
    }

    private mutating func null() { bytes.append(contentsOf: "null".utf8) }

    public mutating func add(_ key: String, _ value: String?) {
        self.key(key)
        if let value { JSONValue.appendQuoted(value, to: &bytes) } else { null() }
    }

    public mutating func add(_ key: String, _ value: Double?, digits: Int = 3) {
        self.key(key)
        if let value { bytes.append(contentsOf: JSONValue.number(value, digits: digits).utf8) } else { null() }
    }

    public mutating func add(_ key: String, _ value: Int?) {
        self.key(key)
        if let value { bytes.append(contentsOf: String(value).utf8) } else { null() }
    }

    public mutating func add(_ key: String, _ value: Bool) {
        self.key(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    public mutating func add(_ key: String, raw json: String?) {
        self.key(key)
        if let json { bytes.append(contentsOf: json.utf8) } else { null() }
    }

    public var text: String {
        String(unsafeUninitializedCapacity: bytes.count + 1) { output in
            _ = output.initialize(from: bytes)
            output[bytes.count] = UInt8(ascii: "}")
            return bytes.count + 1
        }
    }

    /// This object's members and then the members of `object` (the text of a JSON object with
    /// at least one member), as one object: made in one string, as every VERDICT line is.
    public func text(followedByMembersOf object: String) -> String {
        var object = object
        return object.withUTF8 { members in
            precondition(members.count > 2 && members.first == UInt8(ascii: "{"), "not the text of an object with members")
            return String(unsafeUninitializedCapacity: bytes.count + members.count) { output in
                _ = output.initialize(from: bytes)
                output[bytes.count] = UInt8(ascii: ",")
                _ = UnsafeMutableBufferPointer(rebasing: output[(bytes.count + 1)...]).initialize(from: members.dropFirst())
                return bytes.count + members.count
            }
        }
    }
}
