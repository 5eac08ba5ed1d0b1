import Foundation
import Glibc
import Synchronization
public import TagFixDevices
import TagFixSystem

// Tests start programs the way the product does: through `ChildProcess`, whose child starts with
// an empty signal mask and default dispositions. (Foundation's `Process` hands the child the
// spawning thread's mask; spawned from a cooperative or dispatch thread, SIGTERM stayed blocked
// in the child, and one `swift test` hung for ever waiting for it.) Output is read on a thread of
// its own, never on the cooperative pool.

/// Where a program's standard input comes from.
public enum ProgramInput: Sendable {
    /// /dev/null.
    case null
    /// These bytes, then the end of the input.
    case bytes([UInt8])
    /// A pipe the test writes to (`RunningProgram.write`, `closeInput`); for `TestProgram.run`,
    /// an input that ends at once.
    case pipe
    /// The test's own descriptor (the child gets a copy).
    case descriptor(Int32)
}

/// Where a program's standard output or error goes.
public enum ProgramOutput: Sendable {
    /// Read as it comes, into the result (or the running program's text).
    case capture
    /// /dev/null.
    case discard
    /// The test's own descriptor (a file, /dev/full, a pipe it reads itself); the child gets a copy.
    case descriptor(Int32)
    /// Standard error only: into the same pipe as standard output, in the order written.
    case standardOutput
}

/// What a program that ran to its end did.
public struct ProgramResult: Sendable {
    /// How it ended.
    public let termination: ChildProcess.Termination
    /// Its standard output's bytes (with standard error's, for `standardError: .standardOutput`).
    public let standardOutput: [UInt8]
    /// Its standard error's bytes, when captured on their own.
    public let standardError: [UInt8]

    /// The exit status, or the number of the signal that ended it (as Foundation's
    /// `terminationStatus` was).
    public var status: Int32 { ProgramResult.status(of: termination) }
    /// Whether a signal ended it.
    public var signalled: Bool { if case .signalled = termination { true } else { false } }
    /// Standard output as text.
    public var output: String { String(decoding: standardOutput, as: UTF8.self) }
    /// Standard output's lines (empty lines left out).
    public var out: [String] { output.split(separator: "\n").map(String.init) }
    /// Standard error as text.
    public var err: String { String(decoding: standardError, as: UTF8.self) }

    static func status(of termination: ChildProcess.Termination) -> Int32 {
        switch termination {
        case .exited(let code): code
        case .signalled(let signal): signal
        }
    }
}

/// Runs a program to its end.
public enum TestProgram {
    /// Runs `executable` with `arguments`, its environment this process's with `environment` laid
    /// over it and the names in `removing` taken out; waits for it on a thread of its own, off the
    /// cooperative pool. Throws when the program cannot be started.
    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String] = [], environment: [String: String] = [:], removing: [String] = [],
        input: ProgramInput = .null, standardOutput: ProgramOutput = .capture, standardError: ProgramOutput = .capture
    ) async throws(ChildProcessError) -> ProgramResult {
        try await offThePool("test program \((executable as NSString).lastPathComponent)") { () throws(ChildProcessError) in
            try runBlocking(
                executable, arguments, environment: environment, removing: removing, input: input, standardOutput: standardOutput,
                standardError: standardError)
        }
    }

    /// `run`, on the calling thread, which it blocks until the program has ended: for code that
    /// already runs on a thread of its own (never on the cooperative pool).
    @discardableResult
    public static func runBlocking(
        _ executable: String, _ arguments: [String] = [], environment: [String: String] = [:], removing: [String] = [],
        input: ProgramInput = .null, standardOutput: ProgramOutput = .capture, standardError: ProgramOutput = .capture
    ) throws(ChildProcessError) -> ProgramResult {
        let spawned = try Spawned(
            executable, arguments, environment: environment, removing: removing, input: input, standardOutput: standardOutput,
            standardError: standardError)
        try? spawned.inputPipe?.close()  // `.pipe`: nobody writes here, so the input ends at once
        let captured = Captured()
        spawned.pump(into: captured)
        let termination = blockUntilExit(spawned.child)
        return captured.state.withLock { ProgramResult(termination: termination, standardOutput: $0.out, standardError: $0.err) }
    }
}

/// A program a test starts and talks to while it runs: its outputs are read as they come, on a
/// thread of its own. `TestProgram.withRunning` stops it however the test ends; a program made
/// with `init` is the caller's to stop (`stop`).
public final class RunningProgram: Sendable {
    /// The child, as the product starts it.
    public let child: ChildProcess
    private let captured = Captured()
    private let input: Mutex<FileHandle?>

    public init(
        _ executable: String, _ arguments: [String] = [], environment: [String: String] = [:], removing: [String] = [],
        input: ProgramInput = .null, standardOutput: ProgramOutput = .capture, standardError: ProgramOutput = .capture
    ) throws(ChildProcessError) {
        let spawned = try Spawned(
            executable, arguments, environment: environment, removing: removing, input: input, standardOutput: standardOutput,
            standardError: standardError)
        child = spawned.child
        self.input = Mutex(spawned.inputPipe)
        let captured = self.captured
        DeviceThread.detach(name: "test program output") { spawned.pump(into: captured) }
    }

    public var pid: Int32 { child.pid }
    public var isRunning: Bool { child.isRunning }
    /// How it ended; `nil` while it runs.
    public var termination: ChildProcess.Termination? { child.termination }
    /// The exit status, or the number of the signal that ended it; `nil` while it runs.
    public var status: Int32? { termination.map(ProgramResult.status(of:)) }
    /// Whether a signal ended it.
    public var signalled: Bool { if case .signalled = termination { true } else { false } }

    /// Standard output so far, as text.
    public var stdout: String { captured.state.withLock { String(decoding: $0.out, as: UTF8.self) } }
    /// Standard output's lines so far (empty lines left out).
    public var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }
    /// Standard error so far, as text.
    public var stderr: String { captured.state.withLock { String(decoding: $0.err, as: UTF8.self) } }
    /// Standard error's lines so far (empty lines left out).
    public var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }
    /// Both outputs in the order they came, each read of standard error after "stderr: ": for
    /// failure messages.
    public var transcript: String { captured.state.withLock { $0.transcript } }
    /// Whether every captured output has reached its end (the program and every process it
    /// handed them to have closed them).
    public var outputClosed: Bool { captured.state.withLock { $0.closed } }

    /// Sends `signal`, unless the program has been reaped.
    public func signal(_ signal: Int32) { child.signal(signal) }

    /// Writes to standard input (`input: .pipe`), blocking until the pipe takes it.
    public func write(_ bytes: [UInt8]) throws {
        guard let handle = input.withLock({ $0 }) else { return }
        try handle.write(contentsOf: bytes)
    }

    /// Ends standard input (`input: .pipe`).
    public func closeInput() {
        let handle = input.withLock { handle in
            defer { handle = nil }
            return handle
        }
        try? handle?.close()
    }

    /// Waits until `condition` holds, checking every 20 ms without holding a thread, at most `limit`;
    /// whether it held.
    public static func poll(upTo limit: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
        let end = ContinuousClock.now + limit
        while !condition() {
            if ContinuousClock.now > end || Task.isCancelled { return condition() }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Waits, at most `limit`, until standard output (or error) holds `text`.
    public func waitFor(_ text: String, onStandardError: Bool = false, upTo limit: Duration = .seconds(60)) async -> Bool {
        await Self.poll(upTo: limit) { (onStandardError ? stderr : stdout).contains(text) }
    }

    /// Waits, at most `limit`, for the program to end (without signalling it); how it ended, `nil`
    /// if it still runs.
    public func exit(upTo limit: Duration = .seconds(60)) async -> ChildProcess.Termination? {
        _ = await Self.poll(upTo: limit) { !child.isRunning }
        return termination
    }

    /// Blocks the calling thread (a thread of its own, never the cooperative pool) until the
    /// program ends by itself; how it ended.
    public func waitUntilExit() -> ChildProcess.Termination { blockUntilExit(child) }

    /// SIGTERM, up to `grace` for the program to end, then SIGKILL; reaps it. Blocks the calling
    /// thread (`TestProgram.withRunning` calls it on a thread of its own).
    public func stop(grace: Duration = .seconds(1)) {
        closeInput()
        child.stop(grace: grace)
    }

    /// SIGKILL, and waits for the end; no grace, no handler runs in the program.
    public func kill() {
        child.signal(SIGKILL)
        child.stop(grace: .seconds(10))
    }
}

extension TestProgram {
    /// Starts a program (see `RunningProgram.init`), runs `body` with it, and stops it (`stop`,
    /// `grace`) however `body` ends.
    public static func withRunning<Value>(
        _ executable: String, _ arguments: [String] = [], environment: [String: String] = [:], removing: [String] = [],
        input: ProgramInput = .null, standardOutput: ProgramOutput = .capture, standardError: ProgramOutput = .capture,
        grace: Duration = .seconds(1), _ body: (RunningProgram) async throws -> Value
    ) async throws -> Value {
        let program = try RunningProgram(
            executable, arguments, environment: environment, removing: removing, input: input, standardOutput: standardOutput,
            standardError: standardError)
        let stop = { await offThePool("test program stop") { program.stop(grace: grace) } }
        do {
            let value = try await body(program)
            await stop()
            return value
        } catch {
            await stop()
            throw error
        }
    }
}

/// Blocks the calling thread until `child` has exited: `waitid` with WNOWAIT sleeps until then
/// without reaping it, so ChildProcess reaps it and keeps its status.
func blockUntilExit(_ child: ChildProcess) -> ChildProcess.Termination {
    while child.isRunning {
        var info = siginfo_t()
        _ = waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOWAIT)
    }
    guard let termination = child.termination else { preconditionFailure("a reaped child has a termination") }
    return termination
}

/// What the outputs brought so far.
final class Captured: Sendable {
    struct State {
        var out: [UInt8] = []
        var err: [UInt8] = []
        var transcript = ""
        var closed = false
    }
    let state = Mutex(State())
}

/// A spawned child and the parent's ends of its pipes.
struct Spawned: Sendable {
    let child: ChildProcess
    /// The read ends of captured standard output and error.
    let output: FileHandle?
    let error: FileHandle?
    /// The write end of standard input, with the bytes to write there (`.bytes`), or kept for the
    /// test (`.pipe`).
    let inputBytes: (handle: FileHandle, bytes: [UInt8])?
    let inputPipe: FileHandle?

    init(
        _ executable: String, _ arguments: [String], environment: [String: String], removing: [String], input: ProgramInput,
        standardOutput: ProgramOutput, standardError: ProgramOutput
    ) throws(ChildProcessError) {
        var variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        for name in removing { variables[name] = nil }
        // The child's ends are closed here once it has its copies, so each output ends when the
        // program (and whatever it handed the output to) is done with it.
        var childEnds: [FileHandle] = []
        defer { for handle in childEnds { try? handle.close() } }
        func outputPipe() -> Pipe {
            let pipe = Pipe()
            childEnds.append(pipe.fileHandleForWriting)
            return pipe
        }
        var stdin: Int32?
        var inputBytes: (FileHandle, [UInt8])?
        var inputPipe: FileHandle?
        switch input {
        case .null: stdin = nil
        case .descriptor(let fd): stdin = fd
        case .bytes, .pipe:
            let pipe = Pipe()
            childEnds.append(pipe.fileHandleForReading)
            stdin = pipe.fileHandleForReading.fileDescriptor
            if case .bytes(let bytes) = input {
                inputBytes = (pipe.fileHandleForWriting, bytes)
            } else {
                inputPipe = pipe.fileHandleForWriting
            }
        }
        var stdout: Int32?
        var output: FileHandle?
        switch standardOutput {
        case .capture, .standardOutput:
            let pipe = outputPipe()
            stdout = pipe.fileHandleForWriting.fileDescriptor
            output = pipe.fileHandleForReading
        case .discard: stdout = nil
        case .descriptor(let fd): stdout = fd
        }
        var stderr: Int32?
        var errors: FileHandle?
        switch standardError {
        case .capture:
            let pipe = outputPipe()
            stderr = pipe.fileHandleForWriting.fileDescriptor
            errors = pipe.fileHandleForReading
        case .discard: stderr = nil
        case .descriptor(let fd): stderr = fd
        case .standardOutput: stderr = stdout
        }
        do {
            child = try ChildProcess(
                executable: executable, arguments: arguments, environment: variables, standardInput: stdin, standardOutput: stdout,
                standardError: stderr)
            ChildReaper.shared.adopt(child.pid)
        } catch {
            for handle in [output, errors, inputPipe, inputBytes?.0].compactMap({ $0 }) { try? handle.close() }
            throw error
        }
        self.output = output
        self.error = errors
        self.inputBytes = inputBytes
        self.inputPipe = inputPipe
    }

    /// Reads the captured outputs to their ends and writes the input's bytes, on the calling
    /// thread (one of its own), with SIGPIPE blocked there: a program that closes its input early
    /// makes the write fail with EPIPE instead of ending the test process.
    func pump(into captured: Captured) {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
        var reads: [(handle: FileHandle, isError: Bool)] = []
        if let output { reads.append((output, false)) }
        if let error { reads.append((error, true)) }
        var pending = inputBytes?.bytes[...] ?? []
        var writer = inputBytes?.handle
        if let writer {
            if pending.isEmpty {
                try? writer.close()
            } else {
                _ = fcntl(writer.fileDescriptor, F_SETFL, fcntl(writer.fileDescriptor, F_GETFL) | O_NONBLOCK)
            }
        }
        if pending.isEmpty { writer = nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !reads.isEmpty || writer != nil {
            var fds = reads.map { pollfd(fd: $0.handle.fileDescriptor, events: Int16(POLLIN), revents: 0) }
            if let writer { fds.append(pollfd(fd: writer.fileDescriptor, events: Int16(POLLOUT), revents: 0)) }
            // Interrupted waits and calls are retried inside TagFixSystem (valueOrErrno).
            guard (try? valueOrErrno({ poll(&fds, nfds_t(fds.count), -1) })) != nil else { break }
            if let handle = writer, let ready = fds.last, ready.revents != 0 {
                var done = false
                do throws(Errno) {
                    pending = pending.dropFirst(try FileDescriptor(rawValue: handle.fileDescriptor).write(pending))
                    done = pending.isEmpty
                } catch {
                    done = error != .wouldBlock
                }
                if done {
                    try? handle.close()
                    writer = nil
                }
            }
            var ended: [Int] = []
            for (index, read) in reads.enumerated() where fds[index].revents != 0 {
                let count: Int
                do throws(Errno) {
                    count = try FileDescriptor(rawValue: read.handle.fileDescriptor).read(into: &buffer)
                } catch {
                    if error == .wouldBlock { continue }
                    count = 0
                }
                if count > 0 {
                    let chunk = buffer[..<count]
                    captured.state.withLock { state in
                        if read.isError { state.err += chunk } else { state.out += chunk }
                        state.transcript += (read.isError ? "stderr: " : "") + String(decoding: chunk, as: UTF8.self)
                    }
                } else {
                    try? read.handle.close()
                    ended.append(index)
                }
            }
            for index in ended.reversed() { reads.remove(at: index) }
        }
        captured.state.withLock { $0.closed = true }
    }
}
