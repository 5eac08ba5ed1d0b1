import Foundation
import TagFixCore
import TagFixTesting
import Testing

/// gpsd's own expected JSON output for its regression logs (`nmea/gpsd/*.log.chk`).
private let chkFiles = TestData.files(in: "nmea/gpsd", suffix: ".chk")

@Suite("gpsd JSON reports")
struct GPSDReportTests {
    @Test(
        "every report in gpsd's .chk files parses, and TPV become fixes or say why not",
        .enabled(if: !chkFiles.isEmpty, Comment(rawValue: TestData.skipReason)), arguments: chkFiles)
    func chk(_ path: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var tpv = 0, fixes = 0, positioned = 0
        var satellites: Int?
        for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix("{") {
            let report = try GPSDReport.parse(line: String(line))
            let raw = try JSONValue.parse(String(line))
            switch report {
            case .sky(let used, _):
                #expect(raw["class"]?.string == "SKY")
                satellites = used ?? satellites
            case .tpv(let report):
                tpv += 1
                #expect(report.mode == Int(raw["mode"]?.double ?? -1))
                switch report.fix(satellitesUsed: satellites) {
                case .success(let fix):
                    fixes += 1
                    #expect(fix.time == Timestamp(iso8601: raw["time"]?.string ?? ""))
                    if fix.hasPosition {
                        positioned += 1
                        // Exactly gpsd's numbers, and never NaN.
                        #expect(fix.coordinate?.latitude == raw["lat"]?.double)
                        #expect(fix.coordinate?.longitude == raw["lon"]?.double)
                        #expect(
                            fix.horizontalAccuracy
                                == (raw["eph"]?.double ?? Fix.horizontalAccuracy(eph: nil, epx: raw["epx"]?.double, epy: raw["epy"]?.double))
                        )
                        #expect(fix.mode.rawValue == report.mode)
                    } else {
                        #expect(report.mode < 2)
                    }
                case .failure(let rejection):
                    // Only reports without a time are refused in these logs.
                    #expect(rejection == .noTime, "\(line)")
                    #expect(raw["time"] == nil)
                }
            case .other(let name):
                #expect(name != "TPV" && name != "SKY")
            }
        }
        #expect(tpv > 0)
        #expect(fixes <= tpv)
        if path.contains("ublox-lea-5q") || path.contains("bu303-nofix") {
            #expect(positioned == 0, "a log without a fix gives no position")
        }
    }

    @Test("status is normalised: absent or 0 during a fix is plain GPS; 8 is simulated")
    func status() throws {
        func status(_ json: String) throws -> Fix.Status? {
            guard case .tpv(let tpv) = try GPSDReport.parse(line: json) else { return nil }
            return try tpv.fix(satellitesUsed: nil).get().status
        }
        #expect(try status(#"{"class":"TPV","mode":3,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2}"#) == .gps)
        #expect(try status(#"{"class":"TPV","mode":3,"status":0,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2}"#) == .gps)
        #expect(try status(#"{"class":"TPV","mode":3,"status":2,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2}"#) == .dgps)
        #expect(try status(#"{"class":"TPV","mode":3,"status":8,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2}"#) == .simulated)
    }

    @Test(
        "a 2D/3D report without a usable position is refused",
        arguments: [
            (#"{"class":"TPV","mode":3,"time":"2026-01-01T00:00:00Z"}"#, FixRejection.noPosition),
            (#"{"class":"TPV","mode":3,"time":"2026-01-01T00:00:00Z","lat":95,"lon":2}"#, .badPosition(.latitudeOutOfRange(95))),
            (#"{"class":"TPV","mode":2,"lat":1,"lon":2}"#, .noTime),
        ])
    func refused(_ json: String, _ expected: FixRejection) throws {
        guard case .tpv(let tpv) = try GPSDReport.parse(line: json) else {
            Issue.record("not a TPV")
            return
        }
        #expect(tpv.fix(satellitesUsed: nil) == .failure(expected))
    }

    @Test(
        "garbage lines are errors, not crashes",
        arguments: ["", "{", "[]", #"{"mode":3}"#, #"{"class":"TPV","time":"yesterday"}"#, "$GPGGA,1,2,3"])
    func garbage(_ line: String) {
        #expect(throws: DataFileError.self) { try GPSDReport.parse(line: line) }
    }

    @Test("accuracy from eph, else from epx and epy")
    func accuracy() {
        #expect(Fix.horizontalAccuracy(eph: 5, epx: 3, epy: 4) == 5)
        #expect(Fix.horizontalAccuracy(eph: .nan, epx: 3, epy: 4) == 5)
        #expect(Fix.horizontalAccuracy(eph: nil, epx: 3, epy: nil) == nil)
        #expect(Fix.horizontalAccuracy(eph: -1, epx: nil, epy: nil) == nil)
    }
}
