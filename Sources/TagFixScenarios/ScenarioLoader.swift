import Foundation
public import TagFixCore
import TagFixDevices

/// Reads scenario files (docs/scenarios.md). Every problem is a `DataFileError` naming the file
/// and line.
public enum ScenarioLoader {
    /// Loads a scenario file; files it names (a gpsd log) are read relative to its folder.
    public static func load(path: String) throws(DataFileError) -> Scenario {
        let text = try TextFile.read(path)
        let base = (path as NSString).deletingLastPathComponent
        do {
            return try parse(text) { (relative: String) throws(DataFileError) -> String in
                let full = relative.hasPrefix("/") ? relative : (base.isEmpty ? relative : base + "/" + relative)
                return try TextFile.read(full)
            }
        } catch {
            throw error.file == nil ? error.inFile(path) : error
        }
    }

    /// Parses a scenario's JSON text.
    /// - Parameter readFile: reads a file the scenario names (`gps.gpsd_log`), relative to it.
    public static func parse(
        _ text: String,
        readFile: (String) throws(DataFileError) -> String = { (path: String) throws(DataFileError) -> String in
            throw DataFileError(line: nil, message: "cannot read \(path) here")
        }
    ) throws(DataFileError) -> Scenario {
        let root: JSONValue
        do {
            root = try JSONValue.parse(text)
        } catch {
            throw DataFileError(error)
        }
        let top = try Object(root, "scenario", allowed: ["name", "start", "reader", "registry", "policy", "gps", "taps", "reader_errors"])
        let name = try top.string("name") ?? "scenario"
        guard let startText = try top.string("start") else {
            throw top.error("missing \"start\" (an RFC 3339 time, e.g. 2026-05-14T08:00:00Z)")
        }
        guard let start = Timestamp(iso8601: startText) else {
            throw DataFileError(line: top.line(of: "start"), message: "start \"\(startText)\" is not an RFC 3339 time")
        }
        let readerID = try top.string("reader") ?? "mock"
        var policy = VerificationPolicy()
        if let value = top["policy"] { policy = try parsePolicy(try Object(value, "policy", allowed: policyKeys)) }

        var gpsEvents: [Scheduled<FixEvent>] = []
        if let value = top["gps"] {
            gpsEvents = try parseGPS(try Object(value, "gps", allowed: gpsKeys), start: start, readFile: readFile)
        }
        var readerEvents: [Scheduled<ReaderEvent>] = []
        for item in try top.array("taps") {
            let tap = try Object(item, "tap", allowed: ["t", "uid", "type", "url", "source"])
            let at = try time(tap, start: start)
            guard let uidText = try tap.string("uid") else { throw tap.error("tap has no \"uid\"") }
            let uid: TagUID
            do {
                uid = try TagUID(hex: uidText)
            } catch {
                throw DataFileError(line: tap.line(of: "uid"), message: error.description)
            }
            let type = TagType(rawValue: try tap.string("type") ?? "ntag213")
            let sourceText = try tap.string("source") ?? "nfc"
            guard let source = ScanSource(rawValue: sourceText) else {
                throw DataFileError(line: tap.line(of: "source"), message: "source \"\(sourceText)\" must be \"nfc\" or \"link\"")
            }
            let scan = TagScan(readerID: readerID, uid: uid, tagType: type, url: try tap.string("url"), time: at, source: source)
            readerEvents.append(Scheduled(at: at, .tagPresent(scan)))
        }
        for item in try top.array("reader_errors") {
            let entry = try Object(item, "reader error", allowed: ["t", "code", "message", "hint"])
            let at = try time(entry, start: start)
            let code = ReaderError.Code(rawValue: try entry.string("code") ?? "io")
            let message = try entry.string("message") ?? "reader error"
            readerEvents.append(Scheduled(at: at, .failed(ReaderError(code: code, message: message, hint: try entry.string("hint")))))
        }
        readerEvents.sort { $0.at < $1.at }
        return Scenario(
            name: name, start: start, readerID: readerID, policy: policy, registryPath: try top.string("registry"),
            gps: gpsEvents, reader: readerEvents)
    }

    // MARK: - Policy

    static let policyKeys: Set<String> = [
        "location_confirmation", "disallowed_tags", "max_fix_age_s", "max_accuracy_m", "allow_simulated",
        "fix_timeout_s", "interpolation_wait_s", "max_radius_m", "default_url_radius_m",
    ]

    static func parsePolicy(_ object: Object) throws(DataFileError) -> VerificationPolicy {
        var policy = VerificationPolicy()
        if let value = try object.bool("location_confirmation") { policy.locationConfirmation = value }
        if let value = try object.bool("allow_simulated") { policy.allowSimulatedFixes = value }
        for item in try object.array("disallowed_tags") {
            guard let id = item.string else {
                throw DataFileError(line: item.line, message: "disallowed_tags holds strings, found \(item.kindName)")
            }
            policy.disallowedTags.insert(id)
        }
        if let value = try object.duration("max_fix_age_s") { policy.maximumFixAge = value }
        if let value = try object.duration("fix_timeout_s") { policy.fixTimeout = value }
        if let value = try object.duration("interpolation_wait_s") { policy.interpolationWait = value }
        if let value = try object.positive("max_accuracy_m") { policy.maximumAccuracy = value }
        if let value = try object.positive("max_radius_m") { policy.maximumRadius = value }
        if let value = try object.positive("default_url_radius_m") { policy.defaultURLRadius = value }
        return policy
    }

    // MARK: - GPS

    static let gpsKeys: Set<String> = [
        "rate_hz", "accuracy_m", "noise_m", "seed", "satellites", "status", "route", "fixes", "gpsd_log",
        "align_log_to_start", "dropouts", "degraded",
    ]

    struct Window {
        var from: Timestamp
        var to: Timestamp
        func contains(_ t: Timestamp) -> Bool { t >= from && t < to }
    }

    /// The `gps` object: what every fix shares, the route or the listed fixes, a gpsd log, and the
    /// dropouts and degraded windows applied to them.
    static func parseGPS(
        _ gps: Object, start: Timestamp, readFile: (String) throws(DataFileError) -> String
    ) throws(DataFileError) -> [Scheduled<FixEvent>] {
        let receiver = try Receiver(gps)
        let dropouts = try parseDropouts(gps, start: start)
        let degraded = try parseDegraded(gps, start: start)
        var fixes = try routeFixes(gps, start: start, receiver: receiver, degraded: degraded)
        fixes += try listedFixes(gps, start: start, receiver: receiver)
        var events = try logEvents(gps, start: start, readFile: readFile)
        events += applying(dropouts, to: fixes)
        return events.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
    }

    /// What every fix of the `gps` object shares unless a fix says otherwise.
    struct Receiver {
        var rate: Double
        var accuracy: Double
        var noise: Double?
        var seed: Int
        var satellites: Int
        var status: Fix.Status

        init(_ gps: Object) throws(DataFileError) {
            rate = try gps.positive("rate_hz") ?? 1
            guard rate <= 50 else { throw DataFileError(line: gps.line(of: "rate_hz"), message: "rate_hz \(rate) is above 50") }
            accuracy = try gps.nonNegative("accuracy_m") ?? 4
            noise = try gps.nonNegative("noise_m")
            seed = try gps.integer("seed") ?? 1
            satellites = try gps.integer("satellites") ?? 9
            status = try fixStatus(gps, default: .gps)
        }
    }

    typealias Dropout = (Window, silent: Bool)
    typealias Degraded = (Window, accuracy: Double, noise: Double?)

    static func parseDropouts(_ gps: Object, start: Timestamp) throws(DataFileError) -> [Dropout] {
        var dropouts: [Dropout] = []
        for item in try gps.array("dropouts") {
            let entry = try Object(item, "dropout", allowed: ["from", "to", "kind"])
            let window = try self.window(entry, start: start)
            let kind = try entry.string("kind") ?? "silent"
            guard kind == "silent" || kind == "no_fix" else {
                throw DataFileError(line: entry.line(of: "kind"), message: "dropout kind \"\(kind)\" must be \"silent\" or \"no_fix\"")
            }
            dropouts.append((window, kind == "silent"))
        }
        return dropouts
    }

    static func parseDegraded(_ gps: Object, start: Timestamp) throws(DataFileError) -> [Degraded] {
        var degraded: [Degraded] = []
        for item in try gps.array("degraded") {
            let entry = try Object(item, "degraded window", allowed: ["from", "to", "accuracy_m", "noise_m"])
            guard let accuracy = try entry.nonNegative("accuracy_m") else { throw entry.error("degraded window has no \"accuracy_m\"") }
            degraded.append((try window(entry, start: start), accuracy, try entry.nonNegative("noise_m")))
        }
        return degraded
    }

    /// A walked route: timed waypoints, sampled at rate_hz with seeded noise.
    static func routeFixes(_ gps: Object, start: Timestamp, receiver: Receiver, degraded: [Degraded]) throws(DataFileError) -> [Fix] {
        var fixes: [Fix] = []
        let route = try gps.array("route")
        guard !route.isEmpty else { return [] }
        var waypoints: [(Timestamp, Coordinate)] = []
        for item in route {
            let point = try Object(item, "waypoint", allowed: ["t", "lat", "lon"])
            let at = try time(point, start: start)
            if let last = waypoints.last, at < last.0 {
                throw DataFileError(line: point.line, message: "waypoint times must not go backwards")
            }
            waypoints.append((at, try coordinate(point)))
        }
        let samples = waypoints[0].0.duration(to: waypoints[waypoints.count - 1].0).seconds * receiver.rate
        guard samples <= 1_000_000 else {
            throw DataFileError(
                line: gps.line(of: "route"),
                message: "the route would give \(Int(samples)) fixes; at most 1 000 000 (shorten it or lower rate_hz)")
        }
        var generator = SeededGenerator(seed: UInt64(truncatingIfNeeded: receiver.seed))
        let step = Duration.seconds(1 / receiver.rate)
        var t = waypoints[0].0
        let end = waypoints[waypoints.count - 1].0
        var segment = 0
        while t <= end {
            while segment + 1 < waypoints.count - 1, waypoints[segment + 1].0 <= t { segment += 1 }
            let (t0, p0) = waypoints[segment]
            let (t1, p1) = waypoints[min(segment + 1, waypoints.count - 1)]
            let span = t0.duration(to: t1).seconds
            let f = span > 0 ? min(1, max(0, t0.duration(to: t).seconds / span)) : 0
            var accuracy = receiver.accuracy
            var sigma = receiver.noise ?? receiver.accuracy / 2.45
            if let window = degraded.first(where: { $0.0.contains(t) }) {
                accuracy = window.accuracy
                sigma = window.noise ?? window.accuracy / 2.45
            }
            let north = generator.gaussian() * sigma
            let east = generator.gaussian() * sigma
            let latitude = p0.latitude + (p1.latitude - p0.latitude) * f + north / 111_320
            let longitude =
                p0.longitude + (p1.longitude - p0.longitude) * f
                + east / (111_320 * max(0.01, cos(latitude * .pi / 180)))
            if let position = try? Coordinate(latitude: min(90, max(-90, latitude)), longitude: longitude) {
                fixes.append(
                    Fix(
                        time: t, mode: .threeD, coordinate: position, horizontalAccuracy: accuracy, status: receiver.status,
                        satellitesUsed: receiver.satellites))
            }
            t = t.advanced(by: step)
        }
        return fixes
    }

    /// The fixes listed one by one.
    static func listedFixes(_ gps: Object, start: Timestamp, receiver: Receiver) throws(DataFileError) -> [Fix] {
        var fixes: [Fix] = []
        for item in try gps.array("fixes") {
            let entry = try Object(item, "fix", allowed: ["t", "lat", "lon", "accuracy_m", "mode", "status", "satellites"])
            let at = try time(entry, start: start)
            let modeText = try entry.string("mode") ?? "3d"
            let mode: Fix.Mode
            switch modeText {
            case "3d": mode = .threeD
            case "2d": mode = .twoD
            case "no_fix": mode = .noFix
            default: throw DataFileError(line: entry.line(of: "mode"), message: "mode \"\(modeText)\" must be \"3d\", \"2d\" or \"no_fix\"")
            }
            let position = mode == .noFix ? nil : try coordinate(entry)
            fixes.append(
                Fix(
                    time: at, mode: mode, coordinate: position,
                    horizontalAccuracy: try entry.nonNegative("accuracy_m") ?? (mode == .noFix ? nil : receiver.accuracy),
                    status: try fixStatus(entry, default: receiver.status),
                    satellitesUsed: try entry.integer("satellites") ?? receiver.satellites))
        }
        return fixes
    }

    /// A recorded gpsd log's reports, if the object names one.
    static func logEvents(
        _ gps: Object, start: Timestamp, readFile: (String) throws(DataFileError) -> String
    ) throws(DataFileError) -> [Scheduled<FixEvent>] {
        var events: [Scheduled<FixEvent>] = []
        if let logPath = try gps.string("gpsd_log") {
            let log: String
            do {
                log = try readFile(logPath)
            } catch {
                throw error.unreadable ? error : DataFileError(line: gps.line(of: "gpsd_log"), message: "gpsd_log: \(error)")
            }
            events += try gpsdLog(log, name: logPath, start: start, align: try gps.bool("align_log_to_start") ?? true)
        }
        return events
    }

    /// Dropouts: silent removes fixes; no_fix turns them into no-fix reports.
    static func applying(_ dropouts: [Dropout], to fixes: [Fix]) -> [Scheduled<FixEvent>] {
        var events: [Scheduled<FixEvent>] = []
        for fix in fixes {
            if let dropout = dropouts.first(where: { $0.0.contains(fix.time) }) {
                if !dropout.silent {
                    events.append(
                        Scheduled(
                            at: fix.time,
                            .fix(
                                Fix(
                                    time: fix.time, mode: .noFix, coordinate: nil, horizontalAccuracy: nil, status: fix.status,
                                    satellitesUsed: 0))))
                }
                continue
            }
            events.append(Scheduled(at: fix.time, .fix(fix)))
        }
        return events
    }

    /// gpsd JSON lines (as `gpspipe -w` writes them): TPV become fixes with SKY's satellites;
    /// unusable TPV become `rejected` events. NMEA sentences are skipped; any other line that is
    /// not a JSON object is an error.
    static func gpsdLog(_ text: String, name: String, start: Timestamp, align: Bool) throws(DataFileError) -> [Scheduled<FixEvent>] {
        var events: [Scheduled<FixEvent>] = []
        var satellites: Int?
        var offset: Duration?
        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            // Blank lines, comments and raw NMEA sentences (`gpspipe -w -r` interleaves them).
            guard !line.isEmpty, !line.hasPrefix("#"), !line.hasPrefix("$"), !line.hasPrefix("!") else { continue }
            let report: GPSDReport
            do {
                report = try GPSDReport.parse(line: line)
            } catch {
                throw DataFileError(file: name, line: index + 1, message: error.message)
            }
            switch report {
            case .sky(let used, _):
                satellites = used ?? satellites
            case .tpv(let tpv):
                switch tpv.fix(satellitesUsed: satellites) {
                case .success(var fix):
                    if offset == nil { offset = align ? fix.time.duration(to: start) : .zero }
                    fix.time = fix.time.advanced(by: offset ?? .zero)
                    events.append(Scheduled(at: fix.time, .fix(fix)))
                case .failure(let rejection):
                    if let last = events.last { events.append(Scheduled(at: last.at, .rejected(rejection))) }
                }
            case .other:
                continue
            }
        }
        return events
    }

    // MARK: - Field helpers

    static func time(_ object: Object, start: Timestamp) throws(DataFileError) -> Timestamp {
        guard let value = object["t"] else { throw object.error("missing \"t\" (seconds after start)") }
        guard let seconds = value.double, let offset = Duration.seconds(exactly: seconds), seconds >= 0 else {
            throw DataFileError(line: value.line, message: "\"t\" must be a number of seconds ≥ 0")
        }
        return start.advanced(by: offset)
    }

    static func window(_ object: Object, start: Timestamp) throws(DataFileError) -> Window {
        guard let from = try object.nonNegative("from"), let to = try object.nonNegative("to"), to > from,
            let fromOffset = Duration.seconds(exactly: from), let toOffset = Duration.seconds(exactly: to)
        else { throw object.error("a window needs \"from\" < \"to\" (seconds after start)") }
        return Window(from: start.advanced(by: fromOffset), to: start.advanced(by: toOffset))
    }

    static func coordinate(_ object: Object) throws(DataFileError) -> Coordinate {
        guard let latitude = try object.number("lat"), let longitude = try object.number("lon") else {
            throw object.error("needs \"lat\" and \"lon\"")
        }
        do {
            return try Coordinate(latitude: latitude, longitude: longitude)
        } catch {
            throw object.error(error.description)
        }
    }

    static func fixStatus(_ object: Object, default value: Fix.Status) throws(DataFileError) -> Fix.Status {
        guard let name = try object.string("status") else { return value }
        guard let status = Fix.Status(name: name) else {
            throw DataFileError(
                line: object.line(of: "status"),
                message: "status \"\(name)\" is not one of gps, dgps, rtk_fixed, rtk_float, dead_reckoning, simulated…")
        }
        return status
    }
}

/// A JSON object with typed, line-aware accessors; unknown members are errors (typos should not
/// be silently ignored in a test fixture).
struct Object {
    let value: JSONValue
    let what: String

    init(_ value: JSONValue, _ what: String, allowed: Set<String>) throws(DataFileError) {
        guard let members = value.members else {
            throw DataFileError(line: value.line, message: "\(what) must be an object, found \(value.kindName)")
        }
        for member in members where !allowed.contains(member.key) {
            throw DataFileError(
                line: member.value.line,
                message: "unknown member \"\(member.key)\" in \(what) (expected one of \(allowed.sorted().joined(separator: ", ")))")
        }
        self.value = value
        self.what = what
    }

    var line: Int { value.line }
    subscript(key: String) -> JSONValue? { value[key].flatMap { $0.isNull ? nil : $0 } }
    func line(of key: String) -> Int { value[key]?.line ?? value.line }
    func error(_ message: String) -> DataFileError { DataFileError(line: value.line, message: message) }

    func string(_ key: String) throws(DataFileError) -> String? {
        guard let item = self[key] else { return nil }
        guard let text = item.string else {
            throw DataFileError(line: item.line, message: "\"\(key)\" must be a string, found \(item.kindName)")
        }
        return text
    }

    func bool(_ key: String) throws(DataFileError) -> Bool? {
        guard let item = self[key] else { return nil }
        guard let flag = item.bool else {
            throw DataFileError(line: item.line, message: "\"\(key)\" must be true or false, found \(item.kindName)")
        }
        return flag
    }

    func number(_ key: String) throws(DataFileError) -> Double? {
        guard let item = self[key] else { return nil }
        guard let number = item.double else {
            throw DataFileError(line: item.line, message: "\"\(key)\" must be a number, found \(item.kindName)")
        }
        return number
    }

    func nonNegative(_ key: String) throws(DataFileError) -> Double? {
        guard let number = try number(key) else { return nil }
        guard number >= 0 else { throw DataFileError(line: line(of: key), message: "\"\(key)\" must not be negative") }
        return number
    }

    func positive(_ key: String) throws(DataFileError) -> Double? {
        guard let number = try number(key) else { return nil }
        guard number > 0 else { throw DataFileError(line: line(of: key), message: "\"\(key)\" must be above 0") }
        return number
    }

    func integer(_ key: String) throws(DataFileError) -> Int? {
        guard let number = try number(key) else { return nil }
        guard let integer = Int(exactly: number) else {
            throw DataFileError(line: line(of: key), message: "\"\(key)\" must be a whole number")
        }
        return integer
    }

    func duration(_ key: String) throws(DataFileError) -> Duration? {
        guard let number = try nonNegative(key) else { return nil }
        guard let duration = Duration.seconds(exactly: number) else {
            throw DataFileError(line: line(of: key), message: "\"\(key)\" is out of range")
        }
        return duration
    }

    func array(_ key: String) throws(DataFileError) -> [JSONValue] {
        guard let item = self[key] else { return [] }
        guard let items = item.array else {
            throw DataFileError(line: item.line, message: "\"\(key)\" must be an array, found \(item.kindName)")
        }
        return items
    }
}
