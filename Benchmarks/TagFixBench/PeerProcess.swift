import Foundation

/// A peer in Python (bench/*_peer.py) that says what it did one line at a time on its standard
/// output: "ready", then a line per tap ("read …", "gone"). Stopped when it goes out of use.
final class PeerProcess {
    private let process = Process()
    private let pipe = Pipe()
    private var buffer = ""

    /// Starts `python` on `script` with `arguments`; nil when it cannot be started.
    init?(python: String = "/usr/bin/python3", script: String, arguments: [String], environment: [String: String] = [:], errors: FileHandle)
    {
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = pipe
        process.standardError = errors
        guard (try? process.run()) != nil else { return nil }
    }

    deinit { process.terminate() }

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
