import Foundation
import TagFixDevices
import TagFixReaders
import Testing

@testable import TagFixCLI

/// `--reader` is one option: every command accepts the same addresses and refuses the same ones
/// with the same message (it was checked three times, with three driver lists).
@Suite("--reader, the same in every command")
struct ReaderOptionTests {
    /// The arguments of each command that takes --reader, around the address.
    static func command(_ name: String, reader: String) -> [String] {
        switch name {
        case "verify": ["verify", "--reader", reader, "--gps", "gpsd://127.0.0.1:1"]
        case "enroll":
            ["enroll", "--id", "T1", "--reader", reader, "--gps", "gpsd://127.0.0.1:1", "--registry", "/nonexistent/site.sqlite"]
        case "scan": ["scan", "--reader", reader]
        default: ["doctor", "--reader", reader, "--gps", "none"]
        }
    }

    @Test(
        "libnfc's drivers without a port are accepted by verify, enroll and scan alike",
        arguments: ["verify", "enroll", "scan"], ["arygon", "pn53x_usb", "acr122s:/dev/ttyS0", "arygon:/dev/ttyS0", "pn53x_usb:"])
    func accepted(_ name: String, _ reader: String) throws {
        let arguments = Array(Self.command(name, reader: reader).dropFirst())
        let address: ReaderAddress? =
            switch name {
            case "verify": try VerifyCommand(try VerifyCommand.spec.parse(arguments)).reader
            case "enroll": try EnrollCommand(try EnrollCommand.spec.parse(arguments)).reader
            default: try ScanCommand(try ScanCommand.spec.parse(arguments)).reader
            }
        // libnfc's own spelling of the driver (ReaderAddress.libnfcSpelling: acr122s is ACR122S).
        let driver = String(reader.prefix { $0 != ":" })
        #expect(address?.connstring == (ReaderAddress.libnfcSpelling[driver] ?? driver) + reader.dropFirst(driver.count))
    }

    @Test(
        "a wrong address is refused before anything opens, with the same message in each command (exit 64)",
        arguments: ["verify", "enroll", "scan", "doctor"], ["pn533_usb", "acr122_pcsc", "nfc:/dev/ttyUSB0", "mock:"])
    func refused(_ name: String, _ reader: String) async throws {
        let result = await run(Self.command(name, reader: reader))
        #expect(result.code == 64)
        var expected = ""
        do throws(ReaderAddressError) {
            _ = try ReaderAddress(reader)
        } catch {
            expected = error.description
        }
        #expect(!expected.isEmpty)
        #expect(result.err.joined(separator: "\n").hasPrefix("error: \(expected)\n(see 'tagfix help \(name)')"), "\(result.err)")
    }

    @Test("a backend this build lacks is refused with exit 69 and the factory's words")
    func noBackend() throws {
        let without = ReaderFactory(backends: ReaderFactory.standard.backends.filter { $0.kind != .pcsc })
        do {
            _ = try without.address("pcsc:0")
            Issue.record("a factory without PC/SC took pcsc:0")
        } catch {
            let refused = ReaderOption.error(error, command: "scan")
            #expect(refused.exitCode == 69)
            #expect(refused.message.hasPrefix("error: pcsc:0: this build has no PC/SC backend"), "\(refused.message)")
        }
    }

    @Test("pcsc: addresses reach the PC/SC backend in every command that reads tags", arguments: ["verify", "enroll", "scan"])
    func pcsc(_ name: String) throws {
        #expect(try ReaderOption.address("pcsc:0", command: name) == .pcsc(.index(0)))
    }

    @Test("doctor probes libnfc readers only: a pcsc: address is refused (exit 64)")
    func doctorPCSC() async {
        let result = await run(Self.command("doctor", reader: "pcsc:0"))
        #expect(result.code == 64)
        #expect(result.err.first?.contains("doctor opens libnfc readers only") == true, "\(result.err)")
    }

    @Test("doctor probes libnfc readers only: a mock reader is refused")
    func doctorMock() async {
        let result = await run(["doctor", "--reader", "mock:\(example)", "--gps", "none"])
        #expect(result.code == 64)
        #expect(result.err.first?.contains("doctor opens libnfc readers only") == true)
    }

    @Test("--demo refuses --reader whatever it names")
    func demo() async {
        let result = await run(["verify", "--demo", "--reader", "pcsc:"])
        #expect(result.code == 64)
        #expect(result.err.joined().contains("drop --reader"))
    }
}
