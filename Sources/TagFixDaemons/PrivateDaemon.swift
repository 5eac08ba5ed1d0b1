import Foundation
import Glibc
import Synchronization
public import TagFixDevices
import TagFixSystem

/// Why a private daemon could not be started.
public struct DaemonError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The daemon: "gpsd", "pcscd", "mosquitto".
    public var daemon: String
    /// What went wrong, and what to do.
    public var reason: String
    /// How `description` begins: the words the emulators' errors began with when they held the
    /// daemons, kept so that the messages stay as they were.
    public var heading: String

    public init(daemon: String, reason: String, heading: String) {
        self.daemon = daemon
        self.reason = reason
        self.heading = heading
    }

    public var description: String { heading + reason }
}

/// A private daemon for tests, demos and the emulators: a program of the system (gpsd, pcscd,
/// mosquitto) run on a free loopback port with a configuration of its own, never the system
/// service, and counted as started once its readiness probe holds (by default: its own socket
/// listens on the port). Another program (a parallel test's daemon) can take a free port between
/// the choice and the daemon's bind: then another port is tried.
///
/// It does not outlive its owner, however the owner ends. A watchdog shell (`ProcessWatchdog`)
/// waits on a pipe whose only write end the owner holds: `stop()` writes `done` and the watchdog
/// exits quietly; if the owner dies first (Ctrl-C on `tagfix verify --demo`, a killed test run, a
/// crash), the kernel closes the write end, the watchdog reads end of file and stops the daemon.
/// The parent-death signal cannot do this: gpsd started as root changes its user, which clears
/// it, and it follows the spawning thread, not the process.
///
/// Lifetimes are scoped: `PrivateDaemon.with(…) { daemon in … }` stops the daemon when the body
/// ends, or an owner that holds it longer awaits `stop()` itself. Nothing stops it in `deinit`.
/// Stopping awaits the exit (`ChildProcess.stop(grace:)`), and the wait until it is ready sleeps
/// on the clock: no thread of the cooperative pool is held.
///
/// A new private daemon is a `Configuration` (what to run on a port, how to tell it is ready) and
/// a type that wraps a `PrivateDaemon` with a scoped `with` of its own, as `PrivateGPSD` and
/// `PrivatePCSCD` do.
public final class PrivateDaemon: Sendable {
    /// What to run on a port.
    public struct Launch: Sendable {
        public var executable: String
        /// Without the program name.
        public var arguments: [String]
        /// `nil`: this process's.
        public var environment: [String: String]?
        /// A file for the daemon's standard error (its log), or `nil` for /dev/null.
        public var log: String?
        /// Whether its standard output goes to `log` too.
        public var logsOutput: Bool

        public init(
            executable: String, arguments: [String], environment: [String: String]? = nil, log: String? = nil, logsOutput: Bool = false
        ) {
            self.executable = executable
            self.arguments = arguments
            self.environment = environment
            self.log = log
            self.logsOutput = logsOutput
        }
    }

    /// One kind of daemon: how it is run, how it is known to be ready, and what its errors say.
    public struct Configuration: Sendable {
        /// The daemon's process name (/proc/PID/comm), for the watchdog, which checks it before
        /// it signals the pid.
        public var name: String
        /// Prepares a run on `port` (writes any configuration it reads) and says what to run.
        public var launch: @Sendable (_ port: Int) throws(DaemonError) -> Launch
        /// Whether the daemon started as `pid` is ready on `port`. Default: its own socket
        /// listens there.
        public var ready: @Sendable (_ port: Int, _ pid: Int32) -> Bool
        /// The error when it is not ready in time; `exited`: it ended by itself.
        public var notReady: @Sendable (_ port: Int, _ exited: Bool) -> DaemonError
        /// The error when no free port was found.
        public var noFreePort: DaemonError
        /// How the error of a program that cannot be started begins (`DaemonError.heading`).
        public var heading: String
        /// How long it may take to get ready.
        public var readiness: Duration = .seconds(5)
        /// The key of a System V shared-memory segment the daemon on `port` makes and leaves
        /// behind when it ends (gpsd's export of its fixes): removed once the daemon has gone,
        /// by `stop()`, `kill()`, a start that failed, and the watchdog. Left, one a run, they
        /// filled the system's 4,096 segments and initdb failed.
        public var sharedMemoryKey: (@Sendable (_ port: Int) -> Int32)?
        /// A folder of the daemon's own (its configuration, state, socket), made by its owner
        /// for this daemon alone. The watchdog removes it once the daemon has gone if the owner
        /// died without stopping it (a `kill -9`ed `tagfix emulate`, a crashed test run); an
        /// owner that lives removes it itself, after its last `stop()` (a `restart()` runs in it
        /// again).
        public var folder: String?

        public init(
            name: String, heading: String, noFreePort: DaemonError,
            launch: @escaping @Sendable (_ port: Int) throws(DaemonError) -> Launch,
            ready: @escaping @Sendable (_ port: Int, _ pid: Int32) -> Bool = { port, pid in PrivateDaemon.listening(port: port, pid: pid) },
            notReady: @escaping @Sendable (_ port: Int, _ exited: Bool) -> DaemonError
        ) {
            self.name = name
            self.heading = heading
            self.noFreePort = noFreePort
            self.launch = launch
            self.ready = ready
            self.notReady = notReady
        }
    }

    /// The port it serves.
    public let port: Int
    public let configuration: Configuration
    private let clock: any Clock<Duration>
    private let current: Mutex<Running?>

    private struct Running: Sendable {
        var process: ChildProcess
        var port: Int
        var watchdog: ProcessWatchdog?
    }

    private init(configuration: Configuration, port: Int, clock: any Clock<Duration>, running: Running) {
        self.configuration = configuration
        self.port = port
        self.clock = clock
        current = Mutex(running)
    }

    /// Starts the daemon on `port` (a free one when `nil`, tried up to four times) and waits until
    /// it is ready, sleeping on `clock` between looks (by default the monotonic clock's own timer:
    /// under `faketime` Dispatch's timers, and so `ContinuousClock`'s sleep, stop firing).
    /// - Throws: `DaemonError`: it cannot be started, or it was not ready in time.
    public static func start(
        _ configuration: Configuration, port: Int? = nil, clock: any Clock<Duration> = MonotonicClock()
    ) async throws(DaemonError) -> PrivateDaemon {
        var failure = configuration.noFreePort
        for _ in 0..<(port == nil ? 4 : 1) {
            let chosen = port ?? freePort()
            guard chosen > 0 else { break }
            switch await launch(configuration, port: chosen, attempts: 1, clock: clock) {
            case .success(let running):
                return PrivateDaemon(configuration: configuration, port: chosen, clock: clock, running: running)
            case .failure(let why):
                failure = why
            }
        }
        throw failure
    }

    /// Runs the daemon for the length of `body`, then stops it, whether `body` returns or throws.
    /// - Throws: `DaemonError` when it cannot be started, or what `body` throws.
    public static func with<Value>(
        _ configuration: Configuration, port: Int? = nil, clock: any Clock<Duration> = MonotonicClock(),
        isolation: isolated (any Actor)? = #isolation, _ body: (PrivateDaemon) async throws -> Value
    ) async throws -> Value {
        let daemon = try await start(configuration, port: port, clock: clock)
        return try await scoped(daemon, stop: { await $0.stop() }, body)
    }

    /// Runs `body` with `value`, then awaits `stop`, whether `body` returns or throws: the scoped
    /// form of every private daemon.
    public static func scoped<Resource: Sendable, Value>(
        _ value: Resource, stop: (Resource) async -> Void, isolation: isolated (any Actor)? = #isolation,
        _ body: (Resource) async throws -> Value
    ) async throws -> Value {
        let result: Value
        do {
            result = try await body(value)
        } catch {
            await stop(value)
            throw error
        }
        await stop(value)
        return result
    }

    /// Runs the daemon on `port` until it is ready (up to `configuration.readiness`), `attempts`
    /// times at most (the port may still be held by a daemon just stopped), or says why not.
    private static func launch(
        _ configuration: Configuration, port: Int, attempts: Int, clock: any Clock<Duration>
    ) async -> Result<Running, DaemonError> {
        let heading = configuration.heading
        var failure = configuration.notReady(port, false)
        for attempt in 0..<attempts {
            let launch: Launch
            do {
                launch = try configuration.launch(port)
            } catch {
                return .failure(error)
            }
            let logDescriptor = launch.log.flatMap { log in
                try? FileDescriptor.open(
                    log, .writeOnly, options: [.create, .truncate, .closeOnExec], permissions: FilePermissions(rawValue: 0o644))
            }
            defer { try? logDescriptor?.close() }
            let logFile = logDescriptor?.rawValue ?? -1
            let process: ChildProcess
            do {
                process = try ChildProcess(
                    executable: launch.executable, arguments: launch.arguments, environment: launch.environment,
                    standardOutput: launch.logsOutput && logFile >= 0 ? logFile : nil, standardError: logFile >= 0 ? logFile : nil)
            } catch {
                return .failure(DaemonError(daemon: configuration.name, reason: error.description, heading: heading))
            }
            // Guarded from the moment it runs, not once it is ready: an owner that dies while the
            // daemon starts (up to `readiness`, seconds under load) must not leave it behind. Two
            // test processes that crashed did, each with the gpsd it was starting. Dismissed only
            // after a failed start has stopped the daemon.
            let watchdog = ProcessWatchdog(
                guarding: process.pid, named: configuration.name, sharedMemoryKey: configuration.sharedMemoryKey?(port),
                folder: configuration.folder)
            let looks = max(1, Int(configuration.readiness / .milliseconds(50)))
            for _ in 0..<looks {
                if configuration.ready(port, process.pid) {
                    return .success(Running(process: process, port: port, watchdog: watchdog))
                }
                guard process.isRunning else { break }
                do {
                    try await clock.sleep(for: .milliseconds(50))
                } catch {
                    await process.stop(grace: .seconds(1))
                    configuration.removeLeftovers(port: port)
                    await watchdog?.dismiss()
                    return .failure(
                        DaemonError(daemon: configuration.name, reason: "the start was cancelled before it was ready", heading: heading))
                }
            }
            let exited = !process.isRunning
            await process.stop(grace: .seconds(1))
            configuration.removeLeftovers(port: port)
            await watchdog?.dismiss()
            failure = configuration.notReady(port, exited)
            // The port may still be held by the daemon just stopped: wait a little and try again.
            if attempt + 1 < attempts { try? await clock.sleep(for: .milliseconds(50)) }
        }
        return .failure(failure)
    }

    /// Whether the daemon runs.
    public var isRunning: Bool { current.withLock { $0?.process.isRunning ?? false } }

    /// Its pid now (for tests that kill it); `nil` once stopped or killed.
    public var pid: Int32? { current.withLock { $0?.process.pid } }

    /// Sends `signal` to the daemon (SIGSTOP, SIGCONT: a stalled daemon).
    public func signal(_ signal: Int32) {
        current.withLock { $0?.process.signal(signal) }
    }

    /// Stops the daemon: SIGTERM, then SIGKILL after a second, and awaits its exit. The watchdog
    /// is dismissed only once the daemon has gone, so an owner killed in the middle of this still
    /// leaves it to the watchdog.
    public func stop() async {
        await end(
            current.withLock { running in
                defer { running = nil }
                return running
            }, grace: .seconds(1), signal: SIGTERM)
    }

    /// Kills the daemon (SIGKILL, no clean-up: a crash) and leaves it down until `restart()`.
    public func kill() async {
        await end(
            current.withLock { running in
                defer { running = nil }
                return running
            }, grace: .zero, signal: SIGKILL)
    }

    /// Kills the daemon and every process it forked (SIGKILL to all: a power cut), and leaves it
    /// down until `restart()`. A forking server's children outlive a killed parent for a while:
    /// PostgreSQL's backend notices its postmaster's death only when it next waits, so a query
    /// already on its socket may still be run and committed after `kill()` returned. Here the
    /// parent is stopped first and awaited until it shows as stopped (it forks no more), each
    /// child is killed and awaited until it has exited (a zombie of the stopped parent), and only
    /// then is the parent killed.
    public func crash() async {
        if let pid {
            signal(SIGSTOP)
            // Stopped only when it next leaves the kernel: a fork under way still ends, so the
            // children are listed once it shows as stopped (T).
            await waitWhile { Processes.status(of: pid).map { $0.state != "T" && $0.state != "Z" } ?? false }
            let children = Self.children(of: pid)
            for child in children { try? Processes.signal(SIGKILL, to: child) }
            await waitWhile { children.contains(where: Processes.isRunning) }
        }
        await self.kill()
    }

    /// Looks every 10 ms, on the daemon's clock, while `condition` holds, for up to 2 s.
    private func waitWhile(_ condition: () -> Bool) async {
        for _ in 0..<200 {
            guard condition() else { return }
            try? await clock.sleep(for: .milliseconds(10))
        }
    }

    /// The processes whose parent is `pid`, from /proc.
    public static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { Processes.status(of: $0)?.parent == pid }
    }

    private func end(_ running: Running?, grace: Duration, signal: Int32) async {
        guard let running else { return }
        await running.process.stop(grace: grace, signal: signal)
        await running.watchdog?.dismiss()
        configuration.removeLeftovers(port: running.port)
    }

    /// Starts the daemon again on the same port (after `kill()` or `stop()`; a running one is
    /// stopped first), trying `attempts` times: the port may still be held by the daemon just
    /// stopped.
    public func restart(attempts: Int = 1) async throws(DaemonError) {
        await stop()
        switch await Self.launch(configuration, port: port, attempts: attempts, clock: clock) {
        case .success(let running): current.withLock { $0 = running }
        case .failure(let why): throw why
        }
    }

    // MARK: - Ports and /proc

    /// Whether `pid` (any process, when nil) listens on TCP `port` (IPv4), from /proc/net/tcp and
    /// the process's descriptors: no connection is made, so no server takes a probe for a client.
    public static func listening(port: Int, pid: Int32? = nil) -> Bool {
        guard let table = FileSystem.readToEnd("/proc/net/tcp") else { return false }
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

    /// A port the kernel says is free on 127.0.0.1 (for a private daemon, or a test's gpsfake).
    public static func freePort() -> Int {
        (try? Loopback.freePort()) ?? 0
    }
}

extension PrivateDaemon.Configuration {
    /// Removes what the daemon on `port` left behind (its shared-memory segment), once it has gone.
    func removeLeftovers(port: Int) {
        if let key = sharedMemoryKey?(port) { _ = try? SharedMemory.removeSegment(key: key) }
    }
}
