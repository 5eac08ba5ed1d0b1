import Foundation
import TagFixServe
import TagFixTesting
import Testing

@testable import TagFixCLI

@Suite("The systemd unit example")
struct SystemdUnitTests {
    static let unit = (try? String(contentsOfFile: packageRoot + "/Examples/systemd/tagfix-verify.service", encoding: .utf8)) ?? ""
    static let serveUnit = (try? String(contentsOfFile: packageRoot + "/Examples/systemd/tagfix-serve.service", encoding: .utf8)) ?? ""
    static let collectUnit =
        (try? String(contentsOfFile: packageRoot + "/Examples/systemd/tagfix-collect.service", encoding: .utf8)) ?? ""

    static var execStart: [String] { execStart(unit) }

    static func execStart(_ unit: String) -> [String] {
        let line = unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") } ?? ""
        return line.dropFirst("ExecStart=".count).split(separator: " ").map(String.init)
    }

    @Test("tagfix-serve.service: Type=notify, and an ExecStart that tagfix serve accepts, with a log and its socket in its runtime folder")
    func serveUnitParses() throws {
        let arguments = Self.execStart(Self.serveUnit)
        #expect(arguments.first == "/usr/local/bin/tagfix")
        #expect(arguments.dropFirst().first == "serve")
        let command = try ServeCommand(try ServeCommand.spec.parse(Array(arguments.dropFirst(2))))
        #expect(command.verify.logPath != nil, "a service keeps a durable log")
        #expect(command.configuration.socketPath == "/run/tagfix/tagfix.sock")
        #expect(Self.serveUnit.contains("RuntimeDirectory=tagfix"))
        #expect(Self.serveUnit.contains("Type=notify"))
    }

    @Test(
        "tagfix-collect.service: an ExecStart that tagfix collect accepts, with its own client id, never restarted after losing its session"
    )
    func collectUnitParses() throws {
        let arguments = Self.execStart(Self.collectUnit)
        #expect(arguments.first == "/usr/local/bin/tagfix")
        #expect(arguments.dropFirst().first == "collect")
        let command = try CollectCommand(try CollectCommand.spec.parse(Array(arguments.dropFirst(2))))
        #expect(command.db == "/var/lib/tagfix/fleet.sqlite")
        #expect(arguments.contains("--client-id"), "a stable id of its own, not the host's default")
        // Exit 69 is collect's "another client has the session": restarted, it would take it back.
        #expect(CLIError.unavailable("").exitCode == 69)
        #expect(Self.collectUnit.contains("RestartPreventExitStatus=69"))
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
                && FileManager.default.isExecutableFile(atPath: TestBinaries.tagfix),
            "needs systemd-analyze and the built tagfix"))
    func systemdAnalyze() async throws {
        for (name, unit) in [
            ("tagfix-verify.service", Self.unit), ("tagfix-serve.service", Self.serveUnit), ("tagfix-collect.service", Self.collectUnit),
        ] {
            try await analyze(name, unit)
        }
    }

    func analyze(_ name: String, _ unit: String) async throws {
        let copy = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/" + name
        try unit.replacingOccurrences(of: "/usr/local/bin/tagfix", with: TestBinaries.tagfix)
            .write(toFile: copy, atomically: true, encoding: .utf8)
        let result = try await TestProgram.run("/usr/bin/systemd-analyze", ["verify", "--man=no", copy], standardError: .standardOutput)
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.isEmpty, "\(result.output)")
    }
}
