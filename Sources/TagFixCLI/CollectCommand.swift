import TagFixCore
import TagFixDevices
import TagFixMQTT
import TagFixStore

/// `tagfix collect`: every verdict a fleet publishes, stored once in a SQLite file.
struct CollectCommand: Subcommand {
    static let spec = CommandSpec(
        name: "collect",
        abstract: "Store every verdict a fleet publishes to an MQTT broker, each once, in a SQLite file.",
        discussion: """
            Subscribes to PREFIX/+/verdict/+ (with --group, the MQTT 5 shared subscription \
            $share/GROUP/PREFIX/+/verdict/+, so several collectors split one stream) and stores each \
            message once, by its id (device, session, sequence): a copy the broker delivers again is \
            ignored. The broker keeps the collector's session (give each collector its own stable \
            --client-id), so verdicts published while it is away wait for it. SIGINT or SIGTERM stops \
            it cleanly. tagfix report FILE reads the store: the fleet's map and tables per site and \
            device. docs/fleet.md.
            """,
        options: [
            .init(name: "db", valueName: "FILE", help: "The fleet store (SQLite; created if missing)."),
            .init(name: "group", valueName: "G", help: "Share the subscription with the other collectors of group G."),
            .init(
                name: "client-id", valueName: "ID",
                help: "This collector's MQTT client id, stable across runs; default tagfix-collect-HOST[-G]."),
        ] + FleetOptions.mqtt,
        positionals: [.init(name: "URL", help: "mqtt://[USER@]HOST[:PORT]/PREFIX or mqtts://…")],
        examples: [
            "tagfix collect mqtt://broker.example/tagfix --db fleet.sqlite",
            "tagfix collect mqtt://office@broker.example/tagfix --db fleet.sqlite --group office --mqtt-password-file pw",
            "tagfix report fleet.sqlite --output fleet.html",
        ])

    var settings: MQTTSettings
    var db: String
    var group: String?

    init(_ arguments: ParsedArguments) throws(CLIError) {
        guard let db = arguments.value("db") else { throw .usage("collect needs --db FILE (the fleet store)", command: Self.spec.name) }
        self.db = db
        group = arguments.value("group")
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

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        let stop = StopSignals(StopSignals.standard)
        defer { stop.cancel() }
        let store: FleetStore
        do {
            store = try FleetStore(path: db, create: true)
        } catch {
            throw error.isWrongFile ? .usage(error.description, command: Self.spec.name) : .ioError(error.description)
        }
        let collector: FleetCollector
        do {
            collector = try FleetCollector(
                settings: settings, group: group, store: store, clock: MonotonicClock(), note: { io.err("collect: \($0)") })
        } catch {
            throw .usage(error.description, command: Self.spec.name)
        }
        collector.start()
        io.err("collecting \(settings.address) (\(collector.filter)) into \(db); Ctrl-C stops")
        _ = await stop.wait()
        await collector.stop()
        io.out(collector.counts.summary)
    }
}
