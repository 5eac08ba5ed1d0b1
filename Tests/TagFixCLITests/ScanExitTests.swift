import Foundation
import TagFixEmulators
import TagFixNDEF
import TagFixTesting
import Testing

/// `tagfix scan --count 1` returns as soon as it has its tag, while its reader's thread is still
/// letting the tag go. A process that then ended left the reader's RF field on and its tag
/// powered until the next program opened it; now its end waits for the reader to close.
@Suite struct ScanExitTests {
    @Test(
        "a scan run as a user runs it has closed the reader when it exits: its last commands are the field off and PowerDown",
        .enabled(if: TestBinaries.isTagfixBuilt, "needs the built tagfix"),
        arguments: ["https://tags.example.org/t/A1", "https://tags.example.org/t/B22"])
    func closesBeforeExit(url: String) async throws {
        let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded())
        let emulator = try PN532Emulator(tags: [tag], options: .init(logCommands: true))
        defer { emulator.stop() }
        let result = try await TestProgram.run(
            TestBinaries.tagfix, ["scan", "--reader", "pn532_uart:\(emulator.path)", "--json", "--count", "1", "--timeout", "30"])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.output.contains(url))
        // The emulator logs a command after it has answered it: once it has stopped (idle, with
        // nothing left to do), what the program sent before it exited is all in the log.
        await emulator.stopped()
        let openAndClose = emulator.traffic.log.map(\.command).filter { $0 == 0x14 || $0 == 0x16 }
        // An open (SAMConfiguration) and a close (PowerDown) for each time the program opened
        // the reader (once, or again after a failed poll on a loaded machine), the close last.
        #expect(
            !openAndClose.isEmpty && openAndClose.enumerated().allSatisfy { $1 == ($0 % 2 == 0 ? 0x14 : 0x16) }
                && openAndClose.count % 2 == 0,
            "the reader was not closed before the program ended: \(openAndClose.map { String($0, radix: 16) })")
    }
}
