import Foundation
import Glibc
import Synchronization
public import TagFixDevices
import TagFixSystem

// Tests start programs the way the product does: through `ChildProcess`, whose child starts with
// an empty signal mask and default dispositions. (Foundation's `Process` hands the child the
// spawning thread's mask; spawned from a cooperative or dispatch thread, SIGTERM stayed blocked
// in the child, and one `swift test` hung for ever waiting for it.) Output is read, input written
// and the exit awaited on the process's loop (`ProcessLoop.shared`): no thread blocks for them.

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
    /// over it and the names in `removing` taken out; awaits its end and its outputs' ends without
    /// holding a thread. Throws when the program cannot be started.
    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String] = [], environment: [String: String] = [:], removing: [String] = [],
        input: ProgramInput = .null, standardOutput: ProgramOutput = .capture, standardError: ProgramOutput = .capture
    ) async throws(ChildProcessError) -> ProgramResult {
        let spawned = try Spawned(
            executable, arguments, environment: environment, removing: removing, input: input, standardOutput: standardOutput,
            standardError: standardError)
        try? spawned.inputPipe?.close()  // `.pipe`: nobody writes here, so the input ends at once
        let captured = Captured()
        let pump = Pump.start(spawned, into: captured)
        let termination = await spawned.child.exited()
        _ = await pump.wait()
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
    private let input: Mutex<FileDescriptor?>

    public init(
        _ executable: String, _ arguments: [String] = [], environment: [String: String] = [:], removing: [String] = [],
        input: ProgramInput = .null, standardOutput: ProgramOutput = .capture, standardError: ProgramOutput = .capture
    ) throws(ChildProcessError) {
        let spawned = try Spawned(
            executable, arguments, environment: environment, removing: removing, input: input, standardOutput: standardOutput,
            standardError: standardError)
        child = spawned.child
        self.input = Mutex(spawned.inputPipe)
        _ = Pump.start(spawned, into: captured)
    }

    /// A program dropped without `stop` or `closeInput` still gets the end of its `.pipe` input
    /// (a `cat` waiting on it ends), and this process keeps no descriptor for it. Closing a
    /// descriptor does not block.
    deinit { closeInput() }

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

    /// Writes to standard input (`input: .pipe`): a few bytes a pipe takes at once (a write
    /// larger than the pipe's 64 KiB waits for the program to read).
    public func write(_ bytes: [UInt8]) throws {
        try input.withLock { descriptor in
            guard let descriptor else { return }
            _ = try descriptor.writeAll(bytes)
        }
    }

    /// Ends standard input (`input: .pipe`).
    public func closeInput() {
        let descriptor = input.withLock { descriptor in
            defer { descriptor = nil }
            return descriptor
        }
        try? descriptor?.close()
    }

    /// Waits until `condition` holds, checking every 20 ms without holding a thread, at most `limit`;
    /// whether it held.
    public static func poll(upTo limit: Duration = .seconds(60), _ condition: () async -> Bool) async -> Bool {
        let end = ContinuousClock.now + limit
        while await !condition() {
            if ContinuousClock.now > end || Task.isCancelled { return await condition() }
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

    /// Awaits the program's end (without signalling it); how it ended.
    @discardableResult
    public func exited() async -> ChildProcess.Termination { await child.exited() }

    /// SIGTERM, up to `grace` for the program to end, then SIGKILL; awaits its end (reaped).
    public func stop(grace: Duration = .seconds(1)) async {
        closeInput()
        await child.stop(grace: grace)
    }

    /// SIGKILL, and awaits the end; no grace, no handler runs in the program.
    public func kill() async {
        await child.stop(grace: .zero, signal: SIGKILL)
    }

    /// `stop(grace:)` without waiting for it, for a `defer`: SIGTERM now, SIGKILL after `grace`
    /// if it still runs, reaped when it ends; returns at once.
    public func terminate(grace: Duration = .seconds(1)) {
        closeInput()
        let child = child
        child.signal(SIGTERM)
        Task { await child.stop(grace: grace) }
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
        do {
            let value = try await body(program)
            await program.stop(grace: grace)
            return value
        } catch {
            await program.stop(grace: grace)
            throw error
        }
    }
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
    let output: FileDescriptor?
    let error: FileDescriptor?
    /// The write end of standard input, with the bytes to write there (`.bytes`), or kept for the
    /// test (`.pipe`).
    let inputBytes: (descriptor: FileDescriptor, bytes: [UInt8])?
    let inputPipe: FileDescriptor?

    init(
        _ executable: String, _ arguments: [String], environment: [String: String], removing: [String], input: ProgramInput,
        standardOutput: ProgramOutput, standardError: ProgramOutput
    ) throws(ChildProcessError) {
        var variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        for name in removing { variables[name] = nil }
        // Every end is close-on-exec (FileDescriptor.pipe); the child gets its copies through the
        // spawn. The child's ends are closed here once it has them, so each output ends when the
        // program (and whatever it handed the output to) is done with it.
        var childEnds: [FileDescriptor] = []
        var ours: [FileDescriptor] = []
        defer { for descriptor in childEnds { try? descriptor.close() } }
        func makePipe() throws(ChildProcessError) -> (readEnd: FileDescriptor, writeEnd: FileDescriptor) {
            do throws(Errno) {
                return try FileDescriptor.pipe()
            } catch {
                for descriptor in ours { try? descriptor.close() }
                throw ChildProcessError(executable: executable, errno: error.rawValue)
            }
        }
        var stdin: Int32?
        var inputBytes: (FileDescriptor, [UInt8])?
        var inputPipe: FileDescriptor?
        switch input {
        case .null: stdin = nil
        case .descriptor(let fd): stdin = fd
        case .bytes, .pipe:
            let ends = try makePipe()
            childEnds.append(ends.readEnd)
            ours.append(ends.writeEnd)
            stdin = ends.readEnd.rawValue
            if case .bytes(let bytes) = input {
                inputBytes = (ends.writeEnd, bytes)
            } else {
                inputPipe = ends.writeEnd
            }
        }
        var stdout: Int32?
        var output: FileDescriptor?
        switch standardOutput {
        case .capture, .standardOutput:
            let ends = try makePipe()
            childEnds.append(ends.writeEnd)
            ours.append(ends.readEnd)
            stdout = ends.writeEnd.rawValue
            output = ends.readEnd
        case .discard: stdout = nil
        case .descriptor(let fd): stdout = fd
        }
        var stderr: Int32?
        var errors: FileDescriptor?
        switch standardError {
        case .capture:
            let ends = try makePipe()
            childEnds.append(ends.writeEnd)
            ours.append(ends.readEnd)
            stderr = ends.writeEnd.rawValue
            errors = ends.readEnd
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
            for descriptor in ours { try? descriptor.close() }
            throw error
        }
        self.output = output
        self.error = errors
        self.inputBytes = inputBytes
        self.inputPipe = inputPipe
    }
}

/// Reads a spawned program's captured outputs to their ends and writes its input's bytes, as a
/// client of the process's loop (`ProcessLoop.shared`): each descriptor is watched there and
/// read or written when ready, without blocking. A program that closes its input early makes the
/// write fail with `.brokenPipe` (SIGPIPE is blocked on the loop's thread), and the input ends.
final class Pump: Sendable {
    private struct Watched {
        var descriptor: FileDescriptor
        var isError: Bool
        var registration: IORegistration?
    }
    private struct State {
        var reads: [Watched] = []
        var writer: Watched?
        var pending: ArraySlice<UInt8> = []
        var buffer = [UInt8](repeating: 0, count: 65536)
    }
    private let state = Mutex(State())
    private let captured: Captured
    private let ended = OneShot<Bool>()
    private var loop: IOLoop<MonotonicClock> { ProcessLoop.shared }

    private init(captured: Captured) { self.captured = captured }

    /// Starts pumping `spawned`'s pipes into `captured`.
    static func start(_ spawned: Spawned, into captured: Captured) -> Pump {
        let pump = Pump(captured: captured)
        pump.state.withLock { state in
            state.reads = [spawned.output.map { ($0, false) }, spawned.error.map { ($0, true) }].compactMap { $0 }.map {
                Watched(descriptor: $0.0, isError: $0.1)
            }
            if let (descriptor, bytes) = spawned.inputBytes {
                if bytes.isEmpty {
                    try? descriptor.close()
                } else {
                    state.writer = Watched(descriptor: descriptor, isError: false)
                    state.pending = bytes[...]
                }
            }
        }
        // Registered from the loop's thread, so no handler runs before its registration is kept.
        let handed = pump.loop.execute { pump.register() }
        if !handed { pump.giveUp() }
        return pump
    }

    /// Awaits the end of every captured output (and of the input's bytes).
    func wait() async -> Bool? { await ended.wait() }

    private func register() {
        let (reads, writer) = state.withLock { ($0.reads, $0.writer) }
        for read in reads {
            let registration = try? loop.register(
                read.descriptor, for: .readable, handler: { [self] _ in readReady(read.descriptor) },
                onError: { [self] _ in end(read.descriptor) })
            guard let registration else {
                end(read.descriptor)
                continue
            }
            state.withLock { state in
                if let index = state.reads.firstIndex(where: { $0.descriptor == read.descriptor }) {
                    state.reads[index].registration = registration
                }
            }
        }
        if let writer {
            let registration = try? loop.register(
                writer.descriptor, for: .writable, handler: { [self] _ in writeReady() }, onError: { [self] _ in endInput() })
            if let registration {
                try? writer.descriptor.setNonBlocking()
                state.withLock { $0.writer?.registration = registration }
            } else {
                endInput()
            }
        }
        finishIfDone()
    }

    /// On the loop's thread: reads what `descriptor` has.
    private func readReady(_ descriptor: FileDescriptor) {
        let read = state.withLock { state -> (count: Int, chunk: [UInt8], isError: Bool)? in
            guard let watched = state.reads.first(where: { $0.descriptor == descriptor }) else { return nil }
            let count: Int
            do throws(Errno) {
                count = try descriptor.read(into: &state.buffer)
            } catch {
                if error == .wouldBlock { return (-1, [], watched.isError) }
                count = 0
            }
            return (count, count > 0 ? Array(state.buffer[..<count]) : [], watched.isError)
        }
        guard let read else { return }
        if read.count > 0 {
            captured.state.withLock { state in
                if read.isError { state.err += read.chunk } else { state.out += read.chunk }
                state.transcript += (read.isError ? "stderr: " : "") + String(decoding: read.chunk, as: UTF8.self)
            }
        } else if read.count == 0 {
            end(descriptor)
        }
    }

    /// On the loop's thread: writes what the pipe takes of the input's bytes.
    private func writeReady() {
        let done = state.withLock { state -> Bool in
            guard let writer = state.writer else { return false }
            do throws(Errno) {
                state.pending = state.pending.dropFirst(try writer.descriptor.write(state.pending))
                return state.pending.isEmpty
            } catch {
                return error != .wouldBlock
            }
        }
        if done { endInput() }
    }

    /// An output has reached its end: no longer watched, closed.
    private func end(_ descriptor: FileDescriptor) {
        let watched = state.withLock { state -> Watched? in
            guard let index = state.reads.firstIndex(where: { $0.descriptor == descriptor }) else { return nil }
            return state.reads.remove(at: index)
        }
        guard let watched else { return }
        if let registration = watched.registration { loop.deregister(registration) }
        try? watched.descriptor.close()
        finishIfDone()
    }

    /// The input's bytes are written (or cannot be): no longer watched, closed.
    private func endInput() {
        let writer = state.withLock { state -> Watched? in
            defer { state.writer = nil }
            return state.writer
        }
        guard let writer else { return }
        if let registration = writer.registration { loop.deregister(registration) }
        try? writer.descriptor.close()
        finishIfDone()
    }

    private func finishIfDone() {
        guard state.withLock({ $0.reads.isEmpty && $0.writer == nil }) else { return }
        captured.state.withLock { $0.closed = true }
        ended.finish(true)
    }

    /// The loop is gone (never, for the process's): nothing is read; every end is closed.
    private func giveUp() {
        let (reads, writer) = state.withLock { state in
            defer {
                state.reads = []
                state.writer = nil
            }
            return (state.reads, state.writer)
        }
        for watched in reads + [writer].compactMap({ $0 }) { try? watched.descriptor.close() }
        finishIfDone()
    }
}
