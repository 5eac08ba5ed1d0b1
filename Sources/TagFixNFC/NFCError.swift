public import TagFixTags

/// A libnfc error code (nfc.h), named as libnfc names it.
public struct NFCErrorCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let io = NFCErrorCode(rawValue: -1)  // NFC_EIO
    public static let invalidArgument = NFCErrorCode(rawValue: -2)  // NFC_EINVARG
    public static let deviceNotSupported = NFCErrorCode(rawValue: -3)  // NFC_EDEVNOTSUPP
    public static let noSuchDevice = NFCErrorCode(rawValue: -4)  // NFC_ENOTSUCHDEV
    public static let overflow = NFCErrorCode(rawValue: -5)  // NFC_EOVFLOW
    public static let timeout = NFCErrorCode(rawValue: -6)  // NFC_ETIMEOUT
    public static let aborted = NFCErrorCode(rawValue: -7)  // NFC_EOPABORTED
    public static let notImplemented = NFCErrorCode(rawValue: -8)  // NFC_ENOTIMPL
    public static let targetReleased = NFCErrorCode(rawValue: -10)  // NFC_ETGRELEASED
    public static let rfTransmission = NFCErrorCode(rawValue: -20)  // NFC_ERFTRANS
    public static let mifareAuthFailed = NFCErrorCode(rawValue: -30)  // NFC_EMFCAUTHFAIL
    public static let software = NFCErrorCode(rawValue: -80)  // NFC_ESOFT
    public static let chip = NFCErrorCode(rawValue: -90)  // NFC_ECHIP

    public var name: String {
        switch self {
        case .io: "NFC_EIO"
        case .invalidArgument: "NFC_EINVARG"
        case .deviceNotSupported: "NFC_EDEVNOTSUPP"
        case .noSuchDevice: "NFC_ENOTSUCHDEV"
        case .overflow: "NFC_EOVFLOW"
        case .timeout: "NFC_ETIMEOUT"
        case .aborted: "NFC_EOPABORTED"
        case .notImplemented: "NFC_ENOTIMPL"
        case .targetReleased: "NFC_ETGRELEASED"
        case .rfTransmission: "NFC_ERFTRANS"
        case .mifareAuthFailed: "NFC_EMFCAUTHFAIL"
        case .software: "NFC_ESOFT"
        case .chip: "NFC_ECHIP"
        default: "libnfc error \(rawValue)"
        }
    }

    public var description: String { name }
}

/// A libnfc call that failed: the code, what failed, and what to do.
public struct NFCError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: NFCErrorCode
    /// What was being done, e.g. "open pn532_uart:/dev/ttyUSB0".
    public var operation: String
    /// libnfc's own words (nfc_strerror), when there was a device to ask.
    public var detail: String?

    public init(code: NFCErrorCode, operation: String, detail: String? = nil) {
        self.code = code
        self.operation = operation
        self.detail = detail
    }

    /// What a person should try.
    public var hint: String {
        switch code {
        case .noSuchDevice, .io:
            "check the connstring and the cable; for USB readers the pn533_usb kernel module may hold the device (run tagfix doctor; see hardware.md#kernel-modules)"
        case .timeout: "the reader did not answer in time: check its power and wiring"
        case .targetReleased, .rfTransmission: "the tag left the field or the link is noisy: hold the tag still and try again"
        case .deviceNotSupported: "libnfc has no driver for this device or operation"
        case .invalidArgument: "the request is not valid for this reader or tag"
        default: "see hardware.md#troubleshooting"
        }
    }

    public var description: String {
        "\(operation) failed: \(code.name)" + (detail.map { " (\($0))" } ?? "") + ": \(hint)"
    }
}

extension NFCError {
    /// The backend-neutral error the read and write procedures (TagFixTags) decide on; the
    /// detail keeps libnfc's code name, so messages still say NFC_ERFTRANS or NFC_ETIMEOUT.
    public var tagError: TagError {
        let kind: TagError.Kind =
            switch code {
            case .targetReleased, .rfTransmission: .tagLost
            case .timeout: .timeout
            case .mifareAuthFailed: .authenticationFailed
            case .io, .noSuchDevice: .readerFailed
            case .aborted: .cancelled
            default: .protocolError
            }
        return TagError(kind, detail: code.name)
    }
}
