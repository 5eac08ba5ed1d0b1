import Foundation
import TagFixCore
import TagFixDemo
import TagFixDevices
import TagFixGPSD
import TagFixReport
import TagFixScenarios
import TagFixServe
import TagFixStore
import TagFixTLS

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
            Phones are readers and GPS receivers too: with --http and --token FILE (named tokens: tagfix tokens add NAME), a \
            tag URL such as https://HOST/t/E1 opened on a phone gets a page that asks for the phone's position and posts it to \
            /api/tap; the verdict is the verifier's, logged and sent like a reader's, with source "phone" and the token's name \
            (docs/protocol.md). A phone shows its token once, by its link HOST/…?token=TOKEN (an HTTP-only cookie from then on); a \
            tap or a page without one is refused (401) with what to do next: open the link once, which sets the cookie on the \
            phone; nothing is logged; taps are same-origin only, rate-limited per client and bounded. The \
            position decides and is dropped unless --keep-phone-positions; --require-sun takes only SUN taps. Browsers give \
            positions to HTTPS pages only: --tls-cert FILE --tls-key FILE (or a reverse proxy; docs/hardware.md). Without \
            --reader, serve runs with phones alone. \
            Several serve instances behind one reverse proxy act as one with --state postgresql://… (the SUN read \
            counters: a SUN URL accepted by one is a replay at every other) and --registry postgresql://…; a tap whose \
            counter cannot be committed is inconclusive, never confirmed, a line on standard error says why, and \
            the next tap connects again. \
            SIGHUP reloads --registry, --token and --tls-cert/--tls-key; SIGTERM or SIGINT stops: pending scans get their verdicts, the \
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
                help:
                    "The event socket (Unix, mode 0660); default /run/tagfix/tagfix.sock as root (the folder made when missing), else $XDG_RUNTIME_DIR/tagfix.sock; none with --demo unless given."
            ),
            .init(name: "socket-group", valueName: "GROUP", help: "Give the socket to GROUP (mode 0660): its members may connect."),
            .init(name: "listen", valueName: "HOST:PORT", help: "Also serve the event socket on TCP (gpsd's port is 2947; try 2948)."),
            .init(name: "http", valueName: "HOST:PORT", help: "Serve the live page and the HTTP API here, e.g. 127.0.0.1:8080."),
            .init(
                name: "token", valueName: "FILE",
                help:
                    "Token file (mode 0600): one token, or named ones (NAME TOKEN a line; tagfix tokens add NAME makes them); required for any address other than loopback; HTTP and TCP clients must give one; with --http, phones tap with theirs (the link HOST/…?token=TOKEN sets a cookie once). SIGHUP reloads it."
            ),
            .init(
                name: "tls-cert", valueName: "FILE",
                help:
                    "Serve --http as HTTPS with this PEM certificate chain (the server's first), with --tls-key; SIGHUP reloads both (live connections keep theirs). Phones give a page their position only over HTTPS (or on localhost)."
            ),
            .init(name: "tls-key", valueName: "FILE", help: "The PEM private key of --tls-cert (mode 0600)."),
            .init(
                name: "require-sun", valueName: nil,
                help:
                    "A phone tap whose tag proves nothing with SUN (NTAG 424 DNA) is untrusted(sun_required): a plain tag's URL can be opened anywhere by anyone who has seen it."
            ),
            .init(
                name: "keep-phone-positions", valueName: nil,
                help:
                    "Keep a phone tap's coordinates in the log (by default the position decides and is dropped: the log keeps the distance and the accuracy)."
            ),
            .init(
                name: "tap-limit", valueName: "BURST,PER_S",
                help:
                    "Phone taps each client may make: BURST at once, then PER_S a second (default 10,1: a tech taps a tag every few seconds at most; more is refused 429). Raise it for a load test from few addresses, or for phones behind one NAT address."
            ),
            .init(
                name: "client-timeout", valueName: "S",
                help:
                    "How long a client has to finish what it began sending, seconds (default 10): an HTTP request's head, a socket command; then 408 or an ERROR object and the connection is closed. Clients that only read are never cut off by it."
            ),
            .init(
                name: "keep-alive", valueName: "S[,REQUESTS]",
                help:
                    "How long a kept HTTP connection waits for its next request, seconds (default 15), and the most requests one connection is answered (default 1000; the last answer says Connection: close). Behind a reverse proxy that keeps its connections to serve open (Caddy keeps them 2 minutes), make it longer than the proxy's own idle time, so serve never closes a connection the proxy is about to reuse for a tap."
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
            "tagfix serve --registry site.sqlite --log taps.jsonl --http 0.0.0.0:8443 --token /etc/tagfix/tokens --tls-cert site.pem --tls-key site-key.pem",
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
    /// No --reader: phones are the only readers (--http and --token needed).
    var phonesOnly: Bool
    var tlsCertificate: String?
    var tlsKey: String?
    var phonePolicy = PhoneTapPolicy()
    var tapLimit = PhoneRateLimiter()
    var tiles: ReportCommand.Tiles?
    var attribution: String?
    var leafletDirectory = ProcessInfo.processInfo.environment["TAGFIX_LEAFLET_DIR"] ?? Leaflet.debianDirectory

    init(_ arguments: ParsedArguments) throws(CLIError) {
        let name = Self.spec.name
        demo = arguments.flag("demo")
        phonesOnly = arguments.value("reader") == nil && !demo
        if phonesOnly, arguments.value("http") == nil || arguments.value("token") == nil {
            throw .usage("serve needs --reader ADDRESS, or --http HOST:PORT with --token FILE for phones alone (or --demo)", command: name)
        }
        if phonesOnly, arguments.value("gps") != nil || arguments.value("gpsd") != nil {
            throw .usage("--gps is for a --reader's taps: a phone brings its own position; drop --gps or give --reader", command: name)
        }
        if arguments.value("gps") != nil, arguments.value("gpsd") != nil { throw .usage("give --gps or --gpsd, not both", command: name) }
        var session = arguments
        session.values["gps"] = arguments.values["gpsd"] ?? arguments.values["gps"]
        // Phones alone: verify's options, log and sinks as for a reader, and no reader at all.
        verify = try VerifyCommand(session, phonesOnly: phonesOnly)
        tlsCertificate = arguments.value("tls-cert")
        tlsKey = arguments.value("tls-key")
        if (tlsCertificate == nil) != (tlsKey == nil) { throw .usage("give --tls-cert FILE and --tls-key FILE together", command: name) }
        if tlsCertificate != nil, demo { throw .usage("serve --demo serves plain HTTP on loopback: drop --tls-cert", command: name) }
        if tlsCertificate != nil, arguments.value("http") == nil {
            throw .usage("--tls-cert is for --http: give --http HOST:PORT", command: name)
        }
        phonePolicy = PhoneTapPolicy(requireSUN: arguments.flag("require-sun"), keepPositions: arguments.flag("keep-phone-positions"))
        if let limit = arguments.value("tap-limit") { tapLimit = try Self.tapLimit(limit, command: name) }
        readers = try arguments.all("reader").map { text throws(CLIError) in try ReaderOption.address(text, command: name) }
        // One reader by two of its names (a speed, a link) would wait for itself for ever: the
        // second is busy while the first has it.
        var named: [String: ReaderAddress] = [:]
        for address in readers {
            if let first = named[address.reader] {
                throw .usage(
                    first.description == address.description
                        ? "--reader \(address) is given twice"
                        : "--reader \(first) and --reader \(address) are one reader (\(address.reader)): give it once", command: name)
            }
            named[address.reader] = address
        }
        tokenPath = arguments.value("token")
        tiles = try arguments.value("tiles").map { text throws(CLIError) in try ReportCommand.Tiles.parse(text, command: name) }
        attribution = arguments.value("attribution")
        do {
            configuration = ServeConfiguration(
                // The demo has no socket unless asked: it serves its page, and needs no /run/tagfix.
                socketPath: arguments.value("socket") ?? (demo ? nil : ServeConfiguration.defaultSocketPath()),
                listen: try arguments.value("listen").map { text throws(ServeError) in try ListenAddress(text) },
                http: try (arguments.value("http") ?? (demo ? "127.0.0.1:0" : nil)).map { text throws(ServeError) in try ListenAddress(text)
                },
                token: tokenPath.map { _ in "" }, release: TagFixCommandLine.version)
            configuration.socketGroup = arguments.value("socket-group")
            // Root's default, /run/tagfix, is gone after each boot; a user's $XDG_RUNTIME_DIR is
            // the session's to make.
            configuration.makesSocketFolder = arguments.value("socket") == nil && getuid() == 0
            try configuration.check()
        } catch {
            throw .usage(error.message, command: name)
        }
        if let timeout = try arguments.seconds("client-timeout", in: 0.1...3600, command: name) { configuration.clientTimeout = timeout }
        if let keepAlive = arguments.value("keep-alive") {
            (configuration.keepAliveTimeout, configuration.keepAliveRequests) = try Self.keepAlive(keepAlive, command: name)
        }
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        if demo { return try await runDemo(io) }
        var configuration = self.configuration
        let tokens = try tokenPath.map { path throws(CLIError) in TokenRing(try Self.readTokens(path)) }
        if let tokens {
            configuration.token = tokens.current.entries.first?.token
            configuration.tokens = tokens
        }
        if let tlsCertificate, let tlsKey { configuration.tls = ServeTLS(try Self.tlsContext(certificate: tlsCertificate, key: tlsKey)) }
        let map = try liveMap(io)
        let stop = StopSignals(StopSignals.standard)
        defer { stop.cancel() }
        let scenario =
            phonesOnly ? Scenario(name: "phones", start: MonotonicClock().now, gps: [], reader: []) : try verify.sessionScenario()
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
        // Phone taps: with --http and a token file (each phone's token rides in its cookie).
        let phones = tokens.flatMap { tokens in
            configuration.http.map { _ in
                PhoneTaps(
                    handler: PhoneTapHandler(verifier: verifier, clock: MonotonicClock(), policy: phonePolicy), tokens: tokens,
                    secure: configuration.tls != nil, clock: MonotonicClock(), limiter: tapLimit)
            }
        }
        let hub: ServeHub
        do {
            hub = try ServeHub(
                configuration, readers: readers.map(\.description),
                gps: phonesOnly ? nil : verify.gpsd?.description ?? verify.scenarioPath, placements: placements,
                clock: MonotonicClock(), map: map, phones: phones, log: { io.err($0) })
        } catch {
            throw error.kind == .usage ? .usage(error.message, command: Self.spec.name) : .unavailable(error.message)
        }
        io.err("tagfix serve: \(registryName)")
        io.err(Self.listening(configuration, hub: hub))
        if phones != nil, let address = configuration.http, let port = hub.server.httpPort {
            let scheme = configuration.tls != nil ? "https" : "http"
            io.err(
                "tagfix serve: phones tap here: give each tech the link \(scheme)://\(HostPort.described(address.host, port))/?token=TOKEN (tagfix tokens list) once, then tag URLs \(scheme)://HOST/t/{id}"
            )
        }
        hub.start()
        let tokenPath = self.tokenPath
        let (tlsCertificate, tlsKey) = (self.tlsCertificate, self.tlsKey)
        let tls = configuration.tls
        let reload: @Sendable () -> Void = {
            if let tokenPath, let tokens {
                do throws(CLIError) {
                    // A file with no token left is every token revoked (`tagfix tokens revoke`
                    // of the last one): taken, so that each is refused, not kept as it was.
                    tokens.replace(with: try Self.readTokens(tokenPath, allowEmpty: true))
                    let count = tokens.current.entries.count
                    io.err(
                        count == 0
                            ? "SIGHUP: tokens reloaded: none left in \(tokenPath): every phone and client is refused until tagfix tokens add NAME"
                            : "SIGHUP: tokens reloaded: \(count) in \(tokenPath)")
                } catch {
                    io.err("SIGHUP: the tokens were not reloaded (the previous ones stay): \(error.message)")
                }
            }
            if let tls, let tlsCertificate, let tlsKey {
                do throws(CLIError) {
                    tls.replace(with: try Self.tlsContext(certificate: tlsCertificate, key: tlsKey))
                    io.err("SIGHUP: TLS certificate reloaded: \(tlsCertificate) (open connections keep the previous one)")
                } catch {
                    io.err("SIGHUP: the TLS certificate was not reloaded (the previous one stays): \(error.message)")
                }
            }
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
            try await verify.withPrinter(io, sinks: [hub]) { printer, _ throws(CLIError) in
                // A phone's verdict goes through the same fan-out as a reader's: the log first,
                // the taps that arrived together with one fsync.
                let clock = MonotonicClock()
                phones?.deliver(groupsTo: { verdicts, whenKept in printer.print(recorded: verdicts, now: clock.now, whenKept: whenKept) })
                var ended: CLIError?
                if let reader = readers.first {
                    do throws(CLIError) {
                        try await verify.live(
                            reader: reader, also: Array(readers.dropFirst()), watch: hub.watching, scenario: scenario, verifier: verifier,
                            printer: printer, io: io, stop: stop)
                    } catch {
                        ended = error
                    }
                } else {
                    // Phones alone: the session lasts until SIGINT or SIGTERM.
                    _ = await stop.wait()
                }
                // However the session ended, the taps taken are committed before the log closes;
                // later ones get 503.
                await phones?.finish()
                if let ended { throw ended }
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

    /// `--tap-limit BURST,PER_S`: a whole number of taps at once, then a rate (0.001 a second: one
    /// each 1000 s).
    static func tapLimit(_ text: String, command: String) throws(CLIError) -> PhoneRateLimiter {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2, let burst = Int(parts[0]), let perSecond = Double(parts[1]), (1...1_000_000).contains(burst),
            (0.001...1_000_000).contains(perSecond)
        else {
            throw .usage(
                "--tap-limit takes BURST,PER_S: taps at once (1 to 1000000), then taps a second (0.001 to 1000000), e.g. 10,1",
                command: command)
        }
        return PhoneRateLimiter(burst: burst, interval: .seconds(1 / perSecond))
    }

    /// `--keep-alive S[,REQUESTS]`: a kept connection's idle time, and its cap of requests (1000
    /// when not given).
    static func keepAlive(_ text: String, command: String) throws(CLIError) -> (Duration, Int) {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let seconds = Double(parts[0]), (1...3600).contains(seconds),
            let requests = parts.count == 2 ? Int(parts[1]) : 1000, (1...1_000_000).contains(requests)
        else {
            throw .usage(
                "--keep-alive takes S[,REQUESTS]: seconds a kept connection waits for its next request (1 to 3600), then, if given, the most requests a connection is answered (1 to 1000000), e.g. 150 or 150,1000",
                command: command)
        }
        return (.seconds(seconds), requests)
    }

    /// The token file: one token, or named ones; none only when `allowEmpty` (a reload after
    /// the last was revoked; serve does not start with none).
    static func readTokens(_ path: String, allowEmpty: Bool = false) throws(CLIError) -> TokenFile {
        let file: TokenFile
        do {
            file = try TokenFile.read(path)
        } catch {
            throw .file(error)
        }
        guard allowEmpty || !file.entries.isEmpty else {
            throw .usage("--token \(path) is empty: tagfix tokens add NAME makes a token", command: spec.name)
        }
        return file
    }

    /// The TLS certificate and key: a file that cannot be read is 66, one that is not what it
    /// should be (or a key not the certificate's) 65.
    static func tlsContext(certificate: String, key: String) throws(CLIError) -> TLSServerContext {
        do {
            return try TLSServerContext(certificate: certificate, key: key)
        } catch {
            // The file once: the error's own description names it too.
            let message = error.openSSL.isEmpty ? error.message : "\(error.message) (\(error.openSSL))"
            throw .file(DataFileError(file: error.file ?? certificate, line: nil, message: message, unreadable: error.unreadable))
        }
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
                "tagfix serve --demo: open http://\(HostPort.described(address.host, port))/ — the walk begins when the page is open")
        }
        let viewer = hub.firstViewer
        let opened = await stop.run { await viewer.wait() }
        var failure: CLIError?
        if opened == true {
            io.err("tagfix serve --demo: the page is open: walking the Harbour Works example site (\(ExampleSite.stops.count) taps)")
            do {
                try await verify.withPrinter(io, sinks: [hub]) { printer, _ throws(CLIError) in
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
            parts.append("tcp \(HostPort.described(address.host, port))")
        }
        if let address = configuration.http, let port = hub.server.httpPort {
            parts.append("\(configuration.tls != nil ? "https" : "http")://\(HostPort.described(address.host, port))/")
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
