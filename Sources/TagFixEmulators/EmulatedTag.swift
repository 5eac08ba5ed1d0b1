import Synchronization
import TagFixCore
public import TagFixNDEF

/// What a tag answers to one exchange.
public enum TagAnswer: Sendable, Hashable {
    case data([UInt8])
    /// A 4-bit ACK (0xA), as Type 2 tags answer WRITE.
    case ack
    /// A 4-bit NAK (0x0 invalid argument, 0x1 CRC, 0x4 auth, 0x5 EEPROM write error).
    case nak(UInt8)
    /// Silence: the tag did not answer (a wrong command, or gone).
    case silent
    /// A MIFARE Classic authentication the card refused (the PN532 reports status 0x14).
    case authenticationFailed
}

/// A tag in the emulated field.
public protocol EmulatedTag: AnyObject, Sendable {
    var uid: [UInt8] { get }
    /// ATQA as the PN532 reports SENS_RES (two bytes, e.g. 00 44).
    var sensRes: [UInt8] { get }
    var selRes: UInt8 { get }
    /// For ISO-DEP tags: the ATS the chip fetches with RATS.
    var ats: [UInt8]? { get }
    /// One exchange with easy framing (CRC handled by the chip).
    func transceive(_ command: [UInt8]) -> TagAnswer
    /// The tag is (re)selected: state such as authentication resets.
    func reset()
}

/// An NTAG21x / MIFARE Ultralight (EV1) in the field: its pages, GET_VERSION and signature,
/// with the commands readers send and the NAKs real tags give.
public final class EmulatedType2Tag: EmulatedTag, Sendable {
    public let uid: [UInt8]
    public let sensRes: [UInt8]
    public let selRes: UInt8
    public var ats: [UInt8]? { nil }
    /// The tag's memory now (the emulator's I/O thread writes it, under the tag's lock).
    public var pages: [UInt8] { state.withLock { $0.pages } }
    private let state: Mutex<Type2State>

    public init(uid: [UInt8], pages: [UInt8], getVersion: [UInt8]?, signature: [UInt8]?, atqa: [UInt8] = [0x00, 0x44], sak: UInt8 = 0x00) {
        self.uid = uid
        self.sensRes = atqa
        self.selRes = sak
        state = Mutex(Type2State(pages: pages, version: getVersion, signature: signature ?? [UInt8](repeating: 0, count: 32)))
    }

    public func reset() { state.withLock { $0.authenticated = false } }

    public func transceive(_ command: [UInt8]) -> TagAnswer { state.withLock { $0.transceive(command) } }
}

/// A Type 2 tag's memory and session, touched only under its tag's lock.
private struct Type2State {
    var pages: [UInt8]
    let version: [UInt8]?
    let signature: [UInt8]
    /// The number of pages READ can address (the whole memory including config pages).
    var pageCount: Int { pages.count / 4 }
    var authenticated = false

    mutating func transceive(_ command: [UInt8]) -> TagAnswer {
        guard let code = command.first else { return .silent }
        switch code {
        case 0x30:  // READ: 16 bytes from the page, rolling over past the last page
            guard command.count == 2 else { return .nak(0x0) }
            let page = Int(command[1])
            guard page < pageCount else { return .nak(0x0) }
            return .data((0..<16).map { pages[(page * 4 + $0) % pages.count] })
        case 0x3A:  // FAST_READ start end
            guard command.count == 3, version != nil else { return version == nil ? .silent : .nak(0x0) }
            let start = Int(command[1]), end = Int(command[2])
            guard start <= end, end < pageCount else { return .nak(0x0) }
            return .data(Array(pages[start * 4..<(end + 1) * 4]))
        case 0x60:  // GET_VERSION
            guard let version else { return .silent }
            return .data(version)
        case 0x3C:  // READ_SIG 00: the originality signature (zeros when the dump has none)
            guard version != nil else { return .silent }
            guard command == [0x3C, 0x00] else { return .nak(0x0) }
            return .data(signature)
        case 0xA2:  // WRITE page (4 bytes)
            guard command.count == 6 else { return .nak(0x0) }
            return write(page: Int(command[1]), Array(command[2..<6]))
        case 0xA0:  // COMPATIBILITY_WRITE: 16 bytes, the first 4 written
            guard command.count == 2 || command.count == 18 else { return .nak(0x0) }
            if command.count == 2 { return .ack }  // part 1; part 2 follows
            return write(page: Int(command[1]), Array(command[2..<6]))
        case 0x1B:  // PWD_AUTH: answers PACK
            guard command.count == 5, version != nil else { return .nak(0x0) }
            authenticated = true
            return .data([0x00, 0x00])
        default:
            return .nak(0x0)
        }
    }

    private mutating func write(page: Int, _ data: [UInt8]) -> TagAnswer {
        // Pages 0–1 (UID) are read-only; page 2 only lock bytes; page 3 (CC) is OTP.
        guard page >= 2, page < pageCount else { return .nak(0x0) }
        // Locked pages refuse writes, as the chip does (static lock bits; NTAG21x dynamic ones).
        let dynamic = Type2Locks.DynamicLock.forChip(Type2Identification.identify(getVersion: version).type)
        if page >= 3, Type2Locks(memory: pages, dynamic: dynamic).isLocked(page: page) { return .nak(0x0) }
        switch page {
        case 2:
            pages[10] |= data[2]
            pages[11] |= data[3]
        case 3:
            for i in 0..<4 { pages[12 + i] |= data[i] }
        default:
            pages.replaceSubrange(page * 4..<page * 4 + 4, with: data)
        }
        return .ack
    }
}

/// An ISO-DEP tag with the NFC Forum Type 4 NDEF application: SELECT, READ BINARY and UPDATE
/// BINARY on the CC file (E103) and the NDEF file.
public final class EmulatedType4Tag: EmulatedTag, Sendable {
    public let uid: [UInt8]
    public let sensRes: [UInt8] = [0x03, 0x44]
    public let selRes: UInt8 = 0x20
    public let ats: [UInt8]? = [0x06, 0x75, 0x77, 0x81, 0x02, 0x80]
    private let state: Mutex<Type4State>

    public init(uid: [UInt8], ccFile: [UInt8], ndefFile: [UInt8]) {
        self.uid = uid
        state = Mutex(Type4State(ccFile: ccFile, ndefFile: ndefFile))
    }

    /// A tag holding `message`, with a 2 KB NDEF file.
    public convenience init(uid: [UInt8], message: [UInt8], capacity: Int = 2048) {
        let cc: [UInt8] = [
            0x00, 0x0F, 0x20, 0x00, 0xFF, 0x00, 0xFF, 0x04, 0x06, 0xE1, 0x04, UInt8(capacity >> 8), UInt8(capacity & 0xFF), 0x00, 0x00,
        ]
        var file = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        file += [UInt8](repeating: 0, count: max(0, capacity - file.count))
        self.init(uid: uid, ccFile: cc, ndefFile: file)
    }

    public func reset() { state.withLock { $0.reset() } }

    public func transceive(_ command: [UInt8]) -> TagAnswer { state.withLock { $0.transceive(command) } }
}

/// A Type 4 tag's files and selection, touched only under its tag's lock.
private struct Type4State {
    var ccFile: [UInt8]
    var ndefFile: [UInt8]
    private var applicationSelected = false
    private var selectedFile: UInt16?

    init(ccFile: [UInt8], ndefFile: [UInt8]) {
        self.ccFile = ccFile
        self.ndefFile = ndefFile
    }

    mutating func reset() {
        applicationSelected = false
        selectedFile = nil
    }

    mutating func transceive(_ command: [UInt8]) -> TagAnswer {
        let ok: [UInt8] = [0x90, 0x00]
        guard command.count >= 4 else { return .data([0x67, 0x00]) }
        let (cla, ins, p1, p2) = (command[0], command[1], command[2], command[3])
        guard cla == 0x00 else { return .data([0x6E, 0x00]) }
        switch ins {
        case 0xA4:  // SELECT
            guard command.count >= 5 else { return .data([0x67, 0x00]) }
            let lc = Int(command[4])
            guard command.count >= 5 + lc else { return .data([0x67, 0x00]) }
            let body = Array(command[5..<5 + lc])
            if p1 == 0x04 {
                guard body == Type4CapabilityContainer.ndefApplication || body == Type4CapabilityContainer.legacyNDEFApplication else {
                    return .data([0x6A, 0x82])
                }
                applicationSelected = true
                selectedFile = nil
                return .data(ok)
            }
            guard p1 == 0x00, p2 == 0x0C || p2 == 0x00, lc == 2, applicationSelected else { return .data([0x6A, 0x82]) }
            let id = UInt16(body[0]) << 8 | UInt16(body[1])
            guard id == 0xE103 || id == ndefFileID else { return .data([0x6A, 0x82]) }
            selectedFile = id
            return .data(ok)
        case 0xB0:  // READ BINARY
            guard let file = selectedFile.map(contents) else { return .data([0x69, 0x86]) }
            let offset = Int(p1) << 8 | Int(p2)
            let le = command.count > 4 ? Int(command[4]) : 256
            guard offset <= file.count else { return .data([0x6B, 0x00]) }
            return .data(Array(file[offset..<min(file.count, offset + (le == 0 ? 256 : le))]) + ok)
        case 0xD6:  // UPDATE BINARY
            guard selectedFile == ndefFileID, command.count >= 5 else { return .data([0x69, 0x86]) }
            let offset = Int(p1) << 8 | Int(p2), lc = Int(command[4])
            guard command.count >= 5 + lc, offset + lc <= ndefFile.count else { return .data([0x6B, 0x00]) }
            ndefFile.replaceSubrange(offset..<offset + lc, with: command[5..<5 + lc])
            return .data(ok)
        default:
            return .data([0x6D, 0x00])
        }
    }

    private var ndefFileID: UInt16 { UInt16(ccFile[9]) << 8 | UInt16(ccFile[10]) }
    private func contents(_ id: UInt16) -> [UInt8] { id == 0xE103 ? ccFile : ndefFile }
}

/// A MIFARE Classic 1K/4K as the PN532 presents it: the chip runs Crypto1 itself, so the host
/// sends AUTH (0x60 key A / 0x61 key B, block, key, UID) and READ / WRITE in the clear.
///
/// Dumps cannot hold keys (cards read them back as zeros), so a sector whose stored key A is all
/// zeros takes the public keys AN1304 gives NDEF cards: A0A1A2A3A4A5 for the MAD sectors (0, 16)
/// and D3F7D3F7D3F7 for the others.
public final class EmulatedMifareClassicTag: EmulatedTag, Sendable {
    public static let madKey: [UInt8] = [0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5]
    public static let ndefKey: [UInt8] = [0xD3, 0xF7, 0xD3, 0xF7, 0xD3, 0xF7]

    public let uid: [UInt8]
    public let sensRes: [UInt8]
    public let selRes: UInt8
    public var ats: [UInt8]? { nil }
    /// The card's memory now (the emulator's I/O thread writes it, under the tag's lock).
    public var memory: [UInt8] { state.withLock { $0.memory } }
    private let state: Mutex<MifareClassicState>

    public init(uid: [UInt8], memory: [UInt8]) {
        self.uid = uid
        state = Mutex(MifareClassicState(uid: uid, memory: memory))
        let is4K = memory.count == 4096
        sensRes = is4K ? [0x00, 0x02] : [0x00, 0x04]
        selRes = is4K ? 0x18 : 0x08
    }

    public func reset() { state.withLock { $0.authenticatedSector = nil } }

    public func transceive(_ command: [UInt8]) -> TagAnswer { state.withLock { $0.transceive(command) } }
}

/// A MIFARE Classic card's memory and authentication, touched only under its tag's lock.
private struct MifareClassicState {
    let uid: [UInt8]
    var memory: [UInt8]
    var authenticatedSector: Int?

    static func sector(ofBlock block: Int) -> Int { block < 128 ? block / 4 : 32 + (block - 128) / 16 }

    private func trailer(ofSector sector: Int) -> Int {
        MifareClassicMemory.firstBlock(ofSector: sector) + MifareClassicMemory.blockCount(ofSector: sector) - 1
    }

    private func keys(ofSector sector: Int) -> (a: [UInt8], b: [UInt8]) {
        let start = trailer(ofSector: sector) * 16
        let a = Array(memory[start..<start + 6]), b = Array(memory[start + 10..<start + 16])
        if a.allSatisfy({ $0 == 0 }) {
            let key = sector == 0 || sector == 16 ? EmulatedMifareClassicTag.madKey : EmulatedMifareClassicTag.ndefKey
            return (key, b.allSatisfy { $0 == 0 } ? key : b)
        }
        return (a, b)
    }

    mutating func transceive(_ command: [UInt8]) -> TagAnswer {
        guard let code = command.first else { return .silent }
        let blocks = memory.count / 16
        switch code {
        case 0x60, 0x61:  // AUTH key A / key B: block, 6-byte key, 4-byte UID
            guard command.count == 12, Int(command[1]) < blocks else { return .authenticationFailed }
            let sector = Self.sector(ofBlock: Int(command[1]))
            let keys = keys(ofSector: sector)
            guard Array(command[2..<8]) == (code == 0x60 ? keys.a : keys.b), Array(command[8..<12]) == Array(uid.suffix(4)) else {
                authenticatedSector = nil
                return .authenticationFailed
            }
            authenticatedSector = sector
            return .data([])
        case 0x30:  // READ a 16-byte block of the authenticated sector
            guard command.count == 2, Int(command[1]) < blocks, authenticatedSector == Self.sector(ofBlock: Int(command[1])) else {
                return .nak(0x4)
            }
            let block = Int(command[1])
            var data = Array(memory[block * 16..<block * 16 + 16])
            // Key A never reads back.
            if block == trailer(ofSector: Self.sector(ofBlock: block)) { data.replaceSubrange(0..<6, with: [0, 0, 0, 0, 0, 0]) }
            return .data(data)
        case 0xA0:  // WRITE a block of the authenticated sector (not block 0)
            guard command.count == 18, Int(command[1]) > 0, Int(command[1]) < blocks,
                authenticatedSector == Self.sector(ofBlock: Int(command[1]))
            else {
                return .nak(0x4)
            }
            memory.replaceSubrange(Int(command[1]) * 16..<Int(command[1]) * 16 + 16, with: command[2..<18])
            return .ack
        default:
            return .nak(0x4)
        }
    }
}

/// A FeliCa Lite-S formatted as an NFC Forum Type 3 tag: system code 12FC, NDEF service 000B, the
/// attribute block in block 0 and the message from block 1. Commands come with their LEN byte,
/// as libnfc sends them through InDataExchange.
public final class EmulatedType3Tag: Sendable {
    public let idm: [UInt8]
    public let pmm: [UInt8] = [0x00, 0xF1, 0x00, 0x00, 0x00, 0x01, 0x43, 0x00]
    public let systemCode: [UInt8] = [0x12, 0xFC]
    /// The tag's blocks now (the emulator's I/O thread writes them, under the tag's lock).
    public var blocks: [UInt8] { state.withLock { $0.blocks } }
    private let state: Mutex<Type3State>

    public init(idm: [UInt8], blocks: [UInt8]) {
        self.idm = idm
        state = Mutex(Type3State(idm: idm, blocks: blocks + [UInt8](repeating: 0, count: (16 - blocks.count % 16) % 16)))
    }

    /// The polling answer (POL_RES) as the PN532 lists it: LEN, 01, IDm, PMm, system code.
    func pollingResponse(requestSystemCode: Bool) -> [UInt8] {
        requestSystemCode ? [0x14, 0x01] + idm + pmm + systemCode : [0x12, 0x01] + idm + pmm
    }

    /// Whether the tag answers a polling for `code` (FFFF matches any).
    func answers(systemCode code: [UInt8]) -> Bool {
        code == systemCode || code == [0xFF, 0xFF] || (code[0] == 0xFF && code[1] == systemCode[1])
            || (code[1] == 0xFF && code[0] == systemCode[0])
    }

    public func transceive(_ frame: [UInt8]) -> TagAnswer { state.withLock { $0.transceive(frame) } }
}

/// A Type 3 tag's blocks, touched only under its tag's lock.
private struct Type3State {
    let idm: [UInt8]
    var blocks: [UInt8]

    mutating func transceive(_ frame: [UInt8]) -> TagAnswer {
        // LEN, command code, IDm, …
        guard frame.count >= 10, Int(frame[0]) == frame.count, Array(frame[2..<10]) == idm else { return .silent }
        let body = Array(frame[10...])
        switch frame[1] {
        case 0x06, 0x08:  // Read / Write Without Encryption
            guard let services = body.first, services == 1, body.count >= 4, body[1] == 0x0B || body[1] == 0x09, body[2] == 0x00 else {
                return .data(answer(frame[1] + 1, [0xFF, 0xA1]))
            }
            let count = Int(body[3])
            var numbers: [Int] = []
            var index = 4
            for _ in 0..<count {
                guard index + 1 < body.count, body[index] & 0x80 != 0 else { return .data(answer(frame[1] + 1, [0xFF, 0xA2])) }
                numbers.append(Int(body[index + 1]))
                index += 2
            }
            guard numbers.allSatisfy({ ($0 + 1) * 16 <= blocks.count }) else { return .data(answer(frame[1] + 1, [0x01, 0xA8])) }
            if frame[1] == 0x06 {
                return .data(answer(0x07, [0x00, 0x00, UInt8(count)] + numbers.flatMap { blocks[$0 * 16..<($0 + 1) * 16] }))
            }
            guard body.count == index + 16 * count else { return .data(answer(0x09, [0xFF, 0xA3])) }
            for (i, number) in numbers.enumerated() {
                blocks.replaceSubrange(number * 16..<(number + 1) * 16, with: body[(index + 16 * i)..<(index + 16 * (i + 1))])
            }
            return .data(answer(0x09, [0x00, 0x00]))
        default:
            return .silent
        }
    }

    private func answer(_ code: UInt8, _ body: [UInt8]) -> [UInt8] {
        let frame = [code] + idm + body
        return [UInt8(frame.count + 1)] + frame
    }
}

extension TagImage {
    /// The FeliCa tag for a Type 3 image.
    public func emulatedType3Tag() throws(EmulatorError) -> EmulatedType3Tag {
        guard case .type3(let blocks) = memory else { throw .unsupportedTag("not a Type 3 image") }
        guard let idm = uid?.bytes, idm.count == 8 else { throw .unsupportedTag("a FeliCa tag needs an 8-byte IDm as its UID") }
        return EmulatedType3Tag(idm: idm, blocks: blocks)
    }
}

extension TagImage {
    /// The emulated tag for this image (Type 2, Type 4 and MIFARE Classic; Type 3 through
    /// `emulatedType3Tag()`).
    public func emulatedTag() throws(EmulatorError) -> any EmulatedTag {
        guard let uid = uid?.bytes ?? nil else { throw .unsupportedTag("the dump has no UID") }
        switch memory {
        case .type2(let pages):
            // A Flipper dump may hold fewer pages than the chip has: pad to the chip's size.
            var padded = pages
            if let total = chip.totalPages, total * 4 > padded.count {
                padded += [UInt8](repeating: 0, count: total * 4 - padded.count)
            }
            // Every NXP Type 2 chip answers ATQA 00 44, SAK 00 (dumps write the ATQA in either
            // byte order).
            return EmulatedType2Tag(uid: uid, pages: padded, getVersion: getVersion, signature: signature)
        case .type4(let cc, let file):
            if let ntag424 { return try EmulatedNTAG424Tag(declaration: ntag424, uid: uid, ccFile: cc, ndefFile: file) }
            return EmulatedType4Tag(uid: uid, ccFile: cc, ndefFile: file)
        case .mifareClassic(let bytes, _):
            return EmulatedMifareClassicTag(uid: uid, memory: bytes)
        case .type3:
            throw .unsupportedTag("a FeliCa tag is not ISO14443A: use emulatedType3Tag()")
        }
    }
}

/// Why the emulator cannot do what it was asked.
public enum EmulatorError: Error, Sendable, Hashable, CustomStringConvertible {
    case unsupportedTag(String)
    case pty(String)
    case link(String)

    public var description: String {
        switch self {
        case .unsupportedTag(let detail): "cannot emulate this tag: \(detail)"
        case .pty(let detail): "cannot open a pseudo-terminal: \(detail)"
        case .link(let detail): "cannot create the link: \(detail)"
        }
    }
}

extension EmulatedType2Tag {
    /// A factory-fresh NTAG21x holding one NDEF message: the UID in pages 0–2 with its check bytes,
    /// the CC for the chip's data area, the NDEF TLV and a Terminator.
    /// - Parameter chip: 213, 215 or 216.
    public static func ntag(
        _ chip: Int = 213, message: [UInt8], uid: [UInt8] = [0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66]
    ) throws(EmulatorError) -> EmulatedType2Tag {
        let (pagesTotal, ccSize, storage): (Int, UInt8, UInt8) =
            switch chip {
            case 215: (135, 0x3E, 0x11)
            case 216: (231, 0x6D, 0x13)
            default: (45, 0x12, 0x0F)
            }
        guard uid.count == 7 else { throw .unsupportedTag("an NTAG has a 7-byte UID") }
        var pages = Array(uid.prefix(3)) + [0x88 ^ uid[0] ^ uid[1] ^ uid[2]] + Array(uid.suffix(4))
        pages += [uid[3] ^ uid[4] ^ uid[5] ^ uid[6], 0x48, 0x00, 0x00, 0xE1, 0x10, ccSize, 0x00]
        let length: [UInt8] =
            message.count < 0xFF ? [UInt8(message.count)] : [0xFF, UInt8(message.count >> 8), UInt8(message.count & 0xFF)]
        pages += [0x03] + length + message + [0xFE]
        guard pages.count <= 16 + Int(ccSize) * 8 else { throw .unsupportedTag("the message does not fit an NTAG\(chip)") }
        pages += [UInt8](repeating: 0, count: pagesTotal * 4 - pages.count)
        return EmulatedType2Tag(uid: uid, pages: pages, getVersion: [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, storage, 0x03], signature: nil)
    }
}
