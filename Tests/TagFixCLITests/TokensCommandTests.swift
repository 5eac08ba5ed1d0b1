import Foundation
import TagFixServe
import TagFixSystem
import Testing

@Suite("tagfix tokens: named tokens for serve")
struct TokensCommandTests {
    @Test("add prints a fresh token and its link once; list shows names only; revoke takes one out; the file stays 0600")
    func lifecycle() async throws {
        let path = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/tokens"
        let anna = await run(["tokens", "add", "anna", "--file", path, "--url", "https://tags.example.org:8443/"])
        #expect(anna.code == 0, "\(anna.err)")
        let token = try #require(anna.out.first)
        #expect(anna.out.count == 1 && TokenFile.isToken(token))
        #expect(anna.err.contains("  https://tags.example.org:8443/?token=\(token)"))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        let ben = await run(["tokens", "add", "ben", "--file", path])
        #expect(ben.code == 0)
        #expect(!ben.out.joined().contains(token) && !ben.err.joined().contains(token), "another's token is never printed")
        let list = await run(["tokens", "list", "--file", path])
        #expect(list.out == ["anna", "ben"])
        #expect(!(list.out + list.err).joined().contains(token))
        #expect(await run(["tokens", "add", "anna", "--file", path]).code == 64)
        #expect(await run(["tokens", "revoke", "anna", "--file", path]).code == 0)
        #expect(await run(["tokens", "list", "--file", path]).out == ["ben"])
        #expect(try TokenFile.read(path).name(forToken: token) == nil)
        #expect(await run(["tokens", "revoke", "anna", "--file", path]).code == 64)
    }

    /// A site keeps its token file where its serve's unit says (/etc/tagfix/tokens, or a link
    /// there), owned by the user serve runs as, and a site lead adds a tech with sudo.
    @Test("add through a link replaces the file it names and the link stays; the file keeps its owner and mode")
    func linkAndOwner() async throws {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        let file = folder + "/secrets-tokens"
        let link = folder + "/tokens"
        #expect(await run(["tokens", "add", "anna", "--file", file]).code == 0)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: file)
        // The user serve runs as (nobody, where the tests run as root).
        let isRoot = ProcessInfo.processInfo.userName == "root"
        if isRoot { try FileSystem.setOwner(user: 65534, group: 65534, of: file) }
        let ben = await run(["tokens", "add", "ben", "--file", link])
        #expect(ben.code == 0, "\(ben.err)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == file, "the link was replaced")
        #expect(try TokenFile.read(file).entries.map(\.name) == ["anna", "ben"])
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        if isRoot { #expect(attributes[.ownerAccountID] as? Int == 65534, "the file is root's now: serve cannot read it") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).allSatisfy { !$0.contains(".tmp") }, "a temporary file left")
    }

    @Test("today's one-token file is the token named default, and keeps working once names are added")
    func legacy() async throws {
        let path = try temporaryFile("token", "old-single-token-0123456789\n")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        #expect(await run(["tokens", "list", "--file", path]).out == ["default"])
        #expect(await run(["tokens", "add", "anna", "--file", path]).code == 0)
        #expect(try TokenFile.read(path).name(forToken: "old-single-token-0123456789") == "default")
    }

    @Test("a file others can read is refused (66); a missing one cannot be listed (66); bad use is 64")
    func refusals() async throws {
        let path = try temporaryFile("token", "old-single-token-0123456789\n")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        let listed = await run(["tokens", "list", "--file", path])
        #expect(listed.code == 66 && listed.err.count == 1 && !listed.err[0].contains("old-single"))
        #expect(await run(["tokens", "list", "--file", path + ".missing"]).code == 66)
        #expect(await run(["tokens", "add", "a b", "--file", path]).code == 64)
        #expect(await run(["tokens", "add", "--file", path]).code == 64)
        #expect(await run(["tokens", "burn", "x", "--file", path]).code == 64)
        #expect(await run(["tokens", "list"]).code == 64)
    }
}
