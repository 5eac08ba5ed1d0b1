import CPCSC
import Foundation
import Synchronization
import TagFixDevices
import TagFixTags

/// A pcsc-lite call that failed: its return code (`SCARD_E_…`, `SCARD_W_…`) and what was asked.
public struct PCSCError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The return code as pcsc-lite gives it (a `LONG`).
    public var code: Int
    public var operation: String

    public init(code: Int, operation: String) {
        self.code = code
        self.operation = operation
    }

    // The codes TagFix decides on (pcsclite.h; Swift does not import the macros' casts).
    static let cancelled = 0x8010_0002
    static let invalidHandle = 0x8010_0003
    static let unknownReader = 0x8010_0009
    static let timeout = 0x8010_000A
    static let sharingViolation = 0x8010_000B
    static let noSmartCard = 0x8010_000C
    static let communicationError = 0x8010_0013
    static let notTransacted = 0x8010_0016
    static let readerUnavailable = 0x8010_0017
    static let noService = 0x8010_001D
    static let serviceStopped = 0x8010_001E
    static let noReaders = 0x8010_002E
    static let unresponsiveCard = 0x8010_0066
    static let unpoweredCard = 0x8010_0067
    static let resetCard = 0x8010_0068
    static let removedCard = 0x8010_0069

    /// pcsc-lite's name for the code (`SCARD_E_NO_SERVICE`).
    public var name: String {
        switch code {
        case Self.cancelled: "SCARD_E_CANCELLED"
        case Self.invalidHandle: "SCARD_E_INVALID_HANDLE"
        case Self.unknownReader: "SCARD_E_UNKNOWN_READER"
        case Self.timeout: "SCARD_E_TIMEOUT"
        case Self.sharingViolation: "SCARD_E_SHARING_VIOLATION"
        case Self.noSmartCard: "SCARD_E_NO_SMARTCARD"
        case Self.communicationError: "SCARD_F_COMM_ERROR"
        case Self.notTransacted: "SCARD_E_NOT_TRANSACTED"
        case Self.readerUnavailable: "SCARD_E_READER_UNAVAILABLE"
        case Self.noService: "SCARD_E_NO_SERVICE"
        case Self.serviceStopped: "SCARD_E_SERVICE_STOPPED"
        case Self.noReaders: "SCARD_E_NO_READERS_AVAILABLE"
        case Self.unresponsiveCard: "SCARD_W_UNRESPONSIVE_CARD"
        case Self.unpoweredCard: "SCARD_W_UNPOWERED_CARD"
        case Self.resetCard: "SCARD_W_RESET_CARD"
        case Self.removedCard: "SCARD_W_REMOVED_CARD"
        default: String(format: "0x%08lX", code)
        }
    }

    /// pcscd is not there (not running, stopped, restarted): the context must be made again.
    public var serviceGone: Bool {
        [Self.noService, Self.serviceStopped, Self.communicationError, Self.invalidHandle].contains(code)
    }

    /// The card left (or was reset by someone else) during the call.
    var cardGone: Bool {
        [Self.noSmartCard, Self.removedCard, Self.resetCard, Self.unpoweredCard, Self.unresponsiveCard, Self.notTransacted].contains(code)
    }

    /// The reader itself went away (unplugged) or is unknown.
    var readerGone: Bool { code == Self.unknownReader || code == Self.readerUnavailable }

    public var hint: String {
        if serviceGone { return "is pcscd running? (systemctl start pcscd.socket; tagfix doctor)" }
        if readerGone { return "the reader went away: check its cable (pcsc_scan lists the readers pcscd sees)" }
        if cardGone { return "hold the tag still on the reader until it is read, and try again" }
        if code == Self.sharingViolation { return "another program holds the card exclusively: close it and try again" }
        return "try again; tagfix doctor checks pcscd and the reader"
    }

    public var description: String { "\(operation) failed (\(name)): \(hint)" }

    /// The same failure in the words the tag procedures share.
    var tagError: TagError {
        let kind: TagError.Kind =
            if cardGone {
                .tagLost
            } else if code == Self.timeout {
                .timeout
            } else if code == Self.cancelled {
                .cancelled
            } else {
                .readerFailed
            }
        return TagError(kind, detail: name)
    }

    /// The failure as a reader event's error.
    var readerError: ReaderError {
        let code: ReaderError.Code =
            if serviceGone || readerGone {
                .notFound
            } else if self.code == Self.timeout {
                .timeout
            } else if self.code == Self.sharingViolation {
                .busy
            } else {
                .io
            }
        return ReaderError(code: code, message: "\(operation) failed (\(name))", hint: hint)
    }
}

/// A pcsc-lite context (SCardEstablishContext): a number, not a pointer, valid until released.
/// The device thread that made it makes every call on it but `cancel()`, which pcsc-lite allows
/// from any thread.
struct PCSCContext: Sendable {
    let handle: SCARDCONTEXT

    /// The name pcsc-lite gives the pseudo-reader whose state changes when readers come and go.
    static let plugAndPlay = "\\\\?PnP?\\Notification"

    init() throws(PCSCError) {
        var context: SCARDCONTEXT = 0
        let result = SCardEstablishContext(DWORD(SCARD_SCOPE_SYSTEM), nil, nil, &context)
        guard result == SCARD_S_SUCCESS else { throw PCSCError(code: Int(result), operation: "SCardEstablishContext") }
        handle = context
        PCSCActivity.shared.hold(context) { [context] in _ = SCardCancel(context) }
    }

    func release() {
        _ = SCardReleaseContext(handle)
        PCSCActivity.shared.release(handle)
    }

    /// Ends a running `waitForChange` at once (from any thread).
    func cancel() { _ = SCardCancel(handle) }

    /// The readers pcscd has, in its order (`pcsc:N` counts in it); empty when it has none.
    func readers() throws(PCSCError) -> [String] {
        var length: DWORD = 0
        var result = SCardListReaders(handle, nil, nil, &length)
        if result == PCSCError.noReaders { return [] }
        guard result == SCARD_S_SUCCESS else { throw PCSCError(code: Int(result), operation: "SCardListReaders") }
        var buffer = [CChar](repeating: 0, count: Int(length) + 1)
        result = SCardListReaders(handle, nil, &buffer, &length)
        if result == PCSCError.noReaders { return [] }
        guard result == SCARD_S_SUCCESS else { throw PCSCError(code: Int(result), operation: "SCardListReaders") }
        // A multi-string: names ended by NUL, the list by an empty one.
        return buffer.prefix(Int(length)).split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    }

    /// Waits up to `timeout` for one of `states` to differ from its `current` state
    /// (SCardGetStatusChange); each state's `event` and ATR are updated. False on timeout.
    func waitForChange(_ states: inout [PCSCReaderState], timeout: Duration) throws(PCSCError) -> Bool {
        let names = states.map { strdup($0.name) }
        defer { for name in names { free(name) } }
        var raw = states.enumerated().map { index, state in
            var entry = SCARD_READERSTATE()
            entry.szReader = UnsafePointer(names[index])
            entry.dwCurrentState = state.current
            return entry
        }
        let milliseconds = DWORD(max(0, timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        let result = SCardGetStatusChange(handle, milliseconds, &raw, DWORD(raw.count))
        if result == PCSCError.timeout { return false }
        guard result == SCARD_S_SUCCESS else { throw PCSCError(code: Int(result), operation: "SCardGetStatusChange") }
        var atr = [UInt8](repeating: 0, count: Int(MAX_ATR_SIZE))
        for index in raw.indices {
            states[index].event = raw[index].dwEventState
            let count = cpcsc_state_atr(&raw[index], &atr)
            states[index].atr = Array(atr.prefix(count))
        }
        return true
    }

    /// Connects to the card in `reader` (shared, T=0 or T=1, as pcsc-lite's contactless drivers
    /// offer a storage card as T=1), in a transaction until `disconnect()`.
    ///
    /// Shared, so other programs may still see the card (a desktop's smart-card service, a
    /// browser's PKCS#11 module, `pcsc_scan`); in a transaction (SCardBeginTransaction), so none
    /// of their commands comes between two of ours. Without it, another program's SELECT
    /// between a Type 4 tag's SELECT of its NDEF file and the READ BINARY after it made TagFix
    /// read another file, and a read of pages could be cut by another program's reset. pcsc-lite
    /// holds another program's commands, and its connections, until the transaction ends; a
    /// transaction another program holds makes this wait, as its connection already did.
    func connect(_ reader: String) throws(PCSCError) -> PCSCCard {
        var card: SCARDHANDLE = 0
        var proto: DWORD = 0
        let result = SCardConnect(
            handle, reader, DWORD(SCARD_SHARE_SHARED), DWORD(SCARD_PROTOCOL_T0 | SCARD_PROTOCOL_T1), &card, &proto)
        guard result == SCARD_S_SUCCESS else { throw PCSCError(code: Int(result), operation: "SCardConnect \(reader)") }
        var connected = PCSCCard(handle: card, activeProtocol: proto)
        var begun = SCardBeginTransaction(card)
        // Another program reset the card between the two calls: pcsc-lite wants this connection
        // made again first (the tag, reset, is selected anew by the reader).
        if Int(begun) == PCSCError.resetCard, (try? connected.reconnect(DWORD(SCARD_LEAVE_CARD))) != nil {
            begun = SCardBeginTransaction(card)
        }
        guard begun == SCARD_S_SUCCESS else {
            _ = SCardDisconnect(card, DWORD(SCARD_LEAVE_CARD))
            throw PCSCError(code: Int(begun), operation: "SCardBeginTransaction \(reader)")
        }
        return connected
    }
}

/// The pcsc-lite contexts this process has open, so that its end waits for them: libpcsclite's
/// destructor frees its contexts when the process exits, and a device thread still inside
/// `SCardGetStatusChange` then crashed (SIGSEGV at the end of `verify --count 1`, once in a
/// while). At exit every open context is cancelled once and the exit waits for its thread to
/// release it (`DeviceThread.HeldAtExit`).
enum PCSCActivity {
    static let shared = DeviceThread.HeldAtExit<SCARDCONTEXT>()
}

/// One reader's state for `SCardGetStatusChange`.
struct PCSCReaderState: Sendable, Hashable {
    var name: String
    /// What the caller believes (SCARD_STATE_… bits; for the plug-and-play pseudo-reader, the
    /// number of readers in the high word).
    var current: DWORD
    /// What pcscd says now.
    var event: DWORD = 0
    var atr: [UInt8] = []

    init(name: String, current: DWORD) {
        self.name = name
        self.current = current
    }

    var changed: Bool { event & DWORD(SCARD_STATE_CHANGED) != 0 }
    /// A card is in the field and answered (powered, not mute).
    var cardPresent: Bool { event & DWORD(SCARD_STATE_PRESENT) != 0 && event & DWORD(SCARD_STATE_MUTE) == 0 }
    var readerGone: Bool { event & DWORD(SCARD_STATE_UNKNOWN | SCARD_STATE_UNAVAILABLE) != 0 }
    /// The state to wait from next: what was seen, without the CHANGED bit.
    var seen: DWORD { event & ~DWORD(SCARD_STATE_CHANGED) }
}

/// A card connection (SCardConnect): a number, valid until disconnected.
struct PCSCCard: Sendable {
    let handle: SCARDHANDLE
    var activeProtocol: DWORD

    /// Sends one APDU; the answer ends with its status word.
    func transmit(_ apdu: [UInt8]) throws(PCSCError) -> [UInt8] {
        var answer = [UInt8](repeating: 0, count: 264)
        var length = DWORD(answer.count)
        let result = SCardTransmit(handle, cpcsc_pci(activeProtocol), apdu, DWORD(apdu.count), nil, &answer, &length)
        guard result == SCARD_S_SUCCESS else { throw PCSCError(code: Int(result), operation: "SCardTransmit") }
        return Array(answer.prefix(Int(length)))
    }

    /// Resets the card and connects again (a tag that refused a raw command is idle until it is
    /// selected again; the reader selects it again after a reset).
    mutating func reset() throws(PCSCError) { try reconnect(DWORD(SCARD_RESET_CARD)) }

    /// SCardReconnect, shared, T=0 or T=1 as `PCSCContext.connect`, doing `disposition` to the
    /// card first (SCARD_RESET_CARD, or SCARD_LEAVE_CARD after another program's reset).
    mutating func reconnect(_ disposition: DWORD) throws(PCSCError) {
        var proto: DWORD = 0
        let result = SCardReconnect(handle, DWORD(SCARD_SHARE_SHARED), DWORD(SCARD_PROTOCOL_T0 | SCARD_PROTOCOL_T1), disposition, &proto)
        guard result == SCARD_S_SUCCESS else { throw PCSCError(code: Int(result), operation: "SCardReconnect") }
        activeProtocol = proto
    }

    /// Ends the connection's transaction (`PCSCContext.connect`), then the connection.
    func disconnect() {
        _ = SCardEndTransaction(handle, DWORD(SCARD_LEAVE_CARD))
        _ = SCardDisconnect(handle, DWORD(SCARD_LEAVE_CARD))
    }
}

/// The PC/SC readers pcscd has, and whether it runs: for `tagfix devices` and `doctor`.
public enum PCSC {
    /// What pcscd said: its readers, or why it could not be asked.
    public static func readers() async -> Result<[String], PCSCError> {
        let stream: AsyncStream<Result<[String], PCSCError>> = DeviceThread().start(name: "pcsc list") { events in
            do throws(PCSCError) {
                let context = try PCSCContext()
                defer { context.release() }
                events.yield(.success(try context.readers()))
            } catch {
                events.yield(.failure(error))
            }
        }
        for await result in stream { return result }
        return .failure(PCSCError(code: PCSCError.cancelled, operation: "SCardListReaders"))
    }

    /// The `pcsc:N` address of each reader, with its name.
    public static func addresses(_ names: [String]) -> [String] {
        names.enumerated().map { "pcsc:\($0.offset)  \($0.element)" }
    }
}
