/// One receiver's time, mapped onto the session's axis (the monotonic clock, see
/// `TagFixDevices.MonotonicClock`).
///
/// Each fix is stamped on arrival with the session clock. The receiver's own time orders and
/// de-duplicates its fixes; the axis time of a fix is its receiver time plus the smallest
/// `arrival − receiver time` seen over the last few fixes: the receiver's clock carried onto
/// ours, less the jitter of gpsd's delivery. So a fix's age at a scan, the wait for a fix and
/// interpolation are differences of monotonic times, and nothing depends on the wall clock or
/// on the receiver's date agreeing with it (a recording from 2002 works as well as a live fix).
///
/// A receiver whose time goes backwards (a log replayed again, a GPS week rollover), or leaps
/// ahead much further than the time that passed here, starts a new stream: the mapping starts
/// afresh and `observe` says so once.
public struct ReceiverTimeline: Sendable {
    /// What one fix's time says about the stream.
    public enum Observation: Sendable, Hashable {
        /// The first fix of the session.
        case started
        /// A later fix of the same stream.
        case continued
        /// The receiver repeated the last fix's time (gpsd refines an epoch): drop it.
        case repeated
        /// The receiver's time jumped from `previous` (backwards, or ahead by far more than the
        /// time that passed): a new stream starts with this fix.
        case restarted(previous: Timestamp)
    }

    /// How many recent offsets the minimum is taken over: enough to find a quick delivery among
    /// gpsd's jittery ones, few enough to follow a replay that runs faster or slower than time.
    public static let window = 16
    /// A leap ahead of the receiver's time beyond the time that passed here by more than this
    /// starts a new stream.
    public static let leapLimit: Duration = .seconds(600)

    private var offsets: [Int64] = []
    private var next = 0
    private var last: (receiver: Timestamp, arrival: Timestamp)?

    public init() {}

    /// The current offset, axis minus receiver time (`nil` before the first fix).
    public var offset: Duration? {
        offsets.min().map { .nanoseconds($0) }
    }

    /// Takes one fix's receiver time and its arrival on the axis.
    /// - Returns: the fix's time on the axis, and what it says about the stream.
    public mutating func observe(receiverTime: Timestamp, arrival: Timestamp) -> (axisTime: Timestamp, observation: Observation) {
        var observation = Observation.continued
        if let last {
            if receiverTime == last.receiver { return (receiverTime.advanced(by: offset ?? .zero), .repeated) }
            let passed = last.arrival.duration(to: arrival)
            let advanced = last.receiver.duration(to: receiverTime)
            if receiverTime < last.receiver || advanced - passed > Self.leapLimit {
                observation = .restarted(previous: last.receiver)
                offsets.removeAll(keepingCapacity: true)
                next = 0
            }
        } else {
            observation = .started
        }
        let sample = receiverTime.duration(to: arrival).nanoseconds
        if offsets.count < Self.window {
            offsets.append(sample)
        } else {
            offsets[next] = sample
            next = (next + 1) % Self.window
        }
        last = (receiverTime, arrival)
        return (receiverTime.advanced(by: offset ?? .zero), observation)
    }
}

extension ReceiverTimeline {
    /// Places a fix that arrived at `arrival` (axis) on the axis: its `time` becomes the axis
    /// time and its `receiverTime` what the receiver said (`fix.time` as it came).
    public mutating func place(_ fix: Fix, arrival: Timestamp) -> (fix: Fix, observation: Observation) {
        let (axisTime, observation) = observe(receiverTime: fix.time, arrival: arrival)
        var placed = fix
        placed.receiverTime = fix.time
        placed.time = axisTime
        return (placed, observation)
    }
}

/// Which clock a verdict's UTC time comes from.
public enum TimeSource: String, Sendable, Hashable {
    /// The system clock, which the kernel says is synchronised.
    case system
    /// GPS time from the receiver, carried forward on the monotonic clock.
    case gps
}

/// Which clock tells UTC, and how far the other one is from it.
///
/// The session axis is monotonic and only labelled with UTC (the system clock at start). Two
/// clocks can turn an axis instant into UTC: the system clock, which is right when the kernel
/// says it is synchronised, and GPS time, known once the receiver has sent a fix (a fix's
/// receiver time against its axis time). The rule:
/// - the system clock is synchronised and within `agreement` of GPS time (or no GPS time is known
///   yet): `system`;
/// - otherwise, once GPS time is known: `gps`. A synchronised clock that disagrees with GPS by
///   more than `agreement` is not right, whatever the kernel says;
/// - no GPS time yet and an unsynchronised clock: `system`, the only clock there is.
///
/// Only output depends on this: decisions are made on the axis.
public struct TimeReference: Sendable, Hashable {
    /// The largest disagreement between a synchronised system clock and GPS time that still
    /// trusts the system clock: well above gpsd's delivery delay, far below any wrong clock.
    public static let agreement: Duration = .seconds(5)

    /// The system clock minus the axis (what the system clock says at an axis instant).
    public private(set) var systemOffset: Duration = .zero
    /// Whether the kernel says the system clock is synchronised (`nil`: unknown, taken as no).
    public private(set) var systemSynchronised: Bool?
    /// The axis minus GPS time, from the latest fix that carried both.
    public private(set) var gpsOffset: Duration?

    public init() {}

    /// A reading of the system clock taken at axis instant `axisNow`.
    public mutating func system(now systemNow: Timestamp, synchronised: Bool?, axisNow: Timestamp) {
        systemOffset = axisNow.duration(to: systemNow)
        systemSynchronised = synchronised
    }

    /// A fix with both its receiver (GPS) time and its axis time.
    public mutating func gps(receiverTime: Timestamp, axisTime: Timestamp) {
        gpsOffset = receiverTime.duration(to: axisTime)
    }

    /// How far the system clock is ahead of GPS time (negative: behind); `nil` before GPS time.
    public var systemMinusGPS: Duration? {
        gpsOffset.map { systemOffset + $0 }
    }

    public var source: TimeSource {
        guard let difference = systemMinusGPS else { return .system }
        if systemSynchronised == true, difference <= Self.agreement, difference >= .zero - Self.agreement { return .system }
        return .gps
    }

    /// UTC at an axis instant, by the chosen source.
    public func utc(_ axisTime: Timestamp) -> Timestamp {
        switch source {
        case .system: axisTime.advanced(by: systemOffset)
        case .gps: axisTime.advanced(by: .zero - (gpsOffset ?? .zero))
        }
    }

    /// The note a verdict carries: its source and the system clock's offset from GPS time.
    public var stamp: TimeStamp { TimeStamp(source: source, systemMinusGPS: systemMinusGPS) }

    /// Whether the system clock is off GPS time by more than `agreement`: worth telling the user.
    public var systemClockIsOff: Bool {
        guard let difference = systemMinusGPS else { return false }
        return difference > Self.agreement || difference < .zero - Self.agreement
    }

    /// "the system clock is 10 d 2 h behind GPS time", for a person.
    public static func describe(systemMinusGPS difference: Duration) -> String {
        let ahead = difference > .zero
        let seconds = abs(difference.seconds)
        let text: String
        switch seconds {
        case ..<60: text = "\(Coordinate.format(seconds, 1)) s"
        case ..<3600:
            let total = Int(seconds.rounded())
            text = "\(total / 60) min \(total % 60) s"
        case ..<86_400:
            let total = Int((seconds / 60).rounded())
            text = "\(total / 60) h \(total % 60) min"
        default:
            let total = Int((seconds / 3600).rounded())
            text = "\(total / 24) d \(total % 24) h"
        }
        return "the system clock is \(text) \(ahead ? "ahead of" : "behind") GPS time"
    }
}

/// Which clock stamped a verdict, and the system clock's offset from GPS time then.
public struct TimeStamp: Sendable, Hashable {
    public var source: TimeSource
    /// System clock minus GPS time; `nil` before GPS time was known.
    public var systemMinusGPS: Duration?

    public init(source: TimeSource, systemMinusGPS: Duration?) {
        self.source = source
        self.systemMinusGPS = systemMinusGPS
    }
}
