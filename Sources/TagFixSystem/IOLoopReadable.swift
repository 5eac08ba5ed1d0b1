import Synchronization

extension IOLoop {
    /// Waits, without holding a thread, until `descriptor` is readable (or hung up, or in
    /// error) or `timeout` has passed on the loop's clock (`nil`: no limit). The descriptor is
    /// watched for this wait only and stays open; the caller closes it.
    ///
    /// Not cancellable: a teardown that awaits an exit must see it through.
    /// - Returns: true once it is readable, false when the time ran out first.
    /// - Throws: `.closed` once the loop has closed, `.refused` when epoll will not watch it.
    public func readable(_ descriptor: FileDescriptor, within timeout: Duration?) async throws(IOLoopError) -> Bool {
        let wait = ReadableWait()
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Bool, IOLoopError>, Never>) in
            wait.state.withLock { $0.continuation = continuation }
            let registration: IORegistration
            do throws(IOLoopError) {
                registration = try register(
                    descriptor, for: .readable, handler: { [self] _ in wait.finish(.success(true), on: self) },
                    onError: { [self] _ in wait.finish(.success(true), on: self) })
            } catch {
                wait.finish(.failure(error), on: self)
                return
            }
            let timer = timeout.map { timeout in schedule(after: timeout) { [self] in wait.finish(.success(false), on: self) } }
            // Finished meanwhile (readable at once): what it could not undo yet is undone here.
            let finished = wait.state.withLock { state in
                guard state.continuation != nil else { return true }
                state.registration = registration
                state.timer = timer
                return false
            }
            if finished {
                deregister(registration)
                if let timer { cancel(timer) }
            }
        }
        return try result.get()
    }
}

/// One `readable(_:within:)`: whichever of the descriptor, the timer or a failure comes first
/// resumes it, once, and undoes the other.
private final class ReadableWait: Sendable {
    struct State {
        var continuation: CheckedContinuation<Result<Bool, IOLoopError>, Never>?
        var registration: IORegistration?
        var timer: IOTimer?
    }
    let state = Mutex(State())

    func finish<C: Clock>(_ result: Result<Bool, IOLoopError>, on loop: IOLoop<C>) {
        let taken = state.withLock { state -> (CheckedContinuation<Result<Bool, IOLoopError>, Never>, IORegistration?, IOTimer?)? in
            guard let continuation = state.continuation else { return nil }
            defer { state = State() }
            return (continuation, state.registration, state.timer)
        }
        guard let (continuation, registration, timer) = taken else { return }
        if let registration { loop.deregister(registration) }
        if let timer { loop.cancel(timer) }
        continuation.resume(returning: result)
    }
}
