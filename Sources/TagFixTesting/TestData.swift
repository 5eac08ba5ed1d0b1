import Foundation
public import TagFixCore
import TagFixDevices

/// Reference data that nobody on this project wrote (GeographicLib's GeodTest lines, gpsd's
/// regression logs, tag dumps…), read in place from the folder `TAGFIX_TESTDATA` names —
/// `../shared/testdata` in CI. Where it is not set, tests that need it are skipped with
/// `TestData.skipReason` and the rest still run.
public enum TestData {
    /// The environment variable that names the folder.
    public static let variable = "TAGFIX_TESTDATA"

    /// The folder, when the variable names an existing directory.
    public static var root: String? {
        guard let path = ProcessInfo.processInfo.environment[variable], !path.isEmpty else { return nil }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            return nil
        }
        return path
    }

    public static var isAvailable: Bool { root != nil }

    public static let skipReason =
        "reference data not found: set TAGFIX_TESTDATA to the shared testdata folder (../shared/testdata in CI)"

    /// The full path of `relative` inside the folder.
    public static func path(_ relative: String) -> String? {
        root.map { ($0 as NSString).appendingPathComponent(relative) }
    }

    /// The files of a subfolder whose names end with `suffix`, sorted; empty without the data.
    public static func files(in folder: String, suffix: String) -> [String] {
        guard let directory = path(folder),
            let names = try? FileManager.default.contentsOfDirectory(atPath: directory)
        else { return [] }
        return names.filter { $0.hasSuffix(suffix) }.sorted().map { (directory as NSString).appendingPathComponent($0) }
    }
}

extension TestData {
    /// gpsd's regression output for a log (`LOG.chk` beside it): the first TPV reported for each
    /// time, which is what a client that delivers each epoch once must match.
    public static func gpsdCheckTPVs(forLog path: String) throws -> [Timestamp: JSONValue] {
        var byTime: [Timestamp: JSONValue] = [:]
        for line in try TextFile.read(path + ".chk").split(whereSeparator: \.isNewline) where line.contains(#""class":"TPV""#) {
            let tpv = try JSONValue.parse(String(line))
            guard let text = tpv["time"]?.string, let time = Timestamp(iso8601: text), byTime[time] == nil else { continue }
            byTime[time] = tpv
        }
        return byTime
    }
}

/// What gpsd said about one receiver time, from its reports in order (a `.chk` file, `gpspipe -w`):
/// the truth a client that merges gpsd's reports into epochs must match.
public struct GPSDEpochTruth: Sendable {
    public let time: Timestamp
    /// Every position gpsd gave under this time, the first first (later ones: the next epoch,
    /// early, when the receiver's position reached gpsd before its time).
    public let positions: [Coordinate]
    /// The reports of the epoch: those with its first position, or all when none had one.
    public let reports: [GPSDReport.TPV]

    /// Every report gpsd gave under this time, in order.
    public let all: [GPSDReport.TPV]

    /// The same time, its epoch taken to be `position` (one of `positions`): the reports of that
    /// position. `nil` when gpsd gave no such position for this time.
    public func at(_ position: Coordinate) -> GPSDEpochTruth? {
        guard positions.contains(position) else { return nil }
        return GPSDEpochTruth(time: time, positions: positions, reports: all.filter { Self.position($0) == position }, all: all)
    }

    static func position(_ tpv: GPSDReport.TPV) -> Coordinate? {
        guard tpv.mode >= 2, let latitude = tpv.latitude, let longitude = tpv.longitude else { return nil }
        return try? Coordinate(latitude: latitude, longitude: longitude)
    }

    /// The highest mode gpsd gave for the epoch's position.
    public var mode: Int { reports.map(\.mode).max() ?? 0 }

    /// A field as gpsd last gave it for the epoch: from the latest report of the highest mode
    /// that has it, else from the latest report of any mode that has it.
    public func latest(_ field: KeyPath<GPSDReport.TPV, Double?>) -> Double? {
        let top = reports.filter { $0.mode == mode }
        return top.compactMap { $0[keyPath: field] }.last ?? reports.compactMap { $0[keyPath: field] }.last
    }

    /// The epochs of a stream of reports, by receiver time (TPVs without a time say nothing).
    public static func epochs(_ reports: [GPSDReport]) -> [Timestamp: GPSDEpochTruth] {
        var byTime: [Timestamp: [GPSDReport.TPV]] = [:]
        for case .tpv(let tpv) in reports {
            guard let time = tpv.time else { continue }
            byTime[time, default: []].append(tpv)
        }
        var epochs: [Timestamp: GPSDEpochTruth] = [:]
        for (time, tpvs) in byTime {
            var positions: [Coordinate] = []
            for tpv in tpvs {
                if let here = position(tpv), !positions.contains(here) { positions.append(here) }
            }
            let reports = positions.first.map { first in tpvs.filter { position($0) == first } } ?? tpvs
            epochs[time] = GPSDEpochTruth(time: time, positions: positions, reports: reports, all: tpvs)
        }
        return epochs
    }
}

extension TestData {
    /// gpsd's regression output for a log (`LOG.chk` beside it), every report in order (the NMEA
    /// sentences gpsd echoes between them are skipped).
    public static func gpsdCheckReports(forLog path: String) throws -> [GPSDReport] {
        try TextFile.read(path + ".chk").split(whereSeparator: \.isNewline).filter { $0.hasPrefix("{") }.map { line in
            try GPSDReport.parse(line: String(line))
        }
    }
}
