import Foundation
import TagFixCLI
import TagFixCore
import TagFixTestDaemons
import Testing

/// `tagfix registry` and `verify --registry` on a registry in PostgreSQL (a private cluster per
/// test): the same rows and the same verdicts as from the CSV file and the SQLite registry.
@Suite("the registry in PostgreSQL", .enabled(if: PrivatePostgres.available, "needs PostgreSQL (apt-get install postgresql)"))
struct RegistryOnPostgresTests {
    static let csv = RegistryCommandTests.csv

    @Test("import, list, show, export, remove on postgresql://: the rows imported come back, in either format", arguments: ["csv", "json"])
    func lifecycle(format: String) async throws {
        try await PrivatePostgres.with { database in
            let db = ["--registry", database.address, "--db-password-file", database.passwordFile]
            let imported = await run(["registry", "import", Self.csv] + db)
            #expect(imported.code == 0, "\(imported.err)")
            #expect(imported.out.first?.contains("imported 10 tags from \(Self.csv) into \(database.address) (10 new, 10 in all)") == true)

            let listed = await run(["registry", "list", "--json"] + db)
            #expect(try listed.out.map { try JSONValue.parse($0)["id"]?.string ?? "" } == (1...10).map { String(format: "T%02d", $0) })
            #expect(await run(["registry", "list"] + db).out.last == "10 tags in \(database.address)")

            let shown = await run(["registry", "show", "T02", "--json"] + db)
            let t02 = try JSONValue.parse(try #require(shown.out.first))
            #expect(t02["name"]?.string == "Pump house" && t02["uid"]?.string == "04B31A6AD26C81" && t02["radius_m"]?.double == 20)

            let exported = await run(["registry", "export", "--format", format] + db)
            #expect(exported.code == 0, "\(exported.err)")
            let original = try RegistryFile.parse(String(contentsOfFile: Self.csv, encoding: .utf8))
            #expect(try RegistryFile.parse(exported.out.joined(separator: "\n")).entries == original.entries)
            // The same bytes a SQLite registry of the same rows exports.
            let store = try RegistryCommandTests.freshStore()
            #expect(await run(["registry", "import", Self.csv, "--registry", store]).code == 0)
            #expect(await run(["registry", "export", "--format", format, "--registry", store]).out == exported.out)

            let again = await run(["registry", "import", Self.csv] + db)
            #expect(again.code == 65 && again.err.first?.contains("--replace") == true, "ids exist: refused without --replace")
            #expect(await run(["registry", "import", Self.csv, "--replace"] + db).code == 0)
            #expect(await run(["registry", "remove", "T09"] + db).code == 0)
            #expect(await run(["registry", "show", "T09"] + db).code == 66)
            #expect(await run(["registry", "list"] + db).out.last == "9 tags in \(database.address)")
            #expect(await run(["registry", "migrate"] + db).out.first == "\(database.address): schema version 1, 9 tags")
        }
    }

    @Test("verify gives the same verdicts from the registry in PostgreSQL as from the CSV it was imported from, and the SQLite registry")
    func verifyWithPostgres() async throws {
        try await PrivatePostgres.with { database in
            let db = ["--registry", database.address, "--db-password-file", database.passwordFile]
            #expect(await run(["registry", "import", Self.csv] + db).code == 0)
            let store = try RegistryCommandTests.freshStore()
            #expect(await run(["registry", "import", Self.csv, "--registry", store]).code == 0)
            let fromCSV = await run(["verify", "--scenario", example, "--json"])
            let fromSQLite = await run(["verify", "--scenario", example, "--registry", store, "--json"])
            let fromPostgres = await run(["verify", "--scenario", example, "--json"] + db)
            #expect(fromPostgres.code == 0, "\(fromPostgres.err)")
            #expect(!fromPostgres.out.isEmpty && fromPostgres.out == fromCSV.out && fromPostgres.out == fromSQLite.out)
            #expect(fromPostgres.out.contains { $0.contains(#""source":"registry""#) })
        }
    }

    @Test(
        "a wrong password, a database that is not there and a password file without a PostgreSQL address each stop with one line and their code",
        arguments: [
            ("wrong", 69, "password authentication failed"),
            ("down", 69, "cannot connect to postgresql://tagfix@127.0.0.1:1/tagfix: connection to server"),
            ("file", 64, "--db-password-file is for"),
        ])
    func refusals(kind: String, code: Int32, says: String) async throws {
        try await PrivatePostgres.with { database in
            let wrong = try temporaryFile("wrong.pw", "not-the-password\n")
            chmod(wrong, 0o600)
            let arguments: [String]
            switch kind {
            case "wrong": arguments = ["registry", "list", "--registry", database.address, "--db-password-file", wrong]
            case "down":
                arguments = [
                    "registry", "list", "--registry", "postgresql://tagfix@127.0.0.1:1/tagfix", "--db-password-file", database.passwordFile,
                ]
            default: arguments = ["registry", "list", "--registry", try RegistryCommandTests.freshStore(), "--db-password-file", wrong]
            }
            let result = await run(arguments)
            #expect(result.code == code, "\(result.err)")
            #expect(result.err.count == 1 && result.err.first?.contains(says) == true, "\(result.err)")
            #expect(!result.err.joined().contains(database.password))
        }
    }
}
