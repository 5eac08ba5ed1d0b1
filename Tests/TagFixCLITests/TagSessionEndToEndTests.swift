import Foundation
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixReaders
import Testing

/// A tag session from the reader factory, through the real libnfc on the PN532 emulator: what
/// `enroll` gets, without knowing the backend.
@Suite("A tag session through the reader factory and libnfc", .timeLimit(.minutes(2)))
struct TagSessionEndToEndTests {
    @Test("write, read back, identity and raw exchanges (GET_VERSION, READ_SIG) in one session")
    func writeReadExchange() async throws {
        let tag = ntag213(url: "https://before.example/t/S1")
        let emulator = try PN532Emulator(tags: [tag])
        defer { emulator.stop() }
        let address = try ReaderFactory.standard.address("pn532_uart:\(emulator.path)")
        let session = try ReaderFactory.standard.session(address, clock: MonotonicClock())
        let url = "https://after.example/t/S1?lat=53.5&lon=9.9&r=20"
        let message = NDEFMessage(records: [NDEFRecord.uri(url)]).encoded()
        var result: TagSessionResult?
        var other: [TagSessionEvent] = []
        for await event in session.run(TagSessionRequest(write: message, exchanges: [[0x60], [0x3C, 0x00]])) {
            switch event {
            case .ready: continue
            case .done(let done): result = done
            default: other.append(event)
            }
        }
        let done = try #require(result, "\(other)")
        #expect(done.scan.url == url)
        #expect(done.written?.pagesWritten ?? 0 > 0)
        #expect(done.identity.uid.bytes == tag.uid)
        #expect(done.identity.atqa == [0x00, 0x44] && done.identity.sak == 0x00)
        #expect(try done.answers[0].get().count == 8, "GET_VERSION answers 8 bytes")
        #expect(try done.answers[1].get() == [UInt8](repeating: 0, count: 32), "the emulated chip's READ_SIG: zeros")
    }
}
