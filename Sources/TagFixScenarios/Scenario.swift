import Foundation
public import TagFixCore
public import TagFixDevices

/// A field session on a timeline: what the mock GPS reports and what the mock reader reads.
/// The file format is documented in docs/scenarios.md.
public struct Scenario: Sendable {
    public var name: String
    /// Time zero of the scenario; every `t` in the file is seconds after it.
    public var start: Timestamp
    public var readerID: String
    public var policy: VerificationPolicy
    /// A registry file named by the scenario, relative to the scenario's folder.
    public var registryPath: String?
    /// GPS events in time order.
    public var gps: [Scheduled<FixEvent>]
    /// Reader events in time order.
    public var reader: [Scheduled<ReaderEvent>]

    public init(
        name: String, start: Timestamp, readerID: String = "mock", policy: VerificationPolicy = VerificationPolicy(),
        registryPath: String? = nil, gps: [Scheduled<FixEvent>], reader: [Scheduled<ReaderEvent>]
    ) {
        self.name = name
        self.start = start
        self.readerID = readerID
        self.policy = policy
        self.registryPath = registryPath
        self.gps = gps
        self.reader = reader
    }

    /// The scans in the scenario.
    public var scans: [TagScan] {
        reader.compactMap {
            if case .tagPresent(let scan) = $0.event { return scan }
            return nil
        }
    }

    /// Mock devices that play this scenario on `clock`, shifted so that the scenario's start is
    /// `clock.now`'s value at `origin` (by default the scenario's own start).
    public func devices<C: Clock>(
        clock: C, origin: Timestamp? = nil
    ) -> (reader: MockTagReader<C>, gps: MockFixSource<C>) where C.Instant == Timestamp, C.Duration == Duration {
        let shift = start.duration(to: origin ?? start)
        let shifted = shift == .zero ? self : self.shifted(by: shift)
        return (
            MockTagReader(readerID: readerID, clock: clock, script: shifted.reader, finishAfterScript: true),
            MockFixSource(sourceID: "mock", clock: clock, script: shifted.gps, finishAfterScript: true)
        )
    }

    /// The same scenario moved in time.
    public func shifted(by offset: Duration) -> Scenario {
        var copy = self
        copy.start = start.advanced(by: offset)
        copy.gps = gps.map { item in
            var event = item.event
            if case .fix(var fix) = event {
                fix.time = fix.time.advanced(by: offset)
                event = .fix(fix)
            }
            return Scheduled(at: item.at.advanced(by: offset), event)
        }
        copy.reader = reader.map { item in
            var event = item.event
            switch event {
            case .tagPresent(var scan):
                scan.time = scan.time.advanced(by: offset)
                event = .tagPresent(scan)
            case .tagRemoved(let uid, let at):
                event = .tagRemoved(uid, at: at.advanced(by: offset))
            default: break
            }
            return Scheduled(at: item.at.advanced(by: offset), event)
        }
        return copy
    }
}

// MARK: - Replay

/// Runs a scenario through `VerificationSession` as a discrete-event simulation: every event in
/// time order, deadlines handled at their instants. Deterministic and instant; it gives the same
/// verdicts `LiveVerifier` gives on the scenario's mock devices, because the session decides by
/// timestamps alone.
public enum ScenarioReplay {
    /// Replays `scenario` through `verifier`, handing each event to `onEvent`. `stopped` is asked
    /// before each of the scenario's events: once it says yes (a Ctrl-C), the rest are not
    /// replayed, and the session ends as a live one does, a scan still waiting for a fix given
    /// its verdict.
    public static func run(
        _ scenario: Scenario, verifier: Verifier, stopped: () -> Bool = { false }, onEvent: (VerifierEvent) -> Void
    ) {
        var session = VerificationSession(verifier: verifier)
        enum Item {
            case gps(FixEvent)
            case reader(ReaderEvent)
        }
        // GPS before reader at the same instant; otherwise file order within each stream.
        let items =
            (scenario.gps.enumerated().map { ($0.element.at, 0, $0.offset, Item.gps($0.element.event)) }
            + scenario.reader.enumerated().map { ($0.element.at, 1, $0.offset, Item.reader($0.element.event)) })
            .sorted { ($0.0, $0.1, $0.2) < ($1.0, $1.1, $1.2) }

        func emit(_ verdicts: [Verdict]) { verdicts.forEach { onEvent(.verdict($0)) } }
        for (at, _, _, item) in items {
            if stopped() {
                emit(session.finish())
                return
            }
            while let deadline = session.nextDeadline, deadline < at {
                emit(session.advance(to: deadline))
            }
            switch item {
            case .gps(let event):
                onEvent(.gps(event))
                switch event {
                case .fix(let fix): emit(session.receive(fix))
                case .unavailable(let why): session.gpsUnavailable(why)
                case .connected, .resumed: session.gpsUnavailable(nil)
                default: break
                }
            case .reader(let event):
                onEvent(.reader(event))
                if case .tagPresent(let scan) = event { emit(session.receive(scan, now: at)) }
            }
        }
        while let deadline = session.nextDeadline {
            emit(session.advance(to: deadline))
        }
        emit(session.finish())
    }

    /// The verdicts of a scenario, in order.
    public static func verdicts(_ scenario: Scenario, verifier: Verifier) -> [Verdict] {
        var verdicts: [Verdict] = []
        run(scenario, verifier: verifier) {
            if case .verdict(let verdict) = $0 { verdicts.append(verdict) }
        }
        return verdicts
    }
}
