import Foundation
import Synchronization
import TagFixCore
import TagFixDemo
import TagFixDevices
import TagFixGPSD
import TagFixMQTT
import TagFixPostgres
import TagFixScenarios

/// `tagfix verify`: confirm each tag scan against where the tag should be.
struct VerifyCommand: Subcommand {
    static let spec = CommandSpec(
        name: "verify",
        abstract: "Confirm each tag scan against where the tag should be.",
        discussion: """
            Each scan gets one verdict: confirmed, outside (the tag moved), inconclusive (the fix is \
            too poor or too old — the line says what to do), notRegistered, disallowed, or \
            untrusted (⚠: a copied or replaced tag, whatever the distance; docs/trust.md). \
            --require-genuine makes every tag prove it is an original NXP chip (its originality \
            signature, read with READ_SIG); --allow-unsigned-tags then lets chips that have none pass. \
            --trust-key site.pub makes a location in a tag's URL count only when signed with that site \
            key (tagfix sign-url): an unsigned one is untrusted(location_unsigned), a badly signed one \
            untrusted(location_signature_invalid); registry tags need no signature. A GPS whose \
            position jumps farther than --max-speed (default 70 m/s) covers between two fixes, plus \
            both accuracies, is untrusted(gps_jump) for 30 s; a simulated fix is untrusted(gps_simulated).
            The expected region comes from the registry (by the URL's tag id, then the UID), else \
            from the location in the tag's URL (?lat=…&lon=…&r=… or geo:lat,lon;u=…).
            With --reader and --gps it runs live: a status line on a terminal (reader, GPS mode, \
            satellites, accuracy, fix age), one line per tap, a bell (--quiet silences it); plain \
            lines through a pipe. --log appends each verdict to a JSON Lines file, on the disk \
            before it is shown (tagfix report reads it). --demo walks the built-in example site \
            through the emulators. With --scenario the whole pipeline runs on mock devices; the \
            scenario format is in docs/scenarios.md.
            SIGINT (Ctrl-C) or SIGTERM (systemd's stop) ends a live session, the demo or a \
            publishing replay normally: a scan still waiting for a fix gets its verdict, the log \
            is complete, the summary is printed, the emulators and the private gpsd of --demo \
            stop, and the exit code is 0 (a replay without --publish is simply stopped).
            """,
        options: [
            .init(
                name: "demo", valueName: nil,
                help: "Walk the built-in example site through the emulators (PN532 + libnfc, NMEA + gpsd, or a mock GPS)."),
            .init(name: "scenario", valueName: "FILE", help: "Run a scenario file on mock devices."),
            .init(name: "reader", valueName: "ADDRESS", help: "Read tags with a real reader. " + ReaderOption.help),
            .init(
                name: "gps", valueName: "SOURCE",
                help:
                    "With --reader: gpsd://HOST:PORT[/DEVICE] (default gpsd://localhost:2947), or a scenario file whose GPS is replayed from now (mock GPS)."
            ),
            .init(name: "count", valueName: "N", help: "With --reader: stop after N verdicts."),
            .init(name: "timeout", valueName: "S", help: "With --reader: stop after S seconds (exit 75 if fewer than --count verdicts)."),
            .init(
                name: "registry", valueName: "FILE|URL",
                help: "Registry of tag placements (SQLite, CSV or JSON, or PostgreSQL: postgresql://…); default: the scenario's."),
            .init(
                name: "sun-keys", valueName: "FILE",
                help:
                    "Check registry tags with SUN settings (NTAG 424 DNA) with the key sets in FILE (mode 0600; docs/trust.md#sun); "
                    + "their read counters are kept in the SQLite registry."),
            .init(
                name: "sun-counters", valueName: "FILE",
                help: "With a CSV or JSON registry and --sun-keys: keep the SUN read counters in FILE (SQLite, created if missing)."),
            .init(
                name: "state", valueName: "FILE|URL",
                help:
                    "With --sun-keys: keep the SUN read counters in FILE (SQLite, created if missing) or in PostgreSQL, "
                    + "postgresql://[USER@]HOST[:PORT]/DB, which several servers share: a URL accepted by one is a replay at every other."),
            .init(
                name: "db-password-file", valueName: "FILE",
                help: "A PostgreSQL --state or --registry: the user's password (mode 0600; else libpq's PGPASSFILE or ~/.pgpass)."),
            .init(name: "json", valueName: nil, help: "Print one JSON object per verdict (JSON Lines)."),
            .init(
                name: "log", valueName: "FILE",
                help:
                    "Append each verdict to FILE (JSON Lines), on the disk before it is shown; read it with tagfix report. "
                    + "FILE must be new, empty or a session log: any other file (a registry…) is refused and left as it was (exit 64)."),
            .init(name: "quiet", valueName: nil, help: "No terminal bell on a verdict (live runs ring it; scenario replays never do)."),
            .init(name: "realtime", valueName: nil, help: "Play the scenario on the wall clock through the live pipeline."),
            .init(name: "max-accuracy", valueName: "M", help: "Worst usable GPS accuracy in metres (95 %); default 50."),
            .init(name: "max-fix-age", valueName: "S", help: "Oldest usable fix, seconds from the scan; default 2."),
            .init(name: "fix-timeout", valueName: "S", help: "How long a scan waits for a fix, seconds; default 5."),
            .init(name: "max-radius", valueName: "M", help: "Cap for region radii in metres; default 500 (the App Clip limit)."),
            .init(name: "default-url-radius", valueName: "M", help: "Radius for a URL location that gives none; default: none (an error)."),
            .init(name: "allow-simulated", valueName: nil, help: "Let simulated fixes (gpsd status 8) decide verdicts."),
            .init(
                name: "require-genuine", valueName: nil,
                help:
                    "Every tag must carry a genuine NXP originality signature (READ_SIG): any other scan is untrusted (signature_invalid or signature_missing). See docs/trust.md."
            ),
            .init(
                name: "allow-unsigned-tags", valueName: nil,
                help: "With --require-genuine: chips that have no signature at all (NTAG203, MIFARE Classic, Type 4) still pass."),
            .init(
                name: "trust-key", valueName: "FILE",
                help:
                    "Site public key(s) (PEM, tagfix keys public): a URL location must be signed with one (tagfix sign-url), else untrusted.",
                repeatable: true),
            .init(
                name: "max-speed", valueName: "M/S",
                help:
                    "Fastest believable movement between two fixes, beyond both accuracies; faster is untrusted(gps_jump). Default 70; 0 turns the check off."
            ),
            .init(name: "no-confirmation", valueName: nil, help: "Turn location confirmation off: every scan is disallowed."),
            .init(
                name: "disallow", valueName: "TAG",
                help: "Turn confirmation off for a tag id, or a UID in hex (any case, separators allowed).", repeatable: true),
            .init(
                name: "publish", valueName: "URL",
                help:
                    "Send each verdict to an MQTT broker, mqtt://[USER@]HOST[:PORT]/PREFIX or mqtts://… (QoS 1, after the --log has it; "
                    + "the log is the outbox: what the broker has not acknowledged goes with the next run on it; without --log, "
                    + "a log in the state directory, ~/.local/state/tagfix/outbox/SITE/DEVICE.jsonl). docs/fleet.md."),
            .init(name: "site", valueName: "NAME", help: "With --publish: the site's topic level (no /, + or #); default default."),
            .init(
                name: "device-id", valueName: "ID", help: "With --publish: this device in topics and message ids; default the host name."),
            .init(
                name: "publish-linger", valueName: "S",
                help:
                    "With --publish: at the end, wait up to S s for the broker (a second Ctrl-C ends it; a replay's first Ctrl-C ends both); default 10."
            ),
        ] + FleetOptions.mqtt,
        examples: [
            "tagfix verify --demo",
            "tagfix verify --reader pn532_uart:/dev/ttyUSB0 --gps gpsd://localhost:2947 --registry site.sqlite --log today.jsonl",
            "tagfix verify --scenario Examples/site/scenario.json",
            "tagfix verify --scenario Examples/site/scenario.json --json | jq .verdict",
            "tagfix verify --scenario walk.json --registry site.csv --max-accuracy 20",
            "tagfix verify --reader pn532_uart:/dev/ttyUSB0 --gps walk.json --registry site.csv",
        ])

    var demo: Bool
    var scenarioPath: String
    /// With --reader: live fixes from gpsd instead of a scenario's GPS.
    var gpsd: GPSDEndpoint?
    var reader: ReaderAddress?
    var count: Int?
    var timeout: Duration?
    var registryPath: String?
    var sunKeysPath: String?
    var sunCountersPath: String?
    /// --state: where the SUN read counters are kept (a SQLite file or PostgreSQL).
    var statePath: String?
    /// --db-password-file, for a PostgreSQL --state or --registry.
    var dbPasswordFile: String?
    var json: Bool
    var realtime: Bool
    var logPath: String?
    /// Whether `logPath` is --publish's outbox in the state directory (no --log was given).
    var outboxDefaulted = false
    var quiet: Bool
    var overrides: (inout VerificationPolicy) -> Void
    /// --trust-key files: the site keys URL locations must be signed with.
    var trustKeyPaths: [String]
    /// --publish and its options.
    var publish: FleetPublishRequest?
    /// `serve` with phones alone: no reader and no GPS of its own (each phone brings both).
    var phonesOnly = false

    init(_ arguments: ParsedArguments) throws(CLIError) { try self.init(arguments, phonesOnly: false) }

    /// - Parameter phonesOnly: `serve` with phones alone: no --reader, --gps or --scenario is
    ///   needed (nor opened); the terminal's status line says there is no reader.
    init(_ arguments: ParsedArguments, phonesOnly: Bool) throws(CLIError) {
        let name = Self.spec.name
        self.phonesOnly = phonesOnly
        demo = arguments.flag("demo")
        // --demo refuses --reader below, whatever it names.
        reader = demo ? nil : try arguments.value("reader").map { text throws(CLIError) in try ReaderOption.address(text, command: name) }
        if demo {
            for other in ["reader", "scenario", "gps", "registry", "trust-key"] where arguments.value(other) != nil {
                throw .usage("--demo brings its own devices and site: drop --\(other)", command: name)
            }
            scenarioPath = ""
        } else if reader != nil {
            let gps = arguments.value("gps") ?? "gpsd://localhost:2947"
            guard arguments.value("scenario") == nil else { throw .usage("give --scenario or --reader, not both", command: name) }
            if gps.hasPrefix("gpsd://") {
                do {
                    gpsd = try GPSDEndpoint(gps)
                } catch {
                    throw .usage(error.description, command: name)
                }
                scenarioPath = ""
            } else {
                scenarioPath = gps
            }
        } else if phonesOnly {
            scenarioPath = ""
        } else {
            guard let scenario = arguments.value("scenario") else {
                throw .usage("verify needs --reader ADDRESS --gps SOURCE, --scenario FILE (mock devices) or --demo", command: name)
            }
            scenarioPath = scenario
        }
        count = try arguments.number("count", in: 1...1_000_000, command: name).map { Int($0) }
        timeout = try arguments.seconds("timeout", in: 0.1...86_400, command: name)
        registryPath = arguments.value("registry")
        sunKeysPath = arguments.value("sun-keys")
        sunCountersPath = arguments.value("sun-counters")
        statePath = arguments.value("state")
        dbPasswordFile = arguments.value("db-password-file")
        if dbPasswordFile != nil, !([statePath, registryPath].contains { $0.map(PostgresAddress.isAddress) == true }) {
            throw .usage("--db-password-file is for a PostgreSQL --state or --registry (postgresql://…)", command: name)
        }
        json = arguments.flag("json")
        realtime = arguments.flag("realtime")
        logPath = arguments.value("log")
        quiet = arguments.flag("quiet")
        let maxAccuracy = try arguments.number("max-accuracy", in: 0.1...10_000, command: name)
        let maxFixAge = try arguments.seconds("max-fix-age", in: 0...3600, command: name)
        let fixTimeout = try arguments.seconds("fix-timeout", in: 0...3600, command: name)
        let maxRadius = try arguments.number("max-radius", in: 0.1...100_000, command: name)
        let defaultRadius = try arguments.number("default-url-radius", in: 0.1...100_000, command: name)
        let allowSimulated = arguments.flag("allow-simulated")
        let noConfirmation = arguments.flag("no-confirmation")
        let requireGenuine = arguments.flag("require-genuine")
        let allowUnsigned = arguments.flag("allow-unsigned-tags")
        if allowUnsigned, !requireGenuine { throw .usage("--allow-unsigned-tags only applies with --require-genuine", command: name) }
        let disallowed = arguments.all("disallow")
        trustKeyPaths = arguments.all("trust-key")
        let maxSpeed = try arguments.number("max-speed", in: 0...1_000_000, command: name)
        overrides = { policy in
            if let maxSpeed { policy.maximumSpeed = maxSpeed > 0 ? maxSpeed : nil }
            if let maxAccuracy { policy.maximumAccuracy = maxAccuracy }
            if let maxFixAge { policy.maximumFixAge = maxFixAge }
            if let fixTimeout { policy.fixTimeout = fixTimeout }
            if let maxRadius { policy.maximumRadius = maxRadius }
            if let defaultRadius { policy.defaultURLRadius = defaultRadius }
            if allowSimulated { policy.allowSimulatedFixes = true }
            if noConfirmation { policy.locationConfirmation = false }
            if requireGenuine { policy.requireGenuine = true }
            if allowUnsigned { policy.allowUnsignedTags = true }
            policy.disallowedTags.formUnion(disallowed)
        }
        publish = try FleetOptions.publish(arguments, command: name)
        if let publish, logPath == nil {
            // No --log: the outbox is a session log in the state directory, one per site and device.
            guard let outbox = OutboxLocation.path(site: publish.site, device: publish.device) else {
                throw .usage("--publish needs --log FILE (no HOME or XDG_STATE_HOME to keep its outbox in)", command: name)
            }
            logPath = outbox
            outboxDefaulted = true
        }
        if let defaultRadius, let maxRadius, defaultRadius > maxRadius {
            throw .usage("--default-url-radius \(defaultRadius) is above --max-radius \(maxRadius)", command: name)
        }
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        // SIGINT or SIGTERM ends a live session normally: pending scans get their verdicts, the
        // log is complete, the summary is printed, exit 0. A replay catches them only when it
        // publishes (withPrinter); otherwise one kills it.
        let stop = StopSignals(demo || reader != nil || realtime ? StopSignals.standard : [])
        defer { stop.cancel() }
        if demo { return try await runDemo(io, stop: stop) }
        let scenario = try sessionScenario()
        let (verifier, registryName, _) = try makeVerifier(scenario, note: { io.err("tagfix verify: \($0)") })
        if !json { io.out("\(scenario.name) — \(registryName)") }

        try await withPrinter(io) { printer, replayStop throws(CLIError) in
            if let reader {
                try await live(reader: reader, scenario: scenario, verifier: verifier, printer: printer, io: io, stop: stop)
            } else if realtime {
                let clock = MonotonicClock()
                let devices = scenario.devices(clock: clock, origin: clock.now)
                await stop.run {
                    await LiveVerifier(verifier: verifier, clock: clock).run(reader: devices.reader, gps: devices.gps) { event in
                        printer.print(event)
                    }
                }
            } else {
                // A publishing replay catches the stop signals (withPrinter): one ends it between
                // two of its events, as it ends a live session, instead of holding Ctrl-C until
                // the last tap is on the disk (on a disk whose fsync takes 10 ms, 3,000 taps
                // took 35 s).
                ScenarioReplay.run(scenario, verifier: verifier, stopped: { replayStop?.received != nil }) { printer.print($0) }
            }
        }
    }

    /// The scenario a session starts from: an empty live one with gpsd, else the file's.
    func sessionScenario() throws(CLIError) -> Scenario {
        guard gpsd == nil else { return Scenario(name: "live", start: MonotonicClock().now, gps: [], reader: []) }
        do {
            return try ScenarioLoader.load(path: scenarioPath)
        } catch {
            throw .file(error)
        }
    }

    /// The verifier a session runs: the scenario's policy with the options', the registry
    /// (through `wrap`: serve's reloadable one), the SUN keys and the trusted site keys.
    /// `note` hears a PostgreSQL registry or state that cannot be used, and that it works again.
    func makeVerifier(
        _ scenario: Scenario, wrap: (any TagRegistry) -> any TagRegistry = { $0 }, note: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(CLIError) -> (verifier: Verifier, registryName: String, registryPath: String?) {
        var policy = scenario.policy
        overrides(&policy)

        var registry: any TagRegistry = InMemoryRegistry()
        var registryName = "no registry"
        let chosenRegistry =
            registryPath
            ?? scenario.registryPath.map { path in
                path.hasPrefix("/") ? path : ((scenarioPath as NSString).deletingLastPathComponent as NSString).appendingPathComponent(path)
            }
        if let path = chosenRegistry {
            (registry, registryName) = try RegistrySource.open(
                path, maximumRadius: policy.maximumRadius, passwordFile: dbPasswordFile, command: Self.spec.name, note: note)
        }
        let sun = try SunCommand.verifierCheck(
            keysPath: sunKeysPath, countersPath: sunCountersPath, statePath: statePath, passwordFile: dbPasswordFile,
            registryPath: chosenRegistry, registry: registry, command: Self.spec.name, note: note)
        let trust = trustKeyPaths.isEmpty ? nil : try SiteKeyFiles.readTrusted(trustKeyPaths)
        let verifier = Verifier(policy: policy, registry: wrap(registry), sun: sun, locationTrust: trust)
        return (verifier, registryName, chosenRegistry)
    }

    func runDemo(_ io: some TerminalOutput, stop: StopSignals) async throws(CLIError) {
        if !json { io.out("Harbour Works example site (built in) — \(ExampleSite.registry().count) tags, \(ExampleSite.stops.count) taps") }
        try await withPrinter(io) { printer, _ throws(CLIError) in
            do throws(DemoError) {
                try await DemoRun(stop: stop, note: { io.err($0) }, onEvent: { printer.print($0, now: $1) }).run()
            } catch {
                throw CLIError(error)
            }
        }
    }

    /// Opens the --log, runs `body` with the printer (JSON or lines, colours unless NO_COLOR, a
    /// bell on a live run unless --quiet), then clears the status line, stops on a log failure (exit 74) and
    /// prints the tally. The one place a session's sinks are put together: every verdict path
    /// (live, --realtime, a replay, --demo) goes through this printer's fan-out, so a further sink
    /// (a socket server, an MQTT publisher) is one more entry in `sinks:` here. `body` gets the
    /// stop signals a publishing replay catches (nil for any other session), to end the replay
    /// on one.
    func withPrinter(
        _ io: some TerminalOutput, sinks: [any VerdictSink] = [],
        _ body: (VerdictPrinter, _ replayStop: StopSignals?) async throws(CLIError) -> Void
    ) async throws(CLIError) {
        let log = try openLog(io)
        defer { log?.close() }
        // The bell is for a tech with a live reader (and the demo of one), not for a replay.
        let style = VerdictPrinter.Style(
            json: json, bell: !quiet && (reader != nil || demo || phonesOnly),
            colour: ProcessInfo.processInfo.environment["NO_COLOR"].map(\.isEmpty) ?? true, noReader: phonesOnly)
        let publisher = try log.flatMap { log throws(CLIError) in try FleetOptions.start(publish, log: log.path) }
        // A replay catches no signal (a Ctrl-C kills it), but a publishing one lingers after it:
        // from here the signals are caught, so a Ctrl-C ends the replay between two of its
        // events, and the linger, instead of killing the process without its closing line.
        let replaySignals = publisher != nil && !(demo || reader != nil || realtime || phonesOnly) ? StopSignals(StopSignals.standard) : nil
        defer { replaySignals?.cancel() }
        let printer = VerdictPrinter(io: io, style: style, log: log, sinks: (publisher.map { [$0] } ?? []) + sinks)
        let failure: CLIError?
        do {
            try await body(printer, replaySignals)
            failure = nil
        } catch {
            failure = error
        }
        printer.finish()
        if let publisher, let publish { io.err(await FleetOptions.finish(publisher, publish, after: replaySignals)) }
        if let failure { throw failure }
        if let failure = printer.logFailure { throw .ioError(failure.description) }
        if !json { io.out(printer.summary) }
    }

    /// The session log named by --log, opened for appending.
    func openLog(_ io: some TerminalOutput) throws(CLIError) -> SessionLog? {
        guard let logPath else { return nil }
        if outboxDefaulted {
            do {
                if try OutboxLocation.prepare(logPath) {
                    io.err(
                        "note: --publish keeps its outbox in \(logPath): what a run cannot send goes with the next one (--log FILE names another)"
                    )
                }
            } catch {
                throw .ioError(error.description)
            }
        }
        do {
            let log = try SessionLog(path: logPath)
            if let note = log.repaired { io.err("note: \(note)") }
            return log
        } catch {
            // A file that is not a log (a registry given by mistake…) is a wrong argument (64).
            throw error.refusal != nil ? .usage(error.description, command: Self.spec.name) : .ioError(error.description)
        }
    }
}

extension VerifyCommand {
    /// How a live session ended (when --timeout did not end it first).
    enum LiveEnd: Sendable {
        /// The reader's and the GPS's streams ended.
        case finished
        /// --count verdicts, a stop signal, or the session log failed (withPrinter says so).
        case done
        /// The reader never opened.
        case readerNeverOpened(ReaderError)
        /// gpsd never answered.
        case gpsdUnavailable(String)
    }

    /// A real reader with the scenario's GPS replayed from now, through the live pipeline, until
    /// --count verdicts, --timeout, or SIGINT / SIGTERM.
    /// serve's further readers join `reader` in one stream (MergedReader), each through `watch`.
    func live(
        reader: ReaderAddress, also: [ReaderAddress] = [], watch: (any TagReader, String) -> any TagReader = { reader, _ in reader },
        scenario: Scenario, verifier: Verifier, printer: VerdictPrinter, io: some TerminalOutput, stop: StopSignals
    ) async throws(CLIError) {
        let (count, timeout) = (self.count, self.timeout)
        let clock = MonotonicClock()
        let gps: any FixSource =
            gpsd.map { GPSDFixSource(endpoint: $0, clock: clock) } ?? scenario.devices(clock: clock, origin: clock.now).gps
        let devices = try ([reader] + also).map { address throws(CLIError) in
            watch(try ReaderOption.reader(address, clock: clock, command: Self.spec.name), address.description)
        }
        let device = devices.count == 1 ? devices[0] : MergedReader(devices)
        // Readers whose device files are there but that do not answer yet (still waking; on a
        // loaded machine, an emulator) are waited for, as scan waits; a path with nothing behind
        // it ends the run at once.
        let waitForReaders = ([reader] + also).allSatisfy(\.deviceIsThere)
        let (ended, end) = AsyncStream<LiveEnd>.makeStream()
        let verdicts = Counter()
        let gpsdAnswered = Counter()
        let checkGPSD = gpsd != nil
        let session: @Sendable () async -> LiveEnd = {
            await LiveVerifier(verifier: verifier, clock: clock, systemClock: KernelClock()).run(reader: device, gps: gps) { event in
                if case .reader(.disconnected(let error)) = event, verdicts.value == 0, !printer.readerReady, !waitForReaders {
                    end.yield(.readerNeverOpened(error))
                    return
                }
                // gpsd that never answered ends the run as a reader that never opened does.
                if checkGPSD, case .gps(let gpsEvent) = event {
                    if case .connected = gpsEvent { _ = gpsdAnswered.increment() }
                    if case .unavailable(let why) = gpsEvent, gpsdAnswered.value == 0, verdicts.value == 0 {
                        end.yield(.gpsdUnavailable(why))
                        return
                    }
                }
                if case .reader(.ready(let description)) = event, !printer.readerReady {
                    printer.note("reader: \(description)")
                }
                printer.print(event, now: clock.now)
                if printer.logFailure != nil { end.yield(.done) }
                if case .verdict = event, let count, verdicts.increment() >= count { end.yield(.done) }
            }
            return .finished
        }
        var racers: [@Sendable () async -> LiveEnd] = [
            session,
            {
                for await reason in ended { return reason }
                return .done
            },
            {
                _ = await stop.wait()
                return .done
            },
        ]
        if io.isTerminal && !json {
            // The status line's fix age keeps counting between events: this runs alongside and
            // ends only when the race is decided (cancelled), so it never decides it.
            racers.append {
                while !Task.isCancelled {
                    try? await clock.sleep(for: .seconds(1))
                    printer.redraw(now: clock.now)
                }
                return .done
            }
        }
        let outcome = await race(deadline: timeout.map { clock.now.advanced(by: $0) }, clock: clock, first: racers)
        end.finish()
        switch outcome {
        case .timedOut:
            if let count, verdicts.value < count {
                throw .timedOut("\(verdicts.value) of \(counted(count, "verdict")) within the timeout")
            }
        case .value(.readerNeverOpened(let error)): throw .unavailable("cannot open the reader: \(error)")
        case .value(.gpsdUnavailable(let why)): throw .unavailable(why)
        case .value(.finished), .value(.done), .cancelled: return
        }
    }
}
