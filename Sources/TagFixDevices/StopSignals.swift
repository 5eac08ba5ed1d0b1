internal import CProcess
import Dispatch
import Foundation
import Synchronization
import TagFixSystem

/// SIGINT and SIGTERM (Ctrl-C, systemd's stop, `kill`) turned into a normal end: while a
/// `StopSignals` is installed, those signals no longer end the process; the first one wakes
/// `wait()`, and the command stops its devices, finishes its output and exits 0. Every
/// long-running command uses this one piece.
///
/// How: a C handler writes the signal's number to a pipe (the self-pipe; the only thing a
/// handler may safely do) and a dispatch read source on the other end resumes the waiters.
/// Dispatch's signal sources are not used: on Linux they read a signalfd, which only sees a
/// signal that every thread blocks, and the main thread of an async `main` waits in `sigsuspend`
/// with an empty mask, so the signal went to it instead, where `SIG_IGN` dropped it (the
/// emulators then ignored Ctrl-C and SIGTERM until `kill -9`). A handler sees the signal
/// whichever thread takes it, and, unlike `SIG_IGN`, is not inherited by programs the process
/// starts. Several may be installed at once (each gets every signal it asks for); `cancel()` (or
/// deinit) gives a signal back its earlier disposition once no `StopSignals` wants it.
public final class StopSignals: Sendable {
    /// What a long-running command stops on.
    public static let standard: [Int32] = [SIGINT, SIGTERM]

    /// The first signal caught, and the tasks waiting for one.
    private let inbox = OneShot<Int32>()
    private let source: Mutex<(any DispatchSourceRead)?>
    /// The pipe and the handler's slot, released by `cancel()`.
    private let pipe: Mutex<(read: FileDescriptor, write: FileDescriptor, slot: Int32)?>

    /// Catches `signals` from now until `cancel()`. If the pipe cannot be had (no descriptors
    /// left, or 256 `StopSignals` already installed), the signals keep their earlier action.
    /// An empty list catches nothing: `wait()` then returns only on `cancel()`.
    /// - Parameter onSignal: called with each signal's number as it arrives, before the waiters
    ///   are woken, on the signals' own dispatch queue, never the cooperative pool: for what must
    ///   happen on a signal even while every thread of the pool is busy (the benchmark harness
    ///   stops its children so).
    public init(_ signals: [Int32] = StopSignals.standard, onSignal: (@Sendable (Int32) -> Void)? = nil) {
        guard let (reader, writer) = try? FileDescriptor.pipe() else {
            source = Mutex(nil)
            pipe = Mutex(nil)
            return
        }
        // Non-blocking at both ends: the handler's write never waits, and the reader drains.
        let nonBlocking = (try? reader.setNonBlocking()) != nil && (try? writer.setNonBlocking()) != nil
        let slot = nonBlocking ? cprocess_stop_signals_install(signals, Int32(signals.count), writer.rawValue) : -1
        guard slot >= 0 else {
            _ = try? reader.close()
            _ = try? writer.close()
            source = Mutex(nil)
            pipe = Mutex(nil)
            return
        }
        let readSource = DispatchSource.makeReadSource(fileDescriptor: reader.rawValue, queue: DispatchQueue(label: "tagfix.stop-signals"))
        readSource.setEventHandler { [inbox] in
            var bytes = [UInt8](repeating: 0, count: 16)
            while true {
                let count = (try? reader.read(into: &bytes)) ?? 0
                guard count > 0 else { break }
                for byte in bytes.prefix(count) {
                    onSignal?(Int32(byte))
                    inbox.finish(Int32(byte))
                }
            }
        }
        // Both ends are closed once dispatch has let go of the read end, never before. Closed at
        // once, a StopSignals made next could get the same number for its pipe while dispatch
        // still watched the old one, and its signals were never read (a test that caught SIGUSR2
        // twice in a row hung); the write end closed first hung up the read end under dispatch
        // while it was being cancelled, and dispatch's event loop crashed (once, beside two CPU
        // hogs).
        readSource.setCancelHandler {
            _ = try? reader.close()
            _ = try? writer.close()
        }
        readSource.resume()
        source = Mutex(readSource)
        pipe = Mutex((reader, writer, slot))
    }

    /// The first signal received, if any.
    public var received: Int32? { inbox.value }

    /// Whether the signals are caught (`false`: no pipe or no slot could be had, and the signals
    /// keep their earlier action).
    public var isInstalled: Bool { pipe.withLock { $0 != nil } }

    /// Suspends until one of the signals arrives (at once if one already has) and returns its
    /// number; `nil` if the task is cancelled or `cancel()` is called first.
    public func wait() async -> Int32? {
        await inbox.wait()
    }

    /// Runs `body` until it returns or a signal arrives; a signal cancels `body`, which then
    /// ends as it does when cancelled (a session gives every pending scan its verdict), and its
    /// result is returned either way.
    public func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
        let task = Task { await body() }
        let watcher = Task { if await self.wait() != nil { task.cancel() } }
        defer { watcher.cancel() }
        return await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Calls `body` for each of `signals` that arrives (SIGHUP: read the configuration again),
    /// one call at a time, until the returned task is cancelled. The signals are caught from this
    /// call on and stay caught between one and the next: a new `StopSignals` is installed before
    /// the one that woke lets go.
    public static func each(_ signals: [Int32], _ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let first = StopSignals(signals)
        return Task {
            var caught = first
            while await caught.wait() != nil {
                let next = StopSignals(signals)
                caught.cancel()
                caught = next
                await body()
            }
            caught.cancel()
        }
    }

    /// Restores the signals' earlier dispositions, stops watching the pipe and closes it, and
    /// wakes any waiter with `nil`. Idempotent.
    public func cancel() {
        let taken = pipe.withLock { value in
            defer { value = nil }
            return value
        }
        guard let fds = taken else { return }
        // No handler writes once restored; the pipe is closed by the source's cancel handler.
        cprocess_stop_signals_restore(fds.slot)
        source.withLock { value in
            value?.cancel()
            value = nil
        }
        inbox.close()
    }

    deinit { cancel() }
}
