import Foundation
import Testing

@testable import TagFixCLI
@testable import TagFixStore

/// The exit codes say the same thing for the same failure in every command, and the documents
/// list the codes the code gives.
@Suite("exit codes agree across commands and documents", .timeLimit(.minutes(1)))
struct ExitCodeTests {
    /// A registry of one tag, T1, and a GPS scenario enroll would average (it never gets that far).
    static func site() async throws -> (registry: String, gps: String) {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        let registry = folder + "/site.sqlite"
        let csv = try temporaryFile("one.csv", "id,lat,lon,radius_m\nT1,53.545,9.966,25\n")
        #expect(await run(["registry", "import", csv, "--registry", registry]).code == 0)
        let gps = try temporaryFile("still.json", #"{"name":"still","start":"2026-05-14T08:00:00Z","gps":{"fixes":[]}}"#)
        return (registry, gps)
    }

    static func enroll(_ registry: String, gps: String) async -> (code: Int32, out: [String], err: [String]) {
        await run([
            "enroll", "--id", "T1", "--replace", "--reader", "pn532_uart:/nonexistent", "--gps", gps, "--registry", registry, "--average",
            "1",
        ])
    }

    @Test("a registry locked by another writer: enroll exits 75, as registry import does")
    func lockedRegistry() async throws {
        let (registry, gps) = try await Self.site()
        let csv = try temporaryFile("two.csv", "id,lat,lon,radius_m\nT2,53.545,9.966,25\n")
        let holder = try SQLiteConnection(path: registry, mode: .readWrite)
        try holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        try holder.execute("BEGIN EXCLUSIVE")
        try holder.query("INSERT INTO tag (id, lat, lon, radius_m) VALUES ('L1', 1, 2, 3)")
        let enrolled = await Self.enroll(registry, gps: gps)
        let imported = await run(["registry", "import", csv, "--registry", registry])
        try holder.execute("ROLLBACK")
        #expect(imported.code == 75, "\(imported.err)")
        #expect(enrolled.code == 75, "\(enrolled.err)")
        #expect(enrolled.err.joined().contains("is locked by another writer"), "\(enrolled.err)")
    }

    @Test("an unusable entry for the id: enroll and registry show both exit 65 and name the fix")
    func unusableEntry() async throws {
        let (registry, gps) = try await Self.site()
        let raw = try SQLiteConnection(path: registry, mode: .readWrite)
        // Above the 500 m cap every command applies: stored, but unusable.
        try raw.query("UPDATE tag SET radius_m = 900 WHERE id = 'T1'")
        let enrolled = await Self.enroll(registry, gps: gps)
        let shown = await run(["registry", "show", "T1", "--registry", registry])
        #expect(enrolled.code == 65, "\(enrolled.err)")
        #expect(shown.code == 65, "\(shown.err)")
        for result in [enrolled, shown] {
            #expect(result.err.joined().contains("tagfix registry import --replace"), "\(result.err)")
        }
    }

    @Test("70 is what an error of a kind the command does not expect gives, and says it is a bug")
    func softwareError() {
        let error = CLIError.software("registry show: unexpected SomeError")
        #expect(error.exitCode == 70)
        #expect(error.message.contains("please report it"))
    }

    @Test("the overview, README.md and docs/tagfix.1 list every exit code the commands give, and no other")
    func documented() throws {
        let codes: [Int32] = [
            ExitCode.success, ExitCode.usage, ExitCode.dataError, ExitCode.noInput, ExitCode.unavailable, ExitCode.software,
            ExitCode.ioError, ExitCode.temporaryFailure,
        ]
        let readme = try String(contentsOfFile: packageRoot + "/README.md", encoding: .utf8)
        let table = readme.components(separatedBy: "### Exit codes")[1].components(separatedBy: "\n## ")[0]
        let readmeCodes = table.split(separator: "\n").compactMap { line in
            line.hasPrefix("| ") ? Int32(line.dropFirst(2).prefix { $0.isNumber }) : nil
        }
        #expect(readmeCodes == codes)
        let manual = try String(contentsOfFile: packageRoot + "/docs/tagfix.1", encoding: .utf8)
        let exitSection = manual.components(separatedBy: ".SH EXIT STATUS")[1].components(separatedBy: ".SH ")[0]
        let manualCodes = exitSection.split(separator: "\n").compactMap { $0.hasPrefix(".B ") ? Int32($0.dropFirst(3)) : nil }
        #expect(manualCodes == codes)
        for code in codes where code != 0 {
            #expect(TagFixCommandLine.overview.contains(" \(code) "), "the overview does not list \(code)")
        }
    }
}
