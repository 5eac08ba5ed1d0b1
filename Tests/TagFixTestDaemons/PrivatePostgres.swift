import Foundation
import Glibc
import TagFixDaemons
import TagFixDevices

/// A private PostgreSQL cluster for a test (test tooling, never the product): `initdb` into a
/// temporary folder, then `postgres` itself as a `PrivateDaemon` (this process's child, on a free
/// loopback port, its socket in that folder, stopped by its watchdog if this process dies), with
/// password authentication (scram-sha-256) for the user `tagfix` and a database `tagfix`. As root
/// it runs as `nobody` (`setpriv`), since PostgreSQL refuses root. `with { server in … }` stops it
/// and removes the folder however the body ends.
public final class PrivatePostgres: Sendable {
    public let directory: String
    /// The user's password, also in `passwordFile` (mode 0600), as `--db-password-file` wants it.
    public let password: String
    public var passwordFile: String { directory + "/password" }
    public var port: Int { daemon.port }
    /// `postgresql://tagfix@127.0.0.1:PORT/tagfix`.
    public var address: String { "postgresql://tagfix@127.0.0.1:\(port)/tagfix" }
    private let daemon: PrivateDaemon

    /// PostgreSQL's programs (Debian's `postgresql`: /usr/lib/postgresql/VERSION/bin), the newest.
    public static var binaries: String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }.first {
            FileManager.default.isExecutableFile(atPath: $0 + "/initdb") && FileManager.default.isExecutableFile(atPath: $0 + "/postgres")
        }
    }

    /// Whether a private cluster can run here.
    public static var available: Bool {
        binaries != nil && (geteuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"))
    }

    private init(directory: String, password: String, daemon: PrivateDaemon) {
        self.directory = directory
        self.password = password
        self.daemon = daemon
    }

    /// Runs `body` with a fresh cluster, then stops it (the daemon's scope) and removes its
    /// folder, however `body` ends.
    public static func with<Value>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PrivatePostgres) async throws -> Value
    ) async throws -> Value {
        let (directory, password) = try await initdb()
        do {
            let value = try await PrivateDaemon.with(configuration(directory)) { daemon in
                let server = PrivatePostgres(directory: directory, password: password, daemon: daemon)
                try await server.psql("SELECT 1")
                try await server.psql("CREATE DATABASE tagfix")
                return try await body(server)
            }
            try? FileManager.default.removeItem(atPath: directory)
            return value
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// `postgres` on a port, as a private daemon: ready once its own socket listens there.
    static func configuration(_ directory: String) -> PrivateDaemon.Configuration {
        let heading = "private PostgreSQL: "
        var configuration = PrivateDaemon.Configuration(
            name: "postgres", heading: heading,
            noFreePort: DaemonError(daemon: "postgres", reason: "no free TCP port on 127.0.0.1", heading: heading),
            launch: { port throws(DaemonError) in
                guard let binaries else {
                    throw DaemonError(
                        daemon: "postgres", reason: "PostgreSQL is not installed (apt-get install postgresql)", heading: heading)
                }
                let (executable, arguments) = asUnprivileged(
                    binaries + "/postgres",
                    [
                        "-D", directory + "/data", "-p", String(port), "-k", directory, "-c", "listen_addresses=127.0.0.1", "-c",
                        "max_connections=50",
                        // Its dynamic shared memory in files of its data folder (pg_dynshmem), gone
                        // with the folder: as POSIX segments, the default, a cluster killed by a
                        // test (`kill()`) left two in /dev/shm, 1 MB and 17 kB, a few each run.
                        "-c", "dynamic_shared_memory_type=mmap",
                        // Started again after a kill, it syncs its data folder before recovery:
                        // one syncfs instead of an fsync a file (about a thousand in a new
                        // cluster), which on a disk whose fsync takes 20 ms outlasted the 30 s
                        // its first query waits.
                        "-c", "recovery_init_sync_method=syncfs",
                    ])
                return .init(executable: executable, arguments: arguments, log: directory + "/postgres.log")
            },
            notReady: { port, exited in
                DaemonError(
                    daemon: "postgres",
                    reason: exited
                        ? "postgres exited at once; see \(directory)/postgres.log"
                        : "postgres did not listen on port \(port); see \(directory)/postgres.log",
                    heading: heading)
            })
        configuration.readiness = .seconds(30)
        configuration.folder = directory
        return configuration
    }

    /// initdb into a new folder (owned by `nobody` when this process is root): the folder and
    /// the password.
    private static func initdb() async throws -> (String, String) {
        guard let binaries else { throw PrivatePostgresError("PostgreSQL is not installed (apt-get install postgresql)") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-pg-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let password = UUID().uuidString
        guard
            FileManager.default.createFile(
                atPath: directory + "/password", contents: Data(password.utf8), attributes: [.posixPermissions: 0o600])
        else { throw PrivatePostgresError("cannot write \(directory)/password") }
        if geteuid() == 0 {
            for path in [directory, directory + "/password"] {
                try FileManager.default.setAttributes([.ownerAccountID: 65534, .groupOwnerAccountID: 65534], ofItemAtPath: path)
            }
        }
        let status = try await run(
            binaries + "/initdb",
            [
                "-D", directory + "/data", "-U", "tagfix", "--pwfile=\(directory)/password", "--auth=scram-sha-256", "-E", "UTF8",
                "--no-sync",
            ],
            log: directory + "/initdb.log")
        guard status == .exited(0) else {
            try? FileManager.default.removeItem(atPath: directory)
            throw PrivatePostgresError("initdb failed (\(status)); see \(directory)/initdb.log")
        }
        return (directory, password)
    }

    /// Starts the server again after `kill()` (on the same port and data) and waits until it
    /// answers a query (a server recovering from a kill listens before it answers).
    public func start() async throws {
        try await daemon.restart()
        try await psql("SELECT 1")
    }

    /// Kills the server at once, the postmaster and every backend (SIGKILL): a crash, a power
    /// cut. What it committed stays. Killing the postmaster alone is not that: its backends
    /// live on until they next wait, and one that already holds a client's query runs and
    /// commits it (a CI run saw a store "into a killed server" succeed).
    public func kill() async { await daemon.crash() }

    /// Runs one statement through psql on the server's socket, as the user `tagfix` on the
    /// database `postgres`, trying again for up to 30 s while the server is still starting up.
    public func psql(_ statement: String) async throws {
        guard let binaries = Self.binaries else { return }
        let psql = FileManager.default.isExecutableFile(atPath: binaries + "/psql") ? binaries + "/psql" : "/usr/bin/psql"
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(30))
        while true {
            let status = try await Self.run(
                psql, ["-h", directory, "-p", String(port), "-U", "tagfix", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", statement],
                log: directory + "/psql.log", environment: ["PGPASSWORD": password])
            if status == .exited(0) { return }
            // "the database system is starting up" (or recovering after a kill).
            guard clock.now < deadline else {
                throw PrivatePostgresError(
                    "psql -c \(statement.debugDescription) failed (\(status)); see \(directory)/psql.log")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// `executable` with `arguments`, as `nobody` when this process is root.
    static func asUnprivileged(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        guard geteuid() == 0 else { return (executable, arguments) }
        return ("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", executable] + arguments)
    }

    /// Runs a program to its end, its output appended to `log`; awaits its exit.
    static func run(_ executable: String, _ arguments: [String], log: String, environment: [String: String] = [:]) async throws
        -> ChildProcess.Termination
    {
        let (program, all) = asUnprivileged(executable, arguments)
        let output = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { if output >= 0 { close(output) } }
        let child = try ChildProcess(
            executable: program, arguments: all, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            standardOutput: output >= 0 ? output : nil, standardError: output >= 0 ? output : nil)
        return await child.exited()
    }
}

/// A private cluster that could not be set up: what went wrong and where its log is.
public struct PrivatePostgresError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
