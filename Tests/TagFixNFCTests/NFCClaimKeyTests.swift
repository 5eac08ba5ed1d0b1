import Foundation
import Testing

@testable import TagFixNFC

/// The reader a connstring claims in the process (`DeviceThread.Claims`): two names of one reader
/// must be one claim (or two users would talk over each other on its line), and two readers two
/// (or the second would wait for ever for the first). Connstring forms from libnfc's drivers.
@Suite struct NFCClaimKeyTests {
    @Test(
        "one reader by any of its names is one claim; another port, driver or USB device is another",
        arguments: [
            ("pn532_uart:/dev/ttyUSB0", "pn532_uart:/dev/ttyUSB0:115200", true),
            ("pn532_uart:/dev/ttyUSB0", "pn532_uart:/dev/ttyUSB1", false),
            ("pn532_uart:/dev/ttyUSB0", "pn532_i2c:/dev/ttyUSB0", false),
            ("pn532_spi:/dev/spidev0.0", "pn532_spi:/dev/spidev0.0:562500", true),
            ("arygon:/dev/ttyUSB0:9600", "arygon:/dev/ttyUSB0:115200", true),
            // libnfc spells this driver's name in capitals, and matches names as spelled.
            ("ACR122S:/dev/ttyUSB0", "ACR122S:/dev/ttyUSB0:9600", true),
            // Two USB readers on one bus: the third part is the device, not a speed.
            ("pn53x_usb:001:004", "pn53x_usb:001:005", false),
            // "usb:" is libnfc's name for a USB reader whatever its driver.
            ("usb:001:004", "pn53x_usb:001:004", true),
            ("acr122_usb:001:004", "pn53x_usb:002:004", false),
        ])
    func sameReader(_ one: String, _ other: String, _ same: Bool) {
        #expect((NFCDeviceHandle.claimKey(one) == NFCDeviceHandle.claimKey(other)) == same)
    }

    @Test("a serial port by a link (a udev name such as /dev/serial/by-id/…) is the port it names")
    func linkedPort() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("claim-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data().write(to: URL(fileURLWithPath: folder + "/ttyUSB7"))
        try FileManager.default.createSymbolicLink(atPath: folder + "/by-id", withDestinationPath: folder + "/ttyUSB7")
        #expect(NFCDeviceHandle.claimKey("pn532_uart:\(folder)/by-id") == NFCDeviceHandle.claimKey("pn532_uart:\(folder)/ttyUSB7:115200"))
        #expect(NFCDeviceHandle.claimKey("pn532_uart:\(folder)/by-id") != NFCDeviceHandle.claimKey("pn532_uart:\(folder)/ttyUSB8"))
    }

    @Test("libnfc's default reader is a claim apart from any reader named")
    func defaultReader() {
        #expect(NFCDeviceHandle.claimKey(nil) != NFCDeviceHandle.claimKey("pn532_uart:/dev/ttyUSB0"))
        #expect(NFCDeviceHandle.claimKey(nil) != NFCDeviceHandle.claimKey("usb:001:004"))
    }
}
