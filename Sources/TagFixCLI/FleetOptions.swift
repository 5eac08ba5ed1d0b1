import Foundation
import TagFixDevices
import TagFixMQTT
import TagFixPostgres

/// The MQTT options `verify --publish` and `collect` share, and their wiring (the logic is in
/// TagFixMQTT).
enum FleetOptions {
    static let mqtt: [CommandSpec.Option] = [
        .init(name: "mqtt-ca", valueName: "FILE", help: "With mqtts://: the CA certificate (PEM) the broker's certificate must chain to."),
        .init(
            name: "mqtt-password-file", valueName: "FILE",
            help: "The broker password for USER@ (mode 0600, refused otherwise; never logged)."),
        .init(name: "mqtt-version", valueName: "V", help: "MQTT protocol version: 5 (default) or 3.1.1."),
    ]

    /// A PostgreSQL fleet store's address and its password (`collect --db`, `report`): the address
    /// checked (a usage error, `label` before it), the password read from `passwordFile` (mode
    /// 0600, `SecretFile`), or `nil` for libpq's own PGPASSFILE / ~/.pgpass.
    static func postgres(_ text: String, passwordFile: String?, label: String = "", command: String) throws(CLIError) -> (
        address: PostgresAddress, password: String?
    ) {
        let address: PostgresAddress
        do throws(PostgresError) {
            address = try PostgresAddress(text)
        } catch {
            throw .usage(label + error.description, command: command)
        }
        guard let passwordFile else { return (address, nil) }
        do {
            return (address, try SecretFile.read(passwordFile).trimmingCharacters(in: .newlines))
        } catch {
            throw .file(error)
        }
    }

    /// The password of each new connection to a PostgreSQL store: `--db-password-file` read again
    /// (a password rotated in the file while `collect` runs is taken when it reconnects); `nil`
    /// without a file (libpq's PGPASSFILE or ~/.pgpass, which libpq reads at each connection).
    static func postgresPassword(file: String?, address: PostgresAddress) -> @Sendable () throws(PostgresError) -> String? {
        guard let file else { return { nil } }
        return { () throws(PostgresError) -> String? in
            do {
                return try SecretFile.read(file).trimmingCharacters(in: .newlines)
            } catch {
                throw .connection(address: address.description, message: "cannot read --db-password-file: \(error)")
            }
        }
    }

    static func publish(_ arguments: ParsedArguments, command: String) throws(CLIError) -> FleetPublishRequest? {
        guard let address = arguments.value("publish") else {
            for name in ["site", "device-id", "publish-linger", "mqtt-ca", "mqtt-password-file", "mqtt-version"]
            where arguments.value(name) != nil {
                throw .usage("--\(name) only applies with --publish", command: command)
            }
            return nil
        }
        let linger = try arguments.seconds("publish-linger", in: 0...86_400, command: command)
        do {
            return try FleetPublishRequest(
                address: address, site: arguments.value("site"), device: arguments.value("device-id"),
                passwordFile: arguments.value("mqtt-password-file"), caFile: arguments.value("mqtt-ca"),
                version: arguments.value("mqtt-version"),
                linger: linger)
        } catch {
            if let file = error.fileError { throw .file(file) }
            throw error.exitsAsUsage ? .usage(error.description, command: command) : .ioError(error.description)
        }
    }

    static func start(_ request: FleetPublishRequest?, log: String) throws(CLIError) -> FleetPublisher? {
        do {
            return try request?.start(logPath: log)
        } catch {
            throw error.exitsAsUsage ? .usage(error.description, command: "verify") : .ioError(error.description)
        }
    }

    /// The linger, which SIGINT or SIGTERM (a second Ctrl-C) cuts short.
    /// `earlier`: signals caught since before the linger (a replay's); one already received ends
    /// the linger at once.
    static func finish(_ publisher: FleetPublisher, _ request: FleetPublishRequest, after earlier: StopSignals? = nil) async -> String {
        let again = StopSignals(StopSignals.standard)
        defer { again.cancel() }
        let interrupted = earlier?.received != nil
        earlier?.cancel()
        let outcome = await publisher.finish(linger: request.linger, clock: MonotonicClock()) {
            if !interrupted { _ = await again.wait() }
        }
        return outcome.summary(
            address: request.address, log: publisher.logPath, linger: request.linger, interrupted: interrupted || again.received != nil)
    }
}
