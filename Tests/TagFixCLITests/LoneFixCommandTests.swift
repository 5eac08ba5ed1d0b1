import Foundation
import TagFixCLI
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixTesting
import Testing

/// pynmeagps's bad-checksum log: gpsd's only fix is one RMC's, mode 2, with no SKY after it.
private let lone = TestData.files(in: "nmea/other", suffix: "nmeabadck.log").first

@Suite("A recording with one fix through tagfix fix", .timeLimit(.minutes(2)))
struct LoneFixCommandTests {
    @Test(
        "tagfix fix gives gpsd's only fix (mode 2, no SKY after it): it does not wait for a SKY that never comes",
        .enabled(if: PrivateGPSD.installedPath != nil && lone != nil, "needs gpsd and TAGFIX_TESTDATA"))
    func loneFix() async throws {
        let lines = try TextFile.read(try #require(lone)).split(whereSeparator: \.isNewline).map(String.init)
        let receiver = try NMEAEmulator(source: .log(lines), rate: 20)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            let output = CapturedOutput()
            let command = Task {
                await TagFixCommandLine.run(
                    ["fix", "--gps", "gpsd://127.0.0.1:\(gpsd.port)", "--json", "--count", "1", "--timeout", "20"], output: output)
            }
            for _ in 0..<1500 where !output.stderr.contains(where: { $0.hasPrefix("gps: gpsd at") }) {
                try await Task.sleep(for: .milliseconds(20))
            }
            receiver.start()
            let code = await command.value
            #expect(code == 0, "\(output.stderr)")
            let fixes = try output.stdout.map { try JSONValue.parse($0) }
            #expect(fixes.count == 1)
            #expect(fixes.first?["mode"]?.double == 2)
            #expect(abs((fixes.first?["lon"]?.double ?? 0) + 102.2404103) < 1e-6)
        }
    }
}
