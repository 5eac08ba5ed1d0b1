import Foundation
import TagFixServe
import TagFixTesting
import Testing

@Suite("serve's default socket folder")
struct SocketFolderTests {
    /// A folder under a fresh one, not made yet (as /run/tagfix after a boot).
    static func missingFolder() -> (parent: String, folder: String) {
        let parent = FileManager.default.temporaryDirectory.path + "/tagfix-run-\(UUID().uuidString.prefix(8))"
        return (parent, parent + "/tagfix")
    }

    @Test("the default socket's folder, gone after a boot, is made (0755) and the server listens in it; a socket given by path is not")
    func madeWhenMissing() async throws {
        let (parent, folder) = Self.missingFolder()
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: parent) }
        // A path the user gave: its folder is theirs to make; the error says so.
        #expect {
            _ = try EventServer(
                ServeConfiguration(socketPath: folder + "/tagfix.sock", release: "t"), responder: QuietResponder(), log: { _ in })
        } throws: { error in
            (error as? ServeError)?.message.contains("does its folder exist") == true
        }
        #expect(!FileManager.default.fileExists(atPath: folder))
        var configuration = ServeConfiguration(socketPath: folder + "/tagfix.sock", release: "t")
        configuration.makesSocketFolder = true
        let server = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        server.start()
        let mode = try FileManager.default.attributesOfItem(atPath: folder)[.posixPermissions] as? Int
        #expect(mode.map { $0 & 0o022 == 0 && $0 & 0o700 == 0o700 } == true, "mode \(String(mode ?? 0, radix: 8))")
        let client = try SocketLineClient(path: folder + "/tagfix.sock")
        #expect(await eventually { client.lines(ofClass: "VERSION").count == 1 })
        await server.stop(reason: "over")
        // A second start finds the folder there.
        let again = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        await again.stop(reason: "over")
    }

    @Test("a default socket folder that cannot be made is one clear error naming it and what to do")
    func cannotMake() throws {
        let (parent, folder) = Self.missingFolder()  // parent not made: mkdir of one level fails
        var configuration = ServeConfiguration(socketPath: folder + "/tagfix.sock", release: "t")
        configuration.makesSocketFolder = true
        #expect {
            _ = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        } throws: { error in
            let message = (error as? ServeError)?.message ?? ""
            return message.contains("cannot make \(folder)") && message.contains("--socket PATH")
        }
        #expect(!FileManager.default.fileExists(atPath: parent))
    }
}
