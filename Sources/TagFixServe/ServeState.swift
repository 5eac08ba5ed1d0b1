public import TagFixCore
public import TagFixDevices
public import TagFixReport

/// One thing every watching client is told, as a `class`ed JSON line.
///
/// A verdict's line (`{"class":"VERDICT","id":N,` and then its session record's members) is made
/// only when something reads `line`: a socket client or an event stream watching, or a request
/// for the history. Phones alone tapping, with nobody watching, made one a tap for nothing.
public struct ServeEvent: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case verdict, scan, fix, reader, gps, shutdown
    }

    public var kind: Kind
    /// A verdict's number (SSE's `id:`), counting from 1 in this server's run.
    public var id: Int?
    private let text: Text

    private enum Text: Sendable {
        case line(String)
        /// A verdict's session record (its JSON object), the line made from it when read.
        case record(String)
    }

    public init(kind: Kind, line: String, id: Int? = nil) {
        self.kind = kind
        self.text = .line(line)
        self.id = id
    }

    /// Verdict number `id`, from its session record's JSON line.
    public init(verdict id: Int, record: String) {
        kind = .verdict
        self.id = id
        text = .record(record)
    }

    /// The JSON object, without a newline.
    public var line: String {
        switch text {
        case .line(let line): line
        case .record(let record): ServeMessage.verdict(id: id ?? 0, record: record)
        }
    }

    public static func == (lhs: ServeEvent, rhs: ServeEvent) -> Bool {
        lhs.kind == rhs.kind && lhs.id == rhs.id && lhs.line == rhs.line
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(id)
        hasher.combine(line)
    }
}

/// What `tagfix serve` knows of its session: the readers, the GPS, the last fix, the newest
/// `historyLimit` verdicts (for `/api/verdicts` and an event stream that reconnects), each tag's
/// last verdict (for the map), and the counts `/metrics` shows. Its memory is bounded by the
/// history and the number of tags, not by how long it runs (the session log keeps everything).
/// Pure: events in, the lines to send out.
public struct ServeState: Sendable {
    public struct Logged: Sendable, Hashable {
        public var id: Int
        public var record: SessionRecord
        /// The record's JSON line (`RecordedVerdict.line`).
        var recordLine: String

        /// The VERDICT object (made when asked: most verdicts are never read from the history).
        public var line: String { ServeMessage.verdict(id: id, record: recordLine) }
    }

    public var readers: [ReaderState]
    public var gps: GPSState?
    public var fix: Fix?
    public var lastScans: [String: TagScan] = [:]
    public private(set) var history: [Logged] = []
    /// Each tag's last verdict, by `SessionRecord.tagKey`.
    public private(set) var lastByTag: [String: Logged] = [:]
    public private(set) var lastID = 0
    public let historyLimit: Int
    public var placements: [RegistryEntry]

    // Counters for /metrics.
    public private(set) var scans = 0
    public private(set) var verdictsByKind: [String: Int] = [:]
    public private(set) var readerErrors = 0
    public private(set) var gpsProblems = 0

    public init(readers: [String], gps: String?, placements: [RegistryEntry] = [], historyLimit: Int = 1_000) {
        self.readers = readers.map { ReaderState(path: $0, status: .opening) }
        self.gps = gps.map { GPSState(path: $0, status: .connecting) }
        self.placements = placements
        self.historyLimit = max(1, historyLimit)
    }

    /// Takes one verdict: numbered, kept, and returned as the VERDICT line.
    public mutating func receive(_ verdict: Verdict) -> ServeEvent {
        receive(RecordedVerdict(verdict))
    }

    /// `receive(_:)` with the record already encoded (the session log's line, made once for it
    /// and for this).
    public mutating func receive(_ recorded: RecordedVerdict) -> ServeEvent {
        lastID += 1
        let record = recorded.record
        let logged = Logged(id: lastID, record: record, recordLine: recorded.line)
        history.append(logged)
        if history.count > 2 * historyLimit { history.removeFirst(history.count - historyLimit) }
        lastByTag[record.tagKey] = logged
        verdictsByKind[record.verdict, default: 0] += 1
        return ServeEvent(verdict: lastID, record: recorded.line)
    }

    /// Takes a reader or GPS event; returns what watching clients are told of it.
    public mutating func observe(_ event: VerifierEvent, now: Timestamp?) -> [ServeEvent] {
        switch event {
        case .verdict(let verdict): return [receive(verdict)]
        case .reader(let readerEvent):
            return observe(readerEvent, now: now)
        case .gps(let fixEvent):
            return observe(fixEvent, now: now)
        case .clockOffset: return []
        }
    }

    private mutating func observe(_ event: ReaderEvent, now: Timestamp?) -> [ServeEvent] {
        // One reader: its events are its own. Several (merged): a scan names its reader, the
        // other events come through `observe(_:reader:now:)`, from each reader's own stream.
        guard readers.count == 1 || event.scan != nil else { return [] }
        return observe(event, index: 0, now: now)
    }

    /// Takes an event of the reader at `reader` (its address, as `readers` names it; one not
    /// named yet is added) other than a scan, which the verifier's stream brings; returns what
    /// watching clients are told of it.
    public mutating func observe(_ event: ReaderEvent, reader: String, now: Timestamp?) -> [ServeEvent] {
        guard event.scan == nil else { return [] }
        let index =
            readers.firstIndex { $0.path == reader }
            ?? {
                readers.append(ReaderState(path: reader, status: .opening))
                return readers.count - 1
            }()
        return observe(event, index: index, now: now)
    }

    private mutating func observe(_ event: ReaderEvent, index: Int, now: Timestamp?) -> [ServeEvent] {
        guard readers.indices.contains(index) || event.scan != nil else { return [] }
        switch event {
        case .ready(let description):
            readers[index].status = .attached
            readers[index].message = description
            readers[index].time = now
            return [ServeEvent(kind: .reader, line: ServeMessage.reader(readers[index]))]
        case .tagPresent(let scan):
            scans += 1
            lastScans[scan.readerID] = scan
            return [ServeEvent(kind: .scan, line: ServeMessage.scan(scan))]
        case .tagRemoved:
            return []
        case .failed(let error):
            readerErrors += 1
            var state = readers[index]
            state.status = .error
            state.message = error.description
            state.time = now
            // A failed read leaves the reader attached: say so without changing its state.
            return [ServeEvent(kind: .reader, line: ServeMessage.reader(state))]
        case .disconnected(let error):
            readerErrors += 1
            readers[index].status = .removed
            readers[index].message = error.description
            readers[index].time = now
            return [ServeEvent(kind: .reader, line: ServeMessage.reader(readers[index]))]
        }
    }

    private mutating func observe(_ event: FixEvent, now: Timestamp?) -> [ServeEvent] {
        guard var gps else {
            switch event {
            case .fix(let fix), .refined(let fix):
                self.fix = fix
                return [ServeEvent(kind: .fix, line: ServeMessage.fix(fix))]
            default:
                return []
            }
        }
        let before = gps.status
        switch event {
        case .fix(let fix), .refined(let fix):
            self.fix = fix
            gps.status = .connected
            self.gps = gps
            return [ServeEvent(kind: .fix, line: ServeMessage.fix(fix))]
        case .connected(let description):
            gps.status = .connected
            gps.message = description
        case .resumed:
            gps.status = .connected
            gps.message = "fixes resumed"
        case .unavailable(let why):
            gps.status = .unavailable
            gps.message = why
            gpsProblems += 1
        case .silent(let duration):
            gps.status = .silent
            gps.message = "no fix data for \(Coordinate.format(duration.seconds, 0)) s"
            gpsProblems += 1
        case .rejected, .restarted:
            return []
        }
        gps.time = now
        self.gps = gps
        guard before != gps.status || gps.status != .connected else { return [] }
        return [ServeEvent(kind: .gps, line: ServeMessage.gps(gps))]
    }

    /// The verdicts after `id`, oldest first (at least the newest `historyLimit` are kept).
    public func verdicts(since id: Int) -> ArraySlice<Logged> {
        guard let newest = history.last, newest.id > id else { return [] }
        let first = max(history.startIndex, history.endIndex - (newest.id - id))
        return history[first...]
    }

    /// The answer to `?POLL;`.
    public func poll(now: Timestamp?) -> String {
        ServeMessage.poll(
            time: now, readers: readers, lastScans: lastScans.keys.sorted().compactMap { lastScans[$0] }, fix: fix, gps: gps,
            lastVerdict: history.last?.line, verdicts: lastID)
    }

    /// The answer to `?DEVICES;`.
    public var devices: String { ServeMessage.devices(readers: readers, gps: gps) }

    /// The site as the HTML report sees it: the registry's tags, each tag's last verdict and the
    /// newest verdicts.
    public var site: SiteReport {
        let recent = history.suffix(historyLimit)
        let older = lastByTag.values.filter { $0.id < (recent.first?.id ?? 0) }.sorted { $0.id < $1.id }
        return SiteReport(records: (older + recent).map(\.record), placements: placements, title: "TagFix live")
    }

    /// `/api/tags`: each registry tag (`registry list --json`'s object) with its last verdict.
    public var tagsJSON: String {
        let objects = placements.map { entry in
            var head = JSONObjectWriter()
            head.add("status", lastByTag[entry.id]?.record.verdict)
            head.add("verdict_id", lastByTag[entry.id]?.id)
            return ServeMessage.splice(head, RegistryEntryReport.json(entry))
        }
        return "[" + objects.joined(separator: ",") + "]"
    }

    /// `/metrics`, Prometheus' text format. `clients` by kind, `fixAge` in seconds.
    public func metrics(clients: [String: Int], cutOff: Int, fixAge: Double?) -> String {
        var text = "# HELP tagfix_scans_total Tags read.\n# TYPE tagfix_scans_total counter\ntagfix_scans_total \(scans)\n"
        text += "# HELP tagfix_verdicts_total Verdicts, by kind.\n# TYPE tagfix_verdicts_total counter\n"
        for kind in SessionRecord.verdicts { text += "tagfix_verdicts_total{verdict=\"\(kind)\"} \(verdictsByKind[kind] ?? 0)\n" }
        text += "# HELP tagfix_reader_errors_total Reader failures and disconnections.\n# TYPE tagfix_reader_errors_total counter\n"
        text += "tagfix_reader_errors_total \(readerErrors)\n"
        text += "# HELP tagfix_gps_problems_total Times the GPS source was unavailable or silent.\n"
        text += "# TYPE tagfix_gps_problems_total counter\ntagfix_gps_problems_total \(gpsProblems)\n"
        text += "# HELP tagfix_fix_age_seconds Age of the last fix (absent before the first).\n# TYPE tagfix_fix_age_seconds gauge\n"
        if let fixAge { text += "tagfix_fix_age_seconds \(JSONValue.number(fixAge, digits: 3))\n" }
        text += "# HELP tagfix_clients Connected clients, by kind.\n# TYPE tagfix_clients gauge\n"
        for kind in ["socket", "sse", "http"] { text += "tagfix_clients{kind=\"\(kind)\"} \(clients[kind] ?? 0)\n" }
        text += "# HELP tagfix_clients_cut_off_total Clients cut off for not reading.\n# TYPE tagfix_clients_cut_off_total counter\n"
        text += "tagfix_clients_cut_off_total \(cutOff)\n"
        return text
    }
}

extension ReaderEvent {
    /// The scan, when this is one.
    var scan: TagScan? {
        if case .tagPresent(let scan) = self { return scan }
        return nil
    }
}
