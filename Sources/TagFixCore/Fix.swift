/// One position report from a GNSS receiver (through gpsd or a mock).
///
/// Unknown values are `nil`, never NaN. `horizontalAccuracy` is a radius in metres that the
/// verifier treats as a **95 % confidence** bound, the convention gpsd uses for `eph`, `epx` and
/// `epy` (see docs/verifier.md).
public struct Fix: Sendable, Hashable {
    /// What the receiver says about its solution: gpsd's TPV `mode`.
    public enum Mode: Int, Sendable, Hashable, Comparable, CustomStringConvertible {
        case noFix = 1
        case twoD = 2
        case threeD = 3

        public static func < (lhs: Mode, rhs: Mode) -> Bool { lhs.rawValue < rhs.rawValue }

        public var description: String {
            switch self {
            case .noFix: "no fix"
            case .twoD: "2D"
            case .threeD: "3D"
            }
        }
    }

    /// The kind of solution: gpsd's TPV `status` (3.22 numbering; gpsd sends 0 or omits it for a
    /// plain GPS fix, which is normalised to `.gps`).
    public enum Status: Int, Sendable, Hashable, CustomStringConvertible {
        case unknown = 0
        case gps = 1
        case dgps = 2
        case rtkFixed = 3
        case rtkFloat = 4
        case deadReckoning = 5
        case gnssDeadReckoning = 6
        case timeOnly = 7
        case simulated = 8
        case precise = 9

        /// The name used in JSON and scenario files.
        public var name: String {
            switch self {
            case .unknown: "unknown"
            case .gps: "gps"
            case .dgps: "dgps"
            case .rtkFixed: "rtk_fixed"
            case .rtkFloat: "rtk_float"
            case .deadReckoning: "dead_reckoning"
            case .gnssDeadReckoning: "gnss_dead_reckoning"
            case .timeOnly: "time_only"
            case .simulated: "simulated"
            case .precise: "precise"
            }
        }

        public init?(name: String) {
            guard let match = (0...9).lazy.compactMap(Status.init(rawValue:)).first(where: { $0.name == name })
            else { return nil }
            self = match
        }

        public var description: String { name }
    }

    struct Fields: Sendable, Hashable {
        var time: Timestamp
        var receiverTime: Timestamp? = nil
        var mode: Mode
        var coordinate: Coordinate? = nil
        var horizontalAccuracy: Double? = nil
        var status: Status
        var satellitesUsed: Int? = nil
        var altitudeHAE: Double? = nil
        var speed: Double? = nil
        var device: String? = nil
        var errorEstimates: ErrorEstimates? = nil
        var altitudeMSL: Double? = nil
        var track: Double? = nil
        var climb: Double? = nil
        var satellitesVisible: Int? = nil
    }

    /// Copy-on-write, like `TagScan` and `Verdict`: a fix is some 240 bytes of fields, made once
    /// an epoch and copied into every verdict, stream and log it reaches.
    private var storage: ImmutableBox<Fields>

    /// The fix's time on the session's axis, the one scans are stamped on: what the verifier
    /// compares. For a scenario's or a mock's fix it is the receiver time itself; a live source
    /// maps the receiver's time onto the monotonic axis (`ReceiverTimeline`) and keeps what the
    /// receiver said in `receiverTime`.
    public var time: Timestamp {
        get { storage.fields.time }
        set { storage.update { $0.time = newValue } }
    }
    /// UTC as the receiver reported it (gpsd's TPV `time`), when it differs from `time`.
    public var receiverTime: Timestamp? {
        get { storage.fields.receiverTime }
        set { storage.update { $0.receiverTime = newValue } }
    }
    /// What the receiver said the time was: `receiverTime`, else `time`. For output.
    public var reportedTime: Timestamp { storage.fields.receiverTime ?? storage.fields.time }
    public var mode: Mode {
        get { storage.fields.mode }
        set { storage.update { $0.mode = newValue } }
    }
    /// Present when `mode` is 2D or 3D.
    public var coordinate: Coordinate? {
        get { storage.fields.coordinate }
        set { storage.update { $0.coordinate = newValue } }
    }
    /// Horizontal error radius in metres, 95 % confidence; `nil` when the receiver gave none.
    public var horizontalAccuracy: Double? {
        get { storage.fields.horizontalAccuracy }
        set { storage.update { $0.horizontalAccuracy = newValue } }
    }
    public var status: Status {
        get { storage.fields.status }
        set { storage.update { $0.status = newValue } }
    }
    public var satellitesUsed: Int? {
        get { storage.fields.satellitesUsed }
        set { storage.update { $0.satellitesUsed = newValue } }
    }
    /// Height above the ellipsoid, metres. Informational: the verifier ignores altitude.
    public var altitudeHAE: Double? {
        get { storage.fields.altitudeHAE }
        set { storage.update { $0.altitudeHAE = newValue } }
    }
    /// Speed over ground, m/s.
    public var speed: Double? {
        get { storage.fields.speed }
        set { storage.update { $0.speed = newValue } }
    }
    /// The device gpsd read it from, e.g. `/dev/ttyACM0`.
    public var device: String? {
        get { storage.fields.device }
        set { storage.update { $0.device = newValue } }
    }
    /// gpsd's error estimates as reported (metres, 95 %), kept for output.
    public var errorEstimates: ErrorEstimates? {
        get { storage.fields.errorEstimates }
        set { storage.update { $0.errorEstimates = newValue } }
    }
    /// Height above mean sea level, metres (informational).
    public var altitudeMSL: Double? {
        get { storage.fields.altitudeMSL }
        set { storage.update { $0.altitudeMSL = newValue } }
    }
    /// Course over ground, degrees from true north.
    public var track: Double? {
        get { storage.fields.track }
        set { storage.update { $0.track = newValue } }
    }
    /// Vertical speed, m/s.
    public var climb: Double? {
        get { storage.fields.climb }
        set { storage.update { $0.climb = newValue } }
    }
    /// Satellites in view (from gpsd's SKY).
    public var satellitesVisible: Int? {
        get { storage.fields.satellitesVisible }
        set { storage.update { $0.satellitesVisible = newValue } }
    }

    /// gpsd's TPV error fields.
    public struct ErrorEstimates: Sendable, Hashable {
        public var eph: Double?
        public var epx: Double?
        public var epy: Double?
        public var epv: Double?

        public init(eph: Double?, epx: Double?, epy: Double?, epv: Double?) {
            func finite(_ value: Double?) -> Double? { value.flatMap { $0.isFinite ? $0 : nil } }
            self.eph = finite(eph)
            self.epx = finite(epx)
            self.epy = finite(epy)
            self.epv = finite(epv)
        }
    }

    public init(
        time: Timestamp, mode: Mode, coordinate: Coordinate?, horizontalAccuracy: Double?,
        status: Status = .gps, satellitesUsed: Int? = nil, altitudeHAE: Double? = nil,
        speed: Double? = nil, device: String? = nil
    ) {
        storage = ImmutableBox(
            Fields(
                time: time, mode: mode, coordinate: mode == .noFix ? nil : coordinate,
                horizontalAccuracy: horizontalAccuracy.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }, status: status,
                satellitesUsed: satellitesUsed, altitudeHAE: altitudeHAE.flatMap { $0.isFinite ? $0 : nil },
                speed: speed.flatMap { $0.isFinite ? $0 : nil }, device: device))
    }

    /// A fix that gives a position (2D or 3D with a coordinate).
    public var hasPosition: Bool { mode >= .twoD && coordinate != nil }

    /// The horizontal accuracy from gpsd's error estimates: `eph` when given, otherwise the
    /// root-sum-square of `epx` and `epy` (a circle enclosing the error ellipse's axes). NaN,
    /// negative or missing inputs count as unknown.
    public static func horizontalAccuracy(eph: Double?, epx: Double?, epy: Double?) -> Double? {
        func valid(_ value: Double?) -> Double? {
            guard let value, value.isFinite, value >= 0 else { return nil }
            return value
        }
        if let eph = valid(eph) { return eph }
        if let epx = valid(epx), let epy = valid(epy) { return (epx * epx + epy * epy).squareRoot() }
        return nil
    }
}
