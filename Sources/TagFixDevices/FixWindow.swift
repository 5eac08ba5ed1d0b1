import Synchronization
public import TagFixCore

/// The fixes a source delivered during a window, for an average (enroll).
public struct FixWindow: Sendable {
    /// The fixes that arrived in the window, in order.
    public var fixes: [Fix]
    /// Why a source that never connected cannot be reached (gpsd is not running there), when it
    /// said so before any fix.
    public var unreachable: String?

    /// Collects the fixes `source` delivers during `window`, from its first fix on, on `clock`.
    ///
    /// The window opens at the first fix's time, not at the call: a gpsd that takes a second to
    /// answer WATCH (a Pi starting up, a loaded machine) would otherwise eat into the averaging,
    /// and a 2 s window at 5 Hz gave 4 fixes instead of 10. A fix counts by when it arrived (its
    /// time on the session's axis, stamped by the device's own thread), not by when this task got
    /// round to it: on a loaded machine the cooperative pool may be busy for seconds, and the
    /// fixes that arrived in the window wait in the stream's buffer. The collection ends at the
    /// first fix that arrived after the window, or when the source ends, or `grace` after the
    /// window when the source has gone silent (with no fix at all, `window` + `grace` after the
    /// call); or, as soon as it says so, when a source that never connected cannot be reached; or
    /// at the first fix for which `enough` says true (a stopping rule: enroll stops once more
    /// fixes no longer help).
    public static func collect<C: Clock>(
        from source: any FixSource, for window: Duration, grace: Duration = .seconds(10), clock: C,
        enough: (@Sendable (Fix) -> Bool)? = nil
    ) async -> FixWindow where C.Instant == Timestamp, C.Duration == Duration {
        let collected = Mutex(FixWindow(fixes: [], unreachable: nil))
        // Moved on by the first fix: the window's end plus the grace.
        let deadline = Mutex(clock.now.advanced(by: window + grace))
        let events = { @Sendable () async -> Void in
            var connected = false
            var end: Timestamp?
            for await event in source.events() {
                switch event {
                case .fix(let fix):
                    if end == nil {
                        end = fix.time.advanced(by: window)
                        deadline.withLock { $0 = max($0, fix.time.advanced(by: window + grace)) }
                    }
                    guard let end, fix.time <= end else { return }
                    collected.withLock { $0.fixes.append(fix) }
                    if let enough, enough(fix) { return }
                case .refined(let fix):
                    // The same epoch, more complete: it replaces the fix of its time, never adds one.
                    collected.withLock { window in
                        if let index = window.fixes.lastIndex(where: { $0.time == fix.time }) { window.fixes[index] = fix }
                    }
                case .connected: connected = true
                case .unavailable(let why) where !connected && collected.withLock({ $0.fixes.isEmpty }):
                    collected.withLock { $0.unreachable = why }
                    return
                default: break
                }
            }
        }
        let timer = { @Sendable () async -> Void in
            // Sleeps to the deadline, again if the first fix moved it meanwhile.
            var until = deadline.withLock { $0 }
            while (try? await clock.sleep(until: until, tolerance: nil)) != nil {
                let now = deadline.withLock { $0 }
                if now <= until { return }
                until = now
            }
        }
        _ = await race(deadline: nil, clock: clock, first: [events, timer])
        return collected.withLock { $0 }
    }
}
