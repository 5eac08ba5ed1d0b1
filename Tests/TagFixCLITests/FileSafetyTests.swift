import Foundation
import TagFixCore
import TagFixDevices
import TagFixTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

private func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

/// A SQLite registry and a CSV registry in a fresh folder: the files a --log must never touch.
private func registries() async throws -> (sqlite: String, csv: String) {
    let csv = try temporaryFile("site.csv", try String(contentsOfFile: packageRoot + "/Examples/site/registry.csv", encoding: .utf8))
    let sqlite = (csv as NSString).deletingLastPathComponent + "/site.sqlite"
    #expect(await run(["registry", "import", csv, "--registry", sqlite]).code == 0)
    return (sqlite, csv)
}

@Suite("Nothing a user types wrecks a file: --log only appends to a session log, --output replaces safely")
struct FileSafetyTests {
    @Test(
        "verify --log refuses a registry (SQLite or CSV, or a symlink to one) with exit 64 and leaves it byte for byte",
        arguments: ["sqlite", "csv", "symlink", "demo"])
    func logIsNotARegistry(_ kind: String) async throws {
        let (sqlite, csv) = try await registries()
        let target = kind == "csv" ? csv : sqlite
        var log = target
        if kind == "symlink" {
            log = target + ".jsonl"
            try FileManager.default.createSymbolicLink(atPath: log, withDestinationPath: target)
        }
        let before = try #require(bytes(target))
        let arguments = kind == "demo" ? ["verify", "--demo", "--log", log] : ["verify", "--scenario", example, "--log", log]
        let result = await run(arguments)
        #expect(result.code == 64, "\(result.err)")
        #expect(result.err.joined().contains("is not a TagFix session log"), "\(result.err)")
        #expect(!result.err.joined().contains("torn"), "\(result.err)")
        #expect(bytes(target) == before)
        #expect(await run(["registry", "list", "--registry", sqlite]).code == 0, "the registry still opens")
    }

    @Test(
        "a FIFO or a device given as the registry is refused in one line, before anything opens it (a FIFO nobody writes would block for ever)",
        arguments: ["fifo", "device"], ["list", "verify", "report", "import", "refine", "enroll"])
    func registryIsNotAFile(_ kind: String, _ command: String) async throws {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        var registry = "/dev/null"
        if kind == "fifo" {
            registry = folder + "/registry.fifo"
            #expect(mkfifo(registry, 0o600) == 0)
        }
        let log = folder + "/day.jsonl"
        #expect(await run(["verify", "--scenario", example, "--log", log]).code == 0)
        let arguments: [String] =
            switch command {
            case "list": ["registry", "list", "--registry", registry]
            case "verify": ["verify", "--scenario", example, "--registry", registry]
            case "report": ["report", log, "--registry", registry]
            case "import": ["registry", "import", packageRoot + "/Examples/site/registry.csv", "--registry", registry]
            case "refine": ["registry", "refine", "--registry", registry, "--log", log]
            default: ["enroll", "--id", "T1", "--reader", "mock:\(example)", "--gps", "mock:\(example)", "--registry", registry]
            }
        let result = await run(arguments)
        #expect(result.code == 65 || result.code == 66, "\(result.err)")
        #expect(result.err.count == 1, "\(result.err)")
        #expect(result.err.first?.contains(kind == "fifo" ? "a FIFO" : "a character device") == true, "\(result.err)")
        if kind == "fifo" {
            var info = stat()
            #expect(lstat(registry, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "the FIFO is left as it was")
        }
    }

    @Test("verify --log appends to a log an earlier run wrote")
    func logAppends() async throws {
        let log = try temporaryFile("today.jsonl", "")
        #expect(await run(["verify", "--scenario", example, "--log", log]).code == 0)
        let first = try SessionLog.read(path: log).records.count
        #expect(first > 0)
        #expect(await run(["verify", "--scenario", example, "--log", log]).code == 0)
        #expect(try SessionLog.read(path: log).records.count == 2 * first)
    }

    @Test("report and registry export --output follow a symlink (the link stays a link) and keep the file's permissions")
    func outputThroughSymlink() async throws {
        let (sqlite, _) = try await registries()
        let folder = (sqlite as NSString).deletingLastPathComponent
        let log = folder + "/today.jsonl"
        #expect(await run(["verify", "--scenario", example, "--log", log]).code == 0)
        for (name, arguments) in [
            ("report.csv", ["report", log, "--format", "csv", "--output"]),
            ("export.csv", ["registry", "export", "--registry", sqlite, "--output"]),
        ] {
            let target = folder + "/" + name
            try Data("old\n".utf8).write(to: URL(fileURLWithPath: target))
            chmod(target, 0o640)
            let link = folder + "/link-" + name
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: name)
            let result = await run(arguments + [link])
            #expect(result.code == 0, "\(result.err)")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == name)
            let text = try String(contentsOfFile: target, encoding: .utf8)
            #expect(text.hasPrefix(name == "report.csv" ? "time,verdict" : "id,uid"), "\(text)")
            #expect((try FileManager.default.attributesOfItem(atPath: target)[.posixPermissions] as? Int) == 0o640)
        }
    }

    @Test("registry import of an id already in the registry says so, and how to replace it")
    func alreadyRegistered() async throws {
        let (sqlite, csv) = try await registries()
        let again = await run(["registry", "import", csv, "--registry", sqlite])
        #expect(again.code == 65)
        #expect(again.err.joined().contains(#"tag id "T01" is already in the registry"#), "\(again.err)")
        #expect(again.err.joined().contains("--replace"), "\(again.err)")
        #expect(!again.err.joined().contains("appears twice"), "\(again.err)")
    }

    @Test("registry export → import of formula-safe CSV gives back the original text")
    func formulaRoundTrip() async throws {
        let source = try temporaryFile(
            "hostile.csv",
            "id,lat,lon,radius_m,name,notes\n\"=1+1\",53.5,-0.12,20,\"@SUM(A1)\",\"-rm -rf\"\n\"+T2\",-33.9,-70.6,15,'=x,\tx\n")
        let folder = (source as NSString).deletingLastPathComponent
        let store = folder + "/r.sqlite"
        #expect(await run(["registry", "import", source, "--registry", store]).code == 0)
        let exported = folder + "/export.csv"
        #expect(await run(["registry", "export", "--registry", store, "--output", exported]).code == 0)
        let text = try String(contentsOfFile: exported, encoding: .utf8)
        #expect(text.contains("\n'=1+1,,53.5,-0.12,20,'@SUM(A1),"), "\(text)")
        #expect(text.contains("'-rm -rf"), "\(text)")
        let back = folder + "/back.sqlite"
        #expect(await run(["registry", "import", exported, "--registry", back]).code == 0)
        let original = await run(["registry", "list", "--registry", store, "--json"])
        let reimported = await run(["registry", "list", "--registry", back, "--json"])
        #expect(reimported.out == original.out)
        #expect(original.out.contains { $0.contains(#""id":"=1+1","uid":null,"name":"@SUM(A1)""#) }, "\(original.out)")
        #expect(original.out.contains { $0.contains(#""name":"=x""#) }, "an apostrophe before = is the formula-safe form: \(original.out)")
    }
}

/// The built binary with its standard output on a full disk or a pipe nobody reads.
@Suite("A full disk or a closed pipe on standard output: one line and exit 74, or a quiet end", .timeLimit(.minutes(2)))
struct StandardOutputFailureTests {
    static let binary = TestBinaries.tagfix

    /// Runs the binary with `stdout` as its standard output; returns its status and stderr.
    static func run(_ arguments: [String], stdout: FileHandle) async throws -> (status: Int32, signalled: Bool, err: String) {
        let process = try await TestProgram.run(binary, arguments, standardOutput: .descriptor(stdout.fileDescriptor))
        return (process.status, process.signalled, process.err)
    }

    static func session() async throws -> String {
        let log = try temporaryFile("s.jsonl", "")
        #expect(await TagFixCLITests.run(["verify", "--scenario", example, "--log", log]).code == 0)
        return log
    }

    static func commands() async throws -> [[String]] {
        let log = try await session()
        let store = (log as NSString).deletingLastPathComponent + "/r.sqlite"
        #expect(
            await TagFixCLITests.run(["registry", "import", packageRoot + "/Examples/site/registry.csv", "--registry", store]).code == 0)
        return [
            ["report", log, "--format", "csv"], ["report", log, "--format", "html", "--output", "-"],
            ["registry", "export", "--registry", store], ["verify", "--scenario", example, "--json"], ["--help"],
        ]
    }

    @Test(
        "stdout on /dev/full: one line on stderr and exit 74, no crash",
        .enabled(if: FileManager.default.isExecutableFile(atPath: binary), "needs the built tagfix"))
    func fullDisk() async throws {
        for arguments in try await Self.commands() {
            let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
            let result = try await Self.run(arguments, stdout: full)
            #expect(!result.signalled, "\(arguments): killed by a signal")
            #expect(result.status == 74, "\(arguments): \(result.err)")
            let lines = result.err.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains("No space left on device"), "\(arguments): \(result.err)")
        }
    }

    @Test(
        "stdout a pipe closed before anything is read: a quiet end, exit 0, and the log holds every verdict",
        .enabled(if: FileManager.default.isExecutableFile(atPath: binary), "needs the built tagfix"))
    func closedPipe() async throws {
        for arguments in try await Self.commands() {
            let pipe = Pipe()
            try pipe.fileHandleForReading.close()
            let result = try await Self.run(arguments, stdout: pipe.fileHandleForWriting)
            #expect(!result.signalled, "\(arguments): killed by a signal")
            #expect(result.status == 0, "\(arguments): \(result.err)")
            #expect(result.err.isEmpty, "\(arguments): \(result.err)")
        }
        let log = try temporaryFile("closed.jsonl", "")
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        let result = try await Self.run(["verify", "--scenario", example, "--json", "--log", log], stdout: pipe.fileHandleForWriting)
        #expect(result.status == 0 && result.err.isEmpty, "\(result.err)")
        #expect(try SessionLog.read(path: log).records.count >= 1, "the verdict that met the closed pipe is on the disk")
    }
}
