import Foundation
import Glibc
import Synchronization
import TagFixDevices

/// A private Mosquitto broker for tests, demos and benchmarks: `mosquitto -c CONFIG` with a
/// configuration of its own in a folder of its own (listener on 127.0.0.1 and a free port,
/// persistence saved on every change, so a broker killed and started again keeps its sessions),
/// never the system service. Like `PrivateGPSD` it is started through `ChildProcess` and paired
/// with a watchdog, so it stops when its owner ends, however the owner ends.
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

        public init() {}
    }

    public let port: Int
    /// The broker's folder: its configuration, persistence and log.
    public let directory: String
    public let options: Options
    private let running: Mutex<Running?>

    private struct Running {
        var process: ChildProcess
        var watchdog: PrivateGPSD.Watchdog?
    }

    /// mosquitto's path, if installed (Debian's `mosquitto` package).
    public static var installedPath: String? {
        ["/usr/sbin/mosquitto", "/usr/bin/mosquitto", "/usr/local/sbin/mosquitto"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// Starts a broker and waits until it listens.
    public init(options: Options = Options()) throws(EmulatorError) {
        guard Self.installedPath != nil else { throw .link("mosquitto is not installed (apt-get install mosquitto)") }
        self.options = options
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-mosquitto-\(UUID().uuidString)").path
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw .link("cannot create \(folder): \(error)")
        }
        directory = folder
        var failure = EmulatorError.link("no free TCP port on 127.0.0.1")
        for _ in 0..<4 {
            let chosen = PrivateGPSD.freePort()
            guard chosen > 0 else { break }
            switch Self.launch(directory: folder, port: chosen, options: options) {
            case .success(let started):
                port = chosen
                running = Mutex(started)
                return
            case .failure(let why):
                failure = why
            }
        }
        throw failure
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Whether the broker runs.
    public var isRunning: Bool { running.withLock { $0?.process.isRunning ?? false } }

    /// Kills the broker at once (SIGKILL): a crash, a pulled plug. What it saved stays.
    public func kill() {
        running.withLock { running in
            running?.process.stop(grace: .zero, signal: SIGKILL)
            running?.watchdog?.dismiss()
            running = nil
        }
    }

    /// Stops the broker (SIGTERM, then SIGKILL after a second).
    public func stop() {
        running.withLock { running in
            running?.process.stop(grace: .seconds(1))
            running?.watchdog?.dismiss()
            running = nil
        }
    }

    /// Starts the broker again, on the same port with the same folder (its saved sessions).
    public func restart() throws(EmulatorError) {
        stop()
        switch Self.launch(directory: directory, port: port, options: options, attempts: 100) {
        case .success(let started): running.withLock { $0 = started }
        case .failure(let why): throw why
        }
    }

    /// Writes the configuration and runs mosquitto until it listens on `port` (at most 5 s).
    private static func launch(directory: String, port: Int, options: Options, attempts: Int = 1) -> Result<Running, EmulatorError> {
        guard let mosquitto = installedPath else { return .failure(.link("mosquitto is not installed")) }
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
            return .failure(.link("cannot write \(config)"))
        }
        var failure = EmulatorError.link("mosquitto did not start listening on port \(port) (see \(directory)/mosquitto.log)")
        for _ in 0..<attempts {
            let process: ChildProcess
            do {
                process = try ChildProcess(executable: mosquitto, arguments: ["-c", config])
            } catch {
                return .failure(.link(error.description))
            }
            for _ in 0..<100 {
                if PrivateGPSD.listening(port: port, pid: process.pid) {
                    return .success(Running(process: process, watchdog: PrivateGPSD.Watchdog(guarding: process.pid, named: "mosquitto")))
                }
                guard process.isRunning else { break }
                Thread.sleep(forTimeInterval: 0.05)
            }
            process.stop(grace: .seconds(1))
            failure = .link("mosquitto did not start listening on port \(port) (see \(directory)/mosquitto.log)")
            // The port may still be held by the broker just stopped: wait a little and try again.
            Thread.sleep(forTimeInterval: 0.05)
        }
        return .failure(failure)
    }
}
