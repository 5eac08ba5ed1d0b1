import Foundation
import Synchronization
import TagFixDaemons
import Testing

/// A private daemon (gpsd, pcscd, the tests' mosquitto) must not outlive its owner however the
/// owner ends, and that includes the seconds while it starts: two test processes that crashed
/// (SIGABRT) each left behind the gpsd they were starting, because its watchdog was made only
/// once the daemon was ready.
@Suite("a private daemon is guarded by its watchdog from the moment it runs")
struct PrivateDaemonWatchdogTests {
    /// Whether a watchdog shell guards `pid` (its arguments: `tagfix-NAME-watchdog PID NAME …`).
    static func watchdogGuards(_ pid: Int32, named name: String) -> Bool {
        let needle = "tagfix-\(name)-watchdog\0\(pid)\0"
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int32(entry) != nil {
            guard let bytes = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            if String(decoding: bytes, as: UTF8.self).contains(needle) { return true }
        }
        return false
    }

    @Test("while the daemon is not yet ready, its watchdog already runs; a start that fails dismisses it")
    func guardedWhileStarting() async throws {
        // The readiness probe holds only once a watchdog guards the daemon's pid: before the
        // fix the watchdog came after readiness, so the probe never held and the start failed.
        let seen = Mutex<[Int32]>([])
        func configuration(ready: @escaping @Sendable (Int32) -> Bool) -> PrivateDaemon.Configuration {
            var configuration = PrivateDaemon.Configuration(
                name: "sleep", heading: "sleep", noFreePort: DaemonError(daemon: "sleep", reason: "no port", heading: "sleep"),
                launch: { _ in PrivateDaemon.Launch(executable: "/bin/sleep", arguments: ["30"]) },
                ready: { _, pid in ready(pid) },
                notReady: { _, exited in DaemonError(daemon: "sleep", reason: exited ? "it ended" : "not ready", heading: "sleep") })
            configuration.readiness = .seconds(10)
            return configuration
        }
        let daemon = try await PrivateDaemon.start(
            configuration { pid in
                seen.withLock { $0.append(pid) }
                return Self.watchdogGuards(pid, named: "sleep")
            })
        let pid = try #require(daemon.pid)
        #expect(seen.withLock { $0 }.allSatisfy { $0 == pid })
        await daemon.stop()
        #expect(!Self.watchdogGuards(pid, named: "sleep"), "the watchdog outlived its daemon's stop")

        // A start that never gets ready stops the daemon and dismisses its watchdog.
        let tried = Mutex<Int32?>(nil)
        var failing = configuration { pid in
            tried.withLock { $0 = pid }
            return false
        }
        failing.readiness = .milliseconds(200)
        await #expect(throws: DaemonError.self) { try await PrivateDaemon.start(failing, port: 1) }
        let failed = try #require(tried.withLock { $0 })
        #expect(!Self.watchdogGuards(failed, named: "sleep"), "a failed start left its watchdog running")
    }
}
