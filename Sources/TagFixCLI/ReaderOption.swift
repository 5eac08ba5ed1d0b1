import TagFixCore
import TagFixDevices
import TagFixReaders

/// `--reader ADDRESS`, the same for every command: parsed and checked by the reader factory
/// (TagFixReaders), which also opens it. The help texts' words for it.
enum ReaderOption {
    static let help = "The reader: a libnfc connstring (pn532_uart:/dev/ttyUSB0, pn53x_usb, acr122_usb, …), pcsc:[N|NAME] or mock:SCENARIO."

    /// The address `--reader` gives (libnfc's default without one), refused here when no backend
    /// in this build serves it.
    static func address(_ text: String?, command: String) throws(CLIError) -> ReaderAddress {
        do {
            return try ReaderFactory.standard.address(text)
        } catch {
            throw Self.error(error, command: command)
        }
    }

    static func reader(_ address: ReaderAddress, clock: MonotonicClock, command: String) throws(CLIError) -> any TagReader {
        do {
            return try ReaderFactory.standard.reader(address, clock: clock)
        } catch {
            throw Self.error(error, command: command)
        }
    }

    static func session(_ address: ReaderAddress, clock: MonotonicClock, command: String) throws(CLIError) -> any TagSession {
        do {
            return try ReaderFactory.standard.session(address, clock: clock)
        } catch {
            throw Self.error(error, command: command)
        }
    }

    /// A wrong address is a usage error (64); a backend this build lacks is unavailable (69); a
    /// mock scenario that cannot be read is the scenario's file error (66 / 65).
    static func error(_ error: ReaderAddressError, command: String) -> CLIError {
        switch error {
        case .noBackend: .unavailable(error.description)
        case .scenario(let file): .file(file)
        default: .usage(error.description, command: command)
        }
    }
}
