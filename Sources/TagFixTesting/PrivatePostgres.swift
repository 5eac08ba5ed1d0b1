import Foundation
import Glibc
import Synchronization
import TagFixDevices

/// A private PostgreSQL cluster for a test (test tooling, never the product): `initdb` into a
/// temporary folder, then `postgres` itself as this process's child on a free loopback port with
/// its socket in that folder, password authentication (scram-sha-256) for the user `tagfix`, and
/// a database `tagfix`. As root it runs as `nobody` (`setpriv`), since PostgreSQL refuses root.
/// `with { server in … }` stops it and removes the folder however the body ends.
public final class PrivatePostgres: Sendable {
    public let directory: String
    public let port: Int
    /// The user's password, also in `passwordFile` (mode 0600), as `--db-password-file` wants it.
    public let password: String
    public var passwordFile: String { directory + "/password" }
    /// `postgresql://tagfix@127.0.0.1:PORT/tagfix`.
    public var address: String { "postgresql://tagfix@127.0.0.1:\(port)/tagfix" }
    private let server: Mutex<ChildProcess?>

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

    private init(directory: String, port: Int, password: String) {
        self.directory = directory
        self.port = port
        self.password = password
        server = Mutex(nil)
    }

    /// Runs `body` with a fresh cluster, then stops it (SIGINT: PostgreSQL's fast shutdown) and
    /// removes its folder, however `body` ends.
    public static func with<Value>(_ body: (PrivatePostgres) async throws -> Value) async throws -> Value {
        let server = try await make()
        do {
            try await server.start()
            try await server.psql("CREATE DATABASE tagfix")
            let value = try await body(server)
            await server.stop()
            try? FileManager.default.removeItem(atPath: server.directory)
            return value
        } catch {
            await server.stop()
            try? FileManager.default.removeItem(atPath: server.directory)
            throw error
        }
    }

    /// initdb into a new folder (owned by `nobody` when this process is root).
    private static func make() async throws -> PrivatePostgres {
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
        let initdb = try await run(
            binaries + "/initdb",
            [
                "-D", directory + "/data", "-U", "tagfix", "--pwfile=\(directory)/password", "--auth=scram-sha-256", "-E", "UTF8",
                "--no-sync",
            ],
            log: directory + "/initdb.log")
        guard initdb == .exited(0) else {
            throw PrivatePostgresError("initdb failed (\(initdb.map { "\($0)" } ?? "no status")); see \(directory)/initdb.log")
        }
        let port = freePort()
        return PrivatePostgres(directory: directory, port: port, password: password)
    }

    /// Starts `postgres` (again, after `stop()` or `kill()`) and waits until it answers a query
    /// (a server recovering from a kill accepts connections before it answers).
    public func start() async throws {
        guard let binaries = Self.binaries else { throw PrivatePostgresError("PostgreSQL is not installed") }
        let log = open(directory + "/postgres.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { if log >= 0 { close(log) } }
        let (executable, arguments) = Self.asUnprivileged(
            binaries + "/postgres",
            [
                "-D", directory + "/data", "-p", String(port), "-k", directory, "-c", "listen_addresses=127.0.0.1", "-c",
                "max_connections=50",
            ])
        let child = try ChildProcess(executable: executable, arguments: arguments, standardError: log >= 0 ? log : nil)
        server.withLock { $0 = child }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(30))
        while clock.now < deadline {
            guard child.isRunning else { throw PrivatePostgresError("postgres exited at once; see \(directory)/postgres.log") }
            if PrivatePostgres.accepts(port: port) {
                try await psql("SELECT 1")
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw PrivatePostgresError("postgres did not accept connections on port \(port) in 30 s; see \(directory)/postgres.log")
    }

    /// Stops the server (fast shutdown: SIGINT), SIGKILL after 10 s; waits for its exit.
    public func stop() async {
        guard
            let child = server.withLock({ server in
                defer { server = nil }; return server
            })
        else { return }
        await offThePool("postgres stop") { child.stop(grace: .seconds(10), signal: SIGINT) }
    }

    /// Kills the server at once (SIGKILL): a crash, a power cut. What it committed stays.
    public func kill() async {
        guard
            let child = server.withLock({ server in
                defer { server = nil }; return server
            })
        else { return }
        await offThePool("postgres kill") { child.stop(grace: .zero, signal: SIGKILL) }
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

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
                    "psql -c \(statement.debugDescription) failed (\(status.map { "\($0)" } ?? "no status")); see \(directory)/psql.log")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// `executable` with `arguments`, as `nobody` when this process is root.
    static func asUnprivileged(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        guard geteuid() == 0 else { return (executable, arguments) }
        return ("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", executable] + arguments)
    }

    /// Runs a program to its end (off the cooperative pool), its output appended to `log`.
    static func run(_ executable: String, _ arguments: [String], log: String, environment: [String: String] = [:]) async throws
        -> ChildProcess.Termination?
    {
        let (program, all) = asUnprivileged(executable, arguments)
        let output = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { if output >= 0 { close(output) } }
        let child = try ChildProcess(
            executable: program, arguments: all, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            standardOutput: output >= 0 ? output : nil, standardError: output >= 0 ? output : nil)
        return await offThePool("run \(executable)") { () -> ChildProcess.Termination? in
            child.waitUntilExit()
            return child.termination
        }
    }

    /// A port the kernel says is free on 127.0.0.1.
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        guard withUnsafePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }) == 0 else {
            return 0
        }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// A private cluster that could not be set up: what went wrong and where its log is.
public struct PrivatePostgresError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
