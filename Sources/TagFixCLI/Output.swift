import Foundation
import Synchronization

/// Where a command writes: standard output and standard error, a line at a time.
public protocol TerminalOutput: Sendable {
    func out(_ line: String)
    func err(_ line: String)
}

/// The process's stdout and stderr, flushed per line so a verdict is visible the moment it is
/// decided, also through a pipe.
public struct StandardOutput: TerminalOutput {
    public init() {}

    public func out(_ line: String) { write(line, to: FileHandle.standardOutput) }
    public func err(_ line: String) { write(line, to: FileHandle.standardError) }

    private func write(_ line: String, to handle: FileHandle) {
        handle.write(Data((line + "\n").utf8))
    }
}

/// Output kept in memory, for tests.
public final class CapturedOutput: TerminalOutput {
    private let lines = Mutex<(out: [String], err: [String])>(([], []))

    public init() {}

    public func out(_ line: String) { lines.withLock { $0.out.append(line) } }
    public func err(_ line: String) { lines.withLock { $0.err.append(line) } }

    public var stdout: [String] { lines.withLock { $0.out } }
    public var stderr: [String] { lines.withLock { $0.err } }
}
