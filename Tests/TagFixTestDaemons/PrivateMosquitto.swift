import Foundation
import Glibc
public import TagFixDaemons

/// A private Mosquitto broker for tests and benchmarks (a test-only library: not in the product):
/// `mosquitto -c CONFIG` with a configuration of its own in a folder of its own (listener on
/// 127.0.0.1 and a free port, persistence saved on every change, so a broker killed and started
/// again keeps its sessions), never the system service. A `PrivateDaemon`, like `PrivateGPSD`,
/// so it stops when its owner ends, however the owner ends, and its watchdog then removes the
/// folder. Scoped: `PrivateMosquitto.with(options:) { broker in … }`, which removes its folder at
/// the end.
///
/// The folder is on a RAM file system (/dev/shm) where there is one. Saving on every change,
/// mosquitto writes its whole state and fsyncs it after each pass of its loop that changed
/// something, a packet or two: on a disk whose fsync takes 10 ms it handled about 100 packets a
/// second, and a test's burst of 4,800 verdicts outlasted the publisher's minute (CI failed so;
/// a shim that makes fsync take 10 ms off RAM file systems, `Tests/SlowFsync`, shows it). What the
/// tests kill is the broker's process, not the machine's power: a file it wrote, flushed or not,
/// is there for the broker started again.
public final class PrivateMosquitto: Sendable {
    /// What the broker asks of its clients.
    public struct Options: Sendable, Hashable {
        /// TLS on the listener: the server's certificate and key (PEM), and the CA they chain to.
        public struct TLS: Sendable, Hashable {
            public var certificate: String
            public var key: String
            public var ca: String
            public init(certificate: String, key: String, ca: String) {
                self.certificate = certificate
                self.key = key
                self.ca = ca
            }
        }
        public var tls: TLS?
        /// A `mosquitto_passwd` file: anonymous clients are refused.
        public var passwordFile: String?
        /// Sessions and queued messages saved on every change, so a broker killed and started
        /// again keeps them. (Measured with mosquitto 2.0.11: a kept session read back from the
        /// saved state may get a QoS 1 message it acknowledged once more, as QoS 1 allows.)
        public var persistence = true
        /// Variables set in this process's environment for the broker alone (a test's slow disk:
        /// `TestBinaries.slowDisk()`); an `LD_PRELOAD` goes after the one this process has.
        public var environment: [String: String] = [:]

        public init() {}
    }

    public let port: Int
    /// The broker's folder: its configuration, persistence and log.
    public let directory: String
    public let options: Options
    private let daemon: PrivateDaemon

    private init(daemon: PrivateDaemon, directory: String, options: Options) {
        self.daemon = daemon
        self.directory = directory
        self.options = options
        port = daemon.port
    }

    /// mosquitto's path, if installed (Debian's `mosquitto` package).
    public static var installedPath: String? {
        ["/usr/sbin/mosquitto", "/usr/bin/mosquitto", "/usr/local/sbin/mosquitto"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    private static let heading = "cannot create the link: "

    /// Where brokers' folders go: `TAGFIX_RAM_TMPDIR` when set (`scripts/test`'s folder on
    /// /dev/shm for its run, removed however the run ends, a Ctrl-C included), else /dev/shm when
    /// it is a RAM file system this process may write in, else the temporary folder.
    public static let stateRoot: String = {
        if let folder = ProcessInfo.processInfo.environment["TAGFIX_RAM_TMPDIR"], !folder.isEmpty { return folder }
        // /proc/mounts: "tmpfs /dev/shm tmpfs rw,… 0 0", under the path /dev/shm leads to (a
        // system may link it to /run/shm).
        let shm = URL(fileURLWithPath: "/dev/shm").resolvingSymlinksInPath().path
        let mounts = (try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? ""
        let ram = mounts.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 2 && fields[1] == shm && fields[2] == "tmpfs"
        }
        return ram && access(shm, W_OK | X_OK) == 0 ? shm : FileManager.default.temporaryDirectory.path
    }()

    /// Starts a broker and waits until it listens; `finish()` stops it and removes its folder.
    /// - Throws: `DaemonError`: mosquitto is not installed, or did not start listening.
    public static func start(options: Options = Options()) async throws(DaemonError) -> PrivateMosquitto {
        guard let mosquitto = installedPath else {
            throw DaemonError(daemon: "mosquitto", reason: "mosquitto is not installed (apt-get install mosquitto)", heading: heading)
        }
        let folder = stateRoot + "/tagfix-mosquitto-\(UUID().uuidString)"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw DaemonError(daemon: "mosquitto", reason: "cannot create \(folder): \(error)", heading: heading)
        }
        var configuration = PrivateDaemon.Configuration(
            name: "mosquitto", heading: heading,
            noFreePort: DaemonError(daemon: "mosquitto", reason: "no free TCP port on 127.0.0.1", heading: heading),
            launch: { port throws(DaemonError) in
                let config = try writeConfiguration(directory: folder, port: port, options: options)
                return PrivateDaemon.Launch(
                    executable: mosquitto, arguments: ["-c", config],
                    environment: options.environment.isEmpty ? nil : brokerEnvironment(options.environment))
            },
            notReady: { port, _ in
                DaemonError(
                    daemon: "mosquitto", reason: "mosquitto did not start listening on port \(port) (see \(folder)/mosquitto.log)",
                    heading: heading)
            })
        configuration.folder = folder
        do {
            return PrivateMosquitto(daemon: try await PrivateDaemon.start(configuration), directory: folder, options: options)
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    /// Runs a broker for the length of `body`, then stops it and removes its folder, whether
    /// `body` returns or throws.
    /// - Throws: `DaemonError` when the broker cannot be started, or what `body` throws.
    public static func with<Value>(
        options: Options = Options(), isolation: isolated (any Actor)? = #isolation, _ body: (PrivateMosquitto) async throws -> Value
    ) async throws -> Value {
        let broker = try await start(options: options)
        return try await PrivateDaemon.scoped(broker, stop: { await $0.finish() }, body)
    }

    /// Whether the broker runs.
    public var isRunning: Bool { daemon.isRunning }

    /// Kills the broker at once (SIGKILL): a crash, a pulled plug. What it saved stays.
    public func kill() async {
        await daemon.kill()
    }

    /// Sends the broker `signal`: SIGSTOP freezes it (no acknowledgement leaves it) until SIGCONT.
    public func signal(_ signal: Int32) {
        daemon.signal(signal)
    }

    /// Stops the broker (SIGTERM, then SIGKILL after a second); its folder stays, for `restart()`.
    public func stop() async {
        await daemon.stop()
    }

    /// Stops the broker and removes its folder.
    public func finish() async {
        await daemon.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts the broker again, on the same port with the same folder (its saved sessions).
    /// - Throws: `DaemonError` when it did not start listening again (100 tries).
    public func restart() async throws(DaemonError) {
        try await daemon.restart(attempts: 100)
    }

    /// This process's environment with `added` set; an added `LD_PRELOAD` after this process's.
    private static func brokerEnvironment(_ added: [String: String]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in added {
            let mine = environment[name] ?? ""
            environment[name] = name == "LD_PRELOAD" && !mine.isEmpty && mine != value ? mine + ":" + value : value
        }
        return environment
    }

    /// Writes mosquitto.conf for `port` in `directory`; returns its path.
    private static func writeConfiguration(directory: String, port: Int, options: Options) throws(DaemonError) -> String {
        // As root, mosquitto changes to the user `mosquitto` unless told to stay who it is.
        let user = getpwuid(geteuid()).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "root"
        var lines = [
            "user \(user)",
            "per_listener_settings false",
            "persistence \(options.persistence)",
            "persistence_location \(directory)/",
            "autosave_interval 1",
            "autosave_on_changes true",
            "max_queued_messages 1000000",
            "log_dest file \(directory)/mosquitto.log",
            "log_type error",
            "log_type warning",
            "listener \(port) 127.0.0.1",
        ]
        if let tls = options.tls {
            lines += ["cafile \(tls.ca)", "certfile \(tls.certificate)", "keyfile \(tls.key)"]
        }
        if let passwordFile = options.passwordFile {
            lines += ["allow_anonymous false", "password_file \(passwordFile)"]
        } else {
            lines += ["allow_anonymous true"]
        }
        let config = "\(directory)/mosquitto.conf"
        guard FileManager.default.createFile(atPath: config, contents: Data((lines.joined(separator: "\n") + "\n").utf8)) else {
            throw DaemonError(daemon: "mosquitto", reason: "cannot write \(config)", heading: heading)
        }
        return config
    }
}
