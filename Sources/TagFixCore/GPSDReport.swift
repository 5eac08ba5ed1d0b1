/// gpsd's JSON reports (`gpspipe -w` output, one object per line), as far as fixes need them.
///
/// TPV gives time, mode, position, error estimates and status; SKY gives the satellites used,
/// which TPV does not carry (gpsd 3.22), so a reader keeps the latest SKY and attaches it.
public enum GPSDReport: Sendable, Hashable {
    case tpv(TPV)
    case sky(satellitesUsed: Int?, satellitesVisible: Int?)
    /// Any other class (VERSION, DEVICES, WATCH, ATT…), kept by name.
    case other(String)

    /// A TPV report with gpsd's NaN-or-missing values as `nil`.
    public struct TPV: Sendable, Hashable {
        public var device: String?
        public var time: Timestamp?
        public var mode: Int
        public var status: Int?
        public var latitude: Double?
        public var longitude: Double?
        public var altHAE: Double?
        public var altMSL: Double?
        public var eph: Double?
        public var epx: Double?
        public var epy: Double?
        public var epv: Double?
        public var speed: Double?
        public var track: Double?
        public var climb: Double?

        public init(
            device: String? = nil, time: Timestamp?, mode: Int, status: Int? = nil, latitude: Double? = nil, longitude: Double? = nil,
            altHAE: Double? = nil, altMSL: Double? = nil, eph: Double? = nil, epx: Double? = nil, epy: Double? = nil,
            epv: Double? = nil, speed: Double? = nil, track: Double? = nil, climb: Double? = nil
        ) {
            func finite(_ value: Double?) -> Double? { value.flatMap { $0.isFinite ? $0 : nil } }
            self.device = device
            self.time = time
            self.mode = mode
            self.status = status
            self.latitude = finite(latitude)
            self.longitude = finite(longitude)
            self.altHAE = finite(altHAE)
            self.altMSL = finite(altMSL)
            self.eph = finite(eph)
            self.epx = finite(epx)
            self.epy = finite(epy)
            self.epv = finite(epv)
            self.speed = finite(speed)
            self.track = finite(track)
            self.climb = finite(climb)
        }
    }

    /// Parses one line of gpsd JSON.
    /// - Throws: `DataFileError` (line 1) for text that is not a JSON object with a `class`.
    public static func parse(line: String) throws(DataFileError) -> GPSDReport {
        let value: JSONValue
        do {
            value = try JSONValue.parse(line)
        } catch {
            throw DataFileError(error)
        }
        guard value.members != nil, let reportClass = value["class"]?.string else {
            throw DataFileError(line: value.line, message: "not a gpsd report (no \"class\")")
        }
        func number(_ key: String) -> Double? {
            guard let number = value[key]?.double, number.isFinite else { return nil }
            return number
        }
        switch reportClass {
        case "TPV":
            var time: Timestamp?
            if let text = value["time"]?.string {
                guard let parsed = Timestamp(iso8601: text) else {
                    throw DataFileError(line: value.line, message: "TPV time \"\(text)\" is not RFC 3339")
                }
                time = parsed
            }
            let mode = number("mode").map { Int(exactly: $0) ?? 0 } ?? 0
            return .tpv(
                TPV(
                    device: value["device"]?.string, time: time, mode: mode, status: number("status").flatMap { Int(exactly: $0) },
                    latitude: number("lat"), longitude: number("lon"), altHAE: number("altHAE") ?? number("alt"),
                    altMSL: number("altMSL"), eph: number("eph"), epx: number("epx"), epy: number("epy"),
                    epv: number("epv"), speed: number("speed"), track: number("track"), climb: number("climb")))
        case "SKY":
            var used = number("uSat").flatMap { Int(exactly: $0) }
            var visible = number("nSat").flatMap { Int(exactly: $0) }
            if let satellites = value["satellites"]?.array {
                visible = visible ?? satellites.count
                used = used ?? satellites.filter { $0["used"]?.bool == true }.count
            }
            return .sky(satellitesUsed: used, satellitesVisible: visible)
        default:
            return .other(reportClass)
        }
    }
}

extension GPSDReport.TPV {
    /// The fix this report describes, or why it cannot be one.
    ///
    /// gpsd's mode 0 ("not seen") and 1 give a no-fix; status 0 during a fix means a plain GPS fix
    /// (gpsd sends `status` only when it is 2 or more). A 2D/3D report without a finite, in-range
    /// position is rejected: gpsd passes a valid-checksum sentence with nonsense values through as
    /// mode 3 with NaN coordinates.
    public func fix(satellitesUsed: Int?) -> Result<Fix, FixRejection> {
        guard let time else { return .failure(.noTime) }
        let status = Fix.Status(rawValue: status ?? 1).map { $0 == .unknown ? .gps : $0 } ?? .unknown
        guard mode >= 2 else {
            return .success(
                Fix(
                    time: time, mode: .noFix, coordinate: nil, horizontalAccuracy: nil, status: status,
                    satellitesUsed: satellitesUsed, device: device))
        }
        guard let latitude, let longitude else { return .failure(.noPosition) }
        let coordinate: Coordinate
        do {
            coordinate = try Coordinate(latitude: latitude, longitude: longitude)
        } catch {
            return .failure(.badPosition(error))
        }
        var fix = Fix(
            time: time, mode: mode >= 3 ? .threeD : .twoD, coordinate: coordinate,
            horizontalAccuracy: Fix.horizontalAccuracy(eph: eph, epx: epx, epy: epy), status: status,
            satellitesUsed: satellitesUsed, altitudeHAE: altHAE, speed: speed, device: device)
        fix.errorEstimates = Fix.ErrorEstimates(eph: eph, epx: epx, epy: epy, epv: epv)
        fix.altitudeMSL = altMSL
        fix.track = track
        fix.climb = climb
        return .success(fix)
    }
}

/// Why a report is not used as a fix.
public enum FixRejection: Error, Sendable, Hashable, CustomStringConvertible {
    case noTime
    case noPosition
    case badPosition(CoordinateError)

    public var description: String {
        switch self {
        case .noTime: "a fix without a time"
        case .noPosition: "a 2D/3D fix without latitude/longitude"
        case .badPosition(let error): "a fix with an impossible position: \(error)"
        }
    }
}
