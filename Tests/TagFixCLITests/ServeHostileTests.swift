import Foundation
import TagFixTesting
import Testing

/// `tagfix serve --http` against what a hostile review tried, over the wire: each test fails
/// without its fix.
@Suite("tagfix serve: a hostile review's findings")
struct ServeHostileTests {
    static let runnable = RunningTagFix.isBuilt

    @Test(
        "a method a path never takes is 405 before any token is asked for: PUT /api/tap (Allow: POST), DELETE elsewhere",
        .enabled(if: runnable, "needs the built tagfix"))
    func methodBeforeToken() async throws {
        let rig = try await PhoneRig()
        let put = try await HTTPExchange.send(
            port: rig.port, "PUT /api/tap HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\nContent-Length: 2\r\n\r\n{}")
        #expect(put.status == 405 && put.head.contains("Allow: POST"), "\(put)")
        let delete = try await HTTPExchange.send(port: rig.port, "DELETE /api/tags HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\n\r\n")
        #expect(delete.status == 405 && delete.head.contains("Allow: GET, HEAD"), "\(delete)")
        // The right method without a token is still refused for want of one.
        let get = try await HTTPExchange.send(port: rig.port, "GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1:\(rig.port)\r\n\r\n")
        #expect(get.status == 401, "\(get)")
        #expect(rig.logLines.isEmpty)
        #expect(await rig.stop())
    }
}
