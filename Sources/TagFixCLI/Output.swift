import Foundation
import Synchronization
import TagFixDevices
import TagFixSystem

/// Where a command writes: standard output and standard error, a line at a time.
public protocol TerminalOutput: Sendable {
    func out(_ line: String)
    func err(_ line: String)
    /// Whether standard output is a terminal a person watches (colours, a status line, a bell).
    var isTerminal: Bool { get }
    /// Redraws the status line at the bottom of a terminal (no newline); "" clears it.
    func status(_ text: String)
    /// Lines written together, in order (a group of phone taps' verdicts). Default: `out` each.
    func out(lines: [String])
}

extension TerminalOutput {
    public var isTerminal: Bool { false }
    public func status(_ text: String) {}
    public func out(lines: [String]) {
        for line in lines { out(line) }
    }
}

/// The process's stdout and stderr, flushed per line so a verdict is visible the moment it is
/// decided, also through a pipe. Written with write(2), never a call that traps on an error: when
/// standard output cannot be written, a closed pipe (`| head -1`, EPIPE: SIGPIPE is ignored) ends
/// the process quietly with 0, anything else (a full disk, a read-only file system, an I/O
/// error) with one line on stderr and 74. A session log is already on the disk by then: it is
/// written before each verdict is shown. A failing stderr is ignored: there is nowhere to say it.
public struct StandardOutput: TerminalOutput {
    public let isTerminal: Bool

    public init() { isTerminal = FileDescriptor.standardOutput.isTerminal }

    public func out(_ line: String) { write(line + "\n", to: STDOUT_FILENO) }

    /// One write for all of them: a group of 200 phone taps is one system call, not 200.
    public func out(lines: [String]) {
        guard !lines.isEmpty else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(lines.reduce(0) { $0 + $1.utf8.count + 1 })
        for line in lines {
            bytes.append(contentsOf: line.utf8)
            bytes.append(UInt8(ascii: "\n"))
        }
        write(bytes, to: STDOUT_FILENO)
    }
    public func err(_ line: String) { write(line + "\n", to: STDERR_FILENO) }

    public func status(_ text: String) {
        guard isTerminal else { return }
        // Carriage return and "erase line" (ECMA-48 EL 2): the status line is redrawn in place.
        write("\r\u{1B}[2K" + text, to: STDOUT_FILENO)
    }

    private func write(_ text: String, to fd: Int32) { write(Array(text.utf8), to: fd) }

    private func write(_ bytes: [UInt8], to fd: Int32) {
        guard let code = OutputFile.writeAll(fd, bytes), fd == STDOUT_FILENO else { return }
        Self.stdoutFailed(code)
    }

    /// Ends the process after standard output failed with `code` (see the type).
    static func stdoutFailed(_ code: Int32) -> Never {
        if code != EPIPE {
            let message = "error: \(OutputFileError(path: "standard output", operation: "write", errno: code))\n"
            _ = OutputFile.writeAll(STDERR_FILENO, Array(message.utf8))
        }
        exit(code == EPIPE ? ExitCode.success : ExitCode.ioError)
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

/// `--output FILE`: `text` written by `OutputFile`'s rules (a regular file replaced atomically, a
/// FIFO, a device or `-` written in place, a symlink followed); a failure is exit 74.
func writeOutput(_ text: String, to path: String) throws(CLIError) {
    do {
        try OutputFile.write(Array(text.utf8), to: path)
    } catch {
        if error.errno == EPIPE { StandardOutput.stdoutFailed(EPIPE) }
        throw .ioError(error.description)
    }
}
