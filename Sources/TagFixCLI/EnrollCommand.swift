import Foundation
import Synchronization
import TagFixCore
import TagFixCrypto
import TagFixDevices
import TagFixGPSD
import TagFixNDEF
import TagFixScenarios
import TagFixStore

/// The GPS a command reads: gpsd (`gpsd://HOST:PORT[/DEVICE]`), or a scenario file whose GPS
/// timeline is replayed from now (mock GPS).
enum GPSOption {
    /// The gpsd that --gps names for a command that only asks gpsd (doctor, devices): the
    /// default gpsd://localhost:2947, or `nil` for `--gps none`.
    static func endpoint(_ arguments: ParsedArguments, command: String) throws(CLIError) -> GPSDEndpoint? {
        let text = arguments.value("gps") ?? "gpsd://localhost:2947"
        guard text != "none" else { return nil }
        do {
            return try GPSDEndpoint(text)
        } catch {
            throw .usage(error.description, command: command)
        }
    }

    static func source(_ text: String, clock: MonotonicClock, command: String) throws(CLIError) -> any FixSource {
        if text.hasPrefix("gpsd://") {
            do {
                return GPSDFixSource(endpoint: try GPSDEndpoint(text), clock: clock)
            } catch {
                throw .usage(error.description, command: command)
            }
        }
        let scenario: Scenario
        do {
            scenario = try ScenarioLoader.load(path: text)
        } catch {
            throw .file(error)
        }
        return scenario.devices(clock: clock, origin: clock.now).gps
    }
}

/// `tagfix enroll`: record where a tag is, by standing at its spot: take GPS fixes until they
/// agree (PositionAverager's stopping rule), read (and optionally write) the tag, and store the
/// placement in the SQLite registry.
struct EnrollCommand: Subcommand {
    static let spec = CommandSpec(
        name: "enroll",
        abstract: "Enrol a tag at its spot: average GPS fixes, read or write the tag, record its placement.",
        discussion: """
            Stand at the tag's spot with the GPS. enroll takes fixes until they agree — at least \
            --min-fixes over 2 s, each within its stated σ of their mean, not drifting — and stops \
            there, in seconds under open sky: GNSS errors wander for minutes, so averaging longer \
            within one visit would not make the position better. It waits while fixes disagree (a \
            stray fix, a receiver settling after lock) and refuses, saying why, when they keep \
            disagreeing (the position jumps: multipath), when --average seconds pass first, or when \
            the accuracy is worse than --max-accuracy. The accuracy stated and recorded (95 %) is \
            the receiver's own, widened by the scatter seen and any jump, never shrunk by the \
            number of fixes (docs/verifier.md#enrolment). Without --write-url the tag is read \
            while the fixes come in; with it, the tag is written once the position is known. With --write-url it \
            writes the tag's NDEF URL from a template ({id}, {lat}, {lon}, {r}) to a Type 2 tag — \
            the NDEF length is set to 0 first and to the real length last, so a tag pulled away \
            early is empty, never half-written — and reads it back to compare. Read-only and \
            locked tags are refused. The placement (id, UID, name, centre, radius, when, by whom, \
            accuracy, fixes, notes) goes into the registry; an existing id needs --replace. \
            --sign-key site.key signs the written URL's location (lat, lon, r and the tag id; the \
            template must carry {lat} {lon} {r}) for tagfix verify --trust-key; the key file must be \
            mode 0600. The signature does not bind the UID (the URL is made before the tag is \
            read): tagfix sign-url --uid does (docs/trust.md). --sun KEYSET --sun-keys FILE provisions \
            a factory-fresh NTAG 424 DNA instead: the --write-url template carries {picc_data} and \
            {cmac} (e.g. ?picc_data={picc_data}&cmac={cmac}); enroll writes it, turns on SDM, sets \
            keys 1 and 2 from the key set and key 0 last, reads one SUN back and verifies it, and \
            records the tag's sun settings. Interrupted, the same command resumes \
            (docs/trust.md#provisioning-states).
            """,
        options: [
            .init(name: "id", valueName: "ID", help: "The tag's id (as its URL names it)."),
            .init(name: "reader", valueName: "ADDRESS", help: ReaderOption.help),
            .init(
                name: "gps", valueName: "SOURCE", help: "gpsd://HOST:PORT, or a scenario file (mock GPS); default gpsd://localhost:2947."),
            .init(name: "registry", valueName: "FILE", help: "The SQLite registry (created if missing); default: $TAGFIX_REGISTRY."),
            .init(name: "name", valueName: "TEXT", help: "A name for the placement, e.g. \"Pump house door\"."),
            .init(name: "radius", valueName: "M", help: "The expected region's radius in metres; default 25, at most 500."),
            .init(
                name: "write-url", valueName: "TEMPLATE",
                help: "Write this URL to the tag, e.g. https://t.example/t/{id}?lat={lat}&lon={lon}&r={r}."),
            .init(
                name: "sign-key", valueName: "FILE",
                help: "With --write-url: sign the URL's location with this site key (tagfix keys generate), for verify --trust-key."),
            .init(
                name: "sun", valueName: "KEYSET",
                help: "Provision an NTAG 424 DNA for SUN with this key set; --write-url carries {picc_data} and {cmac}."),
            .init(name: "sun-keys", valueName: "FILE", help: "With --sun: the SUN key file (mode 0600), as verify --sun-keys reads it."),
            .init(
                name: "average", valueName: "S",
                help: "The longest to take for the position, seconds from the first fix; default 30 (it stops once the fixes agree)."),
            .init(name: "max-accuracy", valueName: "M", help: "Worst position accuracy (95 %) to accept, metres; default 10."),
            .init(name: "min-fixes", valueName: "N", help: "Fewest agreeing fixes for a position; default 5."),
            .init(name: "by", valueName: "NAME", help: "Who enrols; default $USER."),
            .init(name: "notes", valueName: "TEXT", help: "Free notes kept with the placement."),
            .init(name: "replace", valueName: nil, help: "Replace the registry entry if the id exists."),
            .init(name: "timeout", valueName: "S", help: "How long to wait for the tag, seconds; default 120."),
            .init(name: "allow-simulated", valueName: nil, help: "Average simulated fixes too (gpsd status 8)."),
            .init(
                name: "accept-weak-read", valueName: nil,
                help: "Enrol a tag that reads badly (failed reads, retries, slow) anyway, recorded as weak; default: refuse it (exit 75)."),
            .init(name: "json", valueName: nil, help: "Print the result as one JSON object."),
        ],
        examples: [
            "tagfix enroll --id T01 --name \"Main gate\" --reader pn532_uart:/dev/ttyUSB0 --registry site.sqlite",
            "tagfix enroll --id T02 --radius 15 --write-url 'https://tags.example.org/t/{id}' --reader pn532_uart:/dev/ttyUSB0 --registry site.sqlite",
            "tagfix enroll --id T03 --write-url 'https://t.example/{id}?lat={lat}&lon={lon}&r={r}' --average 60 --reader pn53x_usb --registry site.sqlite",
        ])

    var id: String
    var reader: ReaderAddress
    var gps: String
    var registryPath: String
    var name: String?
    var radius: Double
    var template: String?
    /// --sign-key: the site key the written URL's location is signed with.
    var signKey: Ed25519PrivateKey?
    /// --sun: provision an NTAG 424 DNA (EnrollSUN.swift).
    var sun: SUNEnrolment?
    var average: Duration
    var averager = PositionAverager()
    var by: String?
    var notes: String?
    var replace: Bool
    var timeout: Duration
    var json: Bool
    /// --accept-weak-read: a tag that reads badly is enrolled, recorded weak, not refused.
    var acceptWeakRead: Bool

    init(_ arguments: ParsedArguments) throws(CLIError) {
        let command = Self.spec.name
        guard let id = arguments.value("id"), !id.isEmpty else { throw .usage("enroll needs --id ID", command: command) }
        guard id.allSatisfy({ $0.isLetter || $0.isNumber || "-_.~".contains($0) }) else {
            throw .usage("--id \"\(id)\": use letters, digits, - _ . ~ (it goes into URLs)", command: command)
        }
        self.id = id
        guard let reader = arguments.value("reader") else {
            throw .usage("enroll needs --reader ADDRESS (e.g. pn532_uart:/dev/ttyUSB0)", command: command)
        }
        self.reader = try ReaderOption.address(reader, command: command)
        gps = arguments.value("gps") ?? "gpsd://localhost:2947"
        registryPath = try RegistrySource.storePath(arguments, command: command)
        name = arguments.value("name")
        radius = try arguments.number("radius", in: 0.5...CircularRegion.defaultMaximumRadius, command: command) ?? 25
        template = arguments.value("write-url")
        average = try arguments.seconds("average", in: 1...3600, command: command) ?? .seconds(30)
        averager.maximumAccuracy = try arguments.number("max-accuracy", in: 0.1...1000, command: command) ?? 10
        averager.minimumFixes = Int(try arguments.number("min-fixes", in: 1...100_000, command: command) ?? 5)
        averager.allowSimulated = arguments.flag("allow-simulated")
        by = arguments.value("by") ?? ProcessInfo.processInfo.environment["USER"]
        notes = arguments.value("notes")
        replace = arguments.flag("replace")
        timeout = try arguments.seconds("timeout", in: 0.1...86_400, command: command) ?? .seconds(120)
        json = arguments.flag("json")
        acceptWeakRead = arguments.flag("accept-weak-read")
        sun = try SUNEnrolment(arguments, template: &template, command: command)
        if let template {
            // Try the template now, at a placeholder position: a bad one fails before any waiting.
            let trial = try Self.render(
                template, id: id, at: Coordinate(validLatitude: 0, longitude: 0), radius: radius, command: command)
            if arguments.value("sign-key") != nil {
                do {
                    _ = try SignedLocation.message(forURL: trial, uid: nil)
                } catch {
                    throw .usage("--sign-key: the --write-url template's URL cannot be signed: \(error)", command: command)
                }
            }
        }
        if let keyPath = arguments.value("sign-key") {
            guard template != nil else { throw .usage("--sign-key signs the URL --write-url writes: give --write-url", command: command) }
            signKey = try SiteKeyFiles.readPrivate(keyPath)
        }
    }

    // MARK: - The URL template

    /// The template with `{id}`, `{lat}`, `{lon}`, `{r}` filled in, checked to be a URL whose
    /// location (if it carries one) decodes back to this placement.
    /// An averaged accuracy to the millimetre, as it is shown (±17.1 m): the average's last bits
    /// are arithmetic noise that a registry export printed as 17.099999999999998.
    static func millimetres(_ metres: Double) -> Double { (metres * 1000).rounded() / 1000 }

    static func render(_ template: String, id: String, at position: Coordinate, radius: Double, command: String) throws(CLIError) -> String
    {
        do {
            return try URLTemplate(template).render(id: id, at: position, radius: radius)
        } catch {
            throw .usage("--write-url: \(error)", command: command)
        }
    }

    // MARK: - Running

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        let clock = MonotonicClock()
        let command = Self.spec.name
        // An existing registry is opened (and its id checked) now; a new one is created only when
        // there is a placement to put in it, so a failed enrolment leaves no file behind.
        let registry: EnrolmentRegistry
        do throws(EnrolmentRegistryError) {
            registry = try EnrolmentRegistry(path: registryPath, id: id, replace: replace)
        } catch {
            switch error {
            case .store(let error): throw .registry(error)
            case .alreadyEnrolled: throw .usage(error.description, command: command)
            case .folderNotWritable: throw .ioError(error.description)
            }
        }
        let fixSource = try GPSOption.source(gps, clock: clock, command: command)

        // 1. The position: fixes from now on, until they agree (seconds under open sky) or
        // --average runs out. Without a URL to write, the tech taps meanwhile.
        let overlap = template == nil && sun == nil
        io.err(
            "taking GPS fixes from \(fixSource.sourceID) (at most \(Coordinate.format(average.seconds, 0)) s): stand still at the tag's spot"
                + (overlap ? " and tap the tag on the reader…" : "…"))
        let position: PositionAverager.Result
        let (scan, written, sunRead): (TagScan, TagWritten?, SUNResult?)
        var reads: [ReadEffort] = []
        var url: String?
        if overlap {
            let (located, read) = await locate(from: fixSource, clock: clock, whileReading: true, io: io)
            position = try located.get()
            (scan, written, reads) = try (read ?? .failure(.unavailable("the reader stopped"))).get()
            sunRead = nil
            try check(position)
        } else {
            position = try await locate(from: fixSource, clock: clock, whileReading: false, io: io).position.get()
            io.err(Self.describe(position))
            try check(position)
            // 2. The tag.
            url = try template.map { t throws(CLIError) in
                try Self.render(t, id: id, at: position.coordinate, radius: radius, command: command)
            }
            if let signKey, let unsigned = url {
                url = try SignURLCommand.sign(unsigned, key: signKey, uid: nil, maximumRadius: CircularRegion.defaultMaximumRadius)
            }
            let message = url.map { NDEFMessage(records: [NDEFRecord.uri($0)]).encoded() }
            io.err(url.map { "tap the tag to write \($0)…" } ?? "tap the tag on the reader…")
            if let sun, let url, let message {
                let (read, proof) = try await sun.provision(
                    url: url, message: message, reader: reader, timeout: timeout, clock: clock, io: io)
                (scan, written, sunRead) = (read, nil, proof)
            } else {
                (scan, written, reads) = try await tag(writing: message, clock: clock, io: io)
                sunRead = nil
            }
        }
        let readHealth = try Self.judge(reads, uid: scan.uid, accept: acceptWeakRead, written: written != nil, at: clock.now, io: io)
        if url == nil, let tagURL = scan.url, let found = (try? URLLocation(url: tagURL, defaultRadius: radius))?.tagID, found != id {
            throw .usage(
                "the tag's URL \(tagURL) names tag \"\(found)\", not \"\(id)\": enrol it as --id \(found), or rewrite it with --write-url",
                command: command)
        }

        // 3. The placement.
        let region: CircularRegion
        do {
            region = try CircularRegion(center: position.coordinate, radius: radius, identifier: id)
        } catch {
            throw .usage("\(error)", command: command)
        }
        let entry = RegistryEntry(
            id: id, uid: scan.uid, region: region, name: name,
            enrolment: Enrolment(at: clock.now, by: by, accuracy: Self.millimetres(position.accuracy), fixes: position.kept), notes: notes,
            // A tag enrolled genuine must read genuine from now on (docs/trust.md).
            originality: scan.originality?.status, sun: sun?.settings)
        do {
            try registry.record(entry, replace: replace, readHealth: readHealth)
        } catch {
            throw .registry(error)
        }
        if json {
            var object = JSONObjectWriter()
            object.add("id", id)
            object.add("uid", scan.uid.hex)
            object.add("tag_type", scan.tagType.rawValue)
            object.add("originality", scan.originality?.status.rawValue)
            object.add("lat", position.coordinate.latitude, digits: 9)
            object.add("lon", position.coordinate.longitude, digits: 9)
            object.add("radius_m", radius)
            object.add("accuracy_m", position.accuracy)
            object.add("fixes", position.kept)
            object.add("rejected", position.rejected)
            object.add("span_s", position.span.seconds)
            object.add("elapsed_s", position.elapsed.seconds)
            object.add("stated_m", position.stated)
            object.add("url", sunRead != nil ? url : scan.url)
            object.add("written", written != nil)
            object.add("pages_written", written?.pagesWritten)
            object.add("sun", sun?.settings.description)
            object.add("sun_counter", sunRead?.counter.map { Int($0) })
            object.add("read_health", raw: readHealth.map(Self.json))
            object.add("registry", registryPath)
            io.out(object.text)
        } else {
            if let sunRead, let url {
                io.out("provisioned NTAG 424 DNA \(scan.uid.hex) with \(url): SUN read back and verified (counter \(sunRead.counter ?? 0))")
            }
            if let written {
                io.out("wrote \(scan.url ?? "") to \(written.chipName) \(scan.uid.hex) (\(written.pagesWritten) pages), read back: same")
            }
            io.out(
                "enrolled \(id)\(name.map { " (\($0))" } ?? "") = \(scan.uid.hex) at \(position.coordinate), radius \(Coordinate.format(radius, 1)) m, ±\(Coordinate.format(position.accuracy, 1)) m from \(position.kept) fixes → \(registryPath)"
            )
        }
    }

    /// The position from `source`'s fixes, by the stopping rule (PositionAverager): collects
    /// until the rule decides or --average runs out. With `whileReading`, the tag is read
    /// meanwhile (a read-only enrolment: standing still and tapping overlap); a GPS refusal then
    /// stops the reading and comes first, as does the GPS's answer when the reader fails.
    private func locate(
        from source: any FixSource, clock: MonotonicClock, whileReading: Bool, io: some TerminalOutput
    ) async -> (position: Result<PositionAverager.Result, CLIError>, read: Result<(TagScan, TagWritten?, [ReadEffort]), CLIError>?) {
        let (averager, average) = (self.averager, self.average)
        let gps = { @Sendable () async -> Result<PositionAverager.Result, CLIError> in
            let session = Mutex(PositionAverager.Session(averager))
            let decided = Mutex<Result<PositionAverager.Result, PositionAverager.Refusal>?>(nil)
            let window = await FixWindow.collect(from: source, for: average, clock: clock) { fix in
                guard let decision = session.withLock({ $0.add(fix) }) else { return false }
                decided.withLock { $0 = decision }
                return true
            }
            if let unreachable = window.unreachable { return .failure(.unavailable("nothing was enrolled: \(unreachable)")) }
            switch decided.withLock({ $0 }) ?? session.withLock({ $0.finish() }) {
            case .success(let result): return .success(result)
            case .failure(let refusal): return .failure(.timedOut("enrolment refused: \(refusal)"))
            }
        }
        guard whileReading else { return (await gps(), nil) }
        return await withTaskGroup(of: LocateDone.self) { group in
            group.addTask { .gps(await gps()) }
            group.addTask {
                do throws(CLIError) {
                    return .tag(.success(try await self.tag(writing: nil, clock: clock, io: io)))
                } catch {
                    return .tag(.failure(error))
                }
            }
            var position: Result<PositionAverager.Result, CLIError>?
            var read: Result<(TagScan, TagWritten?, [ReadEffort]), CLIError>?
            while let done = await group.next() {
                switch done {
                case .gps(let result):
                    position = result
                    if case .failure = result { group.cancelAll() }
                    if case .success(let found) = result { io.err(Self.describe(found) + (read == nil ? "; waiting for the tag…" : "")) }
                case .tag(let result): read = result
                }
            }
            return (position ?? .failure(.unavailable("the GPS stopped")), read)
        }
    }

    /// Which of enroll's overlapping halves finished.
    private enum LocateDone: Sendable {
        case gps(Result<PositionAverager.Result, CLIError>)
        case tag(Result<(TagScan, TagWritten?, [ReadEffort]), CLIError>)
    }

    /// The position's line for the tech: how many fixes over how long, and the accuracy.
    static func describe(_ position: PositionAverager.Result) -> String {
        let dropped = position.rejected > 0 ? " (\(position.rejected) left out: settling, stray or before a jump)" : ""
        return
            "position from \(position.kept) agreeing fixes\(dropped) after \(Coordinate.format(position.elapsed.seconds, 1)) s: \(position.coordinate) ±\(Coordinate.format(position.accuracy, 1)) m (95 %; the receiver states ±\(Coordinate.format(position.stated, 1)) m)"
    }

    /// The radius must be able to hold the position's accuracy.
    private func check(_ position: PositionAverager.Result) throws(CLIError) {
        guard radius >= position.accuracy else {
            throw .usage(
                "--radius \(Coordinate.format(radius, 1)) m is smaller than the position's accuracy ±\(Coordinate.format(position.accuracy, 1)) m: verification could rarely confirm; choose a larger radius",
                command: Self.spec.name)
        }
    }

    /// Waits for the tag, writes it when asked, reads it back, then reads it again
    /// `healthReads` times for its read health.
    private func tag(writing message: [UInt8]?, clock: MonotonicClock, io: some TerminalOutput) async throws(CLIError) -> (
        TagScan, TagWritten?, [ReadEffort]
    ) {
        let session = try ReaderOption.session(reader, clock: clock, command: Self.spec.name)
        let (timeout, reader) = (self.timeout, self.reader)
        let outcome = await race(deadline: clock.now.advanced(by: timeout), clock: clock) {
            () async -> Result<(TagScan, TagWritten?, [ReadEffort]), CLIError> in
            // The session's events end with one of these; without one, it was stopped.
            for await event in session.run(TagSessionRequest(write: message, healthReads: Self.healthReads)) {
                switch event {
                case .ready(let description): io.err("reader: \(description)")
                case .done(let result): return .success((result.scan, result.written, result.reads))
                case .writeFailed(let uid, let error): return .failure(.unavailable("cannot write tag \(uid.hex): \(error)"))
                case .readFailed(let error): return .failure(.unavailable("cannot read the tag: \(error)"))
                case .unavailable(let error): return .failure(.unavailable("cannot open the reader \(reader): \(error)"))
                }
            }
            return .failure(.unavailable("the reader stopped"))
        }
        switch outcome {
        case .value(let read): return try read.get()
        case .timedOut: throw .timedOut("no tag within \(Coordinate.format(timeout.seconds, 0)) s: nothing was enrolled")
        case .cancelled: throw .unavailable("the reader stopped")
        }
    }
}

// MARK: - Read health

extension EnrollCommand {
    /// Reads after the first that measure how well the tag reads: ten reads in all, each with the
    /// tag selected again as a tap selects it. A short URL's read is two exchanges (FAST_READ,
    /// READ_SIG), so ten reads are twenty: a tag that fails one exchange in five shows the two
    /// or more errors that make it weak 93 % of the time, a healthy one none (one error or
    /// retry in ten reads is allowed: a hand that moved). They cost about 0.2 s on a PN532 at
    /// 115200 baud (18–28 ms a read, measured on the emulator with --baud 115200).
    static let healthReads = 9

    /// The tag's read health from its enrolment's reads: refused (75) when it reads badly, unless
    /// `accept`; `nil` when the reader did not tell (nothing is recorded then).
    static func judge(
        _ reads: [ReadEffort], uid: TagUID, accept: Bool, written: Bool, at time: Timestamp, io: some TerminalOutput
    ) throws(CLIError) -> EnrolledReadHealth? {
        guard !reads.isEmpty else { return nil }
        let health = ReadHealth(reads)
        let problems = health.problems(.enrolment)
        guard !problems.isEmpty else {
            io.err("read health: \(health.summary)")
            return EnrolledReadHealth(health: health, weak: false, at: time)
        }
        var reason = problems.map(\.description).joined(separator: ", ")
        if problems.contains(where: { if case .failedReads = $0 { true } else { false } }) {
            reason += " — if the reader was taken away, keep it on the tag until enroll has finished"
        }
        guard accept else {
            throw .timedOut(
                "enrolment refused: tag \(uid.hex) reads badly (\(reason); \(health.summary)): nothing was enrolled\(written ? " (the tag keeps the URL written to it)" : ""). Fix: \(ReadHealth.fix)"
            )
        }
        io.err("read health: weak (\(reason); \(health.summary)), enrolled as weak (--accept-weak-read)")
        return EnrolledReadHealth(health: health, weak: true, at: time)
    }

    /// `read_health` in enroll --json.
    static func json(_ record: EnrolledReadHealth) -> String {
        var object = JSONObjectWriter()
        object.add("reads", record.health.reads)
        object.add("completed", record.health.completed)
        object.add("retries", record.health.retries)
        object.add("rf_errors", record.health.rfErrors)
        object.add("excess_rf_errors", record.health.excessRFErrors)
        object.add("median_read_ms", record.health.medianReadTime.map { $0.seconds * 1000 }, digits: 1)
        object.add("weak", record.weak)
        return object.text
    }
}
