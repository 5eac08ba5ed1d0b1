import Foundation
import TagFixDevices
import Testing

@testable import TagFixTesting

/// The programs a test process starts die with it (`ChildReaper`): what its end does — the
/// reaper's socket closed — done here by hand, since this process must live on.
@Suite("a test process's programs end with it, and only they do")
struct ChildReaperTests {
    @Test("the owner gone: a program still running gets SIGTERM; one whose pid now names another program is left alone")
    func ownerGone() async throws {
        let reaper = ChildReaper()
        try await ChildProcess.run(executable: "/bin/sleep", arguments: ["60"]) { adopted in
            try await ChildProcess.run(executable: "/bin/sleep", arguments: ["60"]) { stranger in
                reaper.adopt(adopted.pid)
                // The same pid with another start time: a program the kernel gave it to since.
                let start = try #require(ChildReaper.startTime(of: stranger.pid))
                reaper.adopt(stranger.pid, started: String((Int(start) ?? 0) + 1))
                reaper.ownerGone()
                #expect(await adopted.exited() == .signalled(SIGTERM))
                // Once the reaper has done its rounds (SIGTERM, then SIGKILL a second later).
                #expect(await reaper.process?.exited() == .exited(0))
                #expect(stranger.isRunning, "a pid that is not the adopted program's any more was signalled")
            }
        }
    }

    @Test("every program a test starts is adopted: its start time is read while it runs")
    func startTimeOfAChild() async throws {
        try await ChildProcess.run(executable: "/bin/sleep", arguments: ["60"]) { child in
            let start = try #require(ChildReaper.startTime(of: child.pid))
            #expect(Int(start) != nil && Int(start)! > 0, "\(start)")
            #expect(ChildReaper.startTime(of: child.pid) == start)
        }
        #expect(ChildReaper.startTime(of: Int32.max) == nil)
    }
}
