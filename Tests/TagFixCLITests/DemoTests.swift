import Foundation
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import Testing

@testable import TagFixCLI
@testable import TagFixDemo

// Serialized: the process environment: throughGPSD and withMockGPS set TAGFIX_DEMO_GPS, which the
// in-process `verify --demo` reads, to different values.
@Suite("tagfix verify --demo: the example site through the emulators", .timeLimit(.minutes(2)), .serialized)
struct DemoTests {
    @Test("the built-in registry is the example site's registry file")
    func embeddedSite() throws {
        let file = try String(contentsOfFile: packageRoot + "/Examples/site/registry.csv", encoding: .utf8)
        #expect(ExampleSite.registryCSV == file)
        #expect(ExampleSite.registry().count == 10)
    }

    @Test(
        "through gpsd: every stop gives the verdict it shows, in order, and the log holds them all",
        .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
    func throughGPSD() async throws { try await verdicts("gpsd") }

    @Test("with the mock GPS (no gpsd): the same verdicts")
    func withMockGPS() async throws { try await verdicts("mock") }

    func verdicts(_ gps: String) async throws {
        setenv("TAGFIX_DEMO_GPS", gps, 1)
        defer { unsetenv("TAGFIX_DEMO_GPS") }
        let log = try temporaryFile("demo.jsonl", "")
        let result = await run(["verify", "--demo", "--json", "--log", log])
        #expect(result.code == 0, "\(result.err)")
        let verdicts = try result.out.map { try JSONValue.parse($0) }
        #expect(verdicts.map { $0["verdict"]?.string ?? "" } == ExampleSite.stops.map(\.expected))
        #expect(Set(verdicts.compactMap { $0["verdict"]?.string }).count == 6, "all six kinds")
        // T07's URL on a tag with another UID: a copy.
        #expect(verdicts[6]["reason"]?.string == "uid_mismatch", "\(verdicts[6])")
        #expect(verdicts[3]["reason"]?.string == "poor_accuracy")
        #expect(verdicts[4]["reason"]?.string == "no_fix")
        #expect(verdicts.last?["region"]?["source"]?.string == "url")
        #expect(result.err.contains { $0.contains(gps == "mock" ? "mock GPS" : "read by gpsd") })
        let logged = try SessionLog.read(path: log).records.map(\.value)
        #expect(logged == verdicts)
    }

    @Test("--demo refuses devices of its own")
    func usage() async {
        let result = await run(["verify", "--demo", "--reader", "pn532_uart:/dev/ttyUSB0"])
        #expect(result.code == 64)
        #expect(result.err.joined().contains("drop --reader"))
    }
}
