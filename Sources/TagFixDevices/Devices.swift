public import TagFixCore

// MARK: - Readers

/// An NFC reader: a stream of tag events. Real readers (libnfc) and mocks implement it.
///
/// `events()` is called once; the stream ends when the reader is closed or the consuming task is
/// cancelled (the implementation then releases the device).
public protocol TagReader: Sendable {
    /// A name for the reader in output and logs, e.g. `pn532_uart:/dev/ttyUSB0` or `mock`.
    var readerID: String { get }
    func events() -> AsyncStream<ReaderEvent>
}

public enum ReaderEvent: Sendable, Hashable {
    /// The reader is open and polling.
    case ready(description: String)
    /// A tag entered the field and was read.
    case tagPresent(TagScan)
    /// The tag left the field.
    case tagRemoved(TagUID, at: Timestamp)
    /// Something went wrong; the reader keeps going (or says `.disconnected`).
    case failed(ReaderError)
    /// The reader is gone (unplugged, closed by the OS); implementations may reconnect.
    case disconnected(ReaderError)
}

/// A reader problem with a code, a message for a person and what to do about it.
public struct ReaderError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The tag left the field before its NDEF message was read: nothing of it was used.
        public static let incompleteRead = Code(rawValue: "incomplete_read")
        public static let timeout = Code(rawValue: "timeout")
        public static let io = Code(rawValue: "io")
        /// An exchange failed on the air (libnfc's NFC_ERFTRANS: the chip's time-out, CRC, parity
        /// or framing error; NFC_ETGRELEASED: the tag was released): the tag or the field, not
        /// the reader or its line.
        public static let rfError = Code(rawValue: "rf_error")
        public static let busy = Code(rawValue: "busy")
        public static let notFound = Code(rawValue: "not_found")
        public static let unsupportedTag = Code(rawValue: "unsupported_tag")
        public static let malformedTag = Code(rawValue: "malformed_tag")
        /// A tag that could not be written (a tag session's write); the message says what state
        /// the tag is in.
        public static let writeFailed = Code(rawValue: "write_failed")
    }

    public var code: Code
    public var message: String
    /// What to do next, e.g. "hold the tag still until the beep".
    public var hint: String?

    public init(code: Code, message: String, hint: String? = nil) {
        self.code = code
        self.message = message
        self.hint = hint
    }

    public var description: String {
        hint.map { "\(message): \($0)" } ?? message
    }
}

// MARK: - GPS

/// A GNSS fix source: gpsd through libgps, or a mock.
public protocol FixSource: Sendable {
    /// A name for output and logs, e.g. `gpsd://localhost:2947` or `mock`.
    var sourceID: String { get }
    func events() -> AsyncStream<FixEvent>
}

public enum FixEvent: Sendable, Hashable {
    /// The source is connected and streaming (gpsd answered WATCH).
    case connected(String)
    /// A new epoch: the first report of its time, delivered at once.
    case fix(Fix)
    /// A more complete report of an epoch already delivered with `.fix` (gpsd refines an epoch as
    /// its sentences arrive: 2D becomes 3D, an altitude or `epv` is added). The same epoch, with
    /// the same `time`: it replaces that fix for every later decision and is never a new epoch.
    case refined(Fix)
    /// A report that was dropped instead of being used (no time, an impossible position).
    case rejected(FixRejection)
    /// The receiver's time jumped from `from` to `to` (a log replayed again, a GPS week rollover,
    /// a receiver reset): a new stream of fixes starts, mapped afresh onto the session's axis.
    case restarted(from: Timestamp, to: Timestamp)
    /// The source cannot be reached; it retries by itself.
    case unavailable(String)
    /// The source is connected but has sent nothing for this long.
    case silent(Duration)
    /// The source is back after `unavailable` or `silent`.
    case resumed
}
