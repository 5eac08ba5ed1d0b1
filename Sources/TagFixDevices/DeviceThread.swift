import Foundation
import Synchronization
import TagFixCore

/// The thread a hardware device lives on: its blocking C calls run there, never on the
/// cooperative pool, and its events reach async code through an `AsyncStream`. Ending the stream
/// (the consumer stops or is cancelled) sets `isStopped`, which the device's loop checks, and runs
/// `onStop` (e.g. nfc_abort_command) to interrupt a blocking call.
public final class DeviceThread: Sendable {
    private let stopped = Mutex(false)

    public init() {}

    /// Whether the consumer has gone: the device loop should return.
    public var isStopped: Bool { stopped.withLock { $0 } }

    /// Starts `body` on a new thread named `name`; its events form the returned stream, which
    /// finishes when `body` returns.
    public func start<Event: Sendable>(
        name: String, onStop: @escaping @Sendable () -> Void = {},
        _ body: @escaping @Sendable (AsyncStream<Event>.Continuation) -> Void
    ) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream()
        let thread = Thread {
            body(continuation)
            continuation.finish()
        }
        thread.name = name
        continuation.onTermination = { [self] _ in
            stopped.withLock { $0 = true }
            onStop()
        }
        thread.start()
        return stream
    }

    /// Sleeps `duration` on the device thread, in short steps, returning early once stopped.
    public func pause(_ duration: Duration) {
        var remaining = duration
        while remaining > .zero, !isStopped {
            let step = min(remaining, .milliseconds(50))
            Thread.sleep(forTimeInterval: step.seconds)
            remaining -= step
        }
    }
}

/// Runs a blocking call (a child's exit, a daemon's start-up, a pipe read to its end) on a thread
/// of its own and waits for it without holding a thread of the cooperative pool. The pool has one
/// thread per core (two on a Pi): one `waitUntilExit()` on it stalls every task that shares it,
/// a verifier's fix stream among them.
public func offThePool<Value: Sendable, Failure: Error>(
    _ name: String = "blocking call", _ body: @escaping @Sendable () throws(Failure) -> Value
) async throws(Failure) -> Value {
    let result: Result<Value, Failure> = await withCheckedContinuation { continuation in
        let thread = Thread {
            do throws(Failure) {
                continuation.resume(returning: .success(try body()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        thread.name = name
        thread.start()
    }
    return try result.get()
}
