import Foundation
import TagFixCLI
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import Testing

/// Placements that learn, end to end: tags enrolled (a registry with their enrolled centres and
/// accuracies), tapped on later days through `verify` with a session log per day, then
/// `registry refine` over the logs — once from scenario replays (the real verifier, many days
/// quickly), once through the hardware path (the NMEA emulator's correlated sky read by a private
/// gpsd, the PN532 emulator read by the real libnfc, `enroll` making the registry).
@Suite("tagfix registry refine, end to end")
struct RefineEndToEndTests {
    /// Where tag A really is, and where it was enrolled: 2.5 m east and 1.5 m south of it, ±4 m.
    static let truthA = Coordinate(validLatitude: 53.545, longitude: 9.966)
    static let enrolledA = offset(truthA, east: 2.5, north: -1.5)
    /// Tag B was enrolled where it was (±2.5 m), then moved 8 m east; its radius is 25 m.
    static let enrolledB = offset(truthA, east: 0, north: 120)
    static let truthB = offset(enrolledB, east: 8, north: 0)

    static func offset(_ origin: Coordinate, east: Double, north: Double) -> Coordinate {
        Coordinate(
            validLatitude: origin.latitude + north / 111_257.6,
            longitude: origin.longitude + east / (111_412.84 * cos(origin.latitude * .pi / 180)))
    }

    /// The registry: A and B as enrolled.
    static func registry(in folder: String) async throws -> String {
        let csv = folder + "/site.csv"
        let text = """
            id,uid,lat,lon,radius_m,name,enrolled_at,enrolled_by,accuracy_m,fixes,notes
            A,04A10000000001,\(enrolledA.latitude),\(enrolledA.longitude),25,Gate,2026-05-01T08:00:00Z,tech,4,30,
            B,04B20000000002,\(enrolledB.latitude),\(enrolledB.longitude),25,Pump,2026-05-01T08:05:00Z,tech,2.5,30,

            """
        try text.write(toFile: csv, atomically: true, encoding: .utf8)
        let store = folder + "/site.sqlite"
        let imported = await run(["registry", "import", csv, "--registry", store])
        #expect(imported.code == 0, "\(imported.err)")
        return store
    }

    /// One day's walk: 1 Hz fixes at each tag whose error is that day's (GNSS errors wander for
    /// minutes: within a visit they barely change, from day to day they are independent), one
    /// tap of each tag.
    static func day(_ number: Int, in folder: String, random: inout SeededGenerator) throws -> String {
        var fixes: [String] = []
        var taps: [String] = []
        for (index, (truth, uid, id)) in [(truthA, "04A10000000001", "A"), (truthB, "04B20000000002", "B")].enumerated() {
            let (east, north) = (1.2 * random.gaussian(), 1.2 * random.gaussian())
            let from = index * 60
            for second in 0...20 {
                let point = offset(truth, east: east + 0.1 * random.gaussian(), north: north + 0.1 * random.gaussian())
                fixes.append(#"{"t": \#(from + second), "lat": \#(point.latitude), "lon": \#(point.longitude), "accuracy_m": 3}"#)
            }
            taps.append(#"{"t": \#(from + 8), "uid": "\#(uid)", "type": "ntag213", "url": "https://tags.example.org/t/\#(id)"}"#)
        }
        let scenario = """
            {"name": "day \(number)", "start": "2026-05-\(String(format: "%02d", 1 + number))T09:00:00Z", "reader": "mock",
             "gps": {"fixes": [\(fixes.joined(separator: ", "))]},
             "taps": [\(taps.joined(separator: ", "))]}
            """
        let path = folder + "/day\(number).json"
        try scenario.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func estimates(_ lines: [String]) throws -> [String: JSONValue] {
        var byID: [String: JSONValue] = [:]
        for line in lines {
            let value = try JSONValue.parse(line)
            if let id = value["id"]?.string { byID[id] = value }
        }
        return byID
    }

    /// A registry entry's centre, as `registry show --json` gives it.
    static func centre(_ value: JSONValue) -> Coordinate? {
        guard let lat = value["lat"]?.double, let lon = value["lon"]?.double else { return nil }
        return Coordinate(validLatitude: lat, longitude: lon)
    }

    static func position(_ value: JSONValue?, _ prefix: String) -> Coordinate? {
        guard let lat = value?["\(prefix)_lat"]?.double, let lon = value?["\(prefix)_lon"]?.double else { return nil }
        return Coordinate(validLatitude: lat, longitude: lon)
    }

    @Test("taps on later days move the centre towards the truth; a tag moved 8 m is reported moved while every tap is confirmed")
    func refine() async throws {
        let folder = (try temporaryFile("placeholder", "") as NSString).deletingLastPathComponent
        let store = try await Self.registry(in: folder)
        var random = SeededGenerator(seed: 31)
        var logs: [String] = []
        for number in 1...6 {
            let log = folder + "/day\(number).jsonl"
            let verified = await run([
                "verify", "--scenario", try Self.day(number, in: folder, random: &random), "--registry", store, "--log", log,
            ])
            #expect(verified.code == 0, "\(verified.err)")
            let records = try SessionLog.read(path: log).records.map { try SessionRecord($0.value, line: $0.line) }
            #expect(records.count == 2)
            #expect(records.allSatisfy { $0.verdict == "confirmed" }, "every tap is confirmed: \(records.map(\.message))")
            logs.append(log)

            let refined = await run(["registry", "refine", "--registry", store, "--log", log, "--json"])
            #expect(refined.code == 0, "\(refined.err)")
            let b = try Self.estimates(refined.out)["B"]
            // Not before a few visits; from the third day on, every day.
            #expect(b?["moved"]?.bool == (number >= 3), "day \(number): \(b.map { "\($0)" } ?? "nothing")")
        }

        // Reading every log again adds nothing: the evidence is the same, and so is the answer.
        let again = await run(["registry", "refine", "--registry", store, "--json"] + logs.flatMap { ["--log", $0] })
        #expect(again.code == 0, "\(again.err)")
        #expect(again.err.contains { $0.contains("recorded 0 new confirmed taps from 6 logs (12 known already)") }, "\(again.err)")
        let estimates = try Self.estimates(again.out)
        let a = try #require(estimates["A"])
        #expect(a["taps"]?.double == 6)
        #expect(a["visits"]?.double == 6)
        #expect(a["moved"]?.bool == false)
        let refinedA = try #require(Self.position(a, "refined"))
        let before = Geodesic.distance(from: Self.truthA, to: Self.enrolledA)
        let after = Geodesic.distance(from: Self.truthA, to: refinedA)
        #expect(after < before / 2, "the refined centre is \(after) m from the truth, the enrolled one \(before) m")
        #expect(try #require(a["refined_accuracy_m"]?.double) < 4)
        let b = try #require(estimates["B"])
        #expect(b["status"]?.string == "moved")
        #expect(abs(try #require(b["shift_m"]?.double) - 8) < 2)
        #expect(again.err.contains { $0.hasPrefix("moved: B:") }, "\(again.err)")

        // --apply records A's refined placement (and says so), never B's.
        let applied = await run(["registry", "refine", "--registry", store, "--apply"])
        #expect(applied.code == 0, "\(applied.err)")
        #expect(applied.out.contains { $0.hasPrefix("applied A: ") && $0.contains("kept in the history") }, "\(applied.out)")
        #expect(!applied.out.contains { $0.hasPrefix("applied B") })
        #expect(applied.out.last?.hasSuffix("1 placement changed in \(store)") == true, "\(applied.out)")
        let shown = try JSONValue.parse(try #require(await run(["registry", "show", "A", "--registry", store, "--json"]).out.first))
        #expect(Geodesic.distance(from: refinedA, to: try #require(Self.centre(shown))) < 0.01)
        let shownB = try JSONValue.parse(try #require(await run(["registry", "show", "B", "--registry", store, "--json"]).out.first))
        #expect(Geodesic.distance(from: Self.enrolledB, to: try #require(Self.centre(shownB))) < 0.01, "B stays")
        // registry show tells the history: A's one refinement, from the enrolled centre to the refined one; none for B.
        let history = try #require(shown["history"]?.array)
        #expect(history.count == 1, "\(shown)")
        let change = try #require(history.first)
        let to = Coordinate(validLatitude: change["to_lat"]?.double ?? 0, longitude: change["to_lon"]?.double ?? 0)
        #expect(Geodesic.distance(from: refinedA, to: to) < 0.01, "\(change)")
        #expect(abs((change["shift_m"]?.double ?? -1) - Geodesic.distance(from: Self.enrolledA, to: refinedA)) < 0.01, "\(change)")
        #expect((change["visits"]?.double ?? 0) >= 2, "\(change)")
        #expect(shownB["history"]?.array?.isEmpty == true, "\(shownB)")
        let text = await run(["registry", "show", "A", "--registry", store])
        let shownLines = text.out.joined(separator: "\n").split(separator: "\n")
        #expect(shownLines.contains { $0.hasPrefix("history:") && $0.contains("refined, moved") && $0.contains("visits") }, "\(text.out)")

        // Applying again changes nothing: the taps are not counted twice.
        let twice = await run(["registry", "refine", "--registry", store, "--apply"])
        #expect(twice.out.last?.hasSuffix("0 placements changed in \(store)") == true, "\(twice.out)")
        let shownAgain = try JSONValue.parse(try #require(await run(["registry", "show", "A", "--registry", store, "--json"]).out.first))
        #expect(shownAgain["history"]?.array?.count == 1, "nothing new in the history")
        let still = try Self.estimates(await run(["registry", "refine", "--registry", store, "--json"]).out)
        #expect(still["A"]?["status"]?.string == "unchanged")
        #expect(still["A"]?["enrolled_accuracy_m"]?.double == 4, "the enrolment stays the baseline")

        // tagfix report lists the moved tag, from the registry's evidence.
        let report = await run(["report", logs[0], "--registry", store])
        #expect(report.code == 0, "\(report.err)")
        let page = report.out.joined(separator: "\n")
        let section = try #require(page.range(of: "id=\"placement-moved\"")).upperBound
        let table = String(page[section...]).components(separatedBy: "</table>")[0]
        #expect(table.contains("<td>B</td>"), "\(table)")
        #expect(!table.contains("<td>A</td>"))
    }

    /// A tag that answers as itself: its own UID (the registry binds it) and its URL.
    static func tag(_ id: String, uid last: UInt8) throws -> EmulatedType2Tag {
        try EmulatedType2Tag.ntag(
            213, message: NDEFMessage(records: [.uri("https://tags.example.org/t/\(id)")]).encoded(),
            uid: [0x04, 0x51, 0x0A, 0x0B, 0x0C, 0x0D, last])
    }

    /// One tap through the hardware path: the reader holding `tag`, the receiver on `gps`, the
    /// verdict appended to `log`.
    static func tap(_ tag: EmulatedType2Tag, gps: String, registry: String, log: String) async throws -> JSONValue {
        let reader = try PN532Emulator(tags: [tag])
        defer { reader.stop() }
        let verified = await run([
            "verify", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--registry", registry, "--json", "--count", "1",
            "--timeout", "60", "--fix-timeout", "30", "--log", log,
        ])
        #expect(verified.code == 0, "\(verified.err)")
        return try JSONValue.parse(try #require(verified.out.first))
    }

    @Test(
        "through the NMEA emulator, gpsd, the PN532 emulator and libnfc: enrolled on a bad day, tapped on later days, refine moves the centre towards the truth; a tag moved 8 m within its 25 m is reported moved after a few confirmed taps",
        .enabled(if: gpsdInstalled, "gpsd is not installed"))
    func throughTheHardwarePath() async throws {
        let folder = (try temporaryFile("placeholder", "") as NSString).deletingLastPathComponent
        let registry = folder + "/site.sqlite"
        let truthA = Coordinate(validLatitude: 48.1372, longitude: 11.5756)
        let placedB = Self.offset(truthA, east: 0, north: 150)
        let truthB = Self.offset(placedB, east: 8, north: 0)
        let tagA = try Self.tag("A", uid: 0x01)
        let tagB = try Self.tag("B", uid: 0x02)

        // Day 0, enrolment, on a receiver of σ 1 m per axis (±2.5 m stated). That morning's slow
        // error (the correlated model's, seed 40) put A some 2 m north-east of where it is: within
        // what the receiver states, and the kind of error a visit cannot average away. B is moved
        // 8 m east after its enrolment.
        for (id, tag, spot) in [("A", tagA, truthA), ("B", tagB, placedB)] {
            try await withReceiver(at: spot, noise: 1, seed: 40) { _, _, gps in
                let reader = try PN532Emulator(tags: [tag])
                defer { reader.stop() }
                let enrolled = await run([
                    "enroll", "--id", id, "--radius", "25", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--registry", registry,
                    "--by", "ci",
                ])
                #expect(enrolled.code == 0, "\(enrolled.err)")
            }
        }
        let shown = await run(["registry", "show", "A", "--registry", registry, "--json"])
        let shownLine = try #require(shown.out.first, "\(shown.err)")
        let enrolledA = try #require(Self.centre(try JSONValue.parse(shownLine)))
        let before = Geodesic.distance(from: truthA, to: enrolledA)
        #expect(before > 1, "A was enrolled \(before) m from where it is")

        // Days 1–5: each day's sky its own slow error (the correlated model's, σ 1 m per axis,
        // seeded anew each day: independent from day to day, steady within a visit), each tag
        // tapped once, every tap confirmed; refine after each day.
        var logs: [String] = []
        for day in 1...5 {
            let log = folder + "/day\(day).jsonl"
            for (tag, spot) in [(tagA, truthA), (tagB, truthB)] {
                try await withReceiver(at: spot, noise: 1, seed: UInt64(100 + day), days: day) { _, _, gps in
                    let verdict = try await Self.tap(tag, gps: gps, registry: registry, log: log)
                    #expect(verdict["verdict"]?.string == "confirmed", "day \(day): \(verdict)")
                }
            }
            logs.append(log)
            let refined = await run(["registry", "refine", "--registry", registry, "--log", log, "--json"])
            #expect(refined.code == 0, "\(refined.err)")
            let b = try Self.estimates(refined.out)["B"]
            // A move needs three independent visits, and B shows one from the third day on.
            #expect(b?["moved"]?.bool == (day >= 3), "day \(day): \(b.map { "\($0)" } ?? "nothing")")
            #expect(b?["visits"]?.double == Double(day), "one visit a day: \(b.map { "\($0)" } ?? "nothing")")
        }

        let estimates = try Self.estimates(await run(["registry", "refine", "--registry", registry, "--json"]).out)
        let a = try #require(estimates["A"])
        #expect(a["moved"]?.bool == false, "\(a)")
        #expect(a["visits"]?.double == 5)
        let refinedA = try #require(Self.position(a, "refined"))
        let after = Geodesic.distance(from: truthA, to: refinedA)
        #expect(after < before / 2, "the refined centre is \(after) m from the truth, the enrolled one \(before) m")
        let b = try #require(estimates["B"])
        #expect(b["status"]?.string == "moved", "\(b)")
        // The taps put B where it now is, and the shift from its enrolment beyond both accuracies.
        let tapsB = try #require(Self.position(b, "taps"))
        #expect(Geodesic.distance(from: tapsB, to: truthB) < 2, "\(b)")
        #expect(try #require(b["shift_m"]?.double) > (try #require(b["moved_threshold_m"]?.double)), "\(b)")

        // --apply records A's refined placement, never B's; the report lists B as moved.
        let applied = await run(["registry", "refine", "--registry", registry, "--apply"])
        #expect(applied.code == 0, "\(applied.err)")
        #expect(applied.out.contains { $0.hasPrefix("applied A: ") }, "\(applied.out)")
        #expect(!applied.out.contains { $0.hasPrefix("applied B") })
        let report = await run(["report", logs[4], "--registry", registry])
        #expect(report.code == 0, "\(report.err)")
        let page = report.out.joined(separator: "\n")
        let section = try #require(page.range(of: "id=\"placement-moved\"")).upperBound
        let table = String(page[section...]).components(separatedBy: "</table>")[0]
        #expect(table.contains("<td>B</td>"), "\(table)")
        #expect(!table.contains("<td>A</td>"))
    }

    @Test(
        "refine's inputs that are not session logs each get one clear line and the documented exit",
        arguments: [("registry", 65, "not a session log"), ("missing", 66, "no such file"), ("other-json", 65, "not a tagfix session log")])
    func badLogs(_ kind: String, _ code: Int32, _ fragment: String) async throws {
        let folder = (try temporaryFile("placeholder", "") as NSString).deletingLastPathComponent
        let store = try await Self.registry(in: folder)
        let log: String
        switch kind {
        case "registry": log = store
        case "missing": log = folder + "/nope.jsonl"
        default:
            log = folder + "/tpv.jsonl"
            try #"{"class":"TPV","mode":3}"#.appending("\n").write(toFile: log, atomically: true, encoding: .utf8)
        }
        let result = await run(["registry", "refine", "--registry", store, "--log", log])
        #expect(result.code == code, "\(result.err)")
        #expect(result.err.count == 1, "\(result.err)")
        #expect(result.err.first?.contains(fragment) == true, "\(result.err)")
        #expect(await run(["registry", "list", "--registry", store]).code == 0, "the registry is untouched")
    }

    @Test("a torn last line is skipped with a note; the taps before it count")
    func tornLog() async throws {
        let folder = (try temporaryFile("placeholder", "") as NSString).deletingLastPathComponent
        let store = try await Self.registry(in: folder)
        var random = SeededGenerator(seed: 5)
        let log = folder + "/day.jsonl"
        #expect(
            await run(["verify", "--scenario", try Self.day(1, in: folder, random: &random), "--registry", store, "--log", log]).code == 0)
        let handle = try #require(FileHandle(forWritingAtPath: log))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"time":"2026-05-02T09:01:00Z","verdict":"conf"#.utf8))
        try handle.close()
        let result = await run(["registry", "refine", "--registry", store, "--log", log])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.err.first?.contains("skipped a torn last line") == true, "\(result.err)")
        #expect(result.err.contains { $0.hasPrefix("recorded 2 new confirmed taps from 1 log") }, "\(result.err)")
    }
}
