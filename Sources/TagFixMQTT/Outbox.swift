import Foundation
import Glibc
public import TagFixCore
import TagFixSystem

/// The messages of a log that the broker has not acknowledged, in the log's order: which to send
/// next (at most `window` in flight), which message id carries which, what a PUBACK settles, and
/// what a lost connection puts back. Pure: a state machine, tested without a broker.
public struct OutboxQueue: Sendable {
    /// One verdict as it goes on the wire.
    public struct Entry: Sendable, Hashable {
        /// Its record's place in the session log, from 1.
        public var sequence: Int
        /// `PREFIX/SITE/verdict/TAG_ID`.
        public var topic: String
        /// `PREFIX/SITE/tag/TAG_ID/last` (retained).
        public var lastTopic: String
        /// `FleetMessage.payload`: the same bytes every time it is sent.
        public var payload: [UInt8]

        public init(sequence: Int, topic: String, lastTopic: String, payload: [UInt8]) {
            self.sequence = sequence
            self.topic = topic
            self.lastTopic = lastTopic
            self.payload = payload
        }
    }

    /// One MQTT message of a verdict.
    public enum Message: Sendable, Hashable {
        /// The tag's last verdict, retained on `PREFIX/SITE/tag/TAG_ID/last`, at QoS 0: it needs no
        /// acknowledgement of its own, as the verdict after it on the connection brings one.
        case last(Entry)
        /// The verdict on `PREFIX/SITE/verdict/TAG_ID`, QoS 1: its PUBACK settles the entry.
        case verdict(Entry)

        public var entry: Entry {
            switch self {
            case .last(let entry), .verdict(let entry): entry
            }
        }
        public var topic: String {
            switch self {
            case .last(let entry): entry.lastTopic
            case .verdict(let entry): entry.topic
            }
        }
        public var payload: [UInt8] { entry.payload }
        public var qos: Int32 {
            if case .verdict = self { return 1 }
            return 0
        }
        public var retain: Bool {
            if case .last = self { return true }
            return false
        }
    }

    /// The messages that send `batch`, in the order they go on one connection: each verdict's
    /// retained `last` just before the verdict. A broker handles a connection's packets in order,
    /// so a verdict's PUBACK means its `last` was taken too, and a verdict sent again after a
    /// reconnect brings its `last` again: the newest `last` the broker holds for a tag is never
    /// older than the tag's newest acknowledged verdict.
    public static func messages(_ batch: [Entry]) -> [Message] {
        var messages: [Message] = []
        messages.reserveCapacity(batch.count * 2)
        for entry in batch {
            messages.append(.last(entry))
            messages.append(.verdict(entry))
        }
        return messages
    }

    /// Most verdicts sent and not yet acknowledged at once.
    public let window: Int
    private var entries: [Int: Entry] = [:]
    /// Sequences waiting to be sent, ascending, from `head`.
    private var waiting: [Int] = []
    private var head = 0
    private var inFlight: [Int32: Int] = [:]

    public init(window: Int = 32) { self.window = max(1, window) }

    /// Verdicts not acknowledged yet (waiting or in flight).
    public var unacknowledged: Int { entries.count }
    /// Verdicts sent and not acknowledged.
    public var inFlightCount: Int { inFlight.count }

    /// Queues `entry` behind every other (its sequence is the highest so far).
    public mutating func add(_ entry: Entry) {
        guard entries[entry.sequence] == nil else { return }
        entries[entry.sequence] = entry
        waiting.append(entry.sequence)
    }

    /// The next verdict to send, if the window (and `limit`, the connection's send maximum) has
    /// room; it stays first until `sent`.
    public func next(limit: Int = .max) -> Entry? {
        guard inFlight.count < min(window, limit), head < waiting.count else { return nil }
        return entries[waiting[head]]
    }

    /// The verdicts `next` would give one after another while the window has room (each still
    /// waits until `sent`).
    public func ready(limit: Int = .max) -> [Entry] {
        let room = min(min(window, limit) - inFlight.count, waiting.count - head)
        guard room > 0 else { return [] }
        return waiting[head..<head + room].compactMap { entries[$0] }
    }

    /// The verdict `next()` gave went out as message `mid`.
    public mutating func sent(_ sequence: Int, mid: Int32) {
        guard head < waiting.count, waiting[head] == sequence else { return }
        head += 1
        inFlight[mid] = sequence
        if head > 1024, head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
    }

    /// A PUBACK for `mid`: the verdict it carried, now settled (nil: not a verdict's message).
    public mutating func acknowledged(mid: Int32) -> Int? {
        guard let sequence = inFlight.removeValue(forKey: mid) else { return nil }
        entries[sequence] = nil
        return sequence
    }

    /// The connection went, and every message in flight with it: they wait again, in order,
    /// before the ones never sent.
    public mutating func connectionLost() {
        guard !inFlight.isEmpty else { return }
        let again = inFlight.values.sorted()
        inFlight = [:]
        waiting = again + waiting[head...]
        head = 0
    }
}

/// Which records of a session log the broker has acknowledged: `LOG.acks` beside the log, one
/// sequence number a line, appended and synced on the publisher's thread after the PUBACKs one
/// read from the socket brought (one fsync for all of them). Its
/// first line names the device the log is published as, so a later run cannot send the same
/// records under other ids. A `kill -9` between a PUBACK and the sync loses at most that line:
/// the verdict is sent again, with the same id and bytes, and the collector keeps one.
final class AcknowledgementFile {
    let path: String
    private let descriptor: FileDescriptor
    private(set) var acknowledged: Set<Int>

    static func path(forLog log: String) -> String { log + ".acks" }

    /// Opens (creating) the file for `device`.
    /// - Throws: `FleetPublishError` when it cannot be read or written, or belongs to another device.
    init(log: String, device: String) throws(FleetPublishError) {
        path = Self.path(forLog: log)
        let header = "# tagfix outbox: device \(device)"
        var seen = Set<Int>()
        var hasHeader = false
        var complete = 0
        if let data = FileManager.default.contents(atPath: path) {
            // Only whole lines count: a last line without its newline was cut by a kill while it
            // was written ("12" torn to "1" must not settle record 1), and is cut off below.
            let bytes = Array(data)
            complete = (bytes.lastIndex(of: 0x0A) ?? -1) + 1
            let lines = bytes[..<complete].split(separator: 0x0A, omittingEmptySubsequences: true).map {
                String(decoding: $0, as: UTF8.self)
            }
            for (index, line) in lines.enumerated() {
                if index == 0, line.hasPrefix("# tagfix outbox: device ") {
                    guard line == header else {
                        throw .otherDevice(log: log, recorded: String(line.dropFirst("# tagfix outbox: device ".count)), given: device)
                    }
                    hasHeader = true
                } else if let number = Int(line), number > 0 {
                    seen.insert(number)
                }
            }
        }
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(
                path, .writeOnly, options: [.append, .create, .closeOnExec], permissions: FilePermissions(rawValue: 0o644))
        } catch {
            throw .acknowledgements(path, error.description)
        }
        if let status = try? fd.stat(), Int(status.size) > complete {
            do {
                try fd.resize(to: Int64(complete))
            } catch {
                _ = try? fd.close()
                throw .acknowledgements(path, "cannot cut off a torn last line: \(error)")
            }
        }
        descriptor = fd
        acknowledged = seen
        if !hasHeader { append(header + "\n") }
    }

    deinit { _ = try? descriptor.close() }

    /// Records `sequences` as acknowledged, on the disk (one write, one fsync) before it returns.
    func record(_ sequences: [Int]) {
        guard !sequences.isEmpty else { return }
        acknowledged.formUnion(sequences)
        append(sequences.map { "\($0)\n" }.joined())
    }

    private func append(_ text: String) {
        guard (try? descriptor.writeAll(Array(text.utf8))) != nil else { return }
        _ = try? descriptor.sync()
    }
}

/// Why verdicts cannot be published.
public enum FleetPublishError: Error, Sendable, Hashable, CustomStringConvertible {
    case settings(MQTTSettingsError)
    case topics(FleetTopicError)
    /// --publish without --log, or a log that is not a regular file.
    case needsLog(String)
    case log(String, String)
    case acknowledgements(String, String)
    case otherDevice(log: String, recorded: String, given: String)

    /// A wrong command line (64), as opposed to a file that cannot be read or written.
    public var exitsAsUsage: Bool {
        switch self {
        case .settings(.passwordFile): false
        case .settings, .topics, .needsLog, .otherDevice: true
        case .log, .acknowledgements: false
        }
    }

    /// The password file's error, when that is what failed.
    public var fileError: DataFileError? {
        if case .settings(.passwordFile(let error)) = self { return error }
        return nil
    }

    public var description: String {
        switch self {
        case .settings(let error): error.description
        case .topics(let error): error.description
        case .needsLog(let why): why
        case .log(let path, let why): "cannot read the session log \(path) to publish it (\(why))"
        case .acknowledgements(let path, let why):
            "cannot keep the broker's acknowledgements in \(path) (\(why)): check the folder's permissions"
        case .otherDevice(let log, let recorded, let given):
            "\(log) was published as device \"\(recorded)\": give --device-id \(recorded) to go on with it, or log to a new file for \"\(given)\""
        }
    }
}
