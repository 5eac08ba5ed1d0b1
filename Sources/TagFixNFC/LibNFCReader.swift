import Foundation
import Synchronization
public import TagFixCore
public import TagFixDevices
import TagFixNDEF
import TagFixTags

/// A real NFC reader through libnfc: PN532 (UART, I2C, SPI), PN533, SCL3711, ACR122U — whatever
/// the connstring names, or libnfc's default device (LIBNFC_DEVICE, libnfc.conf).
///
/// The device lives on its own thread, where every blocking libnfc call runs; events reach the
/// consumer through an `AsyncStream`. Cancelling the consumer calls `nfc_abort_command`. When the
/// reader goes away it reports `.disconnected`, then reopens it with backoff.
public final class LibNFCReader<C: Clock>: TagReader, Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public struct Options: Sendable {
        /// Pause between polls while no tag is in the field, and between presence checks.
        public var pollInterval: Duration = .milliseconds(50)
        /// First pause before reopening a lost reader; doubles up to `maximumBackoff`.
        public var reconnectDelay: Duration = .milliseconds(200)
        public var maximumBackoff: Duration = .seconds(2)
        public init() {}
    }

    public let readerID: String
    private let connstring: String?
    private let clock: C
    private let options: Options
    private let thread = DeviceThread()
    private let current = Mutex<NFCDeviceHandle?>(nil)

    /// - Parameter connstring: e.g. `pn532_uart:/dev/ttyUSB0`; `nil` for libnfc's default.
    public init(connstring: String?, clock: C, options: Options = Options()) {
        self.connstring = connstring
        self.readerID = connstring ?? "default"
        self.clock = clock
        self.options = options
    }

    public func events() -> AsyncStream<ReaderEvent> {
        thread.start(name: "libnfc \(readerID)", onStop: { [self] in self.current.withLock { $0?.abort() } }) { [self] events in
            self.run(events)
        }
    }

    /// The consumer has gone, or the process is ending (`NFCActivity`).
    private var isStopped: Bool { thread.isStopped || NFCActivity.shared.exiting }
    private func pause(_ duration: Duration) { thread.pause(duration, or: { NFCActivity.shared.exiting }) }

    // MARK: - The device thread

    private func run(_ events: AsyncStream<ReaderEvent>.Continuation) {
        let context: NFCContext
        do {
            context = try NFCContext.shared()
        } catch {
            events.yield(.disconnected(Self.readerError(error)))
            return
        }
        var backoff = options.reconnectDelay
        var reportedDown = false
        while !isStopped {
            let device: NFCDeviceHandle
            do {
                device = try open(context) {
                    guard !reportedDown else { return }
                    events.yield(.disconnected($0))
                    reportedDown = true
                }
            } catch {
                if !reportedDown {
                    events.yield(.disconnected(Self.readerError(error)))
                    reportedDown = true
                }
                DebugLog.debug("reader \(readerID): \(error); retrying in \(backoff.seconds) s")
                pause(backoff)
                backoff = min(backoff * 2, options.maximumBackoff)
                continue
            }
            current.withLock { $0 = device }
            backoff = options.reconnectDelay
            reportedDown = false
            events.yield(.ready(description: device.label))
            do {
                try poll(device, events)
            } catch {
                if !isStopped {
                    events.yield(.disconnected(Self.readerError(error)))
                    reportedDown = true
                }
            }
            current.withLock { $0 = nil }
            device.close()
            if !isStopped { pause(backoff) }
        }
    }

    /// Opens the reader and makes it an initiator (closed again when that fails, so the reader is
    /// not held through the backoff). While another user in this process holds it, waits, and
    /// after 2 s says so once through `busy`.
    private func open(_ context: NFCContext, busy: (ReaderError) -> Void) throws(NFCError) -> NFCDeviceHandle {
        var waits = 0
        let device = try NFCDeviceHandle(context: context, connstring: connstring) {
            waits += 1
            if waits == 40 {
                busy(
                    ReaderError(
                        code: .busy, message: "\(readerID) is in use by another reader of this program",
                        hint: "give each reader once (a speed or a link names the same port); waiting for it"))
            }
            return !isStopped
        }
        do throws(NFCError) {
            try device.initiatorInit()
        } catch {
            device.close()
            throw error
        }
        return device
    }

    /// Polls for tags, reads each, waits for it to leave. Returns when stopped; throws when the
    /// device fails (the caller reopens it).
    private func poll(_ device: NFCDeviceHandle, _ events: AsyncStream<ReaderEvent>.Continuation) throws(NFCError) {
        // The last Type 4 message's length: a site's tags share a URL template, so the next NTAG
        // 424 DNA's NLEN and message come in one READ BINARY (Type4NDEFReader's expectedLength).
        var lastType4Length: Int?
        while !isStopped {
            guard let target = try device.selectISO14443A() else {
                if let felica = try pollFeliCa(device) {
                    try readFeliCa(device, felica, events)
                    continue
                }
                pause(options.pollInterval)
                continue
            }
            let started = clock.now
            let uid: TagUID
            do {
                uid = try TagUID(bytes: target.uid)
            } catch {
                events.yield(.failed(ReaderError(code: .unsupportedTag, message: "a tag with a \(target.uid.count)-byte UID")))
                try waitForRemoval(device, target)
                continue
            }
            var transport = DeviceTransport(device: device)
            let link = transport
            let (outcome, attempts) = ReadRetry.run(reselect: { link.reselectIfPresent(target) }) {
                read(&transport, target, expectedLength: lastType4Length)
            }
            switch outcome {
            case .success(let result):
                if result.tagType == .type4, let message = result.message { lastType4Length = message.count }
                let duration = started.duration(to: clock.now)
                DebugLog.debug(
                    "read \(uid.hex) (\(result.chipName)): \(result.commands) commands, \(result.bytesMoved) bytes moved, \(Coordinate.format(duration.seconds * 1000, 1)) ms, \(attempts) attempt\(attempts == 1 ? "" : "s"), \(link.failures.rfErrors) RF errors"
                )
                var scan = result.scan(readerID: readerID, uid: uid, time: started, duration: duration)
                scan.readEffort = ReadEffort(attempts: attempts, rfErrors: link.failures.rfErrors, duration: duration)
                events.yield(.tagPresent(scan))
            case .failure(let error):
                events.yield(.failed(Self.readError(error, uid: uid)))
                // The reader itself failed (not the tag): reopen it, as libnfc said.
                if case .incompleteRead = error, let cause = transport.failures.last, cause.code == .io || cause.code == .noSuchDevice {
                    throw cause
                }
                // A read that failed is read again as soon as the tag answers anew: the first
                // probe it misses ends this tap.
                try waitForRemoval(device, target, readSucceeded: false)
                events.yield(.tagRemoved(uid, at: clock.now))
                continue
            }
            try waitForRemoval(device, target, readSucceeded: true)
            events.yield(.tagRemoved(uid, at: clock.now))
        }
    }

    /// FeliCa polling at 212, then 424 kbps.
    private func pollFeliCa(_ device: NFCDeviceHandle) throws(NFCError) -> FeliCaTarget? {
        if let found = try device.selectFeliCa(baud424: false) { return found }
        return try device.selectFeliCa(baud424: true)
    }

    /// Reads a FeliCa tag and waits for it to leave.
    private func readFeliCa(_ device: NFCDeviceHandle, _ target: FeliCaTarget, _ events: AsyncStream<ReaderEvent>.Continuation)
        throws(NFCError)
    {
        let started = clock.now
        guard let uid = try? TagUID(bytes: target.idm) else { return }
        var transport = DeviceTransport(device: device)
        do {
            let result = try Type3NDEFReader.read(&transport, idm: target.idm)
            let message = result.message.flatMap { try? NDEFMessage(bytes: $0) }
            var scan = TagScan(
                readerID: readerID, uid: uid, tagType: .felica, url: message?.firstURL, time: started, ndefMessage: result.message,
                readDuration: started.duration(to: clock.now), bytesMoved: result.bytesMoved)
            scan.ndefProblem = result.problem
            scan.ndefReadFailed = result.failed
            scan.originality = Originality(status: .unsupported)
            DebugLog.debug("read \(uid.hex) (FeliCa): \(result.commands) commands, \(result.bytesMoved) bytes moved")
            events.yield(.tagPresent(scan))
        } catch {
            events.yield(.failed(Self.readError(error, uid: uid)))
        }
        // Gone when polling no longer finds this IDm.
        while !isStopped {
            pause(options.pollInterval)
            if try pollFeliCa(device)?.idm != target.idm { break }
        }
        events.yield(.tagRemoved(uid, at: clock.now))
    }

    private func read(
        _ transport: inout DeviceTransport, _ target: ISO14443ATarget, expectedLength: Int?
    ) -> Result<NDEFRead, NDEFReadError> {
        let link = transport
        do {
            if target.isISODEP {
                return .success(
                    try Type4NDEFReader.read(&transport, known: .layout(answerToSelect: target.ats), expectedLength: expectedLength))
            }
            if target.isMifareClassic {
                return .success(
                    try MifareClassicNDEFReader.read(&transport, uid: target.uid, sectors: target.sak & 0x10 != 0 ? 40 : 16) {
                        () throws(TagError) -> Void in try link.reselect(target)
                    })
            }
            if target.isType2 {
                return .success(
                    try Type2NDEFReader.read(&transport) { () throws(TagError) -> Void in try link.reselect(target) })
            }
            return .failure(
                .malformed("a tag with SAK \(Hex.encode([target.sak])): only Type 2 (NTAG, Ultralight) and Type 4 tags are read"))
        } catch {
            return .failure(error)
        }
    }

    /// Checks presence every poll interval until the tag no longer answers.
    ///
    /// After a read that succeeded, one failed probe is not a removal: a tag on metal, behind glass
    /// or at the edge of the field misses an exchange now and then (an RF error) or browns out
    /// until it is selected again, and taken for gone it would come back at once as a second tap
    /// of the same tag. It has left when a probe fails and then its selection, by its UID, finds
    /// it on none of `removalSelections` tries. After a read that failed, the first failed probe
    /// ends the tap, so that the tag is read again when it answers anew.
    private func waitForRemoval(_ device: NFCDeviceHandle, _ target: ISO14443ATarget, readSucceeded: Bool = false) throws(NFCError) {
        while !isStopped {
            pause(options.pollInterval)
            let probe: [UInt8] =
                target.isISODEP ? [0x00, 0xA4, 0x04, 0x00, 0x07] + [0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01, 0x00] : [0x30, 0x00]
            do {
                _ = try device.transceive(probe)
            } catch {
                if error.code == .io || error.code == .noSuchDevice { throw error }
                if readSucceeded, try answersSelection(device, target) { continue }
                device.deselect()
                return
            }
        }
    }

    /// Tries to select `target` again by its UID (deselected first): whether it is still there.
    private func answersSelection(_ device: NFCDeviceHandle, _ target: ISO14443ATarget) throws(NFCError) -> Bool {
        for _ in 0..<Self.removalSelections {
            device.deselect()
            do {
                if try device.selectISO14443A(uid: target.uid) != nil { return true }
            } catch {
                if error.code == .io || error.code == .noSuchDevice { throw error }
            }
        }
        return false
    }

    /// How many selections must miss, after a failed probe, before a tag counts as removed.
    static var removalSelections: Int { 3 }

    // MARK: - Errors a person reads

    static func readerError(_ error: NFCError) -> ReaderError {
        let code: ReaderError.Code =
            switch error.code {
            case .timeout: .timeout
            case .noSuchDevice: .notFound
            case .rfTransmission, .targetReleased: .rfError
            default: .io
            }
        return ReaderError(code: code, message: "\(error.operation) failed (\(error.code.name))", hint: error.hint)
    }

    static func readError(_ error: NDEFReadError, uid: TagUID) -> ReaderError {
        switch error {
        case .incompleteRead(let commands, let cause):
            ReaderError(
                code: .incompleteRead,
                message: "incomplete read of \(uid.hex): the tag stopped answering after \(commands) commands (\(cause.detail))",
                hint: "hold the tag still until the read completes")
        case .malformed(let detail):
            ReaderError(
                code: .malformedTag, message: "tag \(uid.hex): \(detail)",
                hint: "rewrite the tag, or inspect a dump of it with tagfix inspect")
        }
    }
}

/// The libnfc device as a transport for the read and write procedures (TagFixTags): libnfc's
/// errors become `TagError`s here. The last one is kept (`failures`) for what only libnfc knows:
/// whether the reader itself failed and must be reopened, and in libnfc's words.
struct DeviceTransport: TagTransport {
    let device: NFCDeviceHandle
    let failures = NFCFailures()

    init(device: NFCDeviceHandle) { self.device = device }

    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        do {
            return try device.transceive(command)
        } catch {
            throw failures.record(error)
        }
    }

    /// Deselects `target` and selects it again for another attempt at a read (`ReadRetry`):
    /// false when it no longer answers its selection (it left the field) or the reader failed.
    func reselectIfPresent(_ target: ISO14443ATarget) -> Bool {
        device.deselect()
        return (try? device.selectISO14443A(uid: target.uid)) != nil
    }

    /// Deselects `target` and selects it again (a tag that NAKed or refused a key is idle): the
    /// procedures' `reselect`.
    func reselect(_ target: ISO14443ATarget) throws(TagError) {
        device.deselect()
        do {
            _ = try device.selectISO14443A(uid: target.uid)
        } catch {
            throw failures.record(error)
        }
    }
}

/// The libnfc error behind the last `TagError` a transport threw, and how many of them were RF
/// errors (a read's `ReadEffort.rfErrors`). Used on the device's thread only.
final class NFCFailures {
    private(set) var last: NFCError?
    /// Exchanges libnfc reported failed on the air: NFC_ERFTRANS (the PN53x's time-out, CRC,
    /// parity, framing… statuses), NFC_ETIMEOUT, NFC_ETGRELEASED. A PN532 reports a tag's NAK
    /// as NFC_ERFTRANS too, so a refused probe (FAST_READ on a MIFARE Ultralight) counts here.
    private(set) var rfErrors = 0

    func record(_ error: NFCError) -> TagError {
        last = error
        if error.isRF { rfErrors += 1 }
        return error.tagError
    }
}

extension NFCError {
    /// Whether the exchange failed on the air rather than in the reader or the request.
    var isRF: Bool { code == .rfTransmission || code == .timeout || code == .targetReleased }
}

/// The readers libnfc finds.
public enum LibNFC {
    /// Connstrings of the readers libnfc finds (nfc_list_devices).
    public static func devices() throws(NFCError) -> [String] {
        try NFCContext.shared().listDevices()
    }

    /// libnfc's version (nfc_version).
    public static var version: String { NFCContext.version }

    /// Opens the reader at `connstring` and makes it an initiator, then closes it: "does this
    /// reader work?". Runs on a thread of its own (the calls block), never on the caller's.
    /// - Returns: the reader's name, or the error that stopped it.
    public static func probe(_ connstring: String) async -> Result<String, NFCError> {
        let stream: AsyncStream<Result<String, NFCError>> = DeviceThread().start(name: "libnfc probe") { events in
            do throws(NFCError) {
                // A reader this process is closing is waited for, up to 2 s (40 waits of 50 ms).
                var waits = 0
                let device = try NFCDeviceHandle(context: try NFCContext.shared(), connstring: connstring) {
                    waits += 1
                    return waits <= 40
                }
                defer { device.close() }
                try device.initiatorInit()
                events.yield(.success(device.label))
            } catch {
                events.yield(.failure(error))
            }
        }
        for await result in stream { return result }
        return .failure(NFCError(code: .software, operation: "probe \(connstring)"))
    }
}
