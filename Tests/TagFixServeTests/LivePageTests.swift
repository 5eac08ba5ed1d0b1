import Foundation
import TagFixCore
import TagFixDevices
import Testing

@testable import TagFixServe

@Suite("The live page's script and what it embeds")
struct LivePageTests {
    /// A reader's address and error come from the command line and the device (a PC/SC reader's
    /// name is its USB product string): text that is not ours, embedded in the page's script.
    @Test(
        "a reader's name or error with markup in it stays inside the page's one script, and the devices still parse",
        arguments: [
            "pcsc:Evil </script><script>alert(1)</script>", "pcsc:<!--<script>", "pcsc:ACS ACR1552U 00 00",
            "pcsc:line\u{2028}separator",
        ])
    func hostileNames(_ reader: String) throws {
        var state = ServeState(readers: [reader], gps: "gpsd://localhost:2947")
        _ = state.observe(
            ReaderEvent.failed(ReaderError(code: .io, message: "answer </script> <!-- ended early")), reader: reader, now: nil)
        let page = LivePage.html(state: state, release: "test")
        let script = try #require(page.components(separatedBy: "<script>").dropFirst().first)
        #expect(page.components(separatedBy: "<script>").count == 2, "one script (and the map's data)")
        #expect(page.components(separatedBy: "</script>").count == page.components(separatedBy: "<script").count, "one end of each script")
        #expect(!script.contains("<!--"))
        #expect(!script.contains("\u{2028}"))
        // The embedded devices are JSON whose strings say the same as the server's DEVICES.
        let start = try #require(script.range(of: "for (const d of "))
        let rest = script[start.upperBound...]
        let end = try #require(rest.range(of: ".devices) device(d);"))
        let json = String(rest[..<end.lowerBound])
        let parsed = try JSONValue.parse(json)
        let expected = try JSONValue.parse(ServeMessage.devices(readers: state.readers, gps: state.gps))
        #expect(parsed == expected)
    }
}
