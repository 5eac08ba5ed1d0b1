import Foundation
import Testing

@testable import TagFixCLI

@Suite("The systemd unit example")
struct SystemdUnitTests {
    static let unit = (try? String(contentsOfFile: packageRoot + "/Examples/systemd/tagfix-verify.service", encoding: .utf8)) ?? ""

    static var execStart: [String] {
        let line = unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") } ?? ""
        return line.dropFirst("ExecStart=".count).split(separator: " ").map(String.init)
    }

    @Test("its ExecStart is a tagfix verify command line that tagfix accepts")
    func execStartParses() throws {
        let arguments = Self.execStart
        #expect(arguments.first == "/usr/local/bin/tagfix")
        #expect(arguments.dropFirst().first == "verify")
        let parsed = try VerifyCommand.spec.parse(Array(arguments.dropFirst(2)))
        let command = try VerifyCommand(parsed)
        #expect(command.logPath == "/var/lib/tagfix/verdicts.jsonl", "a service keeps a durable log")
        #expect(command.reader != nil)
    }

    @Test(
        "systemd-analyze finds nothing wrong with it (pointed at the built tagfix)",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze")
                && FileManager.default.isExecutableFile(atPath: packageRoot + "/.build/debug/tagfix"),
            "needs systemd-analyze and the built tagfix"))
    func systemdAnalyze() async throws {
        let copy = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/tagfix-verify.service"
        try Self.unit.replacingOccurrences(of: "/usr/local/bin/tagfix", with: packageRoot + "/.build/debug/tagfix")
            .write(toFile: copy, atomically: true, encoding: .utf8)
        let result = try #require(try await runProgram("/usr/bin/systemd-analyze", ["verify", "--man=no", copy]))
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.isEmpty, "\(result.output)")
    }
}
