import Foundation
import TagFixDevices
import TagFixSystem
import TagFixTLS
import TagFixTesting
import Testing

/// A test CA and a server certificate for `localhost`, made at test time with Debian's openssl.
struct TestCA {
    let directory: String
    var ca: String { directory + "/ca.pem" }
    var certificate: String { directory + "/server.pem" }
    var key: String { directory + "/server.key" }
    var otherKey: String { directory + "/other.key" }

    static func make() async throws -> TestCA {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func openssl(_ arguments: [String]) async throws {
            let result = try await TestProgram.run("/usr/bin/openssl", arguments)
            #expect(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.err)")
        }
        try await openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
            "/CN=TagFix test CA",
            "-keyout", directory + "/ca.key", "-out", directory + "/ca.pem",
        ])
        try await openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=localhost",
            "-keyout", directory + "/server.key", "-out", directory + "/server.csr",
        ])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: directory + "/ext.cnf", atomically: true, encoding: .utf8)
        try await openssl([
            "x509", "-req", "-in", directory + "/server.csr", "-CA", directory + "/ca.pem", "-CAkey", directory + "/ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", directory + "/ext.cnf", "-out", directory + "/server.pem",
        ])
        try await openssl(["genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", directory + "/other.key"])
        return TestCA(directory: directory)
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

/// Moves bytes between two sessions until neither has anything to send.
private func pump(_ a: TLSSession, _ b: TLSSession) throws {
    if !a.isHandshakeComplete { try a.handshake() }
    if !b.isHandshakeComplete { try b.handshake() }
    for _ in 0..<20 {
        let fromA = a.takeOutput()
        let fromB = b.takeOutput()
        if fromA.isEmpty && fromB.isEmpty { return }
        b.receive(fromA)
        a.receive(fromB)
        if !a.isHandshakeComplete { try a.handshake() }
        if !b.isHandshakeComplete { try b.handshake() }
    }
}

@Suite("TLS over memory buffers: the server's sessions, an OpenSSL client in the same process")
struct TLSSessionTests {
    @Test("a client that trusts the test CA completes the handshake; bytes cross both ways; close_notify ends it")
    func roundTrip() async throws {
        let ca = try await TestCA.make()
        defer { ca.remove() }
        let server = try TLSServerContext(certificate: ca.certificate, key: ca.key).session()
        let client = try TLSClientContext(trusting: ca.ca).session(hostName: "localhost")
        #expect(try client.handshake() == false, "the client's hello waits for the server")
        try pump(client, server)
        #expect(client.isHandshakeComplete && server.isHandshakeComplete)

        let written = try client.write(Array("POST /api/tap HTTP/1.1\r\n\r\n".utf8))
        #expect(written == 26)
        server.receive(client.takeOutput())
        #expect(try server.read() == .data(Array("POST /api/tap HTTP/1.1\r\n\r\n".utf8)))
        #expect(try server.read() == .wantMore)
        _ = try server.write(Array("HTTP/1.1 200 OK\r\n\r\n".utf8))
        client.receive(server.takeOutput())
        #expect(try client.read() == .data(Array("HTTP/1.1 200 OK\r\n\r\n".utf8)))

        client.close()
        server.receive(client.takeOutput())
        #expect(try server.read() == .closed)
    }

    @Test("ciphertext that arrives a byte at a time gives the same plaintext")
    func trickle() async throws {
        let ca = try await TestCA.make()
        defer { ca.remove() }
        let server = try TLSServerContext(certificate: ca.certificate, key: ca.key).session()
        let client = try TLSClientContext(trusting: ca.ca).session(hostName: "localhost")
        try client.handshake()
        for _ in 0..<10 {
            for byte in client.takeOutput() {
                server.receive([byte])
                try server.handshake()
            }
            for byte in server.takeOutput() {
                client.receive([byte])
                try client.handshake()
            }
            if client.isHandshakeComplete && server.isHandshakeComplete { break }
        }
        #expect(client.isHandshakeComplete && server.isHandshakeComplete)
        var sent = 0
        var received: [UInt8] = []
        while sent < 40_000 {
            sent += try client.write(Array(repeating: 0x41, count: 40_000 - sent))
            for byte in client.takeOutput() {
                server.receive([byte])
                while case .data(let bytes) = try server.read() { received += bytes }
            }
        }
        #expect(received == Array(repeating: 0x41, count: 40_000))
    }

    @Test("a client that does not trust the CA, or asks for another name, fails the handshake with the reason")
    func untrusted() async throws {
        let ca = try await TestCA.make()
        let other = try await TestCA.make()
        defer {
            ca.remove()
            other.remove()
        }
        let context = try TLSServerContext(certificate: ca.certificate, key: ca.key)
        for (trust, name) in [(other.ca, "localhost"), (ca.ca, "tags.example.org")] {
            let server = try context.session()
            let client = try TLSClientContext(trusting: trust).session(hostName: name)
            #expect {
                try pump(client, server)
            } throws: { error in
                guard let error = error as? TLSError else { return false }
                return error.kind == .handshake && error.description.contains("does not verify")
            }
        }
    }

    @Test("garbage from a client is a handshake error, not a crash")
    func garbage() async throws {
        let ca = try await TestCA.make()
        defer { ca.remove() }
        let server = try TLSServerContext(certificate: ca.certificate, key: ca.key).session()
        server.receive(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(throws: TLSError.self) { try server.handshake() }
    }

    @Test("bad files: one line naming the file, a file error; a key that is not the certificate's")
    func badFiles() async throws {
        let ca = try await TestCA.make()
        defer { ca.remove() }
        let missing = ca.directory + "/missing.pem"
        #expect {
            try TLSServerContext(certificate: missing, key: ca.key)
        } throws: { error in
            guard let error = error as? TLSError else { return false }
            return error.kind == .certificateFile && error.isFileError && error.unreadable
                && error.description.hasPrefix(missing + ": cannot read the file (No such file or directory)")
                && !error.description.contains("\n")
        }
        #expect {
            try TLSServerContext(certificate: ca.certificate, key: ca.certificate)
        } throws: { error in (error as? TLSError)?.kind == .keyFile && (error as? TLSError)?.unreadable == false }
        #expect {
            try TLSServerContext(certificate: ca.certificate, key: ca.otherKey)
        } throws: { error in (error as? TLSError)?.kind == .keyMismatch }
    }

    @Test("a reload makes a new context; a session made from the old one keeps working")
    func reload() async throws {
        let ca = try await TestCA.make()
        defer { ca.remove() }
        var context: TLSServerContext? = try TLSServerContext(certificate: ca.certificate, key: ca.key)
        let live = try context!.session()
        context = try TLSServerContext(certificate: ca.certificate, key: ca.key)  // SIGHUP: the old context is released
        let client = try TLSClientContext(trusting: ca.ca).session(hostName: "localhost")
        try client.handshake()
        try pump(client, live)
        #expect(live.isHandshakeComplete)
        let fresh = try context!.session()
        let second = try TLSClientContext(trusting: ca.ca).session(hostName: "localhost")
        try second.handshake()
        try pump(second, fresh)
        #expect(fresh.isHandshakeComplete)
    }

    @Test("openssl s_client over loopback: it verifies the certificate against the test CA; bytes cross both ways")
    func sClient() async throws {
        let ca = try await TestCA.make()
        defer { ca.remove() }
        let context = try TLSServerContext(certificate: ca.certificate, key: ca.key)
        let (listener, port) = try Loopback.listen()
        defer { _ = try? listener.close() }
        let arguments = [
            "s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", ca.ca, "-servername", "localhost", "-verify_return_error", "-quiet",
        ]
        let received = try await TestProgram.withRunning("/usr/bin/openssl", arguments, input: .pipe) { client in
            try client.write(Array("ping\n".utf8))
            // The server's side blocks on its socket: a thread of its own, never the cooperative pool.
            let text = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
                DeviceThread.detach(name: "TLS server side") { continuation.resume(returning: serveOnce(listener, context)) }
            }
            #expect(await client.waitFor("pong"), "\(client.transcript)")
            return text
        }
        #expect(received == "ping\n")
    }
}

/// Accepts one connection on `listener`, answers its first line with `pong`, and closes: what it
/// read, or why it failed.
private func serveOnce(_ listener: FileDescriptor, _ context: TLSServerContext) -> String {
    do {
        let socket = try listener.accept()
        defer { _ = try? socket.close() }
        let session = try context.session()
        var plaintext: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = try socket.receive(into: &buffer)
            guard count > 0 else { return "the client closed before a line: " + String(decoding: plaintext, as: UTF8.self) }
            session.receive(buffer[..<count])
            if !session.isHandshakeComplete { try session.handshake() }
            while case .data(let bytes) = try session.read() { plaintext += bytes }
            if plaintext.contains(0x0A) {
                _ = try session.write(Array("pong\n".utf8))
                session.close()
            }
            let output = session.takeOutput()
            var sent = 0
            while sent < output.count { sent += try socket.send(output[sent...]) }
            if plaintext.contains(0x0A) { return String(decoding: plaintext, as: UTF8.self) }
        }
    } catch {
        return "failed: \(error)"
    }
}
