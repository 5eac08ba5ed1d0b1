/// Builds one JSON object in key order: TagFix's JSON Lines stay stable and readable. Numbers
/// are written with `JSONValue.number` (a non-finite one as `null`: never NaN).
public struct JSONObjectWriter: Sendable {
    private var parts: [String] = []

    public init() {}

    public mutating func add(_ key: String, _ value: String?) {
        parts.append("\(JSONValue.quoted(key)):\(value.map(JSONValue.quoted) ?? "null")")
    }

    public mutating func add(_ key: String, _ value: Double?, digits: Int = 3) {
        parts.append("\(JSONValue.quoted(key)):\(value.map { JSONValue.number($0, digits: digits) } ?? "null")")
    }

    public mutating func add(_ key: String, _ value: Int?) {
        parts.append("\(JSONValue.quoted(key)):\(value.map(String.init) ?? "null")")
    }

    public mutating func add(_ key: String, _ value: Bool) {
        parts.append("\(JSONValue.quoted(key)):\(value)")
    }

    public mutating func add(_ key: String, raw json: String?) {
        parts.append("\(JSONValue.quoted(key)):\(json ?? "null")")
    }

    public var text: String { "{" + parts.joined(separator: ",") + "}" }
}
