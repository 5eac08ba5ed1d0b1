import Foundation
import Glibc
import TagFixSystem

/// A private gpsd for tests and demos: `gpsd -N -n -b -S PORT DEVICE` on a free loopback port,
/// never the system service, with its own shared-memory key so several can run at once: a
/// `PrivateDaemon`, so a watchdog stops it if its owner ends first. Stopped with SIGTERM, then
/// SIGKILL. Started as every child of TagFix is (`ChildProcess`): with an empty signal mask and
/// default dispositions, so SIGTERM stops it whichever thread started it. (Run with `-n`, gpsd
/// never idles out: before the watchdog, it kept its port and shared memory until someone killed
/// it by hand.)
///
/// Scoped: `PrivateGPSD.with(device:) { gpsd in … }`, or `start` and an awaited `stop()`.
public final class PrivateGPSD: Sendable {
    public let port: Int
    public let device: String
    private let daemon: PrivateDaemon

    private init(daemon: PrivateDaemon, device: String) {
        self.daemon = daemon
        self.device = device
        port = daemon.port
    }

    /// gpsd's path, if installed (Debian's `gpsd` package).
    public static var installedPath: String? {
        ["/usr/sbin/gpsd", "/usr/bin/gpsd", "/usr/local/sbin/gpsd"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts gpsd on `device` and waits until it listens (up to five seconds, sleeping on the
    /// clock, not holding a thread). Without a `port`, a free one is chosen; another program (a
    /// parallel test's gpsd) can take it between the choice and gpsd's bind, so gpsd counts as
    /// started only when the listener on the port is gpsd's own socket, and is started again on
    /// another port when it is not (before, a client could be sent to another test's gpsd that
    /// happened to have the port, and wait for fixes that never came).
    /// - Throws: `DaemonError`: gpsd is not installed, or did not start listening.
    public static func start(device: String, port: Int? = nil) async throws(DaemonError) -> PrivateGPSD {
        let configuration = try configuration(device: device)
        let daemon = try await PrivateDaemon.start(configuration.daemon, port: port)
        return PrivateGPSD(daemon: daemon, device: configuration.target)
    }

    /// Runs gpsd on `device` for the length of `body`, then stops it, whether `body` returns or
    /// throws.
    /// - Throws: `DaemonError` when gpsd cannot be started, or what `body` throws.
    public static func with<Value>(
        device: String, port: Int? = nil, isolation: isolated (any Actor)? = #isolation, _ body: (PrivateGPSD) async throws -> Value
    ) async throws -> Value {
        let gpsd = try await start(device: device, port: port)
        return try await PrivateDaemon.scoped(gpsd, stop: { await $0.stop() }, body)
    }

    /// gpsd's daemon configuration on `device` (a pty or a link to one).
    private static func configuration(device: String) throws(DaemonError) -> (daemon: PrivateDaemon.Configuration, target: String) {
        let heading = "cannot open a pseudo-terminal: "
        guard let gpsd = installedPath else {
            throw DaemonError(daemon: "gpsd", reason: "gpsd is not installed (apt-get install gpsd)", heading: heading)
        }
        // gpsd started as root drops to its own user: let it open the pty.
        let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: device)) ?? device
        try? FileSystem.setPermissions(FilePermissions(rawValue: 0o666), of: target)
        let configuration = PrivateDaemon.Configuration(
            name: URL(fileURLWithPath: gpsd).lastPathComponent, heading: heading,
            noFreePort: DaemonError(daemon: "gpsd", reason: "no free TCP port on 127.0.0.1", heading: heading),
            launch: { port throws(DaemonError) in
                var arguments = ["-N", "-n", "-b", "-S", String(port), target]
                // TAGFIX_GPSD_LOG=DIR keeps gpsd's own debug log (level 3) in DIR/gpsd-PORT.log.
                let logDirectory = ProcessInfo.processInfo.environment["TAGFIX_GPSD_LOG"]
                if logDirectory != nil { arguments = ["-D", "3"] + arguments }
                var environment = ProcessInfo.processInfo.environment
                environment["GPSD_SHM_KEY"] = String(sharedMemoryKey(port: port))
                return PrivateDaemon.Launch(
                    executable: gpsd, arguments: arguments, environment: environment,
                    log: logDirectory.map { ($0 as NSString).appendingPathComponent("gpsd-\(port).log") })
            },
            notReady: { port, _ in DaemonError(daemon: "gpsd", reason: "gpsd did not start listening on port \(port)", heading: heading) })
        var daemon = configuration
        daemon.sharedMemoryKey = { port in sharedMemoryKey(port: port) }
        return (daemon, target)
    }

    /// The key of the segment a private gpsd on `port` exports its fixes in (GPSD_SHM_KEY; one a
    /// port, so two private gpsds never share one, nor meet the system gpsd's).
    public static func sharedMemoryKey(port: Int) -> Int32 { Int32(0x4750_0000 + port) }

    public var isRunning: Bool { daemon.isRunning }

    /// Stops gpsd: SIGTERM, then SIGKILL after a second, and awaits its exit. The watchdog is
    /// dismissed only once gpsd has gone, so an owner killed in the middle of this still leaves it
    /// to the watchdog.
    public func stop() async {
        await daemon.stop()
    }

    /// Freezes gpsd (SIGSTOP) or lets it run again (SIGCONT): a stalled gpsd.
    public func setStopped(_ stopped: Bool) {
        daemon.signal(stopped ? SIGSTOP : SIGCONT)
    }

    /// A port the kernel says is free on 127.0.0.1 (`PrivateDaemon.freePort()`).
    public static func freePort() -> Int { PrivateDaemon.freePort() }
}
