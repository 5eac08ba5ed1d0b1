import Foundation
import Glibc
import TagFixSystem
import Testing

@Suite("the system layer: files' status, terminals, the creation mask, processes and IPv4 addresses")
struct SystemLayerCallsTests {
    @Test("Stat names a device file's device: /dev/null is character device 1,3; a regular file is none")
    func deviceNumbers() throws {
        let null = try Stat("/dev/null")
        #expect(null.type == .characterSpecial)
        #expect(null.device.major == 1 && null.device.minor == 3)
        let file = try Stat("/etc/hostname")
        #expect(file.type == .regular)
        #expect(throws: Errno.noSuchFileOrDirectory) { try Stat("/nonexistent/tagfix") }
    }

    @Test("a file made under withCreationMask has the mask's bits off, and the old mask is back after")
    func creationMask() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-mask-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let before = umask(0o022)
        umask(before)
        let made = try FileSystem.withCreationMask(FilePermissions(rawValue: 0o077)) { () throws(Errno) in
            try FileDescriptor.open(
                folder + "/f", .writeOnly, options: [.create, .closeOnExec], permissions: FilePermissions(rawValue: 0o666))
        }
        try made.close()
        #expect(try Stat(folder + "/f").mode & 0o777 == 0o600)
        let after = umask(before)
        #expect(after == before)
    }

    @Test("access: a readable file passes, a missing one is .noSuchFileOrDirectory")
    func access() throws {
        try FileSystem.check(R_OK, of: "/etc/hostname")
        #expect(throws: Errno.noSuchFileOrDirectory) { try FileSystem.check(R_OK, of: "/nonexistent/tagfix") }
    }

    @Test("a pipe is not a terminal, and making it raw fails with the terminal's errno")
    func terminal() throws {
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        defer {
            try? readEnd.close()
            try? writeEnd.close()
        }
        #expect(!readEnd.isTerminal)
        #expect(throws: Errno(rawValue: ENOTTY)) { try readEnd.makeRawTerminal() }
    }

    @Test("signal 0 to this process is allowed; a child reaped or never ours is .noChildProcess")
    func processes() throws {
        try Processes.signal(0, to: getpid())
        #expect(throws: Errno.noChildProcess) { try Processes.reapIfExited(1) }
    }

    @Test(
        "IPv4 addresses: dotted quads with their port; anything else is nil",
        arguments: [
            ("127.0.0.1", 8080, true), ("10.1.2.3", 1, true), ("localhost", 80, false), ("256.0.0.1", 80, false), ("", 80, false),
        ])
    func ipv4(_ host: String, _ port: Int, _ valid: Bool) {
        let address = SocketAddress.ipv4(host, port: port)
        #expect((address != nil) == valid)
        if let address {
            #expect(address.port == port)
            #expect(address.numericHostAndPort == "\(host):\(port)")
        }
    }
}
