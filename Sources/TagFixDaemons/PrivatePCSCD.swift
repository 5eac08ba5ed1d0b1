import Foundation
import Glibc

/// A private pcscd for tests, demos and `tagfix emulate pcsc --pcscd`: `pcscd -f` with a reader
/// configuration of its own that loads the vsmartcard reader driver (`vpcd`) on a free TCP port,
/// never the system service.
///
/// pcscd 1.9.9 always makes its socket at /run/pcscd/pcscd.comm (it ignores
/// `PCSCLITE_CSOCK_NAME`), so it runs in a mount namespace of its own (`unshare --mount`) where a
/// temporary folder is bound over /run/pcscd; its clients find the socket through
/// `PCSCLITE_CSOCK_NAME` (`environment`), which every libpcsclite client honours. libpcsclite
/// reads the variable once per process, at its first call: a process that talks to this pcscd
/// must have it set before then (tests run tagfix as a child with it).
///
/// A `PrivateDaemon`: it counts as started once pcscd's own socket listens on the vpcd port
/// (another program may take a free port between the choice and pcscd's bind: then another port
/// is tried), and a watchdog stops it however its owner ends. Scoped:
/// `PrivatePCSCD.with(friendlyName:) { pcscd in … }`, or `start` and an awaited `stop()`.
public final class PrivatePCSCD: Sendable {
    /// vpcd's port: the virtual card connects here (`VPCDEmulator.Options.port`).
    public let port: Int
    /// The folder bound over /run/pcscd; it holds pcscd.comm.
    public let runDirectory: String
    public let configDirectory: String
    /// The vpcd reader's name as pcscd lists it (slot 0) by default.
    public static let readerName = "Virtual PCD 00 00"
    /// The vpcd reader's name as this pcscd lists it (slot 0): its FRIENDLYNAME and " 00 00".
    public let readerName: String
    private let daemon: PrivateDaemon

    private init(daemon: PrivateDaemon, runDirectory: String, configDirectory: String, readerName: String) {
        self.daemon = daemon
        port = daemon.port
        self.runDirectory = runDirectory
        self.configDirectory = configDirectory
        self.readerName = readerName
    }

    /// pcscd's path, if installed (Debian's `pcscd` package).
    public static var installedPath: String? {
        ["/usr/sbin/pcscd", "/usr/bin/pcscd", "/usr/local/sbin/pcscd"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// vpcd's driver, if installed (Debian's `vsmartcard-vpcd` package).
    public static var vpcdDriver: String? {
        ["/usr/lib/pcsc/drivers/serial/libifdvpcd.so", "/usr/local/lib/pcsc/drivers/serial/libifdvpcd.so"].first {
            FileManager.default.fileExists(atPath: $0)
        }
    }

    /// Whether a private pcscd can run here: pcscd, vpcd and unshare installed.
    public static var available: Bool {
        installedPath != nil && vpcdDriver != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")
    }

    /// The socket its clients use.
    public var socketPath: String { runDirectory + "/pcscd.comm" }

    /// What a libpcsclite client's environment needs to talk to this pcscd.
    public var environment: [String: String] { ["PCSCLITE_CSOCK_NAME": socketPath] }

    private static let heading = "cannot create the link: "

    /// Starts pcscd with vpcd on `port` (a free one when `nil`) and waits until it listens (up to
    /// five seconds, sleeping on the clock, not holding a thread).
    /// - Parameter friendlyName: the reader's name in reader.conf (`PCSCPart3Reader.Model`'s, so
    ///   the virtual reader is listed as the reader family it answers as).
    /// - Throws: `DaemonError`: pcscd or vpcd is not installed, or pcscd did not start listening.
    public static func start(port: Int? = nil, friendlyName: String = "Virtual PCD") async throws(DaemonError) -> PrivatePCSCD {
        guard !friendlyName.isEmpty, !friendlyName.contains("\""), !friendlyName.contains("\n") else {
            throw DaemonError(
                daemon: "pcscd", reason: "a reader name without quotes or line breaks, not \(friendlyName.debugDescription)",
                heading: heading)
        }
        guard let pcscd = installedPath, let driver = vpcdDriver else {
            throw DaemonError(
                daemon: "pcscd", reason: "pcscd or vpcd is not installed (apt-get install pcscd vsmartcard-vpcd)", heading: heading)
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-pcscd-\(UUID().uuidString)").path
        let runDirectory = folder + "/run"
        let configDirectory = folder + "/reader.conf.d"
        do {
            try FileManager.default.createDirectory(atPath: runDirectory, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: configDirectory, withIntermediateDirectories: true)
        } catch {
            throw DaemonError(daemon: "pcscd", reason: "cannot make \(folder): \(error.localizedDescription)", heading: heading)
        }
        var configuration = PrivateDaemon.Configuration(
            name: "pcscd", heading: heading,
            noFreePort: DaemonError(daemon: "pcscd", reason: "no free TCP port for vpcd", heading: heading),
            launch: { port throws(DaemonError) in
                writeConfiguration(configDirectory, driver: driver, port: port, name: friendlyName)
                return launch(pcscd: pcscd, run: runDirectory, config: configDirectory, port: port)
            },
            ready: { port, pid in
                PrivateDaemon.listening(port: port, pid: pid) && FileManager.default.fileExists(atPath: runDirectory + "/pcscd.comm")
            },
            notReady: { port, exited in
                DaemonError(
                    daemon: "pcscd",
                    reason: exited
                        ? "pcscd exited at once: it runs in a mount namespace of its own (unshare --mount), which this system may not allow"
                        : "pcscd did not start listening for vpcd on port \(port)", heading: heading)
            })
        configuration.folder = folder
        do {
            let daemon = try await PrivateDaemon.start(configuration, port: port)
            return PrivatePCSCD(
                daemon: daemon, runDirectory: runDirectory, configDirectory: configDirectory, readerName: friendlyName + " 00 00")
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    /// Runs pcscd for the length of `body`, then stops it (and removes its folders), whether
    /// `body` returns or throws.
    /// - Throws: `DaemonError` when pcscd cannot be started, or what `body` throws.
    public static func with<Value>(
        port: Int? = nil, friendlyName: String = "Virtual PCD", isolation: isolated (any Actor)? = #isolation,
        _ body: (PrivatePCSCD) async throws -> Value
    ) async throws -> Value {
        let pcscd = try await start(port: port, friendlyName: friendlyName)
        return try await PrivateDaemon.scoped(pcscd, stop: { await $0.stop() }, body)
    }

    /// reader.conf.d/vpcd: one vpcd reader whose card connects to `port` (pcscd also opens
    /// port + 1 for the driver's second slot).
    private static func writeConfiguration(_ folder: String, driver: String, port: Int, name: String) {
        let channel = String(format: "0x%04X", port)
        let text = """
            FRIENDLYNAME "\(name)"
            DEVICENAME   /dev/null:\(channel)
            LIBPATH      \(driver)
            CHANNELID    \(channel)

            """
        try? text.write(toFile: folder + "/vpcd", atomically: true, encoding: .utf8)
    }

    /// pcscd in its own mount namespace, with its socket in `run`.
    private static func launch(pcscd: String, run: String, config: String, port: Int) -> PrivateDaemon.Launch {
        // Bound over /run/pcscd in the new namespace only (unshare makes its mounts private).
        // $4: pcscd's debug flags when its log is kept, else nothing.
        let script = "mkdir -p /run/pcscd && mount --bind \"$1\" /run/pcscd && exec \"$2\" -f -c \"$3\" $4"
        let logDirectory = ProcessInfo.processInfo.environment["TAGFIX_PCSCD_LOG"]
        var arguments = ["--mount", "/bin/sh", "-c", script, "tagfix-pcscd", run, pcscd, config, logDirectory == nil ? "" : "-d -a"]
        // Without root, a user namespace maps this user to root inside it, for the mount.
        if geteuid() != 0 { arguments.insert("--map-root-user", at: 0) }
        try? FileManager.default.removeItem(atPath: run + "/pcscd.comm")
        // TAGFIX_PCSCD_LOG=DIR keeps pcscd's debug log in DIR/pcscd-PORT.log.
        return PrivateDaemon.Launch(
            executable: "/usr/bin/unshare", arguments: arguments,
            log: logDirectory.map { ($0 as NSString).appendingPathComponent("pcscd-\(port).log") }, logsOutput: true)
    }

    public var isRunning: Bool { daemon.isRunning }

    /// The pid of pcscd now (for tests that kill it).
    public var pid: Int32? { daemon.pid }

    /// Kills pcscd (SIGKILL, no clean-up: a crash) and leaves it down until `restart()`.
    public func kill() async {
        await daemon.kill()
    }

    /// Starts pcscd again on the same port and socket (after `kill()` or `stop()`).
    /// - Throws: `DaemonError` when it did not start listening again.
    public func restart() async throws(DaemonError) {
        await daemon.kill()
        try await daemon.restart()
    }

    /// Stops pcscd: SIGTERM, then SIGKILL after a second, and awaits its exit; the watchdog is
    /// dismissed once it is gone. The folders are removed.
    public func stop() async {
        await daemon.stop()
        try? FileManager.default.removeItem(atPath: (runDirectory as NSString).deletingLastPathComponent)
    }
}
