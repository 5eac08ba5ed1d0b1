import CNFC
import Glibc
import Synchronization
import TagFixCore
import TagFixDevices

// MARK: - Every call into libnfc goes through this file.

/// The process's libnfc context (nfc_init), shared by every reader and never exited.
///
/// Why one: libnfc keeps its driver list in a process-wide global that nfc_exit frees, so
/// closing one context leaves every other context in the process with "No driver available".
/// @unchecked Sendable: the nfc_context is an OpaquePointer, set once and only read after nfc_init.
final class NFCContext: @unchecked Sendable {
    // Set once; libnfc's context is only read after nfc_init.
    let pointer: OpaquePointer

    private init() throws(NFCError) {
        var context: OpaquePointer?
        nfc_init(&context)
        guard let context else { throw NFCError(code: .software, operation: "nfc_init", detail: "out of memory or no drivers") }
        pointer = context
    }

    private static let instance = Mutex<NFCContext?>(nil)

    /// nfc_version: the library's version string.
    static var version: String { String(cString: nfc_version()) }

    /// The shared context, created on first use.
    static func shared() throws(NFCError) -> NFCContext {
        let result = instance.withLock { slot -> Result<NFCContext, NFCError> in
            if let existing = slot { return .success(existing) }
            do throws(NFCError) {
                let created = try NFCContext()
                slot = created
                return .success(created)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The connstrings of the readers libnfc finds (nfc_list_devices), honouring LIBNFC_DEVICE,
    /// libnfc.conf and LIBNFC_AUTO_SCAN as libnfc users expect.
    func listDevices() -> [String] {
        let size = Int(NFC_BUFSIZE_CONNSTRING)
        var buffer = [CChar](repeating: 0, count: 16 * size)
        let count = cnfc_list_devices(pointer, &buffer, 16)
        return (0..<count).map { index in
            let slice = buffer[(index * size)..<((index + 1) * size)]
            return String(decoding: slice.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }.filter { !$0.isEmpty }
    }
}

/// What InListPassiveTarget found at 106 kbps type A.
public struct ISO14443ATarget: Sendable, Hashable {
    public var atqa: [UInt8]
    public var sak: UInt8
    public var uid: [UInt8]
    public var ats: [UInt8]

    /// NXP Type 2 (NTAG, Ultralight): ATQA 00 44, SAK 00.
    public var isType2: Bool { atqa == [0x00, 0x44] && sak == 0x00 }
    /// ISO-DEP (Type 4): SAK bit 6.
    public var isISODEP: Bool { sak & 0x20 != 0 }
    public var isMifareClassic: Bool { sak & 0x08 != 0 }
}

/// What FeliCa polling found.
public struct FeliCaTarget: Sendable, Hashable {
    public var idm: [UInt8]
    public var pmm: [UInt8]
    public var systemCode: [UInt8]
}

/// An open libnfc device. Not thread-safe, as libnfc is not: use it from its owner's thread only.
/// `abort()` is the one call that may come from elsewhere (nfc_abort_command).
/// @unchecked Sendable: the nfc_device is an OpaquePointer, used from its owner's thread only.
final class NFCDeviceHandle: @unchecked Sendable {
    let connstring: String
    private let context: NFCContext
    private let device: OpaquePointer
    private let calls = Mutex(Calls())

    /// Where the owner's calls stand, for `abort()`.
    private struct Calls {
        /// `close()` has run: the device is freed.
        var closed = false
        /// The owner is inside a libnfc call.
        var inCall = false
        /// `abort()` came: no call starts any more. So a call that ends with it set is the one an
        /// abort came during (and waits for), and a call under way after it is that one still.
        var stopping = false
    }

    /// Signalled when a call an abort waits for has ended.
    private let callEnded = DeviceThread.Wakeup()
    /// Where an abort waits for the call under way (`abort()`).
    private let aborter = DeviceThread.Worker(name: "libnfc abort")

    /// How long an abort lets a call under way end by itself before libnfc's abort. A command's
    /// wait for its acknowledgement cannot be aborted (libnfc waits for it without the abort
    /// pipe), and an abort that came then was lost and left a descriptor open; every command
    /// but one with no time-out (an exchange on a line that hangs) ends well within this.
    static var abortGrace: Duration { .milliseconds(500) }

    /// What this process claims while the device is open (`DeviceThread.Claims`).
    private let claim: String

    /// nfc_open: `connstring` nil means libnfc's default (LIBNFC_DEVICE, libnfc.conf, first found).
    /// Waits first, while `wanted` holds (asked every 50 ms) and the process is not ending, for
    /// another user of the same device in this process to close it.
    init(context: NFCContext, connstring: String?, while wanted: () -> Bool) throws(NFCError) {
        self.context = context
        let operation = "open \(connstring ?? "the default reader")"
        guard NFCActivity.shared.willTake() else {
            throw NFCError(code: .aborted, operation: operation, detail: "the program is ending")
        }
        let claim = Self.claimKey(connstring)
        guard DeviceThread.Claims.shared.claim(claim, while: { !NFCActivity.shared.exiting && wanted() }) else {
            NFCActivity.shared.failedToTake()
            throw NFCError(
                code: .aborted, operation: operation, detail: "another user of this reader in this process has not let it go: stop it first"
            )
        }
        let opened: OpaquePointer? = connstring.map { nfc_open(context.pointer, $0) } ?? nfc_open(context.pointer, nil)
        guard let opened else {
            DeviceThread.Claims.shared.release(claim)
            NFCActivity.shared.failedToTake()
            throw NFCError(code: .noSuchDevice, operation: operation, detail: "nfc_open found no device there")
        }
        device = opened
        self.claim = claim
        self.connstring = String(cString: nfc_device_get_connstring(opened))
        NFCActivity.shared.took(ObjectIdentifier(self)) { [weak self] in self?.abort() }
    }

    /// The reader a connstring names, as one claim (`DeviceThread.Claims`): the reader by any of
    /// its names (`ReaderAddress.libnfcReader`); libnfc's default reader (nil) is a claim of its
    /// own, apart from the same reader named.
    static func claimKey(_ connstring: String?) -> String {
        connstring.map(ReaderAddress.libnfcReader) ?? ReaderAddress.libnfcDefault.reader
    }

    var name: String { String(cString: nfc_device_get_name(device)) }
    /// The device for a person: its name, and its connstring when the name does not already say
    /// it (libnfc names a serial PN532 by its connstring: "pn532_uart:/dev/ttyUSB0").
    var label: String {
        let name = self.name
        return name.contains(connstring) ? name : "\(name) at \(connstring)"
    }

    private func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(NFCError) -> Int32 {
        guard result < 0 else { return result }
        throw NFCError(code: NFCErrorCode(rawValue: result), operation: operation(), detail: String(cString: nfc_strerror(device)))
    }

    /// Runs `body`, a call into libnfc on the owner's thread where `abort()` can reach it, and
    /// `check`s what it returns. Once the reader is stopping none is begun: it ends as libnfc's
    /// own abort would end it (`NFC_EOPABORTED`).
    private func call(_ operation: @autoclosure () -> String, _ body: () -> Int32) throws(NFCError) -> Int32 {
        let stopping = calls.withLock { calls in
            if !calls.stopping { calls.inCall = true }
            return calls.stopping
        }
        if stopping { throw NFCError(code: .aborted, operation: operation(), detail: "the reader is stopping") }
        let result = body()
        let waited = calls.withLock { calls in
            calls.inCall = false
            return calls.stopping
        }
        if waited { callEnded.signal() }
        return try check(result, operation())
    }

    /// nfc_initiator_init, then polling that returns at once when no tag is there.
    func initiatorInit() throws(NFCError) {
        _ = try call("nfc_initiator_init") { nfc_initiator_init(device) }
        _ = try call("set NP_INFINITE_SELECT") { nfc_device_set_property_bool(device, NP_INFINITE_SELECT, false) }
    }

    /// nfc_initiator_select_passive_target at ISO14443A 106 kbps; `uid` restricts it to one tag.
    func selectISO14443A(uid: [UInt8]? = nil) throws(NFCError) -> ISO14443ATarget? {
        var target = nfc_target()
        let modulation = nfc_modulation(nmt: NMT_ISO14443A, nbr: NBR_106)
        let found = try call("select a tag") {
            guard let uid else { return nfc_initiator_select_passive_target(device, modulation, nil, 0, &target) }
            return uid.withUnsafeBufferPointer {
                nfc_initiator_select_passive_target(device, modulation, $0.baseAddress, $0.count, &target)
            }
        }
        guard found > 0 else { return nil }
        var atqa = [UInt8](repeating: 0, count: 2), sak: UInt8 = 0
        var uidBytes = [UInt8](repeating: 0, count: 10), uidLength = 0
        var ats = [UInt8](repeating: 0, count: 254), atsLength = 0
        cnfc_target_iso14443a(&target, &atqa, &sak, &uidBytes, &uidLength, &ats, &atsLength)
        return ISO14443ATarget(atqa: atqa, sak: sak, uid: Array(uidBytes.prefix(uidLength)), ats: Array(ats.prefix(atsLength)))
    }

    /// nfc_initiator_select_passive_target for FeliCa at 212 or 424 kbps, polling for the NFC
    /// Forum NDEF system code 12FC.
    func selectFeliCa(baud424: Bool) throws(NFCError) -> FeliCaTarget? {
        var target = nfc_target()
        let modulation = nfc_modulation(nmt: NMT_FELICA, nbr: baud424 ? NBR_424 : NBR_212)
        let polling: [UInt8] = [0x00, 0x12, 0xFC, 0x01, 0x00]
        let found = try call("poll FeliCa") {
            polling.withUnsafeBufferPointer {
                nfc_initiator_select_passive_target(device, modulation, $0.baseAddress, $0.count, &target)
            }
        }
        guard found > 0 else { return nil }
        var idm = [UInt8](repeating: 0, count: 8), pmm = [UInt8](repeating: 0, count: 8), code = [UInt8](repeating: 0, count: 2)
        cnfc_target_felica(&target, &idm, &pmm, &code)
        return FeliCaTarget(idm: idm, pmm: pmm, systemCode: code)
    }

    /// nfc_initiator_transceive_bytes with easy framing (the chip adds and checks CRCs).
    func transceive(_ command: [UInt8], capacity: Int = 264, timeout: Int32 = 0) throws(NFCError) -> [UInt8] {
        var response = [UInt8](repeating: 0, count: capacity)
        let count = try call("exchange \(Hex.encode(command.prefix(2)))…") {
            command.withUnsafeBufferPointer { tx in
                nfc_initiator_transceive_bytes(device, tx.baseAddress, tx.count, &response, response.count, Int32(timeout))
            }
        }
        return Array(response.prefix(Int(count)))
    }

    /// nfc_initiator_deselect_target (none once the reader is stopping).
    func deselect() { _ = try? call("deselect") { nfc_initiator_deselect_target(device) } }

    /// Stops the owner's calls, for good (the reader stops, or the process ends). Any thread;
    /// never waits. None is begun after it (`call`), and a call under way that has not ended
    /// within `abortGrace` is interrupted with nfc_abort_command (from a thread of its own).
    ///
    /// Only a call under way, and only one that does not end by itself: libnfc 1.8's pn532_uart
    /// (and arygon) abort closes the read end of the abort pipe and makes a new pipe, and only a
    /// wait for an answer that sees the old one closed closes its write end. An abort between
    /// calls, or in a command's wait for its acknowledgement (made without the pipe), left that
    /// descriptor open for the life of the process, one more each time a reader stopped, and
    /// the wait that came next was on the new pipe, never aborted. Under the lock `close` takes
    /// first, so an abort never runs beside or after `nfc_close` (after the close the pipe's
    /// descriptors are the freed device's, and perhaps another's).
    func abort() {
        let underWay = calls.withLock { calls in
            calls.stopping = true
            return !calls.closed && calls.inCall
        }
        guard underWay else { return }
        aborter.run { [self] in
            _ = callEnded.block(upTo: Self.abortGrace)
            // Still in a call: the same one (none begins once stopping).
            calls.withLock { calls in
                if !calls.closed, calls.inCall { _ = nfc_abort_command(device) }
            }
        }
    }

    /// nfc_close. Once.
    func close() {
        let first = calls.withLock { calls -> Bool in
            defer { calls.closed = true }
            return !calls.closed
        }
        guard first else { return }
        nfc_close(device)
        DeviceThread.Claims.shared.release(claim)
        NFCActivity.shared.release(ObjectIdentifier(self))
    }

    deinit { close() }
}

/// The libnfc devices this process has open, so that its end waits for them to close: a process
/// that ended while its reader's thread was still closing the device (`tagfix scan --count 1`
/// returns as soon as it has its tag) left the reader's RF field on and its tag powered until
/// the next program opened it. At exit each open device's blocking call is aborted once, device
/// loops stop, no device opens, and the exit waits for each to close: InRelease, the field off,
/// PowerDown (`DeviceThread.HeldAtExit`).
enum NFCActivity {
    static let shared = DeviceThread.HeldAtExit<ObjectIdentifier>()
}
