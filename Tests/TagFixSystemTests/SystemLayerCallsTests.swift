import Foundation
import Glibc
import TagFixSystem
import Testing

@Suite("the system layer: files' status, terminals, access, processes and IPv4 addresses")
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
