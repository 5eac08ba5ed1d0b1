import Synchronization
public import TagFixCore
import TagFixDevices

/// What gpsd said when asked (`tagfix doctor`).
public enum GPSProbe: Sendable, Hashable {
    case notAsked
    /// No connection at all.
    case unreachable(endpoint: String, why: String)
    /// Connected, but no report within the wait: no receiver, or it is silent.
    case silent(endpoint: String)
    /// Reports, without a position.
    case noFix(endpoint: String, device: String?)
    case fix(endpoint: String, Fix)
}

extension GPSDEndpoint {
    /// Asks gpsd for reports for up to `wait` (beside `LibNFC.probe`, the reader's).
    public func probe(wait: Duration) async -> GPSProbe {
        let endpoint = self
        let clock = MonotonicClock()
        let source = GPSDFixSource(endpoint: endpoint, clock: clock)
        let name = endpoint.description
        let seen = ProbeState()
        // A fix or an unreachable gpsd decides at once; otherwise the wait ends it.
        let outcome = await race(deadline: clock.now.advanced(by: wait), clock: clock) { () async -> GPSProbe? in
            for await event in source.events() {
                switch event {
                case .connected: seen.state.withLock { $0.connected = true }
                case .unavailable(let why):
                    if !seen.state.withLock({ $0.connected }) {
                        return .unreachable(endpoint: name, why: GPSDEndpoint.reason(inNotAnswering: why))
                    }
                case .fix(let fix), .refined(let fix):
                    if fix.hasPosition { return .fix(endpoint: name, fix) }
                    seen.state.withLock { $0.noFix = fix }
                default: break
                }
            }
            return nil
        }
        let decided: GPSProbe? = if case .value(let probe) = outcome { probe } else { nil }
        if let decided { return decided }
        let state = seen.state.withLock { $0 }
        if let noFix = state.noFix { return .noFix(endpoint: name, device: noFix.device) }
        return state.connected ? .silent(endpoint: name) : .unreachable(endpoint: name, why: "no answer within the wait")
    }
}

/// What the gpsd probe has seen so far.
private final class ProbeState: Sendable {
    let state = Mutex<(connected: Bool, noFix: Fix?)>((false, nil))
}
