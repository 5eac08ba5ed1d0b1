/// Where a tag should be: one row of the registry of tag placements.
public struct RegistryEntry: Sendable, Hashable {
    /// The tag's identifier, as its URL names it (see `URLLocation.tagID`).
    public var id: String
    public var uid: TagUID?
    public var region: CircularRegion
    public var name: String?

    public init(id: String, uid: TagUID?, region: CircularRegion, name: String?) {
        self.id = id
        self.uid = uid
        self.region = region
        self.name = name
    }
}

/// A store of tag placements. Lookups are synchronous: the verifier calls them on its own task
/// for every scan, and stores keep them fast (in memory, or an indexed SQLite table).
public protocol TagRegistry: Sendable {
    /// The entry whose identifier is `id`.
    func entry(forID id: String) throws(RegistryError) -> RegistryEntry?
    /// The entry registered for the tag with this UID.
    func entry(forUID uid: TagUID) throws(RegistryError) -> RegistryEntry?
}

extension TagRegistry {
    /// The registry entry for a scan: by the URL's tag identifier first, then by UID.
    public func entry(forTagID id: String?, uid: TagUID) throws(RegistryError) -> RegistryEntry? {
        if let id, let entry = try entry(forID: id) { return entry }
        return try entry(forUID: uid)
    }
}

/// A registry that could not answer.
public struct RegistryError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "registry unavailable: \(message)" }
}

/// A registry held in memory: dictionaries by identifier and by UID.
public struct InMemoryRegistry: TagRegistry, Sendable {
    public private(set) var entries: [RegistryEntry] = []
    private var byID: [String: Int] = [:]
    private var byUID: [TagUID: Int] = [:]

    public init() {}

    /// - Throws: `RegistryConflict` when an identifier or a UID appears twice.
    public init(_ entries: some Sequence<RegistryEntry>) throws(RegistryConflict) {
        for entry in entries { try add(entry) }
    }

    public mutating func add(_ entry: RegistryEntry) throws(RegistryConflict) {
        guard byID[entry.id] == nil else { throw .duplicateID(entry.id) }
        if let uid = entry.uid {
            if let other = byUID[uid] { throw .duplicateUID(uid, entries[other].id) }
            byUID[uid] = entries.count
        }
        byID[entry.id] = entries.count
        entries.append(entry)
    }

    public var count: Int { entries.count }

    public func entry(forID id: String) -> RegistryEntry? { byID[id].map { entries[$0] } }
    public func entry(forUID uid: TagUID) -> RegistryEntry? { byUID[uid].map { entries[$0] } }
}

public enum RegistryConflict: Error, Sendable, Hashable, CustomStringConvertible {
    case duplicateID(String)
    case duplicateUID(TagUID, String)

    public var description: String {
        switch self {
        case .duplicateID(let id): "tag id \"\(id)\" appears twice"
        case .duplicateUID(let uid, let other): "UID \(uid) is already registered to tag \"\(other)\""
        }
    }
}

// MARK: - CSV and JSON files

/// Reads registry files: CSV with a header row, or JSON (an array of objects, or an object with a
/// `tags` array). Columns / members: `id`, `uid` (optional), `lat`, `lon`, `radius_m`, `name`
/// (optional). Pure: the caller reads the file and passes its text.
public enum RegistryFile {
    public enum Format: Sendable, Hashable {
        case csv, json

        /// The format by content: JSON starts with `[` or `{`, anything else is CSV.
        public static func detect(_ text: String) -> Format {
            let first = text.utf8.first { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }
            return first == UInt8(ascii: "[") || first == UInt8(ascii: "{") ? .json : .csv
        }
    }

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
        let rows = try CSV.parse(text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text)
        guard let header = rows.first else {
            throw DataFileError(line: nil, message: "empty registry: expected a header row id,uid,lat,lon,radius_m,name")
        }
        var columns: [String: Int] = [:]
        for (index, name) in header.fields.enumerated() {
            let key = canonicalColumn(name.lowercased())
            guard columns[key] == nil else { throw DataFileError(line: header.line, message: "column \"\(name)\" appears twice") }
            columns[key] = index
        }
        for required in ["id", "lat", "lon", "radius_m"] where columns[required] == nil {
            throw DataFileError(
                line: header.line,
                message: "missing column \"\(required)\" (header must name id,lat,lon,radius_m; uid and name are optional)")
        }
        var registry = InMemoryRegistry()
        for row in rows.dropFirst() {
            guard row.fields.count == header.fields.count else {
                throw DataFileError(line: row.line, message: "\(row.fields.count) fields, the header has \(header.fields.count)")
            }
            func field(_ name: String) -> String? {
                columns[name].map { row.fields[$0] }.flatMap { $0.isEmpty ? nil : $0 }
            }
            let entry = try makeEntry(
                line: row.line, id: field("id"), uid: field("uid"), lat: field("lat").map(Number.text),
                lon: field("lon").map(Number.text), radius: field("radius_m").map(Number.text), name: field("name"),
                maximumRadius: maximumRadius)
            do {
                try registry.add(entry)
            } catch {
                throw DataFileError(line: row.line, message: error.description)
            }
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
        for item in list {
            guard let members = item.members else {
                throw DataFileError(line: item.line, message: "expected a tag object, found \(item.kindName)")
            }
            for member in members where !["id", "uid", "lat", "lon", "radius_m", "name"].contains(member.key) {
                throw DataFileError(
                    line: member.value.line, message: "unknown member \"\(member.key)\" (expected id, uid, lat, lon, radius_m, name)")
            }
            func string(_ key: String) throws(DataFileError) -> String? {
                guard let value = item[key], !value.isNull else { return nil }
                guard let text = value.string else {
                    throw DataFileError(line: value.line, message: "\"\(key)\" must be a string, found \(value.kindName)")
                }
                return text
            }
            func number(_ key: String) throws(DataFileError) -> Number? {
                guard let value = item[key], !value.isNull else { return nil }
                guard let number = value.double else {
                    throw DataFileError(line: value.line, message: "\"\(key)\" must be a number, found \(value.kindName)")
                }
                return .value(number)
            }
            let entry = try makeEntry(
                line: item.line, id: try string("id"), uid: try string("uid"), lat: try number("lat"),
                lon: try number("lon"), radius: try number("radius_m"), name: try string("name"),
                maximumRadius: maximumRadius)
            do {
                try registry.add(entry)
            } catch {
                throw DataFileError(line: item.line, message: error.description)
            }
        }
        return registry
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

    static func makeEntry(
        line: Int, id: String?, uid: String?, lat: Number?, lon: Number?, radius: Number?, name: String?,
        maximumRadius: Double
    ) throws(DataFileError) -> RegistryEntry {
        guard let id, !id.isEmpty else { throw DataFileError(line: line, message: "tag has no id") }
        guard let lat else { throw DataFileError(line: line, message: "tag \"\(id)\" has no lat") }
        guard let lon else { throw DataFileError(line: line, message: "tag \"\(id)\" has no lon") }
        guard let radius else { throw DataFileError(line: line, message: "tag \"\(id)\" has no radius_m") }
        let latitude = try lat.resolve("lat", line: line)
        let longitude = try lon.resolve("lon", line: line)
        let radiusMetres = try radius.resolve("radius_m", line: line)
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
        if let uid {
            do {
                tagUID = try TagUID(hex: uid)
            } catch {
                throw DataFileError(line: line, message: "tag \"\(id)\": \(error)")
            }
        }
        return RegistryEntry(id: id, uid: tagUID, region: region, name: name)
    }
}
