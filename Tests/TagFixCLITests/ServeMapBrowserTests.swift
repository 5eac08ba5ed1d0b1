import Foundation
import Synchronization
import TagFixCore
import TagFixReport
import TagFixTesting
import Testing

@Suite("tagfix serve's map: --tiles at start, and the live page walked in a browser")
struct ServeMapBrowserTests {
    @Test("a --tiles file that is not MBTiles is one line at start and exit 65; a missing one 66; a bad template 64")
    func badTiles() async throws {
        let garbage = try temporaryFile("site.mbtiles", "not SQLite at all, only its name says so\n")
        let socket = FileManager.default.temporaryDirectory.path + "/tagfix-maps-\(UUID().uuidString).sock"
        let serve = ["serve", "--reader", "pn532_uart:/dev/null", "--socket", socket, "--tiles"]
        let corrupt = await run(serve + [garbage])
        #expect(corrupt.code == 65)
        #expect(corrupt.err.count == 1, "\(corrupt.err)")
        #expect(corrupt.err.first?.contains("not an MBTiles file") == true, "\(corrupt.err)")
        #expect(await run(serve + ["/nonexistent/site.mbtiles"]).code == 66)
        #expect(await run(serve + ["https://t.example.org/{z}/{x}.png"]).code == 64)
        let report = await run(["report", "/nonexistent.jsonl", "--tiles", "https://t.example.org/{z}/{x}/{y}\"><script>"])
        #expect(report.code == 64)
        let log = try temporaryFile("one.jsonl", "")
        #expect(await run(["report", log, "--tiles", garbage]).code == 65)
        #expect(await run(["report", log, "--tiles", "/nonexistent/x.mbtiles"]).code == 66)
        #expect(await run(["report", log, "--max-zoom", "17"]).code == 64, "--max-zoom without --tiles")
        #expect(await run(["report", log, "--format", "csv", "--tiles", garbage]).code == 64)
    }

    @Test(
        "the live page during a walk (phone, then tablet): the tiles from /tiles/, progress up tap by tap, the left-to-tap list shrinking nearest first, the feed growing",
        .enabled(
            if: ServeEndToEndTests.runnable && ReportMapBrowserTests.ready,
            "needs the built tagfix, gpsd, chromium-driver, libjs-leaflet and TAGFIX_SELENIUM_PYTHON (scripts/test sets it up)"))
    func walk() async throws {
        let registry = try temporaryFile(
            "site.csv", "id,uid,lat,lon,radius_m,name\nE1,,53.545,9.966,30,Gate\nE2,,53.5476949,9.966,30,Shed\n")
        let mbtiles = FileManager.default.temporaryDirectory.path + "/tagfix-serve-\(UUID().uuidString).mbtiles"
        try await TestProgram.run(
            "/usr/bin/python3",
            [packageRoot + "/Tests/Browser/make_mbtiles.py", mbtiles] + ReportMapBrowserTests.tile.map(String.init) + ["53.5463", "9.966"],
            standardOutput: .discard, standardError: .discard)
        let rig = try await ServeRig(extra: ["--registry", registry, "--tiles", mbtiles])
        let artefacts = packageRoot + "/.build/test-artefacts"
        try FileManager.default.createDirectory(atPath: artefacts, withIntermediateDirectories: true)
        let browser = try RunningProgram(
            try #require(ServeEndToEndTests.seleniumPython),
            [packageRoot + "/Tests/Browser/live_walk.py", "http://127.0.0.1:\(rig.httpPort)/", artefacts + "/serve-walk"])
        let printed = { browser.transcript }
        let states = {
            printed().split(separator: "\n").filter { $0.hasPrefix("STATE ") }.compactMap {
                try? JSONValue.parse(String($0.dropFirst(6)))
            }
        }
        func progress(_ text: String) async -> Bool {
            await RunningTagFix.poll { states().contains { $0["progress"]?.string == text } || !browser.isRunning }
        }
        // The position is known once the left list says how far: wait for it before the first tap.
        #expect(
            await RunningTagFix.poll {
                states().contains { $0["left"]?.array?.first?.string?.contains(" m ") == true } || !browser.isRunning
            }, "\(printed())")
        #expect(await rig.tap(expecting: 1))
        #expect(await progress("1 of 2 tapped"), "\(printed())")
        #expect(await rig.tap(expecting: 2))
        #expect(await progress("2 of 2 tapped"), "\(printed())")
        _ = await RunningTagFix.poll { !browser.isRunning }
        if browser.isRunning { browser.signal(SIGTERM) }
        #expect(await rig.stop())
        let seen = states()
        #expect(seen.allSatisfy { $0["error"]?.isNull == true }, "a script error: \(seen)")
        let at = { (text: String) in seen.last { $0["progress"]?.string == text } }
        let before = try #require(
            seen.last { $0["progress"]?.string == "0 of 2 tapped" && $0["left"]?.array?.first?.string?.contains(" m ") == true })
        let left0 = before["left"]?.array?.compactMap(\.string) ?? []
        #expect(left0.count == 2)
        #expect(left0.first?.hasPrefix("E1, ") == true, "nearest first: \(left0)")
        let one = try #require(at("1 of 2 tapped"))
        let left1 = one["left"]?.array?.compactMap(\.string) ?? []
        #expect(left1.count == 1)
        // E2 is 300 m north of where the tech stands (±0.5 m of noise).
        #expect(
            left1.first.map { $0.hasPrefix("E2, 299 m N") || $0.hasPrefix("E2, 300 m N") || $0.hasPrefix("E2, 301 m N") } == true,
            "\(left1)")
        #expect(one["feed"]?.array?.count == 1)
        #expect(one["feed"]?.array?.first?.string?.contains("E1 (reader) confirmed") == true, "the verdict and its source: \(one)")
        let two = try #require(at("2 of 2 tapped"))
        #expect(two["feed"]?.array?.count == 2)
        #expect(two["feed"]?.array?.first?.string?.contains("E2 (reader) outside") == true, "newest first: \(two)")
        #expect(two["left"]?.array?.first?.string?.hasPrefix("none") == true)
        for state in seen {
            #expect((state["tiles"]?.double ?? 0) > 0 && state["tilesFromServer"]?.bool == true, "no tiles from /tiles/: \(state)")
            #expect(
                ReportMapBrowserTests.rgb(state["pixel"]) == ReportMapBrowserTests.tile, "the map's background is not the tiles: \(state)")
        }
        #expect(FileManager.default.fileExists(atPath: artefacts + "/serve-walk-tablet.png"))
    }

    @Test(
        "serve --demo: one command, the link it prints, and the live page shows the tiles, the progress going up, the list shrinking, the feed growing to the walk's nine verdicts",
        .enabled(
            if: ServeEndToEndTests.runnable && ReportMapBrowserTests.ready,
            "needs the built tagfix, gpsd, chromium-driver, libjs-leaflet and TAGFIX_SELENIUM_PYTHON (scripts/test sets it up)"))
    func demo() async throws {
        let mbtiles = FileManager.default.temporaryDirectory.path + "/tagfix-demo-\(UUID().uuidString).mbtiles"
        try await TestProgram.run(
            "/usr/bin/python3",
            [packageRoot + "/Tests/Browser/make_mbtiles.py", mbtiles] + ReportMapBrowserTests.tile.map(String.init) + [
                "53.5458", "9.9665",
            ],
            standardOutput: .discard, standardError: .discard)
        // As a newcomer runs it: no --socket. The demo makes none (root's default folder, /run/tagfix,
        // is not there on a fresh machine, and the demo needed it before).
        let serve = try RunningTagFix(["serve", "--demo", "--tiles", mbtiles])
        #expect(await serve.waitFor("the walk begins when the page is open", onStandardError: true), "\(serve.stderr)")
        #expect(!serve.stderr.contains("socket"), "\(serve.stderr)")
        let link = try #require(
            serve.stderr.components(separatedBy: "open ").dropFirst().first?.split(separator: " ").first.map(String.init))
        #expect(link.hasPrefix("http://127.0.0.1:"))
        let artefacts = packageRoot + "/.build/test-artefacts"
        try FileManager.default.createDirectory(atPath: artefacts, withIntermediateDirectories: true)
        let browser = try await ReportMapBrowserTests.python("live_walk.py", [link, artefacts + "/serve-demo", "9"])
        #expect(browser.code == 0, "\(browser.err)")
        #expect(await serve.waitFor("the walk is over", onStandardError: true), "\(serve.stderr)")
        #expect(await serve.stop(with: SIGTERM))
        let states = browser.lines.filter { $0.hasPrefix("STATE ") }.compactMap { try? JSONValue.parse(String($0.dropFirst(6))) }
        // A STATE waits for the tiles and a screenshot: on a busy machine the walk can be over
        // by the first one (CI, 05 Dec: one STATE, the last). The tiles are checked on every STATE.
        #expect(!states.isEmpty, "\(browser.lines)")
        #expect(states.allSatisfy { $0["error"]?.isNull == true }, "a script error: \(states)")
        // The walk starts as the page opens its stream, and a STATE waits for the tiles and a
        // screenshot (seconds on a busy machine): the walk is followed by what the page showed
        // at each change, as the page itself kept it (SEEN).
        let seen = browser.lines.filter { $0.hasPrefix("SEEN ") }.compactMap { try? JSONValue.parse(String($0.dropFirst(5))) }
        #expect(seen.count >= 2, "\(browser.lines)")
        #expect(seen.allSatisfy { $0["error"]?.isNull == true }, "a script error: \(seen)")
        let tapped = seen.compactMap { $0["progress"]?.string.flatMap { Int($0.prefix { $0.isNumber }) } }
        let feeds = seen.map { $0["feed"]?.array?.count ?? -1 }
        let left = seen.map { $0["left"]?.array?.count ?? -1 }
        #expect(tapped == tapped.sorted() && (tapped.last ?? 0) > (tapped.first ?? 0), "the progress did not go up: \(tapped)")
        #expect(feeds == feeds.sorted() && feeds.last == 9, "the feed did not grow to nine: \(feeds)")
        #expect(left == left.sorted(by: >) && (left.last ?? 0) < (left.first ?? 0), "the list did not shrink: \(left)")
        // The walk leaves T06, T08 and T10 untapped: what is left to tap, each with a distance.
        let last = try #require(states.last)
        // Progress counts the site's tags, not a tag the walk meets that the site does not know.
        let siteTags = try String(contentsOfFile: packageRoot + "/Examples/site/registry.csv", encoding: .utf8)
            .split(separator: "\n").dropFirst().filter { !$0.isEmpty }.count
        #expect(last["progress"]?.string?.hasSuffix("of \(siteTags) tapped") == true, "\(last)")
        #expect(
            Set(last["left"]?.array?.compactMap { $0.string?.split(separator: ",").first.map(String.init) } ?? []) == [
                "T06", "T08", "T10",
            ], "\(last)")
        for state in states {
            #expect((state["tiles"]?.double ?? 0) > 0 && state["tilesFromServer"]?.bool == true, "no tiles from /tiles/: \(state)")
            #expect(ReportMapBrowserTests.rgb(state["pixel"]) == ReportMapBrowserTests.tile, "\(state)")
        }
        #expect(FileManager.default.fileExists(atPath: artefacts + "/serve-demo-tablet.png"))
    }
}
