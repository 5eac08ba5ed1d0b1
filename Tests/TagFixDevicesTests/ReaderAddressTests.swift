import TagFixDevices
import Testing

@Suite("Reader addresses (--reader), parsed in one place")
struct ReaderAddressTests {
    @Test(
        "every form a command accepts",
        arguments: [
            ("pn532_uart:/dev/ttyUSB0", ReaderAddress.libnfc(driver: "pn532_uart", connstring: "pn532_uart:/dev/ttyUSB0")),
            ("pn532_uart:/dev/serial0", .libnfc(driver: "pn532_uart", connstring: "pn532_uart:/dev/serial0")),
            ("pn532_i2c:/dev/i2c-1", .libnfc(driver: "pn532_i2c", connstring: "pn532_i2c:/dev/i2c-1")),
            ("pn532_spi:/dev/spidev0.0:500000", .libnfc(driver: "pn532_spi", connstring: "pn532_spi:/dev/spidev0.0:500000")),
            ("pn53x_usb", .libnfc(driver: "pn53x_usb", connstring: "pn53x_usb")),
            ("pn53x_usb:", .libnfc(driver: "pn53x_usb", connstring: "pn53x_usb:")),
            ("pn53x_usb:003:002", .libnfc(driver: "pn53x_usb", connstring: "pn53x_usb:003:002")),
            ("acr122_usb", .libnfc(driver: "acr122_usb", connstring: "acr122_usb")),
            // libnfc 1.8 spells this driver in capitals, and matches names as spelled.
            ("acr122s:/dev/ttyUSB0", .libnfc(driver: "acr122s", connstring: "ACR122S:/dev/ttyUSB0")),
            ("ACR122S:/dev/ttyUSB0:9600", .libnfc(driver: "acr122s", connstring: "ACR122S:/dev/ttyUSB0:9600")),
            ("arygon", .libnfc(driver: "arygon", connstring: "arygon")),
            ("arygon:/dev/ttyS0", .libnfc(driver: "arygon", connstring: "arygon:/dev/ttyS0")),
            ("pcsc", .pcsc(.first)),
            ("pcsc:", .pcsc(.first)),
            ("pcsc:0", .pcsc(.index(0))),
            ("pcsc:12", .pcsc(.index(12))),
            ("pcsc:ACS ACR122U PICC Interface 00 00", .pcsc(.name("ACS ACR122U PICC Interface 00 00"))),
            ("mock:Examples/site/scenario.json", .mock(scenario: "Examples/site/scenario.json")),
        ])
    func valid(_ text: String, _ expected: ReaderAddress) throws {
        let address = try ReaderAddress(text)
        #expect(address == expected)
        if case .libnfc(let driver, _) = expected, ReaderAddress.libnfcSpelling[driver] == nil {
            #expect(address.description == text, "libnfc gets the connstring as it was typed")
        }
    }

    @Test("no --reader is libnfc's default reader")
    func absent() throws {
        #expect(try ReaderAddress(nil) == .libnfcDefault)
        #expect(ReaderAddress.libnfcDefault.connstring == nil)
        #expect(ReaderAddress.libnfcDefault.description == "default")
    }

    static let forms =
        "a libnfc connstring DRIVER[:PORT] (drivers: pn532_uart, pn532_i2c, pn532_spi, pn53x_usb, acr122_usb, acr122s, arygon), pcsc:[N|NAME] or mock:SCENARIO"

    @Test(
        "every refusal, with its whole message",
        arguments: [
            ("", "--reader is empty: give \(forms), e.g. pn532_uart:/dev/ttyUSB0"),
            (
                "pn533_usb",
                "\"pn533_usb\" is not a reader driver: did you mean pn53x_usb? (give \(forms), e.g. pn532_uart:/dev/ttyUSB0)"
            ),
            (
                "acr122_pcsc",
                "\"acr122_pcsc\" is not a reader driver: did you mean acr122_usb (stop pcscd first) or pcsc:? (give \(forms), e.g. pn532_uart:/dev/ttyUSB0)"
            ),
            (
                "PN532_UART:/dev/ttyUSB0",
                "\"PN532_UART\" is not a reader driver: did you mean pn532_uart? (give \(forms), e.g. pn532_uart:/dev/ttyUSB0)"
            ),
            ("/dev/ttyUSB0", "\"/dev/ttyUSB0\" is not a reader driver (give \(forms), e.g. pn532_uart:/dev/ttyUSB0)"),
            ("gpsd://localhost:2947", "\"gpsd\" is not a reader driver (give \(forms), e.g. pn532_uart:/dev/ttyUSB0)"),
            ("pcsc:999", "pcsc:999: a PC/SC reader number is 0 to 255 (or give the reader's name: pcsc:NAME)"),
            ("mock:", "mock: needs a scenario file: mock:SCENARIO (docs/scenarios.md)"),
            ("mock", "mock: needs a scenario file: mock:SCENARIO (docs/scenarios.md)"),
            ("pn532_uart:/dev/tty\nUSB0", "--reader \"pn532_uart:/dev/tty\\nUSB0\" holds a control character: give \(forms)"),
            ("pn532_uart:/" + String(repeating: "x", count: 1100), "--reader is 1112 bytes long: libnfc takes at most 1023"),
        ])
    func invalid(_ text: String, _ message: String) {
        #expect {
            _ = try ReaderAddress(text)
        } throws: { error in
            (error as? ReaderAddressError)?.description == message
        }
    }

    @Test("the driver list is the one Debian's libnfc 1.8 is built with")
    func drivers() {
        #expect(
            ReaderAddress.libnfcDrivers.sorted() == [
                "acr122_usb", "acr122s", "arygon", "pn532_i2c", "pn532_spi", "pn532_uart", "pn53x_usb",
            ])
    }
}
