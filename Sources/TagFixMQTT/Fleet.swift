import TagFixCore

/// Fleets over MQTT (docs/fleet.md): the broker's address, the topics a verdict goes to, and the
/// message a verdict becomes. Pure (no I/O), in the fleet's own module: the transport
/// (MQTTClient), the publisher and the collector build on it.

// MARK: - The broker's address

/// `mqtt://[USER@]HOST[:PORT]/PREFIX` or `mqtts://…` (TLS): where a fleet's verdicts go.
public struct MQTTAddress: Sendable, Hashable, CustomStringConvertible {
    public var tls: Bool
    public var user: String?
    public var host: String
    public var port: Int
    /// The first topic level of every TagFix topic (one level: no `/`, `+` or `#`).
    public var prefix: String

    /// Parses an address.
    /// - Throws: `FleetTopicError` saying what to write instead.
    public init(_ text: String) throws(FleetTopicError) {
        let rest: Substring
        if text.hasPrefix("mqtt://") {
            tls = false
            rest = text.dropFirst("mqtt://".count)
        } else if text.hasPrefix("mqtts://") {
            tls = true
            rest = text.dropFirst("mqtts://".count)
        } else {
            throw .address(text, "give mqtt://[USER@]HOST[:PORT]/PREFIX or mqtts://… (TLS)")
        }
        guard let slash = rest.firstIndex(of: "/") else {
            throw .address(text, "it has no /PREFIX: every topic starts with one, e.g. mqtt://broker.example/tagfix")
        }
        var authority = rest[..<slash]
        let prefix = String(rest[rest.index(after: slash)...])
        if let at = authority.lastIndex(of: "@") {
            let user = String(authority[..<at])
            guard !user.isEmpty, !user.contains(":") else {
                throw .address(text, "give the user alone (USER@HOST); the password comes from --mqtt-password-file, never the address")
            }
            self.user = user
            authority = authority[authority.index(after: at)...]
        } else {
            user = nil
        }
        let parsed: HostPort
        do {
            parsed = try HostPort(parsing: authority)
        } catch {
            if case .port = error { throw .address(text, "the port must be 1…65535") }
            throw .address(text, error.description)
        }
        let port = parsed.port ?? (tls ? 8883 : 1883)
        guard (1...65535).contains(port) else { throw .address(text, "the port must be 1…65535") }
        guard !parsed.host.isEmpty else { throw .address(text, "it names no host") }
        self.host = parsed.host
        self.port = port
        try FleetTopics.checkLevel(prefix, what: "prefix")
        self.prefix = prefix
    }

    /// The address as given, without a password (there never is one in it).
    public var description: String {
        "\(tls ? "mqtts" : "mqtt")://\(user.map { "\($0)@" } ?? "")\(HostPort.described(host, port))/\(prefix)"
    }
}

/// A broker address, topic level, site or device name that TagFix refuses.
public enum FleetTopicError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A `mqtt://` address that does not parse: the text and what to write instead.
    case address(String, String)
    /// A site, device id or prefix that would not be exactly one topic level.
    case level(what: String, value: String, reason: String)

    public var description: String {
        switch self {
        case .address(let text, let hint): "\(text) is not an MQTT broker address: \(hint)"
        case .level(let what, let value, let reason):
            "the \(what) \"\(value)\" cannot be one MQTT topic level (\(reason)): every TagFix topic has exactly four levels; "
                + "choose a \(what) without /, + or #"
        }
    }
}

// MARK: - Topics

/// The topics of a fleet, each exactly four levels under its prefix (docs/fleet.md):
/// `PREFIX/SITE/verdict/TAG_ID`, `PREFIX/SITE/device/DEVICE_ID/status`,
/// and the retained `PREFIX/SITE/tag/TAG_ID/last`.
public struct FleetTopics: Sendable, Hashable {
    public let prefix: String
    public let site: String
    public let device: String

    /// - Throws: `FleetTopicError.level` when the prefix, the site or the device id is empty or
    ///   holds `/`, `+`, `#` or a NUL (it would not be one level, or would be a wildcard).
    public init(prefix: String, site: String, device: String) throws(FleetTopicError) {
        try Self.checkLevel(prefix, what: "prefix")
        try Self.checkLevel(site, what: "site")
        try Self.checkLevel(device, what: "device id")
        self.prefix = prefix
        self.site = site
        self.device = device
    }

    /// Why `value` cannot be one topic level, as a thrown error.
    public static func checkLevel(_ value: String, what: String) throws(FleetTopicError) {
        if value.isEmpty { throw .level(what: what, value: value, reason: "it is empty") }
        if value.hasPrefix("$") { throw .level(what: what, value: value, reason: "a level starting with $ is the broker's") }
        for (character, reason) in [("/", "/ separates levels"), ("+", "+ is a wildcard"), ("#", "# is a wildcard"), ("\0", "NUL")]
        where value.contains(character) {
            throw .level(what: what, value: value, reason: reason)
        }
        if value.utf8.count > 1024 { throw .level(what: what, value: value, reason: "longer than 1024 bytes") }
    }

    /// A tag id as one level: `_` for none; `%`, `/`, `+`, `#` and a lone `_` percent-encoded, so
    /// every tag id is exactly one level and two ids never share one.
    public static func tagLevel(_ tagID: String?) -> String {
        guard let tagID, !tagID.isEmpty else { return "_" }
        if tagID == "_" { return "%5F" }
        var level = ""
        for character in tagID.unicodeScalars {
            switch character {
            case "%": level += "%25"
            case "/": level += "%2F"
            case "+": level += "%2B"
            case "#": level += "%23"
            case "\0": level += "%00"
            default: level.unicodeScalars.append(character)
            }
        }
        return level
    }

    /// `PREFIX/SITE/verdict/TAG_ID`: one QoS 1 message per verdict.
    public func verdict(tagID: String?) -> String { "\(prefix)/\(site)/verdict/\(Self.tagLevel(tagID))" }

    /// `PREFIX/SITE/tag/TAG_ID/last`: the tag's last verdict, retained.
    public func last(tagID: String?) -> String { "\(prefix)/\(site)/tag/\(Self.tagLevel(tagID))/last" }

    /// `PREFIX/SITE/device/DEVICE_ID/status`: `online`, and the Last Will `offline`, retained.
    public var status: String { "\(prefix)/\(site)/device/\(device)/status" }

    /// What a collector subscribes to: every site's verdicts under `prefix`, as a shared
    /// subscription of `group` (`$share/GROUP/…`) when one is given.
    public static func collectorFilter(prefix: String, group: String?) -> String {
        let filter = "\(prefix)/+/verdict/+"
        return group.map { "$share/\($0)/\(filter)" } ?? filter
    }

    /// The site of a verdict topic (`PREFIX/SITE/verdict/TAG_ID`), or nil for any other topic.
    public static func site(ofVerdictTopic topic: String) -> String? {
        // The three slashes found in one pass over the bytes (a collector does this per message).
        let utf8 = topic.utf8
        var slashes: (String.Index, String.Index, String.Index)?
        var first: String.Index?
        var second: String.Index?
        for index in utf8.indices where utf8[index] == UInt8(ascii: "/") {
            if first == nil {
                first = index
            } else if second == nil {
                second = index
            } else if let first, let second, slashes == nil {
                slashes = (first, second, index)
            } else {
                return nil
            }
        }
        guard let (first, second, third) = slashes else { return nil }
        guard topic[topic.index(after: second)..<third] == "verdict" else { return nil }
        return String(topic[topic.index(after: first)..<second])
    }
}

// MARK: - The message

/// A verdict as a fleet message: the session log's line (`SessionRecord.encoded()`, the object
/// `verify --json` prints) with the message's stable `id` and the `device` added at its end.
/// Built from the log's bytes alone, so a verdict sent again (a broker that went away, a
/// restarted publisher) carries the same id and the same bytes.
public enum FleetMessage {
    /// `DEVICE:SESSION:SEQUENCE`. `session` names the log (`session(firstLine:)`); `sequence` is
    /// the record's place in it, from 1.
    public static func id(device: String, session: String, sequence: Int) -> String { "\(device):\(session):\(sequence)" }

    /// A session's name: FNV-1a (64 bits, hex) of the log's first record line, which never
    /// changes once written (its time is in nanoseconds).
    public static func session(firstLine: some Sequence<UInt8>) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in firstLine {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The payload: `line` (a JSON object, no newline) with `"id"` and `"device"` appended.
    public static func payload(line: some Collection<UInt8>, id: String, device: String) -> [UInt8] {
        var bytes = Array(line)
        while let last = bytes.last, last == 0x0A || last == 0x0D || last == 0x20 { bytes.removeLast() }
        guard bytes.last == UInt8(ascii: "}") else { return bytes }
        bytes.removeLast()
        let empty = bytes.last == UInt8(ascii: "{")
        bytes += Array("\(empty ? "" : ",")\"id\":\(JSONValue.quoted(id)),\"device\":\(JSONValue.quoted(device))}".utf8)
        return bytes
    }
}
