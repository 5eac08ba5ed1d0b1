public import TagFixCore

/// One gpsd connection's reports turned into fix events: a state machine without I/O (reports
/// and their arrival on the session's axis in, `FixEvent`s out) that `GPSDFixSource` drives with
/// libgps's reports and tests drive with gpsd's JSON (`gpspipe -w`, gpsd's `.chk` files).
///
/// **Epochs.** gpsd sends a TPV whenever a sentence of the receiver's cycle changes its view, so
/// one time can come several times, more complete each time (a Garmin's cycle: mode 2, then 3D
/// with its altitude, then `epv`). The first report of a time is delivered at once as `.fix`, so
/// no scan waits for the rest of the cycle; each later report for the same time *and the same
/// position* refines it, and the epoch is delivered again as `.refined` (the same axis time, the
/// highest mode, and every field gpsd gave for that position, a later value over an earlier one,
/// a report of a higher mode over a lower one) whenever that changes what the fix says. A report
/// without a position (mode 1) never demotes a positioned epoch; a no-fix epoch that gains a
/// position takes it (the first position of a time is that epoch's).
///
/// A *different* position under the same time is not a refinement: a receiver whose next
/// position reaches gpsd before its time does (its cycle starts with a sentence without a time)
/// makes gpsd send the new position under the old time. Taken as a refinement it would move the
/// epoch to where the receiver was a cycle later; delivered as an epoch it would carry the wrong
/// time (a wrong interpolation, a false jump). It is dropped: the same position comes again a
/// moment later, under its own time, as that epoch's first report. gpsd copies one position into
/// every report of an epoch, so positions are compared exactly.
///
/// A report for an earlier epoch that arrives after a newer one (within `lateLimit` of that
/// epoch's first report, one of the last few) is ignored: a decision may already rest on the
/// newer epoch, and the older one was delivered when it was new. Later than that, or for a time
/// never seen, an earlier time starts a new stream (`ReceiverTimeline`).
///
/// **Satellites.** gpsd 3.22 sends each epoch's TPV before its SKY, so the first positioned TPV of
/// a stream knows no satellites yet: it is held (its refinements merged into it) until that SKY,
/// the next epoch, or `skyWait` after it arrived, whichever comes first (`advance(to:)`,
/// `nextDeadline`), so a verdict on it logs the satellites the receiver reports, and a gpsd that
/// sends no SKY (a lone fix) still gives its fix. Every other fix carries the latest SKY's count.
public struct GPSDStream: Sendable {
    /// How long the stream's first fix waits for its SKY.
    public static let skyWait: Duration = .milliseconds(500)
    /// How long after an epoch's first report a report for it is still taken as a late
    /// refinement (and ignored) rather than as the start of a new stream.
    public static let lateLimit: Duration = .seconds(2)
    /// The earlier epochs remembered for late refinements.
    static let recentEpochs = 4
    /// The reports merged into one epoch, at most (gpsd sends a handful; a runaway stays bounded).
    static let reportsPerEpoch = 16

    private var satellitesUsed: Int?
    private var satellitesVisible: Int?
    private var timeline = ReceiverTimeline()
    private var waitingForSky = true
    /// The latest time gpsd reported, being refined.
    private var current: Epoch?
    /// The epochs before `current` (receiver time, first arrival), newest last.
    private var recent: [(time: Timestamp, arrival: Timestamp)] = []

    private struct Epoch: Sendable {
        var time: Timestamp
        var arrival: Timestamp
        /// The epoch's position (`nil`: no fix yet) and the reports merged into it.
        var position: Position?
        var reports: [GPSDReport.TPV]
        /// What was last delivered for it; `nil` while it is held for its SKY.
        var delivered: Fix?
        /// Until when it is held for its SKY.
        var heldUntil: Timestamp?
    }

    private struct Position: Sendable, Hashable {
        var latitude: Double
        var longitude: Double

        init?(_ tpv: GPSDReport.TPV) {
            guard tpv.mode >= 2, let latitude = tpv.latitude, let longitude = tpv.longitude else { return nil }
            self.latitude = latitude
            self.longitude = longitude
        }
    }

    public init() {}

    /// When `advance(to:)` must be called: the held first fix's deadline.
    public var nextDeadline: Timestamp? { current?.heldUntil }

    /// One report from gpsd, which arrived at `arrival` (the session's axis).
    public mutating func receive(_ report: GPSDReport, arrival: Timestamp) -> [FixEvent] {
        switch report {
        case .sky(let used, let visible):
            if let used, used >= 0 { satellitesUsed = used }
            if let visible, visible >= 0 { satellitesVisible = visible }
            waitingForSky = false
            return release()
        case .tpv(let tpv):
            return receive(tpv, arrival: arrival)
        case .other:
            return []
        }
    }

    /// Time has reached `now`: a first fix held for a SKY that has not come is delivered.
    public mutating func advance(to now: Timestamp) -> [FixEvent] {
        guard let until = current?.heldUntil, until <= now else { return [] }
        waitingForSky = false
        return release()
    }

    // MARK: - Internals

    private mutating func receive(_ tpv: GPSDReport.TPV, arrival: Timestamp) -> [FixEvent] {
        switch tpv.fix(satellitesUsed: satellitesUsed) {
        case .failure(.noTime) where tpv.mode < 2 || timeline.offset == nil:
            // A "no fix yet" report without a time says nothing we can place; nor do gpsd's first
            // reports, before the receiver has sent a date: not worth a line.
            return []
        case .failure(let rejection):
            return [.rejected(rejection)]
        case .success:
            break
        }
        guard let time = tpv.time else { return [] }
        if current?.time == time { return refine(with: tpv) }
        if let earlier = recent.last(where: { $0.time == time }), earlier.arrival.duration(to: arrival) <= Self.lateLimit {
            return []  // a late refinement of an epoch a newer one has followed
        }
        // A new epoch: the one before it is complete (and delivered, if it was held: this gpsd
        // sends no SKY between epochs, so none is waited for again).
        if current?.heldUntil != nil { waitingForSky = false }
        var out = release()
        if let previous = current {
            recent.append((previous.time, previous.arrival))
            if recent.count > Self.recentEpochs { recent.removeFirst() }
        }
        var epoch = Epoch(time: time, arrival: arrival, position: Position(tpv), reports: [tpv])
        if waitingForSky, satellitesUsed == nil, tpv.mode >= 2 {
            epoch.heldUntil = arrival.advanced(by: Self.skyWait)
            current = epoch
            return out
        }
        current = epoch
        out += deliver()
        return out
    }

    /// A later report for the current epoch's time.
    private mutating func refine(with tpv: GPSDReport.TPV) -> [FixEvent] {
        guard var epoch = current else { return [] }
        let position = Position(tpv)
        if let known = epoch.position {
            // A report without a position does not demote the epoch; another position under this
            // time is the next epoch, early.
            guard let position, position == known else { return [] }
            guard epoch.reports.count < Self.reportsPerEpoch else { return [] }
            epoch.reports.append(tpv)
        } else if position != nil {
            // The first position of the time: the epoch's, the no-fix reports before it are not.
            epoch.position = position
            epoch.reports = [tpv]
        } else {
            guard epoch.reports.count < Self.reportsPerEpoch else { return [] }
            epoch.reports.append(tpv)
        }
        current = epoch
        guard let delivered = epoch.delivered, case .success(var fix) = Self.merge(epoch.reports).fix(satellitesUsed: satellitesUsed)
        else { return [] }  // still held for its SKY: delivered, merged, when it comes
        fix.receiverTime = fix.time
        fix.time = delivered.time
        fix.satellitesVisible = satellitesVisible
        guard fix != delivered else { return [] }
        current?.delivered = fix
        return [.refined(fix)]
    }

    /// Delivers a held epoch, if one is held.
    private mutating func release() -> [FixEvent] {
        guard current?.heldUntil != nil else { return [] }
        current?.heldUntil = nil
        return deliver()
    }

    /// Delivers the current epoch as a new one: validated, placed on the axis.
    private mutating func deliver() -> [FixEvent] {
        guard let epoch = current, case .success(let fix) = Self.merge(epoch.reports).fix(satellitesUsed: satellitesUsed)
        else { return [] }
        var (mapped, observation) = timeline.place(fix, arrival: epoch.arrival)
        var events: [FixEvent] = []
        switch observation {
        case .repeated: return []  // cannot happen: a time seen before is refined or ignored above
        case .restarted(let previous):
            recent.removeAll()
            events.append(.restarted(from: previous, to: fix.time))
        case .started, .continued: break
        }
        mapped.satellitesVisible = satellitesVisible
        current?.delivered = mapped
        events.append(.fix(mapped))
        return events
    }

    /// One TPV from an epoch's reports: the highest mode, and each field from the latest report
    /// that gave it, a report of a higher mode before any of a lower one.
    static func merge(_ reports: [GPSDReport.TPV]) -> GPSDReport.TPV {
        let ordered = reports.indices.sorted { (reports[$0].mode, $0) < (reports[$1].mode, $1) }.map { reports[$0] }
        guard var merged = ordered.first else { preconditionFailure("an epoch has a report") }
        for report in ordered.dropFirst() {
            merged.mode = report.mode
            merged.device = report.device ?? merged.device
            merged.status = report.status ?? merged.status
            merged.latitude = report.latitude ?? merged.latitude
            merged.longitude = report.longitude ?? merged.longitude
            merged.altHAE = report.altHAE ?? merged.altHAE
            merged.altMSL = report.altMSL ?? merged.altMSL
            merged.eph = report.eph ?? merged.eph
            merged.epx = report.epx ?? merged.epx
            merged.epy = report.epy ?? merged.epy
            merged.epv = report.epv ?? merged.epv
            merged.speed = report.speed ?? merged.speed
            merged.track = report.track ?? merged.track
            merged.climb = report.climb ?? merged.climb
        }
        return merged
    }
}
