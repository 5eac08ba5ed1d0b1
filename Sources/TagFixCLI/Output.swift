import Foundation
import Synchronization

/// Where a command writes: standard output and standard error, a line at a time.
public protocol TerminalOutput: Sendable {
    func out(_ line: String)
    func err(_ line: String)
    /// Whether standard output is a terminal a person watches (colours, a status line, a bell).
    var isTerminal: Bool { get }
    /// Redraws the status line at the bottom of a terminal (no newline); "" clears it.
    func status(_ text: String)
}

extension TerminalOutput {
    public var isTerminal: Bool { false }
    public func status(_ text: String) {}
}

/// The process's stdout and stderr, flushed per line so a verdict is visible the moment it is
/// decided, also through a pipe.
public struct StandardOutput: TerminalOutput {
    public let isTerminal: Bool

    public init() { isTerminal = isatty(STDOUT_FILENO) == 1 }

    public func out(_ line: String) { write(line + "\n", to: FileHandle.standardOutput) }
    public func err(_ line: String) { write(line + "\n", to: FileHandle.standardError) }

    public func status(_ text: String) {
        guard isTerminal else { return }
        // Carriage return and "erase line" (ECMA-48 EL 2): the status line is redrawn in place.
        write("\r\u{1B}[2K" + text, to: FileHandle.standardOutput)
    }

    private func write(_ text: String, to handle: FileHandle) {
        handle.write(Data(text.utf8))
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
