public import TagFixCore

/// NMEA 0183 sentences as a GNSS receiver writes them, with checksums. Pure.
public enum NMEA {
    /// `$BODY*CS\r\n`, the checksum being the XOR of the body's bytes.
    public static func sentence(_ body: String) -> String {
        let checksum = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
        return "$\(body)*\(Hex.encode([checksum]))\r\n"
    }

    /// One epoch of a receiver's output.
    public struct Epoch: Sendable, Hashable {
        public var time: Timestamp
        /// `nil`: no fix (GGA quality 0, RMC status V, GSA mode 1).
        public var position: Coordinate?
        public var altitude: Double = 35
        public var satellites: Int = 9
        public var hdop: Double = 0.9
        /// Decimals of HDOP in GGA and GSA (receivers write one or two).
        public var hdopDigits = 1
        /// Standard deviations of the position error, metres (GST): gpsd derives epx/epy from them.
        public var sigmaLatitude: Double = 1.5
        public var sigmaLongitude: Double = 1.5
        public var speedKnots: Double = 0
        public var course: Double = 0
        /// GGA fix quality when there is a fix: 1 GPS, 2 DGPS.
        public var quality: Int = 1

        public init(time: Timestamp, position: Coordinate?) {
            self.time = time
            self.position = position
        }
    }

    /// The sentences of an epoch: GGA, GSA, GST, RMC, and one GSV.
    public static func sentences(_ e: Epoch) -> [String] {
        let clock = timeOfDay(e.time)
        let date = dateField(e.time)
        let (lat, ns, lon, ew) = e.position.map(fields) ?? ("", "", "", "")
        let fixed = e.position != nil
        let quality = fixed ? e.quality : 0
        let sats = fixed ? e.satellites : 0
        var out: [String] = []
        out.append(
            sentence(
                "GPGGA,\(clock),\(lat),\(ns),\(lon),\(ew),\(quality),\(pad(sats)),\(fixed ? decimal(e.hdop, e.hdopDigits) : ""),\(fixed ? decimal(e.altitude, 1) : ""),M,47.4,M,,"
            ))
        // The dilutions a receiver states together: VDOP about 1.3 × HDOP, PDOP² = HDOP² + VDOP²,
        // never below the open sky's 1.6 / 1.2 (so a degraded sky's HDOP never exceeds its PDOP).
        let vdop = max(1.2, 1.3 * e.hdop)
        let pdop = max(1.6, (e.hdop * e.hdop + vdop * vdop).squareRoot())
        let prns = (0..<min(12, sats)).map { String(3 + $0 * 2) }
        let used = (prns + Array(repeating: "", count: 12 - prns.count)).joined(separator: ",")
        out.append(
            sentence(
                "GPGSA,A,\(fixed ? 3 : 1),\(used),\(fixed ? decimal(pdop, 1) : ""),\(fixed ? decimal(e.hdop, e.hdopDigits) : ""),\(fixed ? decimal(vdop, 1) : "")"
            ))
        if fixed {
            let rms = max(e.sigmaLatitude, e.sigmaLongitude)
            out.append(
                sentence(
                    "GPGST,\(clock),\(decimal(rms, 1)),\(decimal(e.sigmaLatitude, 1)),\(decimal(e.sigmaLongitude, 1)),0.0,\(decimal(e.sigmaLatitude, 1)),\(decimal(e.sigmaLongitude, 1)),\(decimal(e.sigmaLatitude * 1.5, 1))"
                ))
        }
        out.append(
            sentence(
                "GPRMC,\(clock),\(fixed ? "A" : "V"),\(lat),\(ns),\(lon),\(ew),\(decimal(e.speedKnots, 2)),\(decimal(e.course, 1)),\(date),,,\(fixed ? (e.quality == 2 ? "D" : "A") : "N")"
            ))
        // Satellites in view: the ones GSA says are used (PRN 3, 5, 7, …), four to a GSV sentence.
        let inView = max(sats, 4)
        let pages = (inView + 3) / 4
        for page in 0..<pages {
            var body = "GPGSV,\(pages),\(page + 1),\(pad(inView))"
            for index in (page * 4)..<min(inView, page * 4 + 4) {
                body += ",\(pad(3 + index * 2)),\(15 + (index * 7) % 70),\(pad3((index * 40) % 360)),\(30 + index % 15)"
            }
            out.append(sentence(body))
        }
        return out
    }

    static func fields(_ c: Coordinate) -> (String, String, String, String) {
        func dm(_ value: Double, degreeDigits: Int) -> String {
            let a = abs(value)
            let degrees = Int(a)
            let minutes = (a - Double(degrees)) * 60
            var m = decimal(minutes, 5)
            if minutes < 10 { m = "0" + m }
            let d = String(degrees)
            return String(repeating: "0", count: max(0, degreeDigits - d.count)) + d + m
        }
        return (
            dm(c.latitude, degreeDigits: 2), c.latitude >= 0 ? "N" : "S", dm(c.longitude, degreeDigits: 3), c.longitude >= 0 ? "E" : "W"
        )
    }

    static func timeOfDay(_ t: Timestamp) -> String {
        let iso = t.formatted(fractionDigits: 2)  // 2026-05-14T08:00:00.25Z
        return String(iso.dropFirst(11).prefix(11).filter { $0 != ":" })
    }

    static func dateField(_ t: Timestamp) -> String {
        let iso = t.formatted(fractionDigits: 0)
        let y = iso.dropFirst(2).prefix(2), m = iso.dropFirst(5).prefix(2), d = iso.dropFirst(8).prefix(2)
        return "\(d)\(m)\(y)"
    }

    static func pad(_ n: Int) -> String { n < 10 ? "0\(n)" : String(n) }
    static func pad3(_ n: Int) -> String { n < 10 ? "00\(n)" : n < 100 ? "0\(n)" : String(n) }

    static func decimal(_ value: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = Int64((value * scale).rounded())
        let whole = scaled / Int64(scale), fraction = abs(scaled % Int64(scale))
        let f = String(fraction)
        let sign = value < 0 && whole == 0 && fraction != 0 ? "-" : ""
        return digits == 0 ? "\(sign)\(whole)" : "\(sign)\(whole).\(String(repeating: "0", count: digits - f.count))\(f)"
    }
}
