import CPTY
import Foundation
import Glibc
import Synchronization
import TagFixDevices

/// A private gpsd for tests and demos: `gpsd -N -n -b -S PORT DEVICE` on a free loopback port,
/// never the system service, with its own shared-memory key so several can run at once. Stopped
/// with SIGTERM, then SIGKILL. Started as every child of TagFix is (`ChildProcess`): with an empty
/// signal mask and default dispositions, so SIGTERM stops it whichever thread started it.
///
/// gpsd does not outlive its owner, however the owner ends. A watchdog shell waits on a pipe whose
/// only write end the owner holds: `stop()` writes `done` and the watchdog exits quietly; if the
/// owner dies first (Ctrl-C on `tagfix verify --demo`, a killed test run, a crash), the kernel
/// closes the write end, the watchdog reads end of file and stops gpsd. Before, gpsd (run with
/// `-n`, so it never idles out) kept running with its port and shared memory until someone
/// killed it by hand. The parent-death signal cannot do this: gpsd started as root changes its
/// user, which clears it, and it follows the spawning thread, not the process.
public final class PrivateGPSD: Sendable {
    public let port: Int
    public let device: String
    private let process: ChildProcess
    /// The watchdog until `stop()` dismisses it; `stop()` runs under this lock, one call at a time.
    private let watchdog: Mutex<ProcessWatchdog?>

    /// gpsd's path, if installed (Debian's `gpsd` package).
    public static var installedPath: String? {
        ["/usr/sbin/gpsd", "/usr/bin/gpsd", "/usr/local/sbin/gpsd"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts gpsd on `device` and waits until it listens. Without a `port`, a free one is chosen;
    /// another program (a parallel test's gpsd) can take it between the choice and gpsd's bind, so
    /// gpsd counts as started only when the listener on the port is gpsd's own socket, and is
    /// started again on another port when it is not (before, a client could be sent to another
    /// test's gpsd that happened to have the port, and wait for fixes that never came).
    /// Starts gpsd as `init(device:port:)` does, from async code: the wait for gpsd's listener
    /// (up to five seconds) runs on a thread of its own, not on the cooperative pool.
    public static func start(device: String, port: Int? = nil) async throws(EmulatorError) -> PrivateGPSD {
        try await offThePool("private gpsd start") { () throws(EmulatorError) in try PrivateGPSD(device: device, port: port) }
    }

    public init(device: String, port: Int? = nil) throws(EmulatorError) {
        guard let gpsd = Self.installedPath else { throw .pty("gpsd is not installed (apt-get install gpsd)") }
        // gpsd started as root drops to its own user: let it open the pty.
        let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: device)) ?? device
        _ = chmod(target, 0o666)
        var failure = EmulatorError.pty("no free TCP port on 127.0.0.1")
        for _ in 0..<(port == nil ? 4 : 1) {
            let chosen = port ?? Self.freePort()
            guard chosen > 0 else { break }
            switch Self.launch(gpsd: gpsd, device: target, port: chosen) {
            case .success(let process):
                self.process = process
                self.port = chosen
                self.device = target
                watchdog = Mutex(ProcessWatchdog(guarding: process.pid, named: URL(fileURLWithPath: gpsd).lastPathComponent))
                return
            case .failure(let why):
                failure = why
            }
        }
        throw failure
    }

    /// Runs gpsd on `port` until its own socket listens there (at most 5 s), or says why not.
    private static func launch(gpsd: String, device target: String, port chosen: Int) -> Result<ChildProcess, EmulatorError> {
        var arguments = ["-N", "-n", "-b", "-S", String(chosen), target]
        // TAGFIX_GPSD_LOG=DIR keeps gpsd's own debug log (level 3) in DIR/gpsd-PORT.log.
        let logDirectory = ProcessInfo.processInfo.environment["TAGFIX_GPSD_LOG"]
        if logDirectory != nil { arguments = ["-D", "3"] + arguments }
        var environment = ProcessInfo.processInfo.environment
        environment["GPSD_SHM_KEY"] = String(0x4750_0000 + chosen)
        var logFile: Int32 = -1
        if let logDirectory {
            let path = (logDirectory as NSString).appendingPathComponent("gpsd-\(chosen).log")
            logFile = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        defer { if logFile >= 0 { close(logFile) } }
        let process: ChildProcess
        do {
            process = try ChildProcess(
                executable: gpsd, arguments: arguments, environment: environment, standardError: logFile >= 0 ? logFile : nil)
        } catch {
            return .failure(.pty(error.description))
        }
        for _ in 0..<100 {
            if Self.listening(port: chosen, pid: process.pid) { return .success(process) }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        process.stop(grace: .seconds(1))
        return .failure(.pty("gpsd did not start listening on port \(chosen)"))
    }

    public var isRunning: Bool { process.isRunning }

    /// Stops gpsd: SIGTERM, then SIGKILL after a second. The watchdog is dismissed only once gpsd
    /// has gone, so an owner killed in the middle of this still leaves it to the watchdog.
    public func stop() {
        watchdog.withLock { watchdog in
            process.stop(grace: .seconds(1))
            watchdog?.dismiss()
        }
    }

    /// Freezes gpsd (SIGSTOP) or lets it run again (SIGCONT): a stalled gpsd.
    public func setStopped(_ stopped: Bool) {
        process.signal(stopped ? SIGSTOP : SIGCONT)
    }

    deinit { stop() }

    /// The private daemons' watchdog (`ProcessWatchdog`), by the name `PrivateMosquitto` uses.
    typealias Watchdog = ProcessWatchdog

    /// Whether `pid` (any process, when nil) listens on TCP `port` (IPv4), from /proc/net/tcp and
    /// the process's descriptors: no connection is made, so no server takes a probe for a client.
    static func listening(port: Int, pid: Int32? = nil) -> Bool {
        guard let table = readToEnd("/proc/net/tcp") else { return false }
        let local = String(format: ":%04X", port)
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            // sl, local_address, rem_address, st (0A is LISTEN), queues, timer, retransmits,
            // uid, timeout, inode.
            guard fields.count > 9, fields[1].hasSuffix(local), fields[3] == "0A" else { continue }
            guard let pid else { return true }
            let socket = "socket:[\(fields[9])]"
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            if descriptors.contains(where: {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == socket
            }) {
                return true
            }
        }
        return false
    }

    /// The whole of a /proc file (its size reads as 0, so it is read until end of file).
    static func readToEnd(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A port the kernel says is free on 127.0.0.1 (for a private gpsd, or a test's gpsfake).
    public static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else { return 0 }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
