import Glibc
public import TagFixCore
import TagFixSystem

/// Which reader a command uses (`--reader`), parsed and checked here once for every command.
///
/// - A libnfc connstring, `DRIVER[:PORT[:SPEED]]`, for the drivers Debian's libnfc 1.8 has
///   (`ReaderAddress.libnfcDrivers`): `pn532_uart:/dev/ttyUSB0`, `pn532_i2c:/dev/i2c-1`,
///   `pn532_spi:/dev/spidev0.0:500000`, `pn53x_usb`, `pn53x_usb:003:002`, `acr122_usb`,
///   `acr122s:/dev/ttyUSB0`, `arygon:/dev/ttyUSB0`. A driver alone lets libnfc find the device.
/// - `pcsc:` (whichever PC/SC reader holds a card), `pcsc:N` (the N-th, from 0) or `pcsc:NAME`
///   (the reader of that name, or the first whose name contains NAME): served by the PC/SC backend
///   (TagFixPCSC, registered in TagFixReaders).
/// - `mock:SCENARIO`: the reader events of a scenario file (docs/scenarios.md), played from now.
/// - No `--reader`: libnfc's default (`LIBNFC_DEVICE`, `/etc/nfc/libnfc.conf`, the first found).
public enum ReaderAddress: Sendable, Hashable, CustomStringConvertible {
    case libnfcDefault
    case libnfc(driver: String, connstring: String)
    case pcsc(PCSCReader)
    case mock(scenario: String)

    /// Which PC/SC reader `pcsc:…` names.
    public enum PCSCReader: Sendable, Hashable {
        case first
        case index(Int)
        case name(String)
    }

    /// The libnfc drivers Debian's libnfc 1.8.0 is built with (`libnfc.driver.*` in libnfc.so.6):
    /// no `acr122_pcsc` (Debian builds libnfc without PC/SC) and no `pn71xx`.
    public static let libnfcDrivers = ["pn532_uart", "pn532_i2c", "pn532_spi", "pn53x_usb", "acr122_usb", "acr122s", "arygon"]

    /// libnfc's connstring buffer (NFC_BUFSIZE_CONNSTRING) less its terminating NUL: libnfc
    /// would cut a longer one short and open another device than the one named.
    public static let maximumLength = 1023

    /// The reader this address names, whatever its spelling: two addresses with one `reader` are
    /// one device, which one user at a time may have (`DeviceThread.Claims`), and which `serve`
    /// takes once. A libnfc serial or SPI port (its links resolved) whatever the speed; a USB bus
    /// and device whatever the driver's name; a PC/SC reader as given; a scenario file by its
    /// path, links resolved.
    public var reader: String {
        switch self {
        case .libnfcDefault: "libnfc default"
        case .libnfc(_, let connstring): Self.libnfcReader(connstring)
        case .pcsc: description
        case .mock(let scenario): "mock:" + Self.realPath(scenario)
        }
    }

    /// `reader` for a libnfc connstring: a serial or SPI driver's port (a symlink resolved)
    /// whatever its speed, "pn532_uart:/dev/ttyUSB0:115200" and "pn532_uart:/dev/ttyUSB0" being
    /// one reader; a USB driver's bus and device, whatever the driver's name ("usb:001:004" is
    /// libnfc's alias for any), "pn53x_usb:001:004" and "pn53x_usb:001:005" being two; anything
    /// else as written.
    public static func libnfcReader(_ connstring: String) -> String {
        let parts = connstring.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let driver = parts[0]
        // Driver names as libnfc spells them (it matches them case-sensitively).
        let portThenSpeed: Set<String> = ["pn532_uart", "pn532_spi", "pn532_i2c", "arygon", "ACR122S"]
        if portThenSpeed.contains(driver), parts.count >= 2 {
            return "libnfc \(driver):\(realPath(parts[1]))"
        }
        if driver == "usb" || driver.hasSuffix("_usb") {
            return "libnfc usb:" + parts.dropFirst().joined(separator: ":")
        }
        return "libnfc " + connstring
    }

    /// `path` with its symlinks resolved (a udev link such as /dev/serial/by-id/… and the tty it
    /// names are one port); as given when it cannot be resolved.
    static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The address `--reader` gives, or libnfc's default without one.
    public init(_ text: String?) throws(ReaderAddressError) {
        guard let text else {
            self = .libnfcDefault
            return
        }
        guard !text.isEmpty else { throw .empty }
        guard text.utf8.count <= Self.maximumLength else { throw .tooLong(text.utf8.count) }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .controlCharacter(text)
        }
        let scheme = text.prefix { $0 != ":" }
        let rest = text.dropFirst(scheme.count + (scheme.count < text.count ? 1 : 0))
        switch scheme {
        case "pcsc":
            if rest.isEmpty {
                self = .pcsc(.first)
            } else if rest.allSatisfy(\.isASCIIDigit) {
                guard let index = Int(rest), index < 256 else { throw .pcscIndex(String(rest)) }
                self = .pcsc(.index(index))
            } else {
                self = .pcsc(.name(String(rest)))
            }
        case "mock":
            guard !rest.isEmpty else { throw .mockWithoutScenario }
            self = .mock(scenario: String(rest))
        case "ACR122S":
            // libnfc's own spelling of a driver, as its libnfc.conf has it.
            self = .libnfc(driver: "acr122s", connstring: text)
        default:
            let driver = String(scheme)
            guard Self.libnfcDrivers.contains(driver) else { throw .unknownDriver(driver, suggestion: Self.suggestion(for: driver)) }
            self = .libnfc(driver: driver, connstring: (Self.libnfcSpelling[driver] ?? driver) + text.dropFirst(driver.count))
        }
    }

    /// The drivers libnfc names otherwise than TagFix (which spells every driver in lower case),
    /// as its connstrings must: libnfc 1.8 matches a driver's name case-sensitively, and has "No
    /// driver available to handle acr122s:/dev/ttyUSB0".
    public static let libnfcSpelling = ["acr122s": "ACR122S"]

    /// What a person probably meant by a driver libnfc does not have.
    static func suggestion(for driver: String) -> String? {
        let lower = driver.lowercased()
        if lower != driver, libnfcDrivers.contains(lower) { return lower }
        switch lower {
        // The kernel's module names, and libnfc's PC/SC driver that Debian does not build.
        case "pn533_usb", "pn533", "pn531_usb", "scl3711": return "pn53x_usb"
        case "acr122", "acr122u": return "acr122_usb"
        case "acr122_pcsc": return "acr122_usb (stop pcscd first) or pcsc:"
        case "pn532", "pn532_serial", "uart": return "pn532_uart:/dev/ttyUSB0"
        case "pn532_i2c1", "i2c": return "pn532_i2c:/dev/i2c-1"
        default: return nil
        }
    }

    /// The libnfc connstring (`nil` for libnfc's default); `nil` for other backends too.
    public var connstring: String? {
        if case .libnfc(_, let connstring) = self { return connstring }
        return nil
    }

    /// The device file a serial or I²C reader is behind (`pn532_uart:/dev/ttyUSB0` →
    /// `/dev/ttyUSB0`, options after a second `:` left out); `nil` for USB, PC/SC, mock and the
    /// default, whose presence is not a path.
    public var devicePath: String? {
        guard case .libnfc(_, let connstring) = self else { return nil }
        let parts = connstring.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[1].hasPrefix("/") else { return nil }
        return String(parts[1])
    }

    /// Whether a device is behind `devicePath` that a reader could be: a character device other
    /// than the memory ones (/dev/null, /dev/zero: major 1). Such a reader that does not answer
    /// may still be waking; a path with nothing (or a file, or /dev/null) behind it never will.
    public var deviceIsThere: Bool {
        guard let path = devicePath else { return false }
        guard let info = try? Stat(path), info.type == .characterSpecial else { return false }
        return info.device.major != 1
    }

    /// The reader's name in output and logs, as `TagReader.readerID` gives it.
    public var description: String {
        switch self {
        case .libnfcDefault: "default"
        case .libnfc(_, let connstring): connstring
        case .pcsc(.first): "pcsc:"
        case .pcsc(.index(let index)): "pcsc:\(index)"
        case .pcsc(.name(let name)): "pcsc:\(name)"
        case .mock(let scenario): "mock:\(scenario)"
        }
    }

    /// The backend that serves the address.
    public var backend: Backend {
        switch self {
        case .libnfcDefault, .libnfc: .libnfc
        case .pcsc: .pcsc
        case .mock: .mock
        }
    }

    /// A reader backend: what the reader factory (TagFixReaders) chooses by.
    public enum Backend: String, Sendable, Hashable, CustomStringConvertible {
        case libnfc
        case pcsc
        case mock
        public var description: String {
            switch self {
            case .libnfc: "libnfc"
            case .pcsc: "PC/SC"
            case .mock: "mock"
            }
        }
    }

    /// The accepted forms, for help texts and errors.
    public static let forms =
        "a libnfc connstring DRIVER[:PORT] (drivers: \(libnfcDrivers.joined(separator: ", "))), pcsc:[N|NAME] or mock:SCENARIO"
}

/// Why `--reader` names no reader this build can open. Each says what to write instead.
public enum ReaderAddressError: Error, Sendable, Hashable, CustomStringConvertible {
    case empty
    case tooLong(Int)
    case controlCharacter(String)
    case unknownDriver(String, suggestion: String?)
    case pcscIndex(String)
    case mockWithoutScenario
    /// The address is well formed, but no backend for it is built into this tagfix.
    case noBackend(ReaderAddress.Backend, address: String)
    /// The scenario of `mock:SCENARIO` cannot be read.
    case scenario(DataFileError)

    public var description: String {
        switch self {
        case .empty:
            "--reader is empty: give \(ReaderAddress.forms), e.g. pn532_uart:/dev/ttyUSB0"
        case .tooLong(let count):
            "--reader is \(count) bytes long: libnfc takes at most \(ReaderAddress.maximumLength)"
        case .controlCharacter(let text):
            "--reader \(text.debugDescription) holds a control character: give \(ReaderAddress.forms)"
        case .unknownDriver(let driver, let suggestion):
            "\"\(driver)\" is not a reader driver"
                + (suggestion.map { ": did you mean \($0)?" } ?? "")
                + " (give \(ReaderAddress.forms), e.g. pn532_uart:/dev/ttyUSB0)"
        case .pcscIndex(let text):
            "pcsc:\(text): a PC/SC reader number is 0 to 255 (or give the reader's name: pcsc:NAME)"
        case .mockWithoutScenario:
            "mock: needs a scenario file: mock:SCENARIO (docs/scenarios.md)"
        case .noBackend(let backend, let address):
            "\(address): this build has no \(backend) backend; use a libnfc reader (\(ReaderAddress.libnfcDrivers.joined(separator: ", ")))"
        case .scenario(let error):
            "\(error)"
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
