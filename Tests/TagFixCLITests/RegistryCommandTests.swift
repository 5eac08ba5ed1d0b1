import Foundation
import TagFixCLI
import TagFixCore
import Testing

@Suite("tagfix registry, and verify with a SQLite registry")
struct RegistryCommandTests {
    static let csv = packageRoot + "/Examples/site/registry.csv"

    static func freshStore() throws -> String {
        let path = try temporaryFile("placeholder", "")
        return (path as NSString).deletingLastPathComponent + "/site.sqlite"
    }

    @Test("import, list, show, export, remove: the registry holds what was imported")
    func lifecycle() async throws {
        let store = try Self.freshStore()
        let imported = await run(["registry", "import", Self.csv, "--registry", store])
        #expect(imported.code == 0, "\(imported.err)")
        #expect(imported.out.first?.contains("imported 10 tags") == true, "\(imported.out)")

        let listed = await run(["registry", "list", "--registry", store, "--json"])
        let ids = try listed.out.map { try JSONValue.parse($0)["id"]?.string ?? "" }
        #expect(ids == (1...10).map { String(format: "T%02d", $0) })

        let shown = await run(["registry", "show", "T02", "--registry", store, "--json"])
        let t02 = try JSONValue.parse(try #require(shown.out.first))
        #expect(t02["name"]?.string == "Pump house")
        #expect(t02["uid"]?.string == "04B31A6AD26C81")
        #expect(t02["radius_m"]?.double == 20)

        let exported = await run(["registry", "export", "--registry", store])
        let original = try RegistryFile.parse(String(contentsOfFile: Self.csv, encoding: .utf8))
        #expect(try RegistryFile.parse(exported.out.joined(separator: "\n")).entries == original.entries)

        #expect(await run(["registry", "import", Self.csv, "--registry", store]).code == 65, "ids exist: refused without --replace")
        #expect(await run(["registry", "import", Self.csv, "--registry", store, "--replace"]).code == 0)

        #expect(await run(["registry", "remove", "T09", "--registry", store]).code == 0)
        #expect(await run(["registry", "show", "T09", "--registry", store]).code == 66)
        #expect(await run(["registry", "remove", "T09", "--registry", store]).code == 66)
        #expect(await run(["registry", "list", "--registry", store]).out.last == "9 tags in \(store)")
    }

    @Test("verify gives the same verdicts from the SQLite registry as from the CSV it was imported from")
    func verifyWithSQLite() async throws {
        let store = try Self.freshStore()
        #expect(await run(["registry", "import", Self.csv, "--registry", store]).code == 0)
        let fromCSV = await run(["verify", "--scenario", example, "--json"])
        let fromSQLite = await run(["verify", "--scenario", example, "--registry", store, "--json"])
        #expect(fromSQLite.code == 0, "\(fromSQLite.err)")
        #expect(fromSQLite.out.count == fromCSV.out.count)
        #expect(fromSQLite.out == fromCSV.out)
        #expect(fromSQLite.out.contains { $0.contains(#""source":"registry""#) })
    }

    @Test(
        "bad registries exit with the documented code and say what to do",
        arguments: [
            ("missing", 66, "does not exist"), ("text", 65, "not a TagFix registry"), ("empty-action", 64, "no registry action"),
        ])
    func badRegistry(_ kind: String, _ code: Int32, _ fragment: String) async throws {
        let store = try Self.freshStore()
        let arguments: [String]
        switch kind {
        case "missing": arguments = ["registry", "list", "--registry", store]
        case "text":
            let text = try temporaryFile("r.sqlite", "SQLite format 3\u{0}" + String(repeating: "x", count: 200))
            arguments = ["verify", "--scenario", example, "--registry", text]
        default: arguments = ["registry", "frobnicate", "--registry", store]
        }
        let result = await run(arguments)
        #expect(result.code == code, "\(result.err)")
        #expect(result.err.joined().contains(fragment), "\(result.err)")
    }
}
