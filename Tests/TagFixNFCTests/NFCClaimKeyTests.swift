import Testing

@testable import TagFixNFC

/// The reader a connstring claims in the process (`DeviceThread.Claims`): libnfc's
/// "driver:port[:speed]", so a speed does not make a second reader of one port.
@Suite struct NFCClaimKeyTests {
    @Test(
        "one port at any speed is one claim; another port, driver or USB device is another",
        arguments: [
            ("pn532_uart:/dev/ttyUSB0", "pn532_uart:/dev/ttyUSB0:115200", true),
            ("pn532_uart:/dev/pts/3", "pn532_uart:/dev/pts/3", true),
            ("pn532_uart:/dev/ttyUSB0", "pn532_uart:/dev/ttyUSB1", false),
            ("pn532_uart:/dev/ttyUSB0", "pn532_i2c:/dev/ttyUSB0", false),
            ("pn532_spi:/dev/spidev0.0", "pn532_spi:/dev/spidev0.0:562500", true),
            ("arygon:/dev/ttyUSB0:9600", "arygon:/dev/ttyUSB0:115200", true),
            // Two USB readers on one bus: the third part is the device, not a speed.
            ("pn53x_usb:001:004", "pn53x_usb:001:005", false),
            ("acr122_usb:001:004", "acr122_usb:001:004", true),
        ])
    func sameReader(_ one: String, _ other: String, _ same: Bool) {
        #expect((NFCDeviceHandle.claimKey(one) == NFCDeviceHandle.claimKey(other)) == same)
    }

    @Test("libnfc's default reader is a claim of its own")
    func defaultReader() {
        #expect(NFCDeviceHandle.claimKey(nil) == NFCDeviceHandle.claimKey(nil))
        #expect(NFCDeviceHandle.claimKey(nil) != NFCDeviceHandle.claimKey("pn532_uart:/dev/ttyUSB0"))
    }
}
