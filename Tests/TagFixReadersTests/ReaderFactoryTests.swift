import Foundation
import TagFixCore
import TagFixDevices
import TagFixReaders
import TagFixScenarios
import TagFixTesting
import Testing

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path
private let example = packageRoot + "/Examples/site/scenario.json"

/// A backend registered in one place: a factory with it serves its addresses, and nothing else
/// changes. It stands for any new backend (here in the PC/SC backend's place).
private struct FakePCSCBackend: ReaderBackend {
    var kind: ReaderAddress.Backend { .pcsc }
    func reader<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagReader
    where C.Instant == Timestamp, C.Duration == Duration {
        MockTagReader(readerID: address.description, clock: clock, script: [], finishAfterScript: true)
    }
    func session<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagSession
    where C.Instant == Timestamp, C.Duration == Duration {
        ReaderTagSession(reader: try reader(address, clock: clock))
    }
}

@Suite("The reader factory")
struct ReaderFactoryTests {
    /// A build without the PC/SC backend: the standard list less it.
    static let withoutPCSC = ReaderFactory(backends: ReaderFactory.standard.backends.filter { $0.kind != .pcsc })

    @Test("a factory without a PC/SC backend refuses pcsc: addresses, saying so", arguments: ["pcsc:", "pcsc:1", "pcsc:ACS ACR122U"])
    func noPCSC(_ text: String) throws {
        let address = try ReaderAddress(text)
        #expect(address.backend == .pcsc)
        #expect {
            _ = try Self.withoutPCSC.address(text)
        } throws: { error in
            (error as? ReaderAddressError)?.description
                == "\(address): this build has no PC/SC backend; use a libnfc reader (pn532_uart, pn532_i2c, pn532_spi, pn53x_usb, acr122_usb, acr122s, arygon)"
        }
        #expect(throws: ReaderAddressError.self) { _ = try Self.withoutPCSC.reader(address, clock: ManualClock()) }
        #expect(throws: ReaderAddressError.self) { _ = try Self.withoutPCSC.session(address, clock: ManualClock()) }
    }

    @Test(
        "the standard factory serves pcsc:, pcsc:N and pcsc:NAME with the PC/SC backend, named as given",
        arguments: ["pcsc:", "pcsc:1", "pcsc:ACS ACR122U"])
    func pcsc(_ text: String) throws {
        let address = try ReaderFactory.standard.address(text)
        #expect(try ReaderFactory.standard.backend(for: address).kind == .pcsc)
        // Made, not opened: nothing talks to pcscd until the stream is read.
        #expect(try ReaderFactory.standard.reader(address, clock: ManualClock()).readerID == text)
        #expect(try ReaderFactory.standard.session(address, clock: ManualClock()).readerID == text)
    }

    @Test("a backend added to the factory's list serves its addresses")
    func registered() throws {
        let factory = ReaderFactory(backends: Self.withoutPCSC.backends + [FakePCSCBackend()])
        let address = try factory.address("pcsc:0")
        #expect(try factory.reader(address, clock: ManualClock()).readerID == "pcsc:0")
        #expect(try factory.session(address, clock: ManualClock()).readerID == "pcsc:0")
    }

    @Test(
        "libnfc addresses get libnfc readers named by their connstring",
        arguments: [nil, "pn532_uart:/dev/ttyUSB0", "arygon", "pn53x_usb:"])
    func libnfc(_ text: String?) throws {
        let address = try ReaderFactory.standard.address(text)
        #expect(try ReaderFactory.standard.reader(address, clock: ManualClock()).readerID == (text ?? "default"))
        #expect(try ReaderFactory.standard.session(address, clock: ManualClock()).readerID == (text ?? "default"))
    }

    @Test("mock:SCENARIO plays the scenario's reader events; its session reads the first tag")
    func mock() async throws {
        let scenario = try ScenarioLoader.load(path: example)
        let address = try ReaderFactory.standard.address("mock:\(example)")
        let reader = try ReaderFactory.standard.reader(address, clock: ManualClock())
        #expect(reader.readerID == scenario.readerID)
        // The scenario is played from the clock's now: start there, and move the clock to its
        // first tag once the mock waits for it.
        let clock = ManualClock(now: scenario.start)
        let session = try ReaderFactory.standard.session(address, clock: clock)
        let consumer = Task {
            var result: TagSessionResult?
            for await event in session.run(TagSessionRequest(exchanges: [[0x60]])) {
                if case .done(let done) = event { result = done }
            }
            return result
        }
        let firstTag = try #require(scenario.reader.first { if case .tagPresent = $0.event { true } else { false } })
        await clock.waitForSleepers(count: 1)
        clock.advance(to: firstTag.at)
        let result = await consumer.value
        let done = try #require(result)
        #expect(done.scan.uid == scenario.scans.first?.uid)
        #expect(done.identity.uid == done.scan.uid)
        #expect(done.answers.count == 1)
        #expect(done.written == nil)
    }

    @Test("a mock scenario that cannot be read is the file's error")
    func missingScenario() throws {
        let address = try ReaderFactory.standard.address("mock:/nonexistent/scenario.json")
        #expect {
            _ = try ReaderFactory.standard.reader(address, clock: ManualClock())
        } throws: { error in
            guard case .scenario(let file) = error as? ReaderAddressError else { return false }
            return file.unreadable
        }
    }
}
