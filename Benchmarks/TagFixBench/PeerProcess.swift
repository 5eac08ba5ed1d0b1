import Foundation
import Glibc
import TagFixDevices

/// A peer in Python (bench/*_peer.py) that says what it did one line at a time on its standard
/// output: "ready", then a line per tap ("read …", "gone"). Its user stops it (`stop`).
final class PeerProcess {
    private let process: ChildProcess
    private let pipe = Pipe()
    private var buffer = ""

    /// Starts `python` on `script` with `arguments`; nil when it cannot be started.
    init?(python: String = "/usr/bin/python3", script: String, arguments: [String], environment: [String: String] = [:], errors: FileHandle)
    {
        // Started as the product starts programs (ChildProcess: a clean signal mask).
        guard
            let process = try? BenchChildren.start(
                executable: python, arguments: [script] + arguments,
                environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                standardOutput: pipe.fileHandleForWriting.fileDescriptor, standardError: errors.fileDescriptor)
        else { return nil }
        self.process = process
        try? pipe.fileHandleForWriting.close()
    }

    /// Stops the peer and waits for its end (SIGTERM, SIGKILL after `grace`, reaped): a peer only
    /// signalled on the way out was still there when bench/run looked at the section's process
    /// group, which fails the run ("left running after it ended": a fresh-clone CI run).
    func stop(grace: Duration = .seconds(2)) {
        blockingStop(process, grace: grace)
    }

    /// `stop`, awaited (from async code: no thread held meanwhile).
    func finish(grace: Duration = .seconds(2)) async {
        await process.stop(grace: grace)
    }

    /// The peer's next line, without its newline; nil once it has closed its output.
    func line() -> String? {
        while !buffer.contains("\n") {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer += String(decoding: chunk, as: UTF8.self)
        }
        guard let index = buffer.firstIndex(of: "\n") else { return nil }
        let text = String(buffer[..<index])
        buffer.removeSubrange(...index)
        return text
    }
}
