import Foundation
import TagFixSystem
import TagFixTesting
import Testing

@testable import TagFixServe

/// A transport that changes the bytes both ways (the case of ASCII letters, so lines stay
/// lines) and writes at most `chunk` bytes at a time: what TLS does to the bytes, in miniature.
private struct CaseFlippingTransport: ConnectionTransport {
    var plain: PlainSocketTransport
    let chunk: Int

    var descriptor: FileDescriptor { plain.descriptor }

    static func flip(_ byte: UInt8) -> UInt8 {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) ? byte ^ 0x20 : byte
    }

    mutating func read(into buffer: inout [UInt8]) -> TransportResult {
        let result = plain.read(into: &buffer)
        if case .bytes(let count) = result {
            for index in 0..<count { buffer[index] = Self.flip(buffer[index]) }
        }
        return result
    }

    mutating func write(_ bytes: ArraySlice<UInt8>) -> TransportResult {
        plain.write(ArraySlice(bytes.prefix(chunk).map(Self.flip)))
    }

    mutating func close() { plain.close() }
}

@Suite("tagfix serve's transport seam: what moves the bytes is not the protocol's business")
struct ServeTransportTests {
    @Test("an HTTP connection through a transport that changes the bytes and writes 7 at a time is answered as over the plain socket")
    func transformed() async throws {
        var configuration = ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "t")
        configuration.httpTransport = { fd in CaseFlippingTransport(plain: PlainSocketTransport(fd), chunk: 7) }
        let server = try EventServer(configuration, responder: QuietResponder(), log: { _ in })
        server.start()
        let client = try SocketLineClient(port: server.httpPort)
        client.send("get /HEALTHZ http/1.1\r\ncONNECTION: CLOSE\r\n\r\n")
        #expect(await eventually { client.closed })
        #expect(client.lines.first == "http/1.1 200 ok\r", "\(client.lines)")
        #expect(client.lines.contains("cONTENT-lENGTH: 3\r"))
        #expect(client.lines.last == "OK")
        await server.stop(reason: "over")
    }

    @Test("a connection whose transport cannot be set up is refused with a line in the log; the server serves on")
    func refused() async throws {
        let log = LogLines()
        var configuration = ServeConfiguration(http: try ListenAddress("127.0.0.1:0"), release: "t")
        configuration.httpTransport = { _ in nil }
        let server = try EventServer(configuration, responder: QuietResponder(), log: log.add)
        server.start()
        let client = try SocketLineClient(port: server.httpPort)
        client.send("GET /healthz HTTP/1.1\r\n\r\n")
        #expect(await eventually { client.closed })
        #expect(client.lines.isEmpty)
        #expect(log.all.contains { $0.contains("refused: its transport could not be set up") }, "\(log.all)")
        await server.stop(reason: "over")
    }
}
