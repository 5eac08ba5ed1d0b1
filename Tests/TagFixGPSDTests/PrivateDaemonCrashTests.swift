import Foundation
import Glibc
import TagFixDaemons
import TagFixSystem
import Testing

/// A crash is a power cut for a daemon that forks: its children go with it. Killing the daemon
/// alone leaves them running, and PostgreSQL's backends then answer a query after "the server was
/// killed" (a store into a killed server succeeded in a CI run).
@Suite("a crashed private daemon takes the processes it forked with it")
struct PrivateDaemonCrashTests {
    /// A daemon that forks two children and waits for them: ready once both run.
    static let forking: PrivateDaemon.Configuration = {
        var configuration = PrivateDaemon.Configuration(
            name: "forking", heading: "forking", noFreePort: DaemonError(daemon: "forking", reason: "no port", heading: "forking"),
            launch: { _ in PrivateDaemon.Launch(executable: "/bin/sh", arguments: ["-c", "sleep 300 & sleep 300 & wait"]) },
            ready: { _, pid in PrivateDaemon.children(of: pid).count == 2 },
            notReady: { _, exited in DaemonError(daemon: "forking", reason: exited ? "it ended" : "not ready", heading: "forking") })
        configuration.readiness = .seconds(10)
        return configuration
    }()

    enum End: String, CaseIterable, CustomTestStringConvertible {
        case crash, kill
        var testDescription: String { rawValue }
    }

    @Test("a crash leaves none of the daemon's children running; a kill leaves both", arguments: End.allCases)
    func children(end: End) async throws {
        let daemon = try await PrivateDaemon.start(Self.forking, port: 1)
        let pid = try #require(daemon.pid)
        let children = PrivateDaemon.children(of: pid)
        #expect(children.count == 2)
        switch end {
        case .crash:
            await daemon.crash()
            #expect(!children.contains(where: Processes.isRunning), "a child outlived the crash")
        case .kill:
            await daemon.kill()
            #expect(children.allSatisfy(Processes.isRunning), "a kill is of the parent alone")
            for child in children { try? Processes.signal(SIGKILL, to: child) }
        }
        #expect(!daemon.isRunning)
    }
}
