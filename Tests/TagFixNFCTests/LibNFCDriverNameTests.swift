import Foundation
import TagFixDevices
import TagFixTesting
import Testing

/// Every driver `--reader` takes reaches libnfc under a name it has. libnfc 1.8 matches a
/// connstring's driver case-sensitively, and spells one driver in capitals: `acr122s:/dev/ttyUSB0`,
/// as `--reader` took it and handed it on, was "No driver available" for every ACR122S reader.
@Suite struct LibNFCDriverNameTests {
    static let nfcList = "/usr/bin/nfc-list"

    @Test(
        "the connstring of each driver --reader takes names a driver Debian's libnfc has (asked of libnfc itself, through nfc-list)",
        .enabled(if: FileManager.default.isExecutableFile(atPath: nfcList), "needs libnfc-bin's nfc-list"),
        arguments: ReaderAddress.libnfcDrivers)
    func driverKnown(_ driver: String) async throws {
        // A port that opens as no reader: libnfc gets as far as its driver, and no further.
        let address = try ReaderAddress(driver.hasSuffix("_usb") ? driver : "\(driver):/dev/null")
        let connstring = try #require(address.connstring)
        let listed = try await TestProgram.run(
            Self.nfcList, environment: ["LIBNFC_DEVICE": connstring, "LIBNFC_LOG_LEVEL": "3", "LIBNFC_AUTO_SCAN": "false"])
        let said = listed.output + listed.err
        #expect(said.contains(connstring), "libnfc was not given \(connstring): \(said)")
        #expect(!said.contains("No driver available"), "\(connstring): \(said)")
    }
}
