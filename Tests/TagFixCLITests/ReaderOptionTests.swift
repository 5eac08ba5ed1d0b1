import Foundation
import TagFixDevices
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
        #expect(address?.connstring == reader)
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

    @Test("pcsc: is understood, and refused as a backend this build lacks (exit 69)", arguments: ["verify", "enroll", "scan", "doctor"])
    func noPCSC(_ name: String) async {
        let result = await run(Self.command(name, reader: "pcsc:0"))
        #expect(result.code == 69)
        #expect(result.err.first?.hasPrefix("error: pcsc:0: this build has no PC/SC backend") == true, "\(result.err)")
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
