import Foundation
import TagFixDaemons
import TagFixSystem
import TagFixTesting
import Testing

/// A private gpsd exports its fixes in a System V shared-memory segment (GPSD_SHM_KEY, one a
/// port) and leaves it behind when it ends. Left, one a run, they filled the system's 4,096
/// segments, and every initdb of the PostgreSQL tests failed.
@Suite("a private gpsd leaves no shared memory behind")
struct GPSDLeftoversTests {
    /// `tagfix emulate nmea --gpsd`, its gpsd's port and pid once it serves.
    static func emulator() async throws -> (RunningTagFix, port: Int, gpsd: pid_t) {
        let tagfix = try RunningTagFix(["emulate", "nmea", "--at", "53.545,9.966", "--gpsd"])
        #expect(await tagfix.waitFor("gpsd://"))
        let port = try #require(tagfix.gpsdPort, "\(tagfix.stdout)")
        let gpsd = try #require(EmulatorCommandTests.gpsd(servingPort: port), "no gpsd serves port \(port)")
        return (tagfix, port, gpsd)
    }

    @Test(
        "stopped as it should be (SIGTERM) or killed at once (SIGKILL: its watchdog stops gpsd), the gpsd's segment is removed",
        .enabled(if: RunningTagFix.isBuilt && PrivateGPSD.installedPath != nil, "needs the built tagfix and gpsd"),
        arguments: [SIGTERM, SIGKILL])
    func segmentRemoved(signal: Int32) async throws {
        let (tagfix, port, gpsd) = try await Self.emulator()
        let key = PrivateGPSD.sharedMemoryKey(port: port)
        #expect(await RunningTagFix.poll { SharedMemory.segmentExists(key: key) }, "gpsd made no segment of key \(key)")
        _ = await tagfix.stop(with: signal)
        let gone = await RunningTagFix.poll(upTo: .seconds(10)) { !EmulatorCommandTests.isRunning(gpsd) }
        if !gone { kill(gpsd, SIGKILL) }
        #expect(gone, "gpsd (pid \(gpsd)) outlived tagfix")
        #expect(
            await RunningTagFix.poll(upTo: .seconds(10)) { !SharedMemory.segmentExists(key: key) },
            "gpsd's segment (key 0x\(String(UInt32(bitPattern: key), radix: 16))) was left behind")
        _ = try? SharedMemory.removeSegment(key: key)
    }
}
