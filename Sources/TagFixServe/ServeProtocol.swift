import Foundation
public import TagFixCore
import TagFixReport

/// What a client of `tagfix serve`'s event socket may send, gpsd's way: `?NAME;` or
/// `?NAME={json};` (docs/protocol.md).
public enum ClientCommand: Sendable, Hashable {
    /// `?WATCH={"enable":true};` or `{"enable":false}`; a bare `?WATCH;` asks for the current state.
    case watch(enable: Bool?)
    /// `?POLL;`: the latest state of each reader and the GPS, and the last verdict.
    case poll
    /// `?DEVICES;`: the readers and the GPS source.
    case devices
    /// `?VERSION;`: the VERSION object again.
    case version
    /// `?AUTH="TOKEN";` (or `?AUTH=TOKEN;`): the bearer token, when the server asks for one.
    case auth(String)

    /// The longest command the server reads; a longer one is an error and is skipped.
    public static let maximumLength = 4096

    /// Parses one command, without its terminating `;` or newline (`CommandFramer` splits them).
    /// - Throws: `ProtocolError` saying what was wrong, for an `ERROR` object.
    public static func parse(_ bytes: some Collection<UInt8>) throws(ProtocolError) -> ClientCommand {
        guard bytes.count <= maximumLength else { throw ProtocolError("command longer than \(maximumLength) bytes") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw ProtocolError("a command must be UTF-8 text") }
        return try parse(text)
    }

    /// Parses one command given as text (see `parse(_:)` for bytes).
    public static func parse(_ raw: String) throws(ProtocolError) -> ClientCommand {
        var text = Substring(raw.trimmingCharacters(in: .whitespacesAndNewlines))
        if text.hasSuffix(";") { text = text.dropLast() }
        guard text.first == "?" else {
            throw ProtocolError("commands start with ?, e.g. ?WATCH={\"enable\":true}; (got \(text.excerpt()))")
        }
        text = text.dropFirst()
        let name: Substring
        let argument: Substring?
        if let equals = text.firstIndex(of: "=") {
            name = text[..<equals]
            argument = text[text.index(after: equals)...]
        } else {
            name = text
            argument = nil
        }
        switch name.uppercased() {
        case "WATCH":
            guard let argument, !argument.isEmpty else { return .watch(enable: nil) }
            let value: JSONValue
            do {
                value = try JSONValue.parse(String(argument))
            } catch {
                throw ProtocolError("?WATCH takes a JSON object, e.g. {\"enable\":true}: \(error)")
            }
            guard case .object = value.kind else { throw ProtocolError("?WATCH takes a JSON object, e.g. {\"enable\":true}") }
            guard let member = value["enable"] else { return .watch(enable: true) }
            guard let enable = member.bool else { throw ProtocolError("\"enable\" must be true or false") }
            return .watch(enable: enable)
        case "POLL", "DEVICES", "VERSION":
            guard argument == nil || argument?.isEmpty == true else { throw ProtocolError("?\(name) takes no argument") }
            return name.uppercased() == "POLL" ? .poll : name.uppercased() == "DEVICES" ? .devices : .version
        case "AUTH":
            guard let argument, !argument.isEmpty else { throw ProtocolError("?AUTH needs the token: ?AUTH=\"TOKEN\";") }
            if argument.first == "\"" {
                guard let token = (try? JSONValue.parse(String(argument)))?.string else {
                    throw ProtocolError("?AUTH takes the token as a JSON string: ?AUTH=\"TOKEN\";")
                }
                return .auth(token)
            }
            return .auth(String(argument))
        default:
            throw ProtocolError("unknown command ?\(name.excerpt()); known: ?WATCH, ?POLL, ?DEVICES, ?VERSION, ?AUTH")
        }
    }
}

/// A command the server could not take; the client gets it as an `ERROR` object.
public struct ProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Splits what a client sends into commands: each ends at `;` (outside a JSON string or object)
/// or at a newline, so `?POLL;` needs no newline and `?WATCH={"enable":true};\n` is one command.
/// A command longer than `limit` is reported once (`.tooLong`) and skipped to the end of its line;
/// the framer never holds more than `limit` bytes, whatever a client sends.
public struct CommandFramer: Sendable {
    public enum Piece: Sendable, Hashable {
        case command([UInt8])
        case tooLong
    }

    public let limit: Int
    private var pending: [UInt8] = []
    private var depth = 0
    private var inString = false
    private var escaped = false
    private var skipping = false

    public init(limit: Int = ClientCommand.maximumLength) { self.limit = limit }

    /// The bytes of the command not yet ended.
    public var pendingCount: Int { pending.count }

    /// Whether a command has begun and not ended: more than white space since the last end, or
    /// an overlong one being skipped to the end of its line.
    public var isMidCommand: Bool { skipping || pending.contains { $0 > 0x20 } }

    /// Feeds bytes; returns the commands (and overlong ones) they complete, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [Piece] {
        var pieces: [Piece] = []
        if bytes.withContiguousStorageIfAvailable({ feed($0, into: &pieces) }) == nil {
            Array(bytes).withUnsafeBufferPointer { feed($0, into: &pieces) }
        }
        return pieces
    }

    private mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, into pieces: inout [Piece]) {
        var index = 0
        while index < bytes.count {
            if skipping, let base = bytes.baseAddress {
                // An overlong command is skipped to the end of its line, at memchr's pace (a 10 MB
                // line costs the server next to nothing).
                let rest = bytes.count - index
                let ends = [memchr(base + index, 10, rest), memchr(base + index, 13, rest)].compactMap { found in
                    found.map { UnsafeRawPointer($0) - UnsafeRawPointer(base + index) }
                }
                guard let end = ends.min() else { return }
                index += end
            }
            let byte = bytes[index]
            index += 1
            let ends: Bool
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") {
                ends = true
            } else if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                ends = false
            } else {
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth = max(0, depth - 1)
                default: break
                }
                ends = byte == UInt8(ascii: ";") && depth == 0
            }
            if ends {
                if !skipping, pending.contains(where: { $0 > 0x20 }) { pieces.append(.command(pending)) }
                pending.removeAll(keepingCapacity: true)
                (depth, inString, escaped, skipping) = (0, false, false, false)
                continue
            }
            if pending.count >= limit {
                pieces.append(.tooLong)
                pending.removeAll(keepingCapacity: false)
                skipping = true
                continue
            }
            pending.append(byte)
        }
    }
}

/// The JSON objects the server sends, one per line, each with a `class` first (gpsd's way).
/// They reuse the encoders the commands already print: `VERDICT` is `verify --json`'s record
/// (`SessionRecord`), `SCAN` is `scan --json`'s (`ScanReport`), `FIX` is `fix --json`'s
/// (`FixReport`), each with `class` (and a verdict's `id`) put in front.
public enum ServeMessage {
    public static let protocolMajor = 1
    public static let protocolMinor = 0

    public static func version(release: String) -> String {
        var object = JSONObjectWriter()
        object.add("class", "VERSION")
        object.add("release", release)
        object.add("rev", release)
        object.add("proto_major", protocolMajor)
        object.add("proto_minor", protocolMinor)
        return object.text
    }

    /// `verify --json`'s record with `class` and the server's verdict number in front (the
    /// record already names its `reader`).
    public static func verdict(id: Int, record: String) -> String {
        var head = JSONObjectWriter()
        head.add("class", "VERDICT")
        head.add("id", id)
        return splice(head, record)
    }

    public static func scan(_ scan: TagScan) -> String {
        var head = JSONObjectWriter()
        head.add("class", "SCAN")
        return splice(head, ScanReport.json(scan))
    }

    public static func fix(_ fix: Fix) -> String {
        var head = JSONObjectWriter()
        head.add("class", "FIX")
        return splice(head, FixReport.json(fix))
    }

    /// A reader's state: `attached`, `removed` or `error`, with what it said.
    public static func reader(_ state: ReaderState) -> String {
        var object = JSONObjectWriter()
        object.add("class", "READER")
        state.add(to: &object)
        return object.text
    }

    /// The GPS source's state.
    public static func gps(_ state: GPSState) -> String {
        var object = JSONObjectWriter()
        object.add("class", "GPS")
        state.add(to: &object)
        return object.text
    }

    public static func error(_ message: String) -> String {
        var object = JSONObjectWriter()
        object.add("class", "ERROR")
        object.add("message", message)
        return object.text
    }

    public static func watch(enabled: Bool) -> String {
        var object = JSONObjectWriter()
        object.add("class", "WATCH")
        object.add("enable", enabled)
        object.add("json", true)
        return object.text
    }

    public static func devices(readers: [ReaderState], gps: GPSState?) -> String {
        var object = JSONObjectWriter()
        object.add("class", "DEVICES")
        var devices = readers.map { reader in
            var device = JSONObjectWriter()
            device.add("class", "DEVICE")
            device.add("kind", "reader")
            reader.add(to: &device)
            return device.text
        }
        if let gps {
            var device = JSONObjectWriter()
            device.add("class", "DEVICE")
            device.add("kind", "gps")
            gps.add(to: &device)
            devices.append(device.text)
        }
        object.add("devices", raw: "[" + devices.joined(separator: ",") + "]")
        return object.text
    }

    public static func poll(
        time: Timestamp?, readers: [ReaderState], lastScans: [TagScan], fix: Fix?, gps: GPSState?, lastVerdict: String?, verdicts: Int
    ) -> String {
        var object = JSONObjectWriter()
        object.add("class", "POLL")
        object.add("time", time?.iso8601)
        object.add("verdicts", verdicts)
        object.add("readers", raw: "[" + readers.map(reader).joined(separator: ",") + "]")
        object.add("scans", raw: "[" + lastScans.map(scan).joined(separator: ",") + "]")
        object.add("fix", raw: fix.map(Self.fix))
        object.add("gps", raw: gps.map(Self.gps))
        object.add("verdict", raw: lastVerdict)
        return object.text
    }

    /// Said to every client as the server stops (SIGTERM): the log is complete.
    public static func shutdown(reason: String) -> String {
        var object = JSONObjectWriter()
        object.add("class", "SHUTDOWN")
        object.add("message", reason)
        return object.text
    }

    /// `{"class":…,` + the rest of `object`'s members.
    static func splice(_ head: JSONObjectWriter, _ object: String) -> String {
        // Bytes, not characters: counting a record's characters walks all of it (`{}` is 2 either way).
        guard object.utf8.count > 2 else { return head.text }
        return head.text(followedByMembersOf: object)
    }
}

/// A reader as the server last saw it.
public struct ReaderState: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable {
        case opening, attached, removed, error
    }

    /// The reader's address (`pn532_uart:/dev/ttyUSB0`).
    public var path: String
    public var status: Status
    /// What the reader said: its description, or the error.
    public var message: String?
    public var time: Timestamp?

    public init(path: String, status: Status, message: String? = nil, time: Timestamp? = nil) {
        self.path = path
        self.status = status
        self.message = message
        self.time = time
    }

    func add(to object: inout JSONObjectWriter) {
        object.add("path", path)
        object.add("status", status.rawValue)
        object.add("message", message)
        object.add("time", time?.iso8601)
    }
}

/// The GPS source as the server last saw it.
public struct GPSState: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable {
        case connecting, connected, unavailable, silent
    }

    public var path: String
    public var status: Status
    public var message: String?
    public var time: Timestamp?

    public init(path: String, status: Status, message: String? = nil, time: Timestamp? = nil) {
        self.path = path
        self.status = status
        self.message = message
        self.time = time
    }

    func add(to object: inout JSONObjectWriter) {
        object.add("path", path)
        object.add("status", status.rawValue)
        object.add("message", message)
        object.add("time", time?.iso8601)
    }
}
