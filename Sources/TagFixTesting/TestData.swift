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
