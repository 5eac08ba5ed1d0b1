internal import CSystem
import Glibc
import Synchronization

/// What a descriptor is watched for (`.readable`, `.writable`), or what it is ready for when its
/// handler is called: also `.hangUp` (the peer has gone) and `.error`, which epoll reports
/// whatever the interest.
public struct IOEvents: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bytes (or the end of the file) to read (`EPOLLIN`).
    public static var readable: IOEvents { IOEvents(rawValue: 1 << 0) }
    /// Room to write (`EPOLLOUT`).
    public static var writable: IOEvents { IOEvents(rawValue: 1 << 1) }
    /// The peer has hung up (`EPOLLHUP`).
    public static var hangUp: IOEvents { IOEvents(rawValue: 1 << 2) }
    /// An error is pending on the descriptor (`EPOLLERR`).
    public static var error: IOEvents { IOEvents(rawValue: 1 << 3) }
}

/// A descriptor registered with an `IOLoop`: what `modify` and `deregister` take.
public struct IORegistration: Hashable, Sendable {
    /// The descriptor watched.
    public let descriptor: FileDescriptor
    /// The loop's name for it (epoll's data): never reused by the loop.
    let token: UInt64
}

/// A timer scheduled on an `IOLoop`: what `cancel` takes.
public struct IOTimer: Hashable, Sendable {
    let id: UInt64
}

/// Why an `IOLoop` refused a registration.
public enum IOLoopError: Error, Hashable, CustomStringConvertible {
    /// The loop is closing or has closed: nothing registers with it again. Make a new loop.
    case closed
    /// The registration is no longer on the loop: it was deregistered, or its handler threw.
    /// Register the descriptor again.
    case notRegistered(FileDescriptor)
    /// epoll refused the descriptor (`epoll_ctl(2)`): `.badFileDescriptor` (it is not open),
    /// `.notPermitted` (a regular file or a directory, which epoll cannot watch: read it
    /// directly), `.fileExists` (it is registered already: modify that registration).
    case refused(FileDescriptor, Errno)

    public var description: String {
        switch self {
        case .closed: "the I/O loop has closed: nothing registers with it again (make a new loop)"
        case .notRegistered(let fd): "descriptor \(fd.rawValue) is no longer on the I/O loop: register it again"
        case .refused(let fd, let errno): "epoll refused descriptor \(fd.rawValue): \(errno)"
        }
    }
}

/// One thread waiting in `epoll_wait(2)` for every descriptor registered with it, and running
/// their handlers, its timers and the closures handed to `execute` — all on that thread, one at
/// a time, so a component's state that only the loop touches needs no lock.
///
/// - Descriptors: `register(_:for:handler:onError:)` watches a descriptor (level-triggered) for
///   reading and/or writing; its handler is called on the loop's thread with what it is ready
///   for, until `deregister`. The loop never closes a descriptor: its owner deregisters it, then
///   closes it (a descriptor closed while registered leaves epoll, and its registration is
///   forgotten when the number is registered again or the registration is deregistered).
/// - Timers: `schedule(at:_:)` runs a closure on the loop's thread once `clock.now` has reached
///   its deadline, in deadline order (ties in scheduling order). The loop reads its clock only
///   to decide what is due and how long to wait: with a test's clock, advance it and `wake()`
///   the loop — no real time needs to pass.
/// - `execute(_:)` runs a closure on the loop's thread, in the order handed; safe from any
///   thread.
/// - `close()` stops the loop: closures handed before it run, handlers, timers and later
///   closures never do, and it returns once the thread has ended (its epoll descriptor and
///   eventfd closed, every handler released). Nothing stops in `deinit`: a loop never closed
///   keeps its thread.
///
/// The thread is the loop's own (blocking `epoll_wait` never runs on the cooperative pool); an
/// eventfd wakes it when a closure, a timer or `close` arrives from another thread.
public final class IOLoop<C: Clock>: Sendable where C.Duration == Duration {
    /// The loop's name (its thread's, shortened to 15 bytes).
    public let name: String
    /// The clock its timers' deadlines are read on.
    public let clock: C

    private struct Watch {
        var descriptor: FileDescriptor
        var interest: IOEvents
        var handler: @Sendable (IOEvents) throws -> Void
        var onError: @Sendable (any Error) -> Void
    }

    private struct Timer {
        var id: UInt64
        var deadline: C.Instant
        var body: @Sendable () -> Void
    }

    private enum Phase { case running, closing, closed }

    private struct State {
        /// By token, and the token each watched descriptor's number has now.
        var watches: [UInt64: Watch] = [:]
        var tokens: [Int32: UInt64] = [:]
        /// Sorted by deadline, then by id (the order scheduled).
        var timers: [Timer] = []
        var tasks: [@Sendable () -> Void] = []
        /// Tokens and timer ids; token 0 is the wake-up eventfd's.
        var nextID: UInt64 = 1
        var phase = Phase.running
        var whenClosed: [@Sendable () -> Void] = []
        var thread: pthread_t?
    }

    private static var wakeToken: UInt64 { 0 }
    /// Ready descriptors taken from one `epoll_wait`.
    private static var batch: Int32 { 64 }

    private let epoll: FileDescriptor
    private let wakeUp: EventFD
    private let state = Mutex(State())

    /// Starts a loop on a thread of its own.
    /// - Parameters:
    ///   - name: the thread's name (`top -H`, a debugger).
    ///   - clock: what timers' deadlines are read on: the real clock, or a test's.
    /// - Throws: `Errno` when the epoll descriptor, the eventfd or the thread cannot be made
    ///   (`.tooManyOpenFiles`, `.resourceTemporarilyUnavailable`).
    public init(name: String, clock: C) throws(Errno) {
        self.name = name
        self.clock = clock
        let epoll = FileDescriptor(rawValue: try valueOrErrno { csystem_epoll_create() })
        let wakeUp: EventFD
        do throws(Errno) {
            wakeUp = try EventFD()
            try nothingOrErrno { csystem_epoll_add(epoll.rawValue, wakeUp.descriptor.rawValue, true, false, Self.wakeToken) }
        } catch {
            _ = try? epoll.close()
            throw error
        }
        self.epoll = epoll
        self.wakeUp = wakeUp
        do throws(Errno) {
            try SystemThread.start(name: name) { [self] in run() }
        } catch {
            _ = try? wakeUp.close()
            _ = try? epoll.close()
            throw error
        }
    }

    /// Whether the caller runs on the loop's thread (in a handler, a timer or an `execute`d
    /// closure).
    public var inLoopThread: Bool {
        state.withLock { state in state.thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    // MARK: - Descriptors

    /// Watches `descriptor` (level-triggered: called again while it stays ready) and calls
    /// `handler` on the loop's thread with what it is ready for.
    ///
    /// A handler that throws is deregistered, and its error handed to `onError` (on the loop's
    /// thread); the descriptor stays open.
    /// - Parameter interest: `.readable`, `.writable`, both, or neither (then only hang-ups and
    ///   errors are reported).
    /// - Throws: `.closed` once `close` has been called; `.refused` when epoll will not watch
    ///   the descriptor (`epoll_ctl(EPOLL_CTL_ADD)`).
    public func register(
        _ descriptor: FileDescriptor, for interest: IOEvents, handler: @escaping @Sendable (IOEvents) throws -> Void,
        onError: @escaping @Sendable (any Error) -> Void = { _ in }
    ) throws(IOLoopError) -> IORegistration {
        let (registration, stale) = try state.withLock { state throws(IOLoopError) -> (IORegistration, Watch?) in
            guard state.phase == .running else { throw .closed }
            let token = state.nextID
            do throws(Errno) {
                try nothingOrErrno {
                    csystem_epoll_add(
                        epoll.rawValue, descriptor.rawValue, interest.contains(.readable), interest.contains(.writable), token)
                }
            } catch {
                throw .refused(descriptor, error)
            }
            state.nextID += 1
            // A registration the number still had was of a descriptor closed while registered
            // (epoll let the number in again): it is gone for good.
            let stale = state.tokens[descriptor.rawValue].flatMap { state.watches.removeValue(forKey: $0) }
            state.tokens[descriptor.rawValue] = token
            state.watches[token] = Watch(descriptor: descriptor, interest: interest, handler: handler, onError: onError)
            return (IORegistration(descriptor: descriptor, token: token), stale)
        }
        _ = stale  // released outside the lock: its handler may hold the last reference to anything
        return registration
    }

    /// Changes what a registered descriptor is watched for (`epoll_ctl(EPOLL_CTL_MOD)`).
    /// - Throws: `.closed`, `.notRegistered` (deregistered, or its handler threw), `.refused`.
    public func modify(_ registration: IORegistration, interest: IOEvents) throws(IOLoopError) {
        try state.withLock { state throws(IOLoopError) in
            guard state.phase == .running else { throw .closed }
            guard state.watches[registration.token] != nil else { throw .notRegistered(registration.descriptor) }
            do throws(Errno) {
                try nothingOrErrno {
                    csystem_epoll_modify(
                        epoll.rawValue, registration.descriptor.rawValue, interest.contains(.readable), interest.contains(.writable),
                        registration.token)
                }
            } catch {
                throw .refused(registration.descriptor, error)
            }
            state.watches[registration.token]?.interest = interest
        }
    }

    /// Stops watching the descriptor (`epoll_ctl(EPOLL_CTL_DEL)`); it stays open. From the
    /// loop's thread, its handler is not called again; from another thread, a call already under
    /// way may finish, none starts after it. Deregistering twice, after the handler threw, or
    /// after `close` does nothing.
    public func deregister(_ registration: IORegistration) {
        let removed = state.withLock { state -> Watch? in
            guard state.phase != .closed, let watch = state.watches.removeValue(forKey: registration.token) else { return nil }
            if state.tokens[registration.descriptor.rawValue] == registration.token {
                state.tokens[registration.descriptor.rawValue] = nil
                // Fails only for a descriptor already closed (epoll dropped it then).
                _ = try? nothingOrErrno { csystem_epoll_remove(epoll.rawValue, registration.descriptor.rawValue) }
            }
            return watch
        }
        _ = removed  // released outside the lock
    }

    // MARK: - Timers

    /// Runs `body` on the loop's thread once `clock.now` has reached `deadline` (at once, on the
    /// loop's next turn, when it has already). Timers run in deadline order, ties in the order
    /// scheduled; a loop that has closed never runs it.
    @discardableResult
    public func schedule(at deadline: C.Instant, _ body: @escaping @Sendable () -> Void) -> IOTimer {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            guard state.phase == .running else { return IOTimer(id: id) }
            var low = 0
            var high = state.timers.count
            while low < high {
                let middle = (low + high) / 2
                if state.timers[middle].deadline <= deadline { low = middle + 1 } else { high = middle }
            }
            state.timers.insert(Timer(id: id, deadline: deadline, body: body), at: low)
            // An earlier deadline than the loop waits for: it must wait less.
            if low == 0 && !Self.isLoopThread(state) { wakeUp.signal() }
            return IOTimer(id: id)
        }
    }

    /// Runs `body` on the loop's thread `delay` from now on the loop's clock.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping @Sendable () -> Void) -> IOTimer {
        schedule(at: clock.now.advanced(by: delay), body)
    }

    /// Cancels a timer. Returns whether it had yet to run (false: it ran, is running, or was
    /// cancelled before).
    @discardableResult
    public func cancel(_ timer: IOTimer) -> Bool {
        let removed = state.withLock { state -> Timer? in
            guard let index = state.timers.firstIndex(where: { $0.id == timer.id }) else { return nil }
            return state.timers.remove(at: index)
        }
        return removed != nil
    }

    /// Wakes the loop to look at its clock again: what a test calls after advancing its clock.
    public func wake() {
        state.withLock { state in
            if state.phase != .closed { wakeUp.signal() }
        }
    }

    // MARK: - Closures

    /// Runs `body` on the loop's thread, after what was handed before it. Safe from any thread.
    /// - Returns: false when the loop is closing or has closed: `body` never runs.
    @discardableResult
    public func execute(_ body: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard state.phase == .running else { return false }
            state.tasks.append(body)
            // More than one waiting: the first one's wake-up is still pending.
            if state.tasks.count == 1 && !Self.isLoopThread(state) { wakeUp.signal() }
            return true
        }
    }

    // MARK: - Closing

    /// Stops the loop and returns once its thread has ended: closures `execute`d before this call
    /// have run; no handler or timer runs again; every handler, timer and closure is released;
    /// the epoll descriptor and the eventfd are closed (registered descriptors are not: their
    /// owners close them). Calling it again, from anywhere, waits for the same end.
    public func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            close { continuation.resume() }
        }
    }

    /// `close()` for synchronous code: starts stopping the loop and calls `then` once its thread
    /// has ended (on that thread, or at once when it has already ended).
    public func close(then done: @escaping @Sendable () -> Void) {
        let ended = state.withLock { state -> Bool in
            switch state.phase {
            case .closed:
                return true
            case .running, .closing:
                if state.phase == .running {
                    state.phase = .closing
                    wakeUp.signal()
                }
                state.whenClosed.append(done)
                return false
            }
        }
        if ended { done() }
    }

    // MARK: - The loop's thread

    private static func isLoopThread(_ state: borrowing State) -> Bool {
        state.thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
    }

    private func run() {
        state.withLock { $0.thread = pthread_self() }
        var ready = [csystem_epoll_ready](repeating: csystem_epoll_ready(), count: Int(Self.batch))
        while true {
            let (tasks, closing) = state.withLock { state in
                defer { state.tasks = [] }
                return (state.tasks, state.phase == .closing)
            }
            for task in tasks { task() }
            // `execute` refuses once closing: what ran above was everything handed before `close`.
            if closing { break }
            runDueTimers()
            let timeout = state.withLock { state -> Int32 in
                if !state.tasks.isEmpty || state.phase != .running { return 0 }
                guard let first = state.timers.first else { return -1 }
                return Self.milliseconds(clock.now.duration(to: first.deadline))
            }
            let count: Int32
            do throws(Errno) {
                // Not retried on EINTR: the timeout is worked out afresh from the clock instead.
                count = try valueOrErrno(retryOnInterrupt: false) {
                    ready.withUnsafeMutableBufferPointer { csystem_epoll_wait(epoll.rawValue, $0.baseAddress!, Self.batch, timeout) }
                }
            } catch .interrupted {
                continue
            } catch {
                preconditionFailure("epoll_wait on the I/O loop's own descriptor failed: \(error)")
            }
            for event in ready.prefix(Int(count)) {
                if event.token == Self.wakeToken {
                    wakeUp.drain()
                } else {
                    dispatch(event)
                }
            }
        }
        finish()
    }

    /// Runs the timers due now, one at a time (a timer may cancel or schedule another).
    private func runDueTimers() {
        let now = clock.now
        while let timer = state.withLock({ state -> Timer? in
            guard let first = state.timers.first, first.deadline <= now else { return nil }
            return state.timers.removeFirst()
        }) {
            timer.body()
        }
    }

    /// Calls a ready descriptor's handler, unless it was deregistered meanwhile (by a handler
    /// earlier in the same batch, say).
    private func dispatch(_ event: csystem_epoll_ready) {
        guard let watch = state.withLock({ $0.watches[event.token] }) else { return }
        var events: IOEvents = []
        if event.readable { events.insert(.readable) }
        if event.writable { events.insert(.writable) }
        if event.hangUp { events.insert(.hangUp) }
        if event.error { events.insert(.error) }
        do {
            try watch.handler(events)
        } catch {
            deregister(IORegistration(descriptor: watch.descriptor, token: event.token))
            watch.onError(error)
        }
    }

    /// The loop's end: everything it holds released, its descriptors closed (under the lock, so
    /// no call on another thread can use their numbers after), then those waiting in `close`
    /// told.
    private func finish() {
        var waiters: [@Sendable () -> Void] = []
        do {
            let released = state.withLock { state in
                state.phase = .closed
                defer {
                    state.watches = [:]
                    state.tokens = [:]
                    state.timers = []
                    state.tasks = []
                    state.whenClosed = []
                }
                _ = try? wakeUp.close()
                _ = try? epoll.close()
                return (state.watches, state.timers, state.tasks, state.whenClosed)
            }
            waiters = released.3
        }
        for waiter in waiters { waiter() }
    }

    /// An epoll timeout for a wait of `duration`: whole milliseconds, rounded up (a timer is never
    /// looked at before its deadline), 0 for one already due.
    static func milliseconds(_ duration: Duration) -> Int32 {
        guard duration > .zero else { return 0 }
        let (seconds, attoseconds) = duration.components
        guard seconds < Int64(Int32.max / 1000) else { return Int32.max }
        let attosecondsPerMillisecond: Int64 = 1_000_000_000_000_000
        return Int32(seconds * 1000 + (attoseconds + attosecondsPerMillisecond - 1) / attosecondsPerMillisecond)
    }
}

extension IOLoop where C == ContinuousClock {
    /// Starts a loop whose timers run on the continuous clock.
    public convenience init(name: String) throws(Errno) {
        try self.init(name: name, clock: ContinuousClock())
    }
}
