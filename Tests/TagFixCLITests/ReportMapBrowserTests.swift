import Foundation
import TagFixCore
import TagFixReport
import TagFixStore
import TagFixTesting
import Testing

/// The report's map in headless Chromium with the network off (Tests/Browser/report_map.py),
/// screenshots of a desktop, a tablet and a phone viewport in .build/test-artefacts.
@Suite("tagfix report's map in a browser")
struct ReportMapBrowserTests {
    static let ready =
        ServeEndToEndTests.seleniumPython != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver")
        && FileManager.default.fileExists(atPath: Leaflet.debianDirectory + "/leaflet.js")

    /// The tiles' one colour: no verdict's, no background's.
    static let tile = [51, 102, 153]

    /// Runs a script of Tests/Browser with the Selenium venv's Python; its standard output's lines.
    static func python(_ script: String, _ arguments: [String]) async throws -> (code: Int32, lines: [String], err: String) {
        let process = try await TestProgram.run(
            try #require(ServeEndToEndTests.seleniumPython), [packageRoot + "/Tests/Browser/" + script] + arguments)
        return (process.status, process.out, process.err)
    }

    /// A report of the example walk, with `extra` options; its path.
    static func report(_ name: String, _ extra: [String]) async throws -> (path: String, err: [String]) {
        let log = try await ReportCommandTests.sessionLog()
        let output = (log as NSString).deletingLastPathComponent + "/\(name).html"
        let result = await run(["report", log, "--registry", packageRoot + "/Examples/site/registry.csv", "--output", output] + extra)
        #expect(result.code == 0, "\(result.err)")
        return (output, result.err)
    }

    static func viewports(_ path: String, shot: String) async throws -> [JSONValue] {
        let artefacts = packageRoot + "/.build/test-artefacts"
        try FileManager.default.createDirectory(atPath: artefacts, withIntermediateDirectories: true)
        let browser = try await python("report_map.py", [path, artefacts + "/" + shot])
        #expect(browser.code == 0, "\(browser.err)")
        let lines = try browser.lines.map { try JSONValue.parse($0) }
        #expect(lines.map { $0["viewport"]?.string } == ["desktop", "tablet", "phone"], "\(browser.lines) \(browser.err)")
        for name in ["desktop", "tablet", "phone"] {
            #expect(FileManager.default.fileExists(atPath: "\(artefacts)/\(shot)-\(name).png"))
        }
        return lines
    }

    static func rgb(_ value: JSONValue?) -> [Int] { value?.array?.compactMap { $0.double.map { Int($0) } } ?? [] }

    /// `colour` (#rrggbb) at `opacity` over `under`.
    static func blend(_ colour: String, _ opacity: Double, over under: [Int]) -> [Int] {
        let hex = Array(colour.dropFirst())
        let top = stride(from: 0, to: 6, by: 2).map { Int(String(hex[$0..<$0 + 2]), radix: 16) ?? 0 }
        return zip(top, under).map { Int((Double($0) * opacity + Double($1) * (1 - opacity)).rounded()) }
    }

    static func near(_ a: [Int], _ b: [Int], within: Int = 6) -> Bool { a.count == 3 && zip(a, b).allSatisfy { abs($0 - $1) <= within } }

    @Test(
        "with --tiles FILE.mbtiles, the tiles' colour is under the circles in the screenshot's pixels, with the network off",
        .enabled(if: ready, "needs chromium-driver, libjs-leaflet and TAGFIX_SELENIUM_PYTHON (scripts/test sets it up)"))
    func tiles() async throws {
        let mbtiles = FileManager.default.temporaryDirectory.path + "/tagfix-report-\(UUID().uuidString).mbtiles"
        let made = try await TestProgram.run(
            "/usr/bin/python3",
            [packageRoot + "/Tests/Browser/make_mbtiles.py", mbtiles] + Self.tile.map(String.init) + ["53.5458", "9.9665"],
            standardOutput: .discard, standardError: .discard)
        #expect(made.status == 0)
        let (path, err) = try await Self.report("tiles", ["--tiles", mbtiles, "--max-zoom", "18"])
        #expect(err.contains { $0.hasPrefix("note: embedded ") && $0.contains("zooms") && $0.contains("KiB") }, "\(err)")
        for line in try await Self.viewports(path, shot: "report-tiles") {
            #expect(line["error"]?.isNull == true, "a script error: \(line)")
            #expect((line["tiles"]?.double ?? 0) > 0, "no tile loaded: \(line)")
            #expect(Self.rgb(line["outside"]) == Self.tile, "the base map is not the tiles' colour: \(line)")
            let fill = try #require(line["fill"]?.string), opacity = Double(line["opacity"]?.string ?? "") ?? 0
            let inside = Self.rgb(line["inside"])
            #expect(Self.near(inside, Self.blend(fill, opacity, over: Self.tile)), "not the tiles under the circle: \(line)")
            #expect(!Self.near(inside, Self.blend(fill, opacity, over: [248, 248, 244])), "the plain background under the circle: \(line)")
            // The tiles' file's attribution is shown as text, not markup.
            #expect(line["legend"]?.array?.count == 8)
        }
        let page = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!page.contains("<b>test</b>"), "the MBTiles attribution reached the page as markup")
    }

    @Test(
        "without tiles: the circles, the legend of the six verdicts, every verdict's taps, a plain background and no script error",
        .enabled(if: ready, "needs chromium-driver, libjs-leaflet and TAGFIX_SELENIUM_PYTHON (scripts/test sets it up)"))
    func plain() async throws {
        let (path, _) = try await Self.report("plain", [])
        let log = try await ReportCommandTests.sessionLog()
        let records = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").enumerated().map {
            try SessionRecord(try JSONValue.parse(String($0.element)), line: $0.offset + 1)
        }
        let expected = Dictionary(grouping: records, by: \.verdict).mapValues(\.count)
        for line in try await Self.viewports(path, shot: "report-plain") {
            #expect(line["error"]?.isNull == true, "a script error: \(line)")
            let legend = line["legend"]?.array?.compactMap(\.string) ?? []
            #expect(Array(legend.prefix(7)) == SiteMap.labels.map(\.1), "\(line)")
            let drawn = line["verdicts"]?.members.map { Dictionary(uniqueKeysWithValues: $0.map { ($0.key, Int($0.value.double ?? 0)) }) }
            #expect(drawn == expected, "not every tap is on the map: \(line)")
            #expect(Self.rgb(line["outside"]) == [248, 248, 244], "\(line)")
            let fill = try #require(line["fill"]?.string), opacity = Double(line["opacity"]?.string ?? "") ?? 0
            #expect(Self.near(Self.rgb(line["inside"]), Self.blend(fill, opacity, over: [248, 248, 244])), "\(line)")
        }
    }

    /// Names from a log nobody here wrote: markup, a script end tag, an event handler.
    static let hostileNames = [
        #"<img src=x onerror="document.documentElement.setAttribute('data-pwned','img')">"#,
        #"</script><script>document.documentElement.setAttribute('data-pwned','script')</script>"#,
    ]

    @Test(
        "hostile tag ids, messages and an MBTiles attribution reach the browser as text: nothing runs, nothing is injected, the labels read as written",
        .enabled(if: ready, "needs chromium-driver, libjs-leaflet and TAGFIX_SELENIUM_PYTHON (scripts/test sets it up)"))
    func hostile() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-hostile-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Two taps of two tags 60 m apart whose ids, names and messages are markup.
        let lines = Self.hostileNames.enumerated().map { index, name in
            let lat = 53.5458 + Double(index) * 0.0005, lon = 9.9665
            let text = JSONValue.quoted(name)
            return
                #"{"time":"2026-05-14T08:0\#(index):00.000Z","verdict":"confirmed","reason":null,"message":\#(text),"uid":null,"tag_id":\#(text),"url":null,"reader":"r","distance_m":2,"accuracy_m":3,"bearing_deg":0,"region":{"id":\#(text),"name":\#(text),"lat":\#(lat),"lon":\#(lon),"radius_m":20,"source":"url"},"fix_age_s":0,"interpolated":false,"fix":{"time":"2026-05-14T08:0\#(index):00.000Z","mode":"3d","lat":\#(lat + 0.00002),"lon":\#(lon),"accuracy_m":3}}"#
        }
        let log = folder + "/hostile.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: log, atomically: true, encoding: .utf8)
        let mbtiles = folder + "/hostile.mbtiles"
        let attribution = #"<img src=x onerror="document.documentElement.setAttribute('data-pwned','attribution')"> tiles"#
        let made = try await TestProgram.run(
            "/usr/bin/python3",
            [packageRoot + "/Tests/Browser/make_mbtiles.py", mbtiles] + Self.tile.map(String.init) + [
                "53.5460", "9.9665", "14", "18", "3",
            ],
            environment: ["MBTILES_ATTRIBUTION": attribution])
        #expect(made.status == 0, "\(made.output)")
        let output = folder + "/hostile.html"
        let result = await run(["report", log, "--tiles", mbtiles, "--max-zoom", "18", "--output", output])
        #expect(result.code == 0, "\(result.err)")
        for line in try await Self.viewports(output, shot: "report-hostile") {
            #expect(line["error"]?.isNull == true, "a script error: \(line)")
            let hostile = try #require(line["hostile"])
            #expect(hostile["pwned"]?.isNull == true, "a hostile name ran as script: \(line)")
            #expect(hostile["injected"]?.double == 0, "a hostile name became an element: \(line)")
            let labels = hostile["labels"]?.array?.compactMap(\.string) ?? []
            for name in Self.hostileNames { #expect(labels.contains(name), "the label does not read as written: \(labels)") }
            #expect(hostile["attribution"]?.string?.contains(attribution) == true, "\(line)")
            let drawn = line["verdicts"]?["confirmed"]?.double
            #expect(drawn == 2, "both taps drawn: \(line)")
        }
    }
}

@Suite("tagfix report's map options")
struct ReportMapOptionTests {
    /// The built tagfix with `environment` added; its exit code and standard error.
    static func tagfix(_ arguments: [String], environment: [String: String]) async throws -> (code: Int32, err: String) {
        let process = try await TestProgram.run(RunningTagFix.binary, arguments, environment: environment, standardOutput: .discard)
        return (process.status, process.err)
    }

    @Test(
        "without libjs-leaflet: a note naming the package and the plain SVG map; with --tiles, exit 69",
        .enabled(if: RunningTagFix.isBuilt, "needs the built tagfix"))
    func withoutLeaflet() async throws {
        let log = try await ReportCommandTests.sessionLog()
        let output = (log as NSString).deletingLastPathComponent + "/no-leaflet.html"
        let missing = ["TAGFIX_LEAFLET_DIR": "/nonexistent/leaflet"]
        let plain = try await Self.tagfix(["report", log, "--output", output], environment: missing)
        #expect(plain.code == 0, "\(plain.err)")
        #expect(plain.err.contains("apt-get install libjs-leaflet"), "\(plain.err)")
        #expect(try String(contentsOfFile: output, encoding: .utf8).contains("<svg"))
        let tiles = try await Self.tagfix(
            ["report", log, "--output", output, "--tiles", "https://tile.openstreetmap.org/{z}/{x}/{y}.png"], environment: missing)
        #expect(tiles.code == 69)
        #expect(tiles.err.split(separator: "\n").count == 1, "\(tiles.err)")
        #expect(tiles.err.contains("apt-get install libjs-leaflet"))
    }

    @Test(
        "a fleet store on tiles: each site its own Leaflet map with the MBTiles file's tiles over that site, embedded; --tiles URL for every site",
        .enabled(if: FileManager.default.fileExists(atPath: Leaflet.debianDirectory + "/leaflet.js"), "needs libjs-leaflet"))
    func fleetOnTiles() async throws {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        let db = folder + "/fleet.sqlite"
        let store = try FleetStore(path: db, create: true)
        // Two sites 20 km apart, two tags 330 m apart and one tap each.
        let sites = [("harbour", 53.545, 9.966), ("depot", 53.725, 9.966)]
        var placements: [FleetStore.Placement] = []
        for (index, (site, lat, lon)) in sites.enumerated() {
            for (tag, north) in [("T0\(index)", 0.0), ("T1\(index)", 0.003)] {
                let region = try CircularRegion(center: Coordinate(latitude: lat + north, longitude: lon), radius: 20, identifier: tag)
                placements.append(.init(site: site, entry: RegistryEntry(id: tag, uid: nil, region: region, name: tag), registry: "r.csv"))
            }
            let line =
                #"{"time":"2026-05-14T08:00:00.000Z","verdict":"confirmed","reason":null,"message":"m","uid":null,"tag_id":"T0\#(index)","url":null,"reader":"r","distance_m":2,"accuracy_m":3,"bearing_deg":0,"region":{"id":"T0\#(index)","name":"n","lat":\#(lat),"lon":\#(lon),"radius_m":20,"source":"registry"},"fix_age_s":0,"interpolated":false,"fix":{"time":"2026-05-14T08:00:00.000Z","mode":"3d","lat":\#(lat + 0.00002),"lon":\#(lon),"accuracy_m":3}}"#
            #expect(try store.store(id: "v\(index)", site: site, device: "van", payload: line, receivedNanoseconds: 1))
        }
        try store.replacePlacements(sites: Set(sites.map(\.0)), with: placements, loadedNanoseconds: 1)
        // One MBTiles file holding tiles around both sites (zooms 14–17, as make_mbtiles.py makes them).
        let mbtiles = folder + "/both.mbtiles"
        for (_, lat, lon) in sites {
            let made = try await TestProgram.run(
                "/usr/bin/python3",
                [packageRoot + "/Tests/Browser/make_mbtiles.py", mbtiles, "51", "102", "153", "\(lat)", "\(lon)", "14", "17", "3"],
                standardError: .standardOutput)
            #expect(made.status == 0, "\(made.output)")
        }
        let output = folder + "/fleet.html"
        let result = await run(["report", db, "--tiles", mbtiles, "--max-zoom", "17", "--output", output])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.err.filter { $0.hasPrefix("note: embedded ") }.count == 2, "a note per site: \(result.err)")
        let page = try String(contentsOfFile: output, encoding: .utf8)
        var keys: [Set<String>] = []
        for index in 0..<2 {
            let data = try #require(
                page.components(separatedBy: "id=\"site-data-\(index)\">").dropFirst().first?.components(separatedBy: "</script>").first)
            let base = try #require(try JSONValue.parse(data)["base"])
            #expect(base["kind"]?.string == "tiles")
            keys.append(Set(base["tiles"]?.members?.map(\.key) ?? []))
        }
        #expect(!keys[0].isEmpty && !keys[1].isEmpty && keys[0].isDisjoint(with: keys[1]), "each site's own tiles, 20 km apart")

        let served = await run(["report", db, "--tiles", "https://tiles.example.org/{z}/{x}/{y}.png", "--output", output])
        #expect(served.code == 0, "\(served.err)")
        let again = try String(contentsOfFile: output, encoding: .utf8)
        #expect(again.components(separatedBy: #""url":"https://tiles.example.org/{z}/{x}/{y}.png""#).count - 1 == 2)
    }

    @Test(
        "--tiles URL: the template reaches the page's data escaped, with OpenStreetMap's attribution for its servers",
        .enabled(if: FileManager.default.fileExists(atPath: Leaflet.debianDirectory + "/leaflet.js"), "needs libjs-leaflet"))
    func tileServer() async throws {
        let log = try await ReportCommandTests.sessionLog()
        let output = (log as NSString).deletingLastPathComponent + "/osm.html"
        let result = await run(["report", log, "--output", output, "--tiles", "https://tile.openstreetmap.org/{z}/{x}/{y}.png?a=1&b=2"])
        #expect(result.code == 0, "\(result.err)")
        let page = try String(contentsOfFile: output, encoding: .utf8)
        #expect(page.contains(#""url":"https://tile.openstreetmap.org/{z}/{x}/{y}.png?a=1\u0026b=2""#))
        #expect(page.contains("© OpenStreetMap contributors"))
    }
}
