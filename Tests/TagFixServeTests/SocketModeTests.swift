import Foundation
import Synchronization
import TagFixDevices
import TagFixSystem
import Testing

@testable import TagFixServe

/// serve's Unix socket gets its mode without touching the process's umask, which every thread
/// shares: set around a bind, two servers binding at once restored each other's mask, and every
/// file made after that by any thread of the process had the socket's (a test run's PostgreSQL
/// could not enter its folders, Chromium its profile).
@Suite("serve's Unix socket: its mode, and the process's umask left alone")
struct SocketModeTests {
    /// The process's umask as the kernel reports it (/proc/self/status), read without changing it.
    static func umask() -> String? {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("Umask:") }.map {
            String($0.dropFirst(6)).trimmingCharacters(in: .whitespaces)
        }
    }

    @Test(
        "64 sockets bound at once on 4 threads: each has its mode exactly, and the umask never changes while they bind",
        arguments: [0o660, 0o600])
    func modeWithoutUmask(_ mode: Int) async throws {
        let before = try #require(Self.umask(), "no Umask line in /proc/self/status")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-sock-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        final class Shared: Sendable {
            let seen = Mutex(Set<String>())
            let binding = Mutex(true)
            let modes = Mutex([UInt32]())
        }
        let shared = Shared()
        // A sampler reads the umask as fast as it can while the sockets bind.
        let sampled = OneShot<Bool>()
        DeviceThread.detach(name: "umask sampler") {
            while shared.binding.withLock({ $0 }) {
                if let mask = Self.umask() { shared.seen.withLock { _ = $0.insert(mask) } }
            }
            sampled.finish(true)
        }
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<4 {
                group.addTask {
                    await offThePool("bind sockets") {
                        for index in 0..<16 {
                            let path = "\(folder)/s\(thread)-\(index)"
                            guard let fd = try? Socket.listenUnix(path, mode: mode_t(mode)) else { continue }
                            if let info = try? Stat(path, followTargetSymlink: false) {
                                shared.modes.withLock { $0.append(info.mode & 0o777) }
                            }
                            try? fd.close()
                        }
                    }
                }
            }
        }
        shared.binding.withLock { $0 = false }
        _ = await sampled.wait()
        #expect(shared.modes.withLock { $0.count } == 64)
        #expect(
            shared.modes.withLock { $0 }.allSatisfy { $0 == UInt32(mode) }, "\(shared.modes.withLock { $0.map { String($0, radix: 8) } })")
        #expect(shared.seen.withLock { $0 } == [before], "the umask changed while sockets bound: \(shared.seen.withLock { $0 })")
        #expect(Self.umask() == before)
    }
}
