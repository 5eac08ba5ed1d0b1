public import TagFixCore

/// What a running verification reports, in order.
public enum VerifierEvent: Sendable {
    case verdict(Verdict)
    case reader(ReaderEvent)
    case gps(FixEvent)
    /// The system clock is off GPS time by more than `TimeReference.agreement`: said once, with
    /// the fix that showed it. Verdicts from then on say which clock stamped them.
    case clockOffset(TimeReference)
}

/// Runs `VerificationSession` in real time against a reader and a fix source, both consumed
/// concurrently, waking on the injected clock for fix timeouts.
///
/// `C` is the session's axis: `MonotonicClock` in the field, `ManualClock` (TagFixTesting) in
/// tests, which advance it instead of sleeping. Scans are stamped with it, fixes arrive mapped
/// onto it (`Fix.time`), and every wait is a sleep on it, so no decision depends on the wall
/// clock. Only a verdict's UTC label does: each verdict leaves with its scan time in UTC by the
/// clock `TimeReference` chooses (the system clock, or GPS time when the system clock is not
/// synchronised or disagrees with GPS), and says which in `Verdict.timeStamp`.
public struct LiveVerifier<C: Clock>: Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public var verifier: Verifier
    public let clock: C
    /// The system clock to weigh against GPS time; `nil`: the axis's labels are UTC (a test
    /// clock, a scenario).
    public let systemClock: (any SystemClock)?

    public init(verifier: Verifier, clock: C, systemClock: (any SystemClock)? = nil) {
        self.verifier = verifier
        self.clock = clock
        self.systemClock = systemClock
    }

    private enum Input: Sendable {
        case reader(ReaderEvent)
        case readerEnded
        case gps(FixEvent)
        case gpsEnded
        case deadline(Timestamp)
    }

    /// Verifies every scan the reader delivers until the reader's stream ends (every scan still
    /// waiting then gets its verdict) or the calling task is cancelled.
    ///
    /// - Parameter onEvent: called for each verdict and device event, one at a time, in order.
    public func run(
        reader: some TagReader, gps: some FixSource,
        onEvent: @Sendable (VerifierEvent) async -> Void
    ) async {
        let (inputs, input) = AsyncStream<Input>.makeStream()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in reader.events() { input.yield(.reader(event)) }
                input.yield(.readerEnded)
            }
            group.addTask {
                for await event in gps.events() { input.yield(.gps(event)) }
                input.yield(.gpsEnded)
            }

            var session = VerificationSession(verifier: verifier)
            var timer: Task<Void, Never>?
            var timerDeadline: Timestamp?
            var readerEnded = false
            var watch = ClockWatch(systemClock: systemClock)

            func emit(_ verdicts: [Verdict]) async {
                for verdict in verdicts { await onEvent(.verdict(watch.stamp(verdict, axisNow: clock.now))) }
            }

            for await next in inputs {
                switch next {
                case .reader(let event):
                    if case .tagPresent(let scan) = event {
                        await onEvent(.reader(event))
                        await emit(session.receive(scan, now: clock.now))
                    } else {
                        await onEvent(.reader(event))
                    }
                case .readerEnded:
                    readerEnded = true
                case .gps(let event):
                    await onEvent(.gps(event))
                    switch event {
                    case .fix(let fix):
                        if let reference = watch.observe(fix, axisNow: clock.now) { await onEvent(.clockOffset(reference)) }
                        await emit(session.receive(fix))
                    case .refined(let fix):
                        await emit(session.refine(fix))
                    case .unavailable(let why): session.gpsUnavailable(why)
                    case .connected, .resumed: session.gpsUnavailable(nil)
                    default: break
                    }
                case .gpsEnded:
                    break
                case .deadline:
                    await emit(session.advance(to: clock.now))
                }
                if readerEnded, session.pendingCount == 0 { break }
                // One timer at a time, for the earliest deadline.
                let deadline = session.nextDeadline
                if deadline != timerDeadline {
                    timer?.cancel()
                    timerDeadline = deadline
                    timer = deadline.map { deadline in
                        Task { [clock] in
                            do {
                                try await clock.sleep(until: deadline, tolerance: nil)
                                input.yield(.deadline(deadline))
                            } catch {
                                // Cancelled: a newer deadline replaced this one.
                            }
                        }
                    }
                }
            }
            // Cancelled, or the reader ended: every scan still waiting gets its verdict now.
            await emit(session.finish())
            timer?.cancel()
            input.finish()
            group.cancelAll()
        }
    }
}
