import Foundation
import TagFixCLI
import TagFixCore
import Testing

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
let example = packageRoot + "/Examples/site/scenario.json"

func run(_ arguments: [String]) async -> (code: Int32, out: [String], err: [String]) {
    let output = CapturedOutput()
    let code = await TagFixCommandLine.run(arguments, output: output)
    return (code, output.stdout, output.stderr)
}

/// A file in a fresh temporary folder.
func temporaryFile(_ name: String, _ contents: String) throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let path = folder.appendingPathComponent(name).path
    try contents.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

@Suite("tagfix command line")
struct CommandLineTests {
    @Test(
        "usage errors go to stderr with exit code 64",
        arguments: [
            [String](), ["frobnicate"], ["--frobnicate"], ["verify"], ["verify", "--scenario"],
            ["verify", "--scenario", example, "--bogus"],
            ["verify", "--scenario", example, "--max-accuracy", "abc"], ["verify", "--scenario", example, "--max-accuracy", "-3"],
            ["verify", "--scenario", example, "--json=yes"], ["verify", "--scenario", example, "--scenario", example],
            ["verify", "--scenario", example, "stray"], ["help", "frobnicate"],
            ["emulate", "nmea"], ["emulate", "nmea", "--at", "100,0"], ["emulate", "nmea", "--at", "1,2", "--log", "x.log"],
            ["emulate", "pn532"], ["emulate", "toaster"], ["fix", "--gps", "http://x"],
            ["emulate", "pn532", "--tag", "x.nfc", "--weak-tag", "1:0.3"], ["emulate", "pn532", "--tag", "x.nfc", "--weak-tag", "0:2"],
            ["emulate", "nmea", "--at", "1,2", "--weak-tag", "0:0.3"],
        ])
    func usage(_ arguments: [String]) async {
        let result = await run(arguments)
        #expect(result.code == 64)
        if arguments.first == "emulate", arguments.count > 2 {
            #expect(!result.err.joined().contains("unknown option"), "the option must be known; the value is what is wrong")
        }
        #expect(result.out.isEmpty)
        #expect(result.err.joined().contains("error:"))
        #expect(result.err.joined().contains("tagfix"))
    }

    @Test(
        "every command is in the overview, and 'help NAME' and 'NAME --help' both explain it",
        arguments: ["verify", "scan", "fix", "devices", "inspect", "emulate", "enroll", "registry", "report", "doctor"])
    func everyCommandHasHelp(_ name: String) async {
        let overview = await run(["--help"]).out.joined(separator: "\n")
        #expect(overview.contains("\n  \(name) "))
        let viaHelp = await run(["help", name])
        let viaFlag = await run([name, "--help"])
        #expect(viaHelp.code == 0)
        #expect(viaHelp.out.joined().contains("USAGE: tagfix \(name)"))
        #expect(viaFlag.code == 0)
        #expect(viaFlag.out == viaHelp.out)
        #expect(viaHelp.out.joined(separator: "\n").contains("EXAMPLES:\n  tagfix \(name)"), "every command shows examples")
    }

    @Test("help for tagfix and for verify", arguments: [["--help"], ["-h"], ["help"], ["help", "verify"], ["verify", "--help"]])
    func help(_ arguments: [String]) async {
        let result = await run(arguments)
        #expect(result.code == 0)
        let text = result.out.joined(separator: "\n")
        #expect(text.contains("USAGE: tagfix"))
        if arguments.contains("verify") {
            #expect(text.contains("--scenario FILE"))
            #expect(text.contains("EXAMPLES:"))
        } else {
            #expect(text.contains("Exit codes"))
        }
    }

    @Test("the example site shows all five verdict kinds")
    func exampleSite() async throws {
        let result = await run(["verify", "--scenario", example])
        #expect(result.code == 0)
        let text = result.out.joined(separator: "\n")
        for marker in ["✓ confirmed", "✗ outside", "? inconclusive", "– not registered", "⊘ disallowed"] {
            #expect(text.contains(marker), "missing \(marker)")
        }
        #expect(result.out.last == "12 scans: 5 confirmed, 1 outside, 4 inconclusive, 1 not registered, 1 disallowed")
    }

    @Test("--json prints one JSON object per verdict with the documented fields")
    func json() async throws {
        let result = await run(["verify", "--scenario", example, "--json"])
        #expect(result.code == 0)
        #expect(result.out.count == 12)
        var kinds = Set<String>()
        for line in result.out {
            let object = try JSONValue.parse(line)
            for key in ["verdict", "reason", "uid", "url", "distance_m", "accuracy_m", "region", "fix_age_s"] {
                #expect(object[key] != nil, "\(key) missing in \(line)")
            }
            kinds.insert(try #require(object["verdict"]?.string))
            if object["verdict"]?.string == "confirmed" {
                #expect(object["region"]?["radius_m"]?.double != nil)
                #expect(object["fix"]?["lat"]?.double != nil)
            }
        }
        #expect(kinds == ["confirmed", "outside", "inconclusive", "notRegistered", "disallowed"])
    }

    @Test("options override the scenario's policy")
    func overrides() async throws {
        let off = await run(["verify", "--scenario", example, "--json", "--no-confirmation"])
        #expect(off.out.allSatisfy { $0.contains(#""verdict":"disallowed""#) })
        let lenient = await run(["verify", "--scenario", example, "--json", "--max-accuracy", "100"])
        let fire = try #require(lenient.out.first { $0.contains(#""tag_id":"T06""#) })
        #expect(!fire.contains("poor_accuracy"))
    }

    @Test("a malformed scenario exits 65 naming the file and line")
    func malformedScenario() async throws {
        let path = try temporaryFile("bad.json", "{\n\"start\": \"2026-01-01T00:00:00Z\",\n\"taps\": [{\"t\": 1}]\n}")
        let result = await run(["verify", "--scenario", path])
        #expect(result.code == 65)
        #expect(result.err.joined().contains("\(path):3:"))
    }

    @Test("a malformed registry exits 65 naming the file and line")
    func malformedRegistry() async throws {
        let path = try temporaryFile("registry.csv", "id,lat,lon,radius_m\nA,1,2,10\nB,1,999,10\n")
        let result = await run(["verify", "--scenario", example, "--registry", path])
        #expect(result.code == 65)
        #expect(result.err.joined().contains("\(path):3:"))
        #expect(result.err.joined().contains("longitude 999"))
    }

    @Test(
        "a missing file exits 66",
        arguments: [["--scenario", "/nonexistent/s.json"], ["--scenario", example, "--registry", "/nonexistent/r.csv"]])
    func missing(_ options: [String]) async {
        let result = await run(["verify"] + options)
        #expect(result.code == 66)
        #expect(result.err.joined().contains("no such file"))
    }

    @Test("--realtime runs the live pipeline on the wall clock")
    func realtime() async throws {
        // A fix at the tap's instant decides at once: nothing waits on the clock.
        let path = try temporaryFile(
            "now.json",
            """
            {"start": "2026-01-01T00:00:00Z",
             "gps": {"fixes": [{"t": 0, "lat": 1, "lon": 2, "accuracy_m": 3}]},
             "taps": [{"t": 0, "uid": "04A1B2C3", "url": "geo:1,2;u=20"}]}
            """)
        // Generous limits: on a loaded machine the pipeline may see the scan seconds after its time.
        let result = await run(["verify", "--scenario", path, "--realtime", "--json", "--fix-timeout", "60", "--max-fix-age", "60"])
        #expect(result.code == 0)
        #expect(result.out.count == 1)
        #expect(result.out.first?.contains(#""verdict":"confirmed""#) == true, "\(result.out)")
    }
}

@Suite("The manual page")
struct ManPageTests {
    @Test("docs/tagfix.1 is what 'tagfix help --man' generates from the commands (regenerate it when they change)")
    func current() async throws {
        let file = try String(contentsOfFile: packageRoot + "/docs/tagfix.1", encoding: .utf8)
        let generated = await run(["help", "--man"])
        #expect(generated.code == 0)
        #expect(file == generated.out.joined(separator: "\n") + "\n", "run: .build/debug/tagfix help --man > docs/tagfix.1")
        for name in ["verify", "enroll", "registry", "report", "doctor", "devices", "scan", "fix", "inspect", "emulate", "sun"] {
            #expect(file.contains(".SH \(name.uppercased())\n"), "\(name) missing from the manual")
        }
    }
}
