import Foundation
import TagFixCore
import TagFixDevices
import TagFixScenarios
import TagFixTesting
import Testing

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
let exampleScenario = packageRoot + "/Examples/site/scenario.json"

@Suite("The bundled example site")
struct ExampleSiteTests {
    func verdicts() throws -> [Verdict] {
        let scenario = try ScenarioLoader.load(path: exampleScenario)
        let registry = try RegistryFile.parse(try TextFile.read(packageRoot + "/Examples/site/" + (scenario.registryPath ?? "")))
        return ScenarioReplay.verdicts(scenario, verifier: Verifier(policy: scenario.policy, registry: registry))
    }

    @Test("every tap gets the verdict the site was built to show")
    func expected() throws {
        let byTag = Dictionary(try verdicts().map { ($0.tagID ?? $0.scan.uid.hex, $0.kind) }, uniquingKeysWith: { a, _ in a })
        #expect(byTag["T01"] == .confirmed)
        #expect(byTag["T02"] == .confirmed)
        #expect(byTag["T03"] == .outside, "the moved tag")
        #expect(byTag["P7"] == .confirmed, "the tag whose URL carries its location")
        #expect(byTag["T04"]?.reasonCode == "stale_fix", "tapped during a silent GPS dropout")
        #expect(byTag["T05"]?.reasonCode == "no_fix", "tapped while the receiver reports no fix")
        #expect(byTag["T06"]?.reasonCode == "poor_accuracy", "tapped in the poor-accuracy stretch")
        #expect(byTag["X99"] == .notRegistered)
        #expect(byTag["T07"] == .confirmed)
        #expect(byTag["T08"]?.reasonCode == "straddles_boundary")
        #expect(byTag["T09"] == .disallowed(.tagDisallowed("T09")))
        #expect(byTag["T10"] == .confirmed)
        #expect(byTag.count == 12)
    }

    @Test("the moved tag is reported about 120 m north")
    func moved() throws {
        let moved = try #require(try verdicts().first { $0.tagID == "T03" })
        #expect(abs(try #require(moved.distance) - 120) < 5)
        #expect(Geodesic.compassPoint(forAzimuth: try #require(moved.bearing)) == "N")
    }

    @Test("the same scenario gives the same verdicts every time")
    func deterministic() throws {
        #expect(try verdicts() == (try verdicts()))
    }
}

@Suite("Scenario files")
struct ScenarioLoaderTests {
    @Test("a walked route is sampled at the rate, with seeded noise")
    func route() throws {
        func fixes(seed: Int) throws -> [Fix] {
            let text = """
                {"start": "2026-01-01T00:00:00Z",
                 "gps": {"rate_hz": 2, "accuracy_m": 5, "seed": \(seed),
                         "route": [{"t": 0, "lat": 10, "lon": 20}, {"t": 10, "lat": 10.001, "lon": 20}]}}
                """
            return try ScenarioLoader.parse(text).gps.compactMap {
                if case .fix(let fix) = $0.event { return fix }
                return nil
            }
        }
        let a = try fixes(seed: 1), b = try fixes(seed: 1), c = try fixes(seed: 2)
        #expect(a.count == 21)
        #expect(a == b)
        #expect(a != c)
        // Noise of σ = 5/2.45 m stays within a few σ of the straight line.
        for fix in a {
            let position = try #require(fix.coordinate)
            #expect(abs(position.longitude - 20) * 111_320 * cos(10 * Double.pi / 180) < 15)
        }
        #expect(a.last.map { abs($0.coordinate!.latitude - 10.001) * 111_320 } ?? 99 < 15)
    }

    @Test("dropouts and degraded windows shape the fixes")
    func windows() throws {
        let text = """
            {"start": "2026-01-01T00:00:00Z",
             "gps": {"route": [{"t": 0, "lat": 10, "lon": 20}, {"t": 30, "lat": 10, "lon": 20}],
                     "dropouts": [{"from": 5, "to": 10, "kind": "silent"}, {"from": 15, "to": 18, "kind": "no_fix"}],
                     "degraded": [{"from": 20, "to": 25, "accuracy_m": 70}]}}
            """
        let scenario = try ScenarioLoader.parse(text)
        let fixes = scenario.gps.compactMap { item -> (Double, Fix)? in
            if case .fix(let fix) = item.event { return (scenario.start.duration(to: item.at).seconds, fix) }
            return nil
        }
        #expect(!fixes.contains { (5..<10).contains($0.0) })
        #expect(fixes.filter { (15..<18).contains($0.0) }.allSatisfy { $0.1.mode == .noFix })
        #expect(fixes.filter { (20..<25).contains($0.0) }.allSatisfy { $0.1.horizontalAccuracy == 70 })
        #expect(fixes.filter { $0.0 < 5 }.allSatisfy { $0.1.horizontalAccuracy == 4 })
    }

    @Test(
        "each mistake names its line",
        arguments: [
            ("{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"taps\": [{\"t\": 1, \"uid\": \"zz\"}]\n}", 3, "not hex"),
            ("{\n\"start\": \"yesterday\"\n}", 2, "RFC 3339"),
            ("{\n\"name\": \"x\"\n}", 1, "missing \"start\""),
            ("{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"gps\": {\n\"fixes\": [{\"t\": 1, \"lat\": 91, \"lon\": 0}]}\n}", 4, "latitude 91"),
            ("{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"gps\": {\"rate_hz\": -1}\n}", 3, "above 0"),
            ("{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"taps\": [{\"t\": -4, \"uid\": \"04A1B2C3\"}]\n}", 3, "≥ 0"),
            ("{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"policy\": {\"max_fix_age\": 3}\n}", 3, "unknown member \"max_fix_age\""),
            (
                "{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"taps\": [{\"t\": 1, \"uid\": \"04A1B2C3\", \"source\": \"qr\"}]\n}", 3,
                "\"nfc\" or \"link\""
            ),
            ("{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"gps\": {\"dropouts\": [{\"from\": 5, \"to\": 2}]}\n}", 3, "\"from\" < \"to\""),
            (
                "{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"gps\": {\"rate_hz\": 50,\n\"route\": [{\"t\": 0, \"lat\": 1, \"lon\": 1}, {\"t\": 1e8, \"lat\": 1, \"lon\": 1}]}\n}",
                4, "at most 1 000 000"
            ),
            ("{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"taps\": [\n{\"t\": 1, \"uid\": \"04A1B2C3\"},,\n]\n}", 4, "invalid JSON"),
        ])
    func errors(_ text: String, _ line: Int, _ fragment: String) {
        do {
            _ = try ScenarioLoader.parse(text)
            Issue.record("accepted a malformed scenario")
        } catch {
            #expect(error.line == line, "\(error)")
            #expect(error.message.contains(fragment), "\(error)")
        }
    }

    @Test("a missing file is unreadable, not malformed")
    func missing() {
        do {
            _ = try ScenarioLoader.load(path: "/nonexistent/scenario.json")
            Issue.record("loaded a missing file")
        } catch {
            #expect(error.unreadable)
            #expect(error.description.hasPrefix("/nonexistent/scenario.json"))
        }
    }
}

private let gpsdLogs = TestData.files(in: "nmea/gpsd", suffix: ".log.chk")

@Suite("Replaying gpsd recordings")
struct GPSDReplayTests {
    @Test(
        "gpsd's own output replays as fixes through a scenario", .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)),
        arguments: gpsdLogs)
    func replay(_ path: String) throws {
        let name = (path as NSString).lastPathComponent
        let scenarioText = """
            {"start": "2026-01-01T00:00:00Z", "gps": {"gpsd_log": "\(name)"}}
            """
        let scenario = try ScenarioLoader.parse(scenarioText) { (relative: String) throws(DataFileError) -> String in
            try TextFile.read((path as NSString).deletingLastPathComponent + "/" + relative)
        }
        let text = try TextFile.read(path)
        let timedTPV = text.split(whereSeparator: \.isNewline).filter { $0.contains(#""class":"TPV""#) && $0.contains(#""time""#) }
        let fixes = scenario.gps.compactMap { item -> Fix? in
            if case .fix(let fix) = item.event { return fix }
            return nil
        }
        #expect(fixes.count == timedTPV.count)
        // Aligned: the first fix is at the scenario's start, and times keep their spacing.
        if !fixes.isEmpty { #expect(fixes.first?.time == scenario.start) }
        #expect(zip(fixes, fixes.dropFirst()).allSatisfy { $0.time <= $1.time } || name.contains("coldboot"))
    }
}
