import Synchronization
public import TagFixCore

/// The fixes a source delivered during a window, for an average (enroll).
public struct FixWindow: Sendable {
    /// The fixes that arrived in the window, in order.
    public var fixes: [Fix]
    /// Why a source that never connected cannot be reached (gpsd is not running there), when it
    /// said so before any fix.
    public var unreachable: String?

    /// Collects the fixes `source` delivers during `window` from now on `clock`.
    ///
    /// A fix counts by when it arrived (its time on the session's axis, stamped by the device's
    /// own thread), not by when this task got round to it: on a loaded machine (a Pi, a parallel
    /// test run) the cooperative pool may be busy for seconds, and the fixes that arrived in the
    /// window wait in the stream's buffer. The collection ends at the first fix that arrived
    /// after the window, or when the source ends, or `grace` after the window when the source
    /// has gone silent; or, as soon as it says so, when a source that never connected cannot be
    /// reached.
    public static func collect<C: Clock>(
        from source: any FixSource, for window: Duration, grace: Duration = .seconds(10), clock: C
    ) async -> FixWindow where C.Instant == Timestamp, C.Duration == Duration {
        let end = clock.now.advanced(by: window)
        let collected = Mutex(FixWindow(fixes: [], unreachable: nil))
        _ = await race(deadline: end.advanced(by: grace), clock: clock) { () async -> Void in
            var connected = false
            for await event in source.events() {
                switch event {
                case .fix(let fix):
                    guard fix.time <= end else { return }
                    collected.withLock { $0.fixes.append(fix) }
                case .connected: connected = true
                case .unavailable(let why) where !connected && collected.withLock({ $0.fixes.isEmpty }):
                    collected.withLock { $0.unreachable = why }
                    return
                default: break
                }
            }
        }
        return collected.withLock { $0 }
    }
}
