import Foundation
import TagFixSystem
import TagFixTLS
import TagFixTesting
import Testing

@testable import TagFixServe

@Suite("tagfix serve's TLS transport: how a client's side ends")
struct TLSTransportTests {
    /// A self-signed certificate for localhost and its key, made with Debian's openssl.
    static func certificate() async throws -> (certificate: String, key: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let result = try await TestProgram.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost", "-keyout", folder + "/key.pem", "-out", folder + "/cert.pem",
            ])
        #expect(result.status == 0, "openssl: \(result.err)")
        return (folder + "/cert.pem", folder + "/key.pem")
    }

    /// How a client ends its side after a whole request.
    enum ClientEnd: Sendable, CaseIterable {
        /// TLS's close_notify, the TCP connection left open (as `openssl s_client` does).
        case closeNotify
        /// TCP's half-close (`shutdown(SHUT_WR)`) without close_notify, as a client that is done
        /// writing and still reads does (ServePhoneTests.halfClosed does it in the clear). The
        /// request was whole, each record checked: nothing of it was cut.
        case halfCloseWithoutNotify
    }

    @Test(
        "a client that ends its side after a whole request (close_notify, or TCP's half-close without it): its side has ended (not failed), and the answer is still written and read",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs openssl"), arguments: ClientEnd.allCases)
    func endAfterRequest(_ end: ClientEnd) async throws {
        let files = try await Self.certificate()
        let (server, client) = try FileDescriptor.socketPair()
        defer {
            _ = try? client.close()
        }
        try server.setNonBlocking()
        var transport = TLSTransport(server, session: try TLSServerContext(certificate: files.certificate, key: files.key).session())
        defer { transport.close() }
        let session = try TLSClientContext(trusting: files.certificate).session(hostName: "localhost")
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var scratch = [UInt8](repeating: 0, count: 65_536)
        func clientSends() throws {
            let output = session.takeOutput()
            if !output.isEmpty { _ = try client.writeAll(output) }
        }
        /// What the client reads (blocking: only called when the server has written).
        func clientReceives() throws {
            let count = try client.receive(into: &scratch)
            try #require(count > 0, "the server closed the connection")
            session.receive(scratch[0..<count])
        }
        // The handshake, each side in turn: the server's transport never waits.
        _ = try session.handshake()
        try clientSends()
        while !session.isHandshakeComplete {
            #expect(transport.read(into: &buffer) == .wouldBlock)
            try clientReceives()
            _ = try session.handshake()
            try clientSends()
        }
        // A whole request, then the end of the client's side: it has nothing more to say, and waits.
        let request = Array("GET /api/tags HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
        #expect(try session.write(request) == request.count)
        switch end {
        case .closeNotify:
            session.close()
            try clientSends()
        case .halfCloseWithoutNotify:
            try clientSends()
            try client.shutdown(Int32(SHUT_WR))
        }
        var received: [UInt8] = []
        var last = transport.read(into: &buffer)
        while case .bytes(let count) = last {
            received += buffer[0..<count]
            last = transport.read(into: &buffer)
        }
        #expect(received == request)
        #expect(last == .ended, "the end of the client's side was taken for a failure: its answer would never be written")
        // The answer is written after the end of the client's side, and the client reads it.
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n".utf8)
        var written = 0
        while written < answer.count {
            guard case .bytes(let count) = transport.write(answer[written...]) else {
                Issue.record("the answer could not be written")
                break
            }
            written += count
        }
        var read: [UInt8] = []
        while read.count < answer.count {
            try clientReceives()
            while case .data(let plaintext) = try session.read() { read += plaintext }
        }
        #expect(read == answer)
    }
}
