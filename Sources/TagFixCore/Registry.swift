import Foundation

/// Where a tag should be: one row of the registry of tag placements.
///
/// The fields every entry has are kept in line; the ones few entries have (enrolment, notes,
/// originality, SUN settings: some 170 bytes together) share one box, absent when none is set.
/// An entry is 88 bytes instead of 264, so a registry of a million tags held in memory (a CSV or
/// JSON file) costs 88 MB of entries, not 264.
public struct RegistryEntry: Sendable, Hashable {
    /// The tag's identifier, as its URL names it (see `URLLocation.tagID`).
    public var id: String
    public var uid: TagUID?
    public var region: CircularRegion
    public var name: String?
    /// The rarely set fields; `nil` when none is (never a box of nothing, so `==` holds).
    private var details: ImmutableBox<Details>?

    private struct Details: Sendable, Hashable {
        var enrolment: Enrolment?
        var notes: String?
        var originality: Originality.Status?
        var sun: SUNSettings?

        var isEmpty: Bool { enrolment == nil && notes == nil && originality == nil && sun == nil }
    }

    /// How the placement was recorded, when `tagfix enroll` (or an imported file) says.
    public var enrolment: Enrolment? {
        get { details?.fields.enrolment }
        set { update { $0.enrolment = newValue } }
    }
    public var notes: String? {
        get { details?.fields.notes }
        set { update { $0.notes = newValue } }
    }
    /// The originality status the tag had when enrolled. A tag enrolled `genuine` must read
    /// genuine on every scan, else `untrusted(signature_invalid | signature_missing)`.
    public var originality: Originality.Status? {
        get { details?.fields.originality }
        set { update { $0.originality = newValue } }
    }
    /// For an NTAG 424 DNA with SUN mirroring: how its per-tap proof is checked.
    public var sun: SUNSettings? {
        get { details?.fields.sun }
        set { update { $0.sun = newValue } }
    }

    public init(
        id: String, uid: TagUID?, region: CircularRegion, name: String?, enrolment: Enrolment? = nil, notes: String? = nil,
        originality: Originality.Status? = nil, sun: SUNSettings? = nil
    ) {
        self.id = id
        self.uid = uid
        self.region = region
        self.name = name
        let details = Details(enrolment: enrolment, notes: notes, originality: originality, sun: sun)
        self.details = details.isEmpty ? nil : ImmutableBox(details)
    }

    private mutating func update(_ change: (inout Details) -> Void) {
        var fields = details?.fields ?? Details()
        change(&fields)
        details = fields.isEmpty ? nil : ImmutableBox(fields)
    }
}

/// When, by whom and how well a placement was measured.
public struct Enrolment: Sendable, Hashable {
    public var at: Timestamp
    public var by: String?
    /// The averaged position's horizontal accuracy, metres (95 %).
    public var accuracy: Double?
    /// How many fixes the average kept.
    public var fixes: Int?

    public init(at: Timestamp, by: String? = nil, accuracy: Double? = nil, fixes: Int? = nil) {
        self.at = at
        self.by = by
        self.accuracy = accuracy
        self.fixes = fixes
    }
}

/// A store of tag placements. Lookups are synchronous: the verifier calls them on its own task
/// for every scan, and stores keep them fast (in memory, or an indexed SQLite table).
public protocol TagRegistry: Sendable {
    /// The entry whose identifier is `id`.
    func entry(forID id: String) throws(RegistryError) -> RegistryEntry?
    /// The entry registered for the tag with this UID.
    func entry(forUID uid: TagUID) throws(RegistryError) -> RegistryEntry?
    /// What the verifier needs of the entry for a scan (by the URL's tag identifier first, then by
    /// UID). A store may answer it without building the whole entry; the default does build it.
    func placement(forTagID id: String?, uid: TagUID) throws(RegistryError) -> Placement?
    /// `placement(forTagID:uid:)` for an id given as its UTF-8 bytes, as the verifier reads it from
    /// a tag's URL. The same answer, without a `String` made of the id, where the store can look
    /// bytes up; the default makes the `String`.
    func placement(forTagIDUTF8 id: Span<UInt8>, uid: TagUID) throws(RegistryError) -> Placement?
}

extension TagRegistry {
    /// The registry entry for a scan: by the URL's tag identifier first, then by UID.
    public func entry(forTagID id: String?, uid: TagUID) throws(RegistryError) -> RegistryEntry? {
        if let id, let entry = try entry(forID: id) { return entry }
        return try entry(forUID: uid)
    }

    public func placement(forTagID id: String?, uid: TagUID) throws(RegistryError) -> Placement? {
        try entry(forTagID: id, uid: uid).map(Placement.init)
    }

    public func placement(forTagIDUTF8 id: Span<UInt8>, uid: TagUID) throws(RegistryError) -> Placement? {
        // Bytes that are not UTF-8 are no id a registry holds (decoding would repair them into
        // one with U+FFFD): only the UID can match, as in the in-memory index.
        try placement(forTagID: id.withUnsafeBufferPointer { String(validating: $0, as: UTF8.self) }, uid: uid)
    }
}

/// A registry that could not answer.
public struct RegistryError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "registry unavailable: \(message)" }
}

/// A registry held in memory: the entries, an index by identifier that holds their regions (see
/// `PlacementIndex`), and a dictionary by UID.
public struct InMemoryRegistry: TagRegistry, Sendable {
    public private(set) var entries: [RegistryEntry] = []
    private var byID = PlacementIndex()
    private var byUID: [TagUID: Int] = [:]

    public init() {}

    /// - Throws: `RegistryConflict` when an identifier or a UID appears twice.
    public init(_ entries: some Sequence<RegistryEntry>) throws(RegistryConflict) {
        for entry in entries { try add(entry) }
    }

    public mutating func add(_ entry: RegistryEntry) throws(RegistryConflict) {
        guard byID.entry(for: entry.id) == nil else { throw .duplicateID(entry.id) }
        if let uid = entry.uid {
            if let other = byUID[uid] { throw .duplicateUID(uid, entries[other].id) }
            byUID[uid] = entries.count
        }
        byID.insert(entry, at: entries.count)
        entries.append(entry)
    }

    public var count: Int { entries.count }

    /// Makes room for `total` entries in all (a file's row count, say): the entries and the index
    /// are then allocated once, at their size, instead of doubling on the way, when each doubling
    /// held the old copy and the new one together.
    public mutating func reserveCapacity(_ total: Int) {
        entries.reserveCapacity(total)
        byID.reserve(total)
    }

    public func entry(forID id: String) -> RegistryEntry? { byID.entry(for: id).map { entries[$0] } }
    public func entry(forUID uid: TagUID) -> RegistryEntry? { byUID[uid].map { entries[$0] } }

    /// From the index slot alone when the id is found and the entry has no name.
    public func placement(forID id: String) -> Placement? { byID.placement(for: id, entries: entries) }

    public func placement(forTagID id: String?, uid: TagUID) -> Placement? {
        if let id, let placement = placement(forID: id) { return placement }
        return byUID[uid].map { Placement(entries[$0]) }
    }

    public func placement(forTagIDUTF8 id: Span<UInt8>, uid: TagUID) -> Placement? {
        if let placement = byID.placement(forUTF8: id, entries: entries) { return placement }
        return byUID[uid].map { Placement(entries[$0]) }
    }
}

public enum RegistryConflict: Error, Sendable, Hashable, CustomStringConvertible {
    /// The id is on two rows of the same file.
    case duplicateID(String)
    case duplicateUID(TagUID, String)
    /// The id is already in the registry being added to (without replacing).
    case alreadyRegistered(String)

    public var description: String {
        switch self {
        case .duplicateID(let id): "tag id \"\(id)\" appears twice"
        case .alreadyRegistered(let id):
            "tag id \"\(id)\" is already in the registry: give --replace to replace it with this one, "
                + "or leave it out to keep the registered one"
        case .duplicateUID(let uid, let other): "UID \(uid) is already registered to tag \"\(other)\""
        }
    }
}

// MARK: - CSV and JSON files

/// Reads and writes registry files: CSV with a header row, or JSON (an array of objects, or an
/// object with a `tags` array). Columns / members: `id`, `lat`, `lon`, `radius_m`, and optionally
/// `uid`, `name`, `enrolled_at` (ISO 8601), `enrolled_by`, `accuracy_m`, `fixes`, `notes`. Pure:
/// the caller reads the file and passes its text, or writes the text returned.
public enum RegistryFile {
    public enum Format: String, Sendable, Hashable {
        case csv, json

        /// The format by content: JSON starts with `[` or `{`, anything else is CSV.
        public static func detect(_ text: String) -> Format {
            let first = text.utf8.first { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }
            return first == UInt8(ascii: "[") || first == UInt8(ascii: "{") ? .json : .csv
        }
    }

    /// Every column a file may have, in the order files are written.
    public static let columns = [
        "id", "uid", "lat", "lon", "radius_m", "name", "enrolled_at", "enrolled_by", "accuracy_m", "fixes", "notes", "originality", "sun",
    ]

    /// The columns a file needs for `entries`: the trust columns only when an entry uses them,
    /// so a registry without them is written as before.
    static func columns(for entries: [RegistryEntry]) -> [String] {
        let originality = entries.contains { $0.originality != nil }
        let sun = entries.contains { $0.sun != nil }
        return columns.filter { ($0 != "originality" || originality) && ($0 != "sun" || sun) }
    }

    static let numericColumns: Set<String> = ["lat", "lon", "radius_m", "accuracy_m", "fixes"]

    /// Parses a registry file's text.
    /// - Throws: `DataFileError` with the line of the first problem.
    public static func parse(
        _ text: String, format: Format? = nil, maximumRadius: Double = CircularRegion.defaultMaximumRadius
    ) throws(DataFileError) -> InMemoryRegistry {
        switch format ?? Format.detect(text) {
        case .csv: try parseCSV(text, maximumRadius: maximumRadius)
        case .json: try parseJSON(text, maximumRadius: maximumRadius)
        }
    }

    static func parseCSV(_ text: String, maximumRadius: Double) throws(DataFileError) -> InMemoryRegistry {
        // Row by row, each made into its entry as it is read: the rows of a million-tag file
        // held at once (an array of fields each) were 130 MB more at the peak than the registry.
        var header: CSV.Row?
        var columns: [String: Int] = [:]
        var registry = InMemoryRegistry()
        let body = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        let size = body.utf8.count
        try CSV.forEachRow(body) { row, bytesRead throws(DataFileError) in
            guard let header else {
                for (index, name) in row.fields.enumerated() {
                    let key = canonicalColumn(name.lowercased())
                    guard columns[key] == nil else { throw DataFileError(line: row.line, message: "column \"\(name)\" appears twice") }
                    columns[key] = index
                }
                for required in ["id", "lat", "lon", "radius_m"] where columns[required] == nil {
                    throw DataFileError(
                        line: row.line,
                        message: "missing column \"\(required)\" (header must name id,lat,lon,radius_m; uid and name are optional)")
                }
                header = row
                return
            }
            guard row.fields.count == header.fields.count else {
                throw DataFileError(line: row.line, message: "\(row.fields.count) fields, the header has \(header.fields.count)")
            }
            var fields = Fields(line: row.line)
            for (key, index) in columns where !row.fields[index].isEmpty {
                // Text cells come back from their formula-safe form (see `CSV.formulaSafe`).
                let text = row.fields[index]
                fields.values[key] = .text(numericColumns.contains(key) ? text : CSV.formulaUnescaped(text))
            }
            try add(try makeEntry(fields, maximumRadius: maximumRadius), to: &registry, line: row.line)
            // Once 4,096 rows have been read, room for the whole file at their length, so the
            // entries and the index are allocated once at their size instead of doubling (each
            // doubling held the old copy and the new at once). Estimated from rows read and
            // valid, not from counting lines, so that a file of empty lines reserves nothing.
            if registry.count == 4_096 {
                registry.reserveCapacity(Int(Double(size) / Double(bytesRead) * 4_096 * 1.05))
            }
        }
        guard header != nil else {
            throw DataFileError(line: nil, message: "empty registry: expected a header row id,uid,lat,lon,radius_m,name")
        }
        return registry
    }

    private static func canonicalColumn(_ name: String) -> String {
        switch name {
        case "latitude": "lat"
        case "longitude", "lng": "lon"
        case "radius", "r", "radius_m": "radius_m"
        default: name
        }
    }

    private static func add(_ entry: RegistryEntry, to registry: inout InMemoryRegistry, line: Int) throws(DataFileError) {
        do {
            try registry.add(entry)
        } catch {
            throw DataFileError(line: line, message: error.description)
        }
    }

    static func parseJSON(_ text: String, maximumRadius: Double) throws(DataFileError) -> InMemoryRegistry {
        let root: JSONValue
        do {
            root = try JSONValue.parse(text)
        } catch {
            throw DataFileError(error)
        }
        let list: [JSONValue]
        if let array = root.array {
            list = array
        } else if let tags = root["tags"]?.array {
            list = tags
        } else {
            throw DataFileError(line: root.line, message: "expected an array of tags, or an object with a \"tags\" array")
        }
        var registry = InMemoryRegistry()
        registry.reserveCapacity(list.count)
        for item in list {
            guard let members = item.members else {
                throw DataFileError(line: item.line, message: "expected a tag object, found \(item.kindName)")
            }
            var fields = Fields(line: item.line)
            for member in members {
                guard columns.contains(member.key) else {
                    throw DataFileError(
                        line: member.value.line,
                        message: "unknown member \"\(member.key)\" (expected \(columns.joined(separator: ", ")))")
                }
                let value = member.value
                if value.isNull { continue }
                if numericColumns.contains(member.key) {
                    guard let number = value.double else {
                        throw DataFileError(line: value.line, message: "\"\(member.key)\" must be a number, found \(value.kindName)")
                    }
                    fields.values[member.key] = .value(number)
                } else {
                    guard let text = value.string else {
                        throw DataFileError(line: value.line, message: "\"\(member.key)\" must be a string, found \(value.kindName)")
                    }
                    fields.values[member.key] = .text(text)
                }
            }
            try add(try makeEntry(fields, maximumRadius: maximumRadius), to: &registry, line: item.line)
        }
        return registry
    }

    /// One tag's fields as found in a row or an object.
    struct Fields {
        var line: Int
        var values: [String: Number] = [:]

        func string(_ key: String) throws(DataFileError) -> String? {
            switch values[key] {
            case nil: return nil
            case .text(let text): return text
            case .value:
                throw DataFileError(line: line, message: "\"\(key)\" must be a string, found a number")
            }
        }

        func number(_ key: String) throws(DataFileError) -> Double? {
            try values[key]?.resolve(key, line: line)
        }
    }

    enum Number {
        case text(String)
        case value(Double)

        func resolve(_ field: String, line: Int) throws(DataFileError) -> Double {
            switch self {
            case .value(let value): return value
            case .text(let text):
                guard let value = strictDecimal(text) else {
                    throw DataFileError(line: line, message: "\(field) \"\(text)\" is not a decimal number")
                }
                return value
            }
        }
    }

    static func makeEntry(_ fields: Fields, maximumRadius: Double) throws(DataFileError) -> RegistryEntry {
        let line = fields.line
        guard let id = try fields.string("id"), !id.isEmpty else { throw DataFileError(line: line, message: "tag has no id") }
        guard let latitude = try fields.number("lat") else { throw DataFileError(line: line, message: "tag \"\(id)\" has no lat") }
        guard let longitude = try fields.number("lon") else { throw DataFileError(line: line, message: "tag \"\(id)\" has no lon") }
        guard let radiusMetres = try fields.number("radius_m") else {
            throw DataFileError(line: line, message: "tag \"\(id)\" has no radius_m")
        }
        let region: CircularRegion
        do {
            let center = try Coordinate(latitude: latitude, longitude: longitude)
            region = try CircularRegion(center: center, radius: radiusMetres, identifier: id, maximumRadius: maximumRadius)
        } catch let error as CoordinateError {
            throw DataFileError(line: line, message: "tag \"\(id)\": \(error)")
        } catch let error as RegionError {
            throw DataFileError(line: line, message: "tag \"\(id)\": \(error)")
        } catch {
            throw DataFileError(line: line, message: "tag \"\(id)\": \(error)")
        }
        var tagUID: TagUID?
        if let uid = try fields.string("uid") {
            do {
                tagUID = try TagUID(hex: uid)
            } catch {
                throw DataFileError(line: line, message: "tag \"\(id)\": \(error)")
            }
        }
        var enrolment: Enrolment?
        if let at = try fields.string("enrolled_at") {
            guard let time = Timestamp(iso8601: at) else {
                throw DataFileError(
                    line: line, message: "tag \"\(id)\": enrolled_at \"\(at)\" is not an ISO 8601 time (2026-05-14T08:00:00Z)")
            }
            let accuracy = try fields.number("accuracy_m")
            if let accuracy, !(accuracy >= 0 && accuracy.isFinite) {
                throw DataFileError(line: line, message: "tag \"\(id)\": accuracy_m \(accuracy) must be zero or more")
            }
            let fixes = try fields.number("fixes")
            if let fixes, !(fixes >= 0 && fixes <= 1e9 && fixes.rounded() == fixes) {
                throw DataFileError(line: line, message: "tag \"\(id)\": fixes \(fixes) must be a whole number")
            }
            enrolment = Enrolment(at: time, by: try fields.string("enrolled_by"), accuracy: accuracy, fixes: fixes.map { Int($0) })
        } else if fields.values["enrolled_by"] != nil || fields.values["accuracy_m"] != nil || fields.values["fixes"] != nil {
            throw DataFileError(line: line, message: "tag \"\(id)\": enrolled_by, accuracy_m and fixes need enrolled_at")
        }
        var originality: Originality.Status?
        if let text = try fields.string("originality") {
            guard let status = Originality.Status(rawValue: text) else {
                throw DataFileError(
                    line: line, message: "tag \"\(id)\": originality \"\(text)\" is not one of genuine, invalid, absent, unsupported")
            }
            originality = status
        }
        var sun: SUNSettings?
        if let text = try fields.string("sun") {
            do {
                sun = try SUNSettings(spec: text)
            } catch {
                throw DataFileError(line: line, message: "tag \"\(id)\": \(error)")
            }
        }
        return RegistryEntry(
            id: id, uid: tagUID, region: region, name: try fields.string("name"), enrolment: enrolment, notes: try fields.string("notes"),
            originality: originality, sun: sun)
    }
}

// MARK: - Writing

extension RegistryFile {
    /// The entries as a file of `format` that `parse` reads back to the same entries.
    public static func write(_ entries: some Sequence<RegistryEntry>, format: Format) -> String {
        let entries = Array(entries)
        let used = Self.columns(for: entries)
        switch format {
        case .csv:
            var text = used.joined(separator: ",") + "\n"
            for entry in entries {
                // Text cells formula-safe (a name "=HYPERLINK(…)" is not run by a spreadsheet);
                // numbers as they are.
                let cells = zip(used, row(entry, used)).map { key, value in
                    value.map { CSV.quoted(numericColumns.contains(key) ? $0 : CSV.formulaSafe($0)) } ?? ""
                }
                text += cells.joined(separator: ",") + "\n"
            }
            return text
        case .json:
            let objects = entries.map { entry in
                let members = zip(used, row(entry, used)).compactMap { key, value -> String? in
                    guard let value else { return nil }
                    let numeric = numericColumns.contains(key)
                    return "\(JSONValue.quoted(key)): \(numeric ? value : JSONValue.quoted(value))"
                }
                return "  {" + members.joined(separator: ", ") + "}"
            }
            return "[\n" + objects.joined(separator: ",\n") + (objects.isEmpty ? "" : "\n") + "]\n"
        }
    }

    /// The entry's fields in `columns` order; numbers in full precision.
    private static func row(_ entry: RegistryEntry, _ columns: [String]) -> [String?] {
        var cells: [String?] = [
            entry.id, entry.uid?.hex, exactDecimal(entry.region.center.latitude), exactDecimal(entry.region.center.longitude),
            exactDecimal(entry.region.radius), entry.name, entry.enrolment.map { $0.at.formatted(fractionDigits: 9) }, entry.enrolment?.by,
            entry.enrolment?.accuracy.map(exactDecimal), entry.enrolment?.fixes.map(String.init), entry.notes,
        ]
        if columns.contains("originality") { cells.append(entry.originality?.rawValue) }
        if columns.contains("sun") { cells.append(entry.sun?.description) }
        return cells
    }
}

/// A finite number as a plain decimal (no exponent) that reads back to the same `Double`: the
/// shortest round-trip digits of `description` (17.1, not 17.099999999999998), with an exponent
/// form (`1.2345678901234567e-05`) written out by moving its decimal point, so no digit is lost
/// or invented (a `%.20f` rounding kept only 16 significant digits of small numbers).
func exactDecimal(_ value: Double) -> String {
    var text = "\(value)"
    if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }), let exponent = Int(text[text.index(after: e)...]) {
        let mantissa = text[..<e]
        let negative = mantissa.hasPrefix("-")
        let unsigned = negative ? mantissa.dropFirst() : mantissa
        let point = unsigned.firstIndex(of: ".") ?? unsigned.endIndex
        let digits = Array(unsigned.filter { $0 != "." })
        let position = unsigned.distance(from: unsigned.startIndex, to: point) + exponent  // digits before the point
        var plain: String
        if position <= 0 {
            plain = "0." + String(repeating: "0", count: -position) + String(digits)
        } else if position >= digits.count {
            plain = String(digits) + String(repeating: "0", count: position - digits.count)
        } else {
            plain = String(digits[..<position]) + "." + String(digits[position...])
        }
        if plain.contains(".") {
            while plain.hasSuffix("0") { plain.removeLast() }
        }
        text = (negative ? "-" : "") + plain
    }
    if text.hasSuffix(".0") { text.removeLast(2) }
    if text.hasSuffix(".") { text.removeLast() }
    return text
}
