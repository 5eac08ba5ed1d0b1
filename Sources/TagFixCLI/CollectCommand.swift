import Foundation
import Glibc
import TagFixCore
import TagFixDevices
import TagFixMQTT
import TagFixPostgres
import TagFixStore

/// `tagfix collect`: every verdict a fleet publishes, stored once in a SQLite file or PostgreSQL.
struct CollectCommand: Subcommand {
    static let spec = CommandSpec(
        name: "collect",
        abstract: "Store every verdict a fleet publishes to an MQTT broker, each once, in a SQLite file.",
        discussion: """
            Subscribes to PREFIX/+/verdict/+ (with --group, the MQTT 5 shared subscription \
            $share/GROUP/PREFIX/+/verdict/+, so several collectors split one stream) and stores each \
            message once, by its id (device, session, sequence): a copy the broker delivers again is \
            ignored. The broker keeps the collector's session (give each collector its own stable \
            --client-id), so verdicts published while it is away wait for it. --registry SITE=FILE \
            (SQLite, CSV or JSON, as verify --registry reads them; FILE alone is the site default, \
            verify's default --site) stores where the site's tags should be, so the report shows \
            the tags never tapped: each site given replaces that site's stored placements, the \
            others stay. Only each tag's id, UID, name, centre and radius are copied (never SUN \
            settings or counters). A registry that cannot be read stops collect before it \
            subscribes; SIGHUP reads the registries again (a failure keeps the stored ones). \
            SIGINT or SIGTERM stops it cleanly. Two collectors with one client id would take the \
            broker's session from each other for ever: the newcomer (or one that had only just \
            connected) stops with exit status 69 and one line instead, and the other keeps it \
            (systemd: RestartPreventExitStatus=69). tagfix report FILE reads the store: the whole \
            fleet on one map, then per site its map, its tags never tapped and a table per \
            device. docs/fleet.md.
            """,
        options: [
            .init(
                name: "db", valueName: "FILE|URL",
                help:
                    "The fleet store: a SQLite file (created if missing), or PostgreSQL, postgresql://[USER@]HOST[:PORT]/DB (several collectors, one database)."
            ),
            .init(
                name: "db-password-file", valueName: "FILE",
                help:
                    "PostgreSQL: the user's password (mode 0600; else libpq's PGPASSFILE or ~/.pgpass), read again at every connection: a rotated password needs no restart."
            ),
            .init(
                name: "registry", valueName: "[SITE=]FILE",
                help: "The registry of SITE's tags (default site: default); SIGHUP reads it again. A FILE with = in its name: ./a=b.csv.",
                repeatable: true),
            .init(name: "group", valueName: "G", help: "Share the subscription with the other collectors of group G."),
            .init(
                name: "client-id", valueName: "ID",
                help: "This collector's MQTT client id, stable across runs; default tagfix-collect-HOST[-G]."),
        ] + FleetOptions.mqtt,
        positionals: [.init(name: "URL", help: "mqtt://[USER@]HOST[:PORT]/PREFIX or mqtts://…")],
        examples: [
            "tagfix collect mqtt://broker.example/tagfix --db fleet.sqlite",
            "tagfix collect mqtt://office@broker.example/tagfix --db fleet.sqlite --group office --mqtt-password-file pw",
            "tagfix collect mqtt://broker.example/tagfix --db fleet.sqlite --registry harbour=harbour.sqlite --registry depot=depot.csv",
            "tagfix collect mqtt://broker.example/tagfix --db postgresql://collect@db.example/fleet --db-password-file pg.pw --group office",
            "tagfix report fleet.sqlite --output fleet.html",
        ])

    /// One `--registry [SITE=]FILE`.
    struct SiteRegistry: Sendable, Hashable {
        var site: String
        var path: String

        /// The site `verify --publish` publishes under without `--site`.
        static let defaultSite = "default"

        /// `SITE=FILE` when the text before the first `=` is not empty and holds no `/` (so
        /// `./a=b.csv` is a file), else `FILE` for the default site.
        static func parse(_ text: String, command: String) throws(CLIError) -> SiteRegistry {
            var site = defaultSite
            var path = text
            if let equals = text.firstIndex(of: "="), equals != text.startIndex, !text[..<equals].contains("/") {
                site = String(text[..<equals])
                path = String(text[text.index(after: equals)...])
            }
            guard !path.isEmpty else { throw .usage("--registry \(text): give SITE=FILE or FILE", command: command) }
            do {
                try FleetTopics.checkLevel(site, what: "site")
            } catch {
                throw .usage("--registry \(text): \(error.description)", command: command)
            }
            return SiteRegistry(site: site, path: path)
        }
    }

    var settings: MQTTSettings
    var db: String
    /// `--db` as a PostgreSQL address, with the password from `--db-password-file`.
    var postgres: (address: PostgresAddress, password: String?)?
    /// `--db-password-file`, read again each time the collector connects to PostgreSQL again.
    var postgresPasswordFile: String?
    var group: String?
    var registries: [SiteRegistry]

    init(_ arguments: ParsedArguments) throws(CLIError) {
        guard let db = arguments.value("db") else { throw .usage("collect needs --db FILE (the fleet store)", command: Self.spec.name) }
        self.db = db
        if PostgresAddress.isAddress(db) {
            postgres = try FleetOptions.postgres(
                db, passwordFile: arguments.value("db-password-file"), label: "--db: ", command: Self.spec.name)
            postgresPasswordFile = arguments.value("db-password-file")
        } else if arguments.value("db-password-file") != nil {
            throw .usage("--db-password-file is for a PostgreSQL --db (postgresql://…)", command: Self.spec.name)
        }
        group = arguments.value("group")
        registries = try arguments.all("registry").map { text throws(CLIError) in try SiteRegistry.parse(text, command: Self.spec.name) }
        let clientID = arguments.value("client-id") ?? "tagfix-collect-\(FleetPublishRequest.hostDevice)" + (group.map { "-\($0)" } ?? "")
        do {
            settings = try MQTTSettings.parse(
                address: arguments.positionals[0], passwordFile: arguments.value("mqtt-password-file"), caFile: arguments.value("mqtt-ca"),
                version: arguments.value("mqtt-version"), clientID: clientID)
        } catch {
            if case .passwordFile(let file) = error { throw .file(file) }
            throw .usage(error.description, command: Self.spec.name)
        }
    }

    /// Every registry's placements, each with its site; any registry that cannot be read is the
    /// error (and nothing is stored).
    static func readPlacements(_ registries: [SiteRegistry]) throws(CLIError) -> [FleetStore.Placement] {
        var placements: [FleetStore.Placement] = []
        for registry in registries {
            placements += try RegistrySource.entries(registry.path).map {
                // Only what the report draws: the SUN settings and the rest stay in the registry.
                FleetStore.Placement(
                    site: registry.site, entry: RegistryEntry(id: $0.id, uid: $0.uid, region: $0.region, name: $0.name),
                    registry: registry.path)
            }
        }
        return placements
    }

    /// Reads the registries and replaces their sites' placements in `store`.
    static func loadPlacements(_ registries: [SiteRegistry], into store: any FleetVerdictStore, at now: Timestamp) throws(CLIError)
        -> String
    {
        try storePlacements(try readPlacements(registries), of: registries, into: store, at: now)
    }

    /// Replaces the placements of the registries' sites in `store`.
    /// - Returns: what to say: how many tags of how many sites.
    static func storePlacements(
        _ placements: [FleetStore.Placement], of registries: [SiteRegistry], into store: any FleetVerdictStore, at now: Timestamp
    ) throws(CLIError) -> String {
        let sites = Set(registries.map(\.site))
        do {
            try store.replacePlacements(sites: sites, with: placements, loadedNanoseconds: now.nanosecondsSinceEpoch)
        } catch {
            throw .ioError("fleet store \(store.location): the registries' placements were not stored: \(error)")
        }
        let tags = Set(placements.map { [$0.site, $0.entry.id] }).count
        return "\(counted(tags, "tag")) of \(counted(sites.count, "site")) stored in \(store.location)"
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        let stop = StopSignals(StopSignals.standard)
        defer { stop.cancel() }
        // The registries first: one that cannot be read stops the run before the store is made
        // or anything is subscribed. Files and SQLite block: off the cooperative pool.
        let (registries, db, postgres, clock) = (self.registries, self.db, self.postgres, MonotonicClock())
        let passwordFile = postgresPasswordFile
        let (store, said) = try await offThePool("collect store") { () throws(CLIError) -> (any FleetVerdictStore, String?) in
            let placements = try Self.readPlacements(registries)
            let store: any FleetVerdictStore
            if let postgres {
                do throws(PostgresError) {
                    store = try PostgresFleetStore(
                        address: postgres.address,
                        passwordFrom: FleetOptions.postgresPassword(file: passwordFile, address: postgres.address))
                } catch {
                    // A database that is down or refuses us: say so and stop (a service manager
                    // restarts it); the broker keeps what arrives meanwhile.
                    if case .newerSchema = error { throw .usage(error.description, command: Self.spec.name) }
                    throw .unavailable(error.description)
                }
            } else {
                do throws(FleetStoreError) {
                    store = try FleetStore(path: db, create: true)
                } catch {
                    throw error.isWrongFile ? .usage(error.description, command: Self.spec.name) : .ioError(error.description)
                }
            }
            guard !registries.isEmpty else { return (store, nil) }
            return (store, "registry: " + (try Self.storePlacements(placements, of: registries, into: store, at: clock.now)))
        }
        if let said { io.err(said) }
        let collector: FleetCollector
        do {
            collector = try FleetCollector(
                settings: settings, group: group, store: store, clock: clock, note: { io.err("collect: \($0)") })
        } catch {
            throw .usage(error.description, command: Self.spec.name)
        }
        collector.start()
        io.err("collecting \(settings.address) (\(collector.filter)) into \(store.location); Ctrl-C stops")
        let reloader = StopSignals.each([SIGHUP]) {
            // Reading files and writing SQLite block: off the cooperative pool.
            let said: String = await offThePool("collect registry reload") {
                guard !registries.isEmpty else { return "SIGHUP: no --registry to read again" }
                do throws(CLIError) {
                    return "SIGHUP: registry read again: " + (try Self.loadPlacements(registries, into: store, at: clock.now))
                } catch {
                    return "SIGHUP: the registries were not read again (the stored placements stay): \(error.message)"
                }
            }
            io.err(said)
        }
        let ended = await stop.run { await collector.ended() }
        reloader.cancel()
        await collector.stop()
        io.out(collector.counts.summary)
        if let ended {
            throw .unavailable(
                "collect: \(ended), so this one stops: give each collector its own --client-id (collectors that split one stream: --group G, each with its own id)"
            )
        }
    }
}
