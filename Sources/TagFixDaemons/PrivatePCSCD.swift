import Foundation
import Glibc
import Synchronization
import TagFixDevices

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
/// It counts as started once pcscd's own socket listens on the vpcd port (another program may
/// take a free port between the choice and pcscd's bind: then another port is tried), and it is
/// stopped however its owner ends, by the same watchdog as `PrivateGPSD`.
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
    private let current: Mutex<Running?>

    private struct Running {
        var process: ChildProcess
        var watchdog: ProcessWatchdog?
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

    /// Starts pcscd with vpcd on `port` (a free one when `nil`) and waits until it listens.
    /// - Parameter friendlyName: the reader's name in reader.conf (`PCSCPart3Reader.Model`'s, so
    ///   the virtual reader is listed as the reader family it answers as).
    public init(port: Int? = nil, friendlyName: String = "Virtual PCD") throws(EmulatorError) {
        guard !friendlyName.isEmpty, !friendlyName.contains("\""), !friendlyName.contains("\n") else {
            throw .link("a reader name without quotes or line breaks, not \(friendlyName.debugDescription)")
        }
        readerName = friendlyName + " 00 00"
        guard Self.installedPath != nil, let driver = Self.vpcdDriver else {
            throw .link("pcscd or vpcd is not installed (apt-get install pcscd vsmartcard-vpcd)")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-pcscd-\(UUID().uuidString)").path
        runDirectory = folder + "/run"
        configDirectory = folder + "/reader.conf.d"
        do {
            try FileManager.default.createDirectory(atPath: runDirectory, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: configDirectory, withIntermediateDirectories: true)
        } catch {
            throw .link("cannot make \(folder): \(error.localizedDescription)")
        }
        var failure = EmulatorError.link("no free TCP port for vpcd")
        for _ in 0..<(port == nil ? 4 : 1) {
            let chosen = port ?? PrivateGPSD.freePort()
            guard chosen > 0 else { break }
            Self.writeConfiguration(configDirectory, driver: driver, port: chosen, name: friendlyName)
            switch Self.launch(run: runDirectory, config: configDirectory, port: chosen) {
            case .success(let process):
                self.port = chosen
                current = Mutex(Running(process: process, watchdog: ProcessWatchdog(guarding: process.pid, named: "pcscd")))
                return
            case .failure(let why):
                failure = why
            }
        }
        try? FileManager.default.removeItem(atPath: folder)
        throw failure
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

    /// Runs pcscd in its own mount namespace until its socket listens on `port` (at most 5 s).
    private static func launch(run: String, config: String, port: Int) -> Result<ChildProcess, EmulatorError> {
        guard let pcscd = installedPath else { return .failure(.link("pcscd is not installed")) }
        // Bound over /run/pcscd in the new namespace only (unshare makes its mounts private).
        // $4: pcscd's debug flags when its log is kept, else nothing.
        let script = "mkdir -p /run/pcscd && mount --bind \"$1\" /run/pcscd && exec \"$2\" -f -c \"$3\" $4"
        let logDirectory = ProcessInfo.processInfo.environment["TAGFIX_PCSCD_LOG"]
        var arguments = ["--mount", "/bin/sh", "-c", script, "tagfix-pcscd", run, pcscd, config, logDirectory == nil ? "" : "-d -a"]
        // Without root, a user namespace maps this user to root inside it, for the mount.
        if geteuid() != 0 { arguments.insert("--map-root-user", at: 0) }
        // TAGFIX_PCSCD_LOG=DIR keeps pcscd's debug log in DIR/pcscd-PORT.log.
        var logFile: Int32 = -1
        if let directory = logDirectory {
            logFile = open(
                (directory as NSString).appendingPathComponent("pcscd-\(port).log"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        defer { if logFile >= 0 { close(logFile) } }
        try? FileManager.default.removeItem(atPath: run + "/pcscd.comm")
        let process: ChildProcess
        do {
            process = try ChildProcess(
                executable: "/usr/bin/unshare", arguments: arguments, standardOutput: logFile >= 0 ? logFile : nil,
                standardError: logFile >= 0 ? logFile : nil)
        } catch {
            return .failure(.link(error.description))
        }
        for _ in 0..<100 {
            if PrivateGPSD.listening(port: port, pid: process.pid), FileManager.default.fileExists(atPath: run + "/pcscd.comm") {
                return .success(process)
            }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        let exited = !process.isRunning
        process.stop(grace: .seconds(1))
        if exited {
            return .failure(
                .link("pcscd exited at once: it runs in a mount namespace of its own (unshare --mount), which this system may not allow"))
        }
        return .failure(.link("pcscd did not start listening for vpcd on port \(port)"))
    }

    public var isRunning: Bool { current.withLock { $0?.process.isRunning ?? false } }

    /// The pid of pcscd now (for tests that kill it).
    public var pid: Int32? { current.withLock { $0?.process.pid } }

    /// Kills pcscd (SIGKILL, no clean-up: a crash) and leaves it down until `restart()`.
    public func kill() {
        current.withLock { running in
            running?.process.stop(grace: .zero, signal: SIGKILL)
            running?.watchdog?.dismiss()
            running = nil
        }
    }

    /// Starts pcscd again on the same port and socket (after `kill()` or `stop()`).
    public func restart() throws(EmulatorError) {
        kill()
        let started = Self.launch(run: runDirectory, config: configDirectory, port: port)
        switch started {
        case .success(let process):
            current.withLock { $0 = Running(process: process, watchdog: ProcessWatchdog(guarding: process.pid, named: "pcscd")) }
        case .failure(let why):
            throw why
        }
    }

    /// Stops pcscd: SIGTERM, then SIGKILL after a second; the watchdog is dismissed once it is
    /// gone. The folders are removed.
    public func stop() {
        current.withLock { running in
            running?.process.stop(grace: .seconds(1))
            running?.watchdog?.dismiss()
            running = nil
        }
        try? FileManager.default.removeItem(atPath: (runDirectory as NSString).deletingLastPathComponent)
    }

    deinit { stop() }
}
