/// Why one exchange with a tag failed, in words every reader backend shares: a backend maps its
/// own errors (libnfc's `NFCError`, a PC/SC status) into these at its transport, and the read and
/// write procedures decide on `kind` alone.
public struct TagError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The tag left the field or stopped answering (an RF error, a released target).
        case tagLost = "tag_lost"
        /// Nothing answered in time.
        case timeout
        /// The tag answered with a refusal (a NAK, an error status): it does not do this command.
        case refused
        /// The tag refused the key (a MIFARE Classic sector authentication).
        case authenticationFailed = "authentication_failed"
        /// An answer or a request that breaks the protocol (wrong length, a command the reader
        /// cannot send).
        case protocolError = "protocol_error"
        /// The reader itself failed (I/O error, unplugged): the backend reopens it.
        case readerFailed = "reader_failed"
        /// The exchange was cancelled (the reader is being closed).
        case cancelled
    }

    public var kind: Kind
    /// The backend's own name for what happened, shown in messages: `NFC_ERFTRANS`, `SW 6A82`.
    public var detail: String

    public init(_ kind: Kind, detail: String? = nil) {
        self.kind = kind
        self.detail = detail ?? kind.rawValue
    }

    /// What a person should do next.
    public var hint: String {
        switch kind {
        case .tagLost: "hold the tag still on the reader until it is read, and try again"
        case .timeout: "the reader or the tag did not answer in time: hold the tag still, check the reader's power and wiring"
        case .refused: "the tag does not do this: it may be another chip than it says, or locked"
        case .authenticationFailed: "the tag refused the key: it is not formatted for NDEF, or it is protected"
        case .protocolError: "the tag or the reader answered out of protocol: try again, then try another reader"
        case .readerFailed: "the reader failed: check its cable and power (tagfix doctor)"
        case .cancelled: "the reader was closed"
        }
    }

    public var description: String { "\(detail): \(hint)" }
}
