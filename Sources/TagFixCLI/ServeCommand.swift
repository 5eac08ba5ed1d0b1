import Foundation
import TagFixCore
import TagFixDemo
import TagFixDevices
import TagFixGPSD
import TagFixReport
import TagFixServe
import TagFixStore

/// `tagfix serve`: the live verifier as a service, with a gpsd-style event socket and a live
/// map over HTTP. The session is `verify --reader`'s (VerifyCommand); the server is one more
/// sink of its fan-out (TagFixServe).
struct ServeCommand: Subcommand {
    static let spec = CommandSpec(
        name: "serve",
        abstract: "Run the live verifier as a service: a gpsd-style event socket and a live site map over HTTP.",
        discussion: """
            Owns the reader (or several: --reader again) and the GPS source, verifies every tap as verify --reader does (the same \
            policy options), keeps --log on the disk before anything is sent (with --publish, each verdict also goes to an \
            MQTT broker as verify --publish sends it; docs/fleet.md), and serves: a Unix socket \
            (--socket, mode 0660) and optionally TCP (--listen) where clients send ?WATCH={"enable":true}; \
            and read one JSON object per line (VERSION, SCAN, FIX, VERDICT, READER, GPS, ERROR; \
            docs/protocol.md); and with --http a live page (GET /, updated by Server-Sent Events from \
            /events: the site on a Leaflet map, the tags left to tap nearest first with their distance \
            and direction, the progress and the last verdicts), /api/verdicts?since=ID, /api/tags, /healthz and \
            /metrics (Prometheus); Leaflet (Debian's libjs-leaflet, read once at start) under /leaflet/, and \
            with --tiles FILE.mbtiles the file's tiles at /tiles/Z/X/Y (anything outside its zooms or \
            tile range is 404; a file that is not MBTiles is one line at start and exit 65). \
            Addresses are loopback unless --token FILE is given (mode 0600): then HTTP needs \
            Authorization: Bearer TOKEN and TCP socket clients ?AUTH="TOKEN"; first. A client that does \
            not read is cut off after 1 MiB of unread output, with a line on standard error; one that begins a request or a \
            command and does not end it within --client-timeout is closed. \
            Several serve instances behind one reverse proxy act as one with --state postgresql://… (the SUN read \
            counters: a SUN URL accepted by one is a replay at every other) and --registry postgresql://…; a tap whose \
            counter cannot be committed is inconclusive, never confirmed, a line on standard error says why, and \
            the next tap connects again. \
            SIGHUP reloads --registry; SIGTERM or SIGINT stops: pending scans get their verdicts, the \
            log is complete, clients get a SHUTDOWN object, exit 0. Under systemd (Type=notify) it \
            says READY=1 once it listens.
            """,
        options: [
            .init(
                name: "reader", valueName: "ADDRESS",
                help: ReaderOption.help + " Give several to serve them all: each verdict names its reader.",
                repeatable: true),
            .init(
                name: "gps", valueName: "SOURCE",
                help: "gpsd://HOST:PORT[/DEVICE] (default gpsd://localhost:2947), or a scenario file whose GPS is replayed (mock GPS)."),
            .init(name: "gpsd", valueName: "URL", help: "The same as --gps."),
            .init(
                name: "registry", valueName: "FILE|URL",
                help: "Registry of tag placements (SQLite, CSV or JSON, or PostgreSQL: postgresql://…); SIGHUP reloads it."),
            .init(
                name: "log", valueName: "FILE", help: "Append each verdict to FILE (JSON Lines), on the disk before it is sent anywhere."),
            .init(
                name: "socket", valueName: "PATH",
                help: "The event socket (Unix, mode 0660); default /run/tagfix/tagfix.sock as root, else $XDG_RUNTIME_DIR/tagfix.sock."),
            .init(name: "socket-group", valueName: "GROUP", help: "Give the socket to GROUP (mode 0660): its members may connect."),
            .init(name: "listen", valueName: "HOST:PORT", help: "Also serve the event socket on TCP (gpsd's port is 2947; try 2948)."),
            .init(name: "http", valueName: "HOST:PORT", help: "Serve the live page and the HTTP API here, e.g. 127.0.0.1:8080."),
            .init(
                name: "token", valueName: "FILE",
                help: "Bearer token file (mode 0600): required for any address other than loopback; HTTP and TCP clients must give it."),
            .init(
                name: "client-timeout", valueName: "S",
                help:
                    "How long a client has to finish what it began sending, seconds (default 10): an HTTP request's head, a socket command; then 408 or an ERROR object and the connection is closed. Clients that only read are never cut off by it."
            ),
            .init(
                name: "tiles", valueName: "FILE|URL",
                help:
                    "The live map's base map: an MBTiles file (served as /tiles/Z/X/Y, so the page works without a network) or an XYZ tile server's https://…/{z}/{x}/{y}.png (the browser reads it; mind its usage policy)."
            ),
            .init(
                name: "attribution", valueName: "TEXT",
                help: "The base map's credit (default: the MBTiles file's, or OpenStreetMap's for its servers)."),
            .init(
                name: "demo", valueName: nil,
                help:
                    "Walk the built-in example site through the emulators (as verify --demo does) and serve it live: open the link it prints (--http defaults to 127.0.0.1 on a free port); the walk begins once the page is open, and the page stays up until Ctrl-C."
            ),
            .init(name: "json", valueName: nil, help: "Print one JSON object per verdict on standard output (JSON Lines)."),
            .init(name: "quiet", valueName: nil, help: "No terminal bell on a verdict."),
        ]
            + VerifyCommand.spec.options.filter { Self.policyOptions.contains($0.name) },
        examples: [
            "tagfix serve --reader pn532_uart:/dev/ttyUSB0 --gps gpsd://localhost:2947 --registry site.sqlite --log today.jsonl --http 127.0.0.1:8080",
            "tagfix serve --reader pn532_uart:/dev/ttyUSB0 --registry site.sqlite --listen 0.0.0.0:2948 --token /etc/tagfix/token",
            "tagfix serve --demo",
            #"printf '?WATCH={"enable":true};\n' | socat - UNIX-CONNECT:$XDG_RUNTIME_DIR/tagfix.sock"#,
        ])

    /// verify's options that decide verdicts, and its --publish ones: serve takes them as verify does.
    static let policyOptions: Set<String> = [
        "sun-keys", "sun-counters", "state", "db-password-file", "max-accuracy", "max-fix-age", "fix-timeout", "max-radius",
        "default-url-radius", "allow-simulated",
        "require-genuine", "allow-unsigned-tags", "trust-key", "max-speed", "no-confirmation", "disallow",
        // --publish (with --log, its outbox) and its MQTT options, wired as verify wires them.
        "publish", "site", "device-id", "publish-linger", "mqtt-ca", "mqtt-password-file", "mqtt-version",
    ]

    var verify: VerifyCommand
    /// Every --reader, in order.
    var readers: [ReaderAddress]
    var configuration: ServeConfiguration
    var tokenPath: String?
    var demo: Bool
    var tiles: ReportCommand.Tiles?
    var attribution: String?
    var leafletDirectory = ProcessInfo.processInfo.environment["TAGFIX_LEAFLET_DIR"] ?? Leaflet.debianDirectory

    init(_ arguments: ParsedArguments) throws(CLIError) {
        let name = Self.spec.name
        demo = arguments.flag("demo")
        guard arguments.value("reader") != nil || demo else { throw .usage("serve needs --reader ADDRESS (or --demo)", command: name) }
        if arguments.value("gps") != nil, arguments.value("gpsd") != nil { throw .usage("give --gps or --gpsd, not both", command: name) }
        var session = arguments
        session.values["gps"] = arguments.values["gpsd"] ?? arguments.values["gps"]
        verify = try VerifyCommand(session)
        readers = try arguments.all("reader").map { text throws(CLIError) in try ReaderOption.address(text, command: name) }
        if Set(readers.map(\.description)).count < readers.count { throw .usage("a --reader is given twice", command: name) }
        tokenPath = arguments.value("token")
        tiles = try arguments.value("tiles").map { text throws(CLIError) in try ReportCommand.Tiles.parse(text, command: name) }
        attribution = arguments.value("attribution")
        do {
            configuration = ServeConfiguration(
                socketPath: arguments.value("socket") ?? ServeConfiguration.defaultSocketPath(),
                listen: try arguments.value("listen").map { text throws(ServeError) in try ListenAddress(text) },
                http: try (arguments.value("http") ?? (demo ? "127.0.0.1:0" : nil)).map { text throws(ServeError) in try ListenAddress(text)
                },
                token: tokenPath.map { _ in "" }, release: TagFixCommandLine.version)
            configuration.socketGroup = arguments.value("socket-group")
            try configuration.check()
        } catch {
            throw .usage(error.message, command: name)
        }
        if let timeout = try arguments.seconds("client-timeout", in: 0.1...3600, command: name) { configuration.clientTimeout = timeout }
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        guard let reader = readers.first else {
            guard demo else { throw .usage("serve needs --reader ADDRESS", command: Self.spec.name) }
            return try await runDemo(io)
        }
        var configuration = self.configuration
        if let tokenPath {
            do {
                configuration.token = try SecretFile.read(tokenPath).trimmingCharacters(in: .whitespacesAndNewlines)
            } catch {
                throw .file(error)
            }
            guard configuration.token?.isEmpty == false else { throw .usage("--token \(tokenPath) is empty", command: Self.spec.name) }
        }
        let map = try liveMap(io)
        let stop = StopSignals(StopSignals.standard)
        defer { stop.cancel() }
        let scenario = try verify.sessionScenario()
        var wrapped: ReloadableRegistry?
        let note: @Sendable (String) -> Void = { io.err("tagfix serve: \($0)") }
        let (verifier, registryName, registryPath) = try verify.makeVerifier(
            scenario,
            wrap: { registry in
                let reloadable = ReloadableRegistry(registry)
                wrapped = reloadable
                return reloadable
            }, note: note)
        let reloadable = wrapped
        let passwordFile = verify.dbPasswordFile
        let placements =
            try registryPath.map { path throws(CLIError) in
                try RegistrySource.entries(path, passwordFile: passwordFile, command: Self.spec.name)
            } ?? []
        let hub: ServeHub
        do {
            hub = try ServeHub(
                configuration, readers: readers.map(\.description), gps: verify.gpsd?.description ?? verify.scenarioPath,
                placements: placements,
                clock: MonotonicClock(), map: map, log: { io.err($0) })
        } catch {
            throw error.kind == .usage ? .usage(error.message, command: Self.spec.name) : .unavailable(error.message)
        }
        io.err("tagfix serve: \(registryName)")
        io.err(Self.listening(configuration, hub: hub))
        hub.start()
        let reload: @Sendable () -> Void = {
            guard let registryPath, let reloadable else { return io.err("SIGHUP: no --registry to reload") }
            do throws(CLIError) {
                let (registry, name) = try RegistrySource.open(
                    registryPath, maximumRadius: verifier.policy.maximumRadius, passwordFile: passwordFile, command: Self.spec.name,
                    note: note)
                let entries = try RegistrySource.entries(registryPath, passwordFile: passwordFile, command: Self.spec.name)
                reloadable.replace(with: registry)
                hub.setPlacements(entries)
                io.err("SIGHUP: registry reloaded: \(name)")
            } catch {
                io.err("SIGHUP: the registry was not reloaded (the previous one stays): \(error.message)")
            }
        }
        let reloader = StopSignals.each([SIGHUP]) { reload() }
        // Ready only once SIGHUP is caught: systemd's ExecReload may follow READY at once.
        SystemdNotify.send("READY=1\nSTATUS=serving \(registryName)")
        var failure: CLIError?
        do {
            try await verify.withPrinter(io, sinks: [hub]) { printer throws(CLIError) in
                try await verify.live(
                    reader: reader, also: Array(readers.dropFirst()), watch: hub.watching, scenario: scenario, verifier: verifier,
                    printer: printer, io: io, stop: stop)
            }
        } catch {
            failure = error
        }
        reloader.cancel()
        SystemdNotify.send("STOPPING=1")
        let signal = stop.received.map { $0 == SIGINT ? "SIGINT" : $0 == SIGTERM ? "SIGTERM" : "signal \($0)" }
        await hub.stop(
            reason: failure.map { "error: \($0.message)" } ?? signal.map { "stopped by \($0); the log is complete" } ?? "session over")
        if let failure { throw failure }
    }

    /// `serve --demo`: the example site (its registry on the page), walked through the emulators
    /// as `verify --demo` walks it once the first page is open, each verdict to the hub as to any
    /// sink; then the finished walk stays served until SIGINT or SIGTERM.
    func runDemo(_ io: some TerminalOutput) async throws(CLIError) {
        let map = try liveMap(io)
        let stop = StopSignals(StopSignals.standard)
        defer { stop.cancel() }
        let hub: ServeHub
        do {
            hub = try ServeHub(
                configuration, readers: ["demo: PN532 emulator"], gps: "demo: NMEA emulator", placements: ExampleSite.registry().entries,
                clock: MonotonicClock(), map: map, log: { io.err($0) })
        } catch {
            throw error.kind == .usage ? .usage(error.message, command: Self.spec.name) : .unavailable(error.message)
        }
        io.err(Self.listening(configuration, hub: hub))
        hub.start()
        if let address = configuration.http, let port = hub.server.httpPort {
            io.err(
                "tagfix serve --demo: open http://\(ListenAddress.described(address.host, port))/ — the walk begins when the page is open")
        }
        let viewer = hub.firstViewer
        let opened = await stop.run { await viewer.wait() }
        var failure: CLIError?
        if opened == true {
            io.err("tagfix serve --demo: the page is open: walking the Harbour Works example site (\(ExampleSite.stops.count) taps)")
            do {
                try await verify.withPrinter(io, sinks: [hub]) { printer throws(CLIError) in
                    do throws(DemoError) {
                        try await DemoRun(stop: stop, note: { io.err($0) }, onEvent: { printer.print($0, now: $1) }).run()
                    } catch {
                        throw CLIError(error)
                    }
                }
            } catch {
                failure = error
            }
            if failure == nil, stop.received == nil {
                io.err("tagfix serve --demo: the walk is over; the page stays up until Ctrl-C")
                _ = await stop.wait()
            }
        }
        let signal = stop.received.map { $0 == SIGINT ? "SIGINT" : $0 == SIGTERM ? "SIGTERM" : "signal \($0)" }
        await hub.stop(reason: failure.map { "error: \($0.message)" } ?? signal.map { "stopped by \($0)" } ?? "demo over")
        if let failure { throw failure }
    }

    /// The live page's map: Leaflet read once from libjs-leaflet, and --tiles. Without Leaflet
    /// the page draws the plain map, with a note; with --tiles that is an error (69). A
    /// --tiles file that is not MBTiles is one line and exit 65 (66 when it cannot be read).
    func liveMap(_ io: some TerminalOutput) throws(CLIError) -> LiveMap {
        var map = LiveMap()
        do {
            map.leaflet = try Leaflet.load(directory: leafletDirectory)
        } catch {
            guard tiles == nil else { throw .unavailable("\(error.message) (--tiles needs it to draw the map)") }
            io.err("note: \(error.message); the live page draws the plain map")
        }
        switch tiles {
        case nil: break
        case .server(let template): map.tiles = .server(template, attribution: attribution)
        case .file(let path):
            do {
                let file = try MBTiles(path: path)
                map.tiles = .source(MBTilesSource(file: file, attribution: attribution ?? file.metadata["attribution"]))
                io.err(
                    "tagfix serve: tiles from \(path), zooms \(file.zooms.lowerBound)–\(file.zooms.upperBound) (\(file.format)), at /tiles/Z/X/Y"
                )
            } catch {
                throw .file(DataFileError(file: path, line: nil, message: error.message, unreadable: error.kind == .missing))
            }
        }
        return map
    }

    /// What the server listens on, said once at start.
    static func listening(_ configuration: ServeConfiguration, hub: ServeHub) -> String {
        var parts: [String] = []
        if let path = configuration.socketPath { parts.append("socket \(path)") }
        if let address = configuration.listen, let port = hub.server.listenPort {
            parts.append("tcp \(ListenAddress.described(address.host, port))")
        }
        if let address = configuration.http, let port = hub.server.httpPort {
            parts.append("http://\(ListenAddress.described(address.host, port))/")
        }
        var line = "tagfix serve: listening on " + parts.joined(separator: ", ")
        let open = [configuration.listen, configuration.http].compactMap { $0 }.filter { !$0.isLoopback }
        if !open.isEmpty {
            line += "\ntagfix serve: \(open.map(\.description).joined(separator: " and ")) can be reached from other machines: "
            line += "clients must give the --token (HTTP: Authorization: Bearer; socket: ?AUTH=\"TOKEN\";)"
        }
        return line
    }
}

/// An MBTiles file as the live page's tile source.
struct MBTilesSource: TileSource {
    let file: MBTiles
    let attribution: String?

    var zooms: ClosedRange<Int> { file.zooms }
    var mediaType: String { file.mediaType }
    func tileData(z: Int, x: Int, y: Int) throws -> [UInt8]? { try file.tile(z: z, x: x, y: y) }
}
