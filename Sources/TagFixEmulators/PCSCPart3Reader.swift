import Synchronization
import TagFixCore

/// A PC/SC Part 3 contactless reader as a client of pcsc-lite sees it through the card it
/// presents: the ATR it makes up for the tag, and its answers to APDUs. One APDU in, one
/// answer (data + status word) out; the tag's behaviour is the shared emulated tag's, the
/// reader's is its `Model`'s (which raw pass-through it has, the name pcscd shows).
///
/// - `FF CA 00 00 00` (GET DATA): the UID.
/// - `FF B0 00 page Le` (READ BINARY) and `FF D6 00 page Lc …` (UPDATE BINARY): Type 2 READ and
///   WRITE, 4 pages (16 bytes) per READ.
/// - `FF 00 00 00 Lc D4 42 …` (direct transmit of a PN532 `InCommunicateThru`, as the ACR122U
///   and ACR1252U take it): any raw command to the tag (FAST_READ, READ_SIG, GET_VERSION),
///   answered `D5 43 status data 90 00`.
/// - `FF C2 00 00 …` / `FF C2 00 02 …` / `FF C2 00 01 …` (PC/SC Part 3 Manage Session, Switch
///   Protocol to ISO 14443-A layer 3, and Transparent Exchange,
///   as the ACR1552U, OMNIKEY and uTrust readers take them): a raw command in a `95` data
///   object, answered `C0 03 00 90 00`, `92 01 bits`, `96 02 00 00`, `97 len data`, `90 00`.
///   Inside a transparent session the reader leaves the card to the host: it refuses READ and
///   UPDATE BINARY until the session ends (strict, so a client that forgets to end it fails).
/// - Anything else goes to an ISO 14443-4 tag as it is (ISO 7816-4: SELECT, READ BINARY…).
public struct PCSCPart3Reader: Sendable {
    /// How a reader passes a raw ISO 14443-3 command to the tag.
    public enum PassThrough: String, Sendable, Hashable {
        /// ACS's direct transmit of a PN532 `InCommunicateThru` (`FF 00 00 00 Lc D4 42 …`).
        case direct
        /// PC/SC Part 3 Transparent Exchange (`FF C2 00 01 … 95 len frame`).
        case transparent
        /// None: READ and UPDATE BINARY only.
        case none
    }

    /// A reader family to behave as: its pass-through, and the name pcscd shows for it (vpcd's
    /// FRIENDLYNAME in reader.conf; pcscd adds " 00 00"). The names are libccid's for the real
    /// readers (CCID's readers/supported_readers.txt).
    public enum Model: String, Sendable, Hashable, CaseIterable {
        /// The vsmartcard virtual reader as it is, with the direct transmit (the default).
        case virtual
        /// The virtual reader without any pass-through.
        case plain
        case acr122u, acr1252u, acr1552u, omnikey5022, omnikey5422, omnikey5427, utrust3700f

        public var passThrough: PassThrough {
            switch self {
            case .virtual, .acr122u, .acr1252u: .direct
            case .plain: .none
            case .acr1552u, .omnikey5022, .omnikey5422, .omnikey5427, .utrust3700f: .transparent
            }
        }

        /// vpcd's FRIENDLYNAME: pcscd lists the reader as this and " 00 00".
        public var friendlyName: String {
            switch self {
            case .virtual, .plain: "Virtual PCD"
            case .acr122u: "ACS ACR122U PICC Interface"
            case .acr1252u: "ACS ACR1252 Reader"
            case .acr1552u: "ACS ACR1552 1S CL Reader"
            case .omnikey5022: "HID Global OMNIKEY 5022 Smart Card Reader"
            case .omnikey5422: "HID Global OMNIKEY 5422 Smartcard Reader"
            case .omnikey5427: "HID OMNIKEY 5427 CK"
            case .utrust3700f: "Identiv uTrust 3700 F CL Reader"
            }
        }

        /// The reader's name as pcscd lists it (slot 0).
        public var readerName: String { friendlyName + " 00 00" }
    }

    public let tag: any EmulatedTag
    /// The ATR pcscd reports for the card.
    public let atr: [UInt8]
    public let model: Model
    public var passThrough: PassThrough { model.passThrough }
    /// Whether a transparent session is open (the card was put in the field closed).
    private let session = SessionFlag()

    /// The one piece of reader state: shared by the copies of a reader (a class: Mutex is not
    /// copyable).
    private final class SessionFlag: Sendable {
        private let open = Mutex(false)
        func withLock<R>(_ body: (inout Bool) -> R) -> R { open.withLock { body(&$0) } }
    }

    public init(tag: any EmulatedTag, model: Model = .virtual) {
        self.tag = tag
        self.model = model
        atr = Self.atr(for: tag)
    }

    /// The card left the field or was reset: any transparent session ends with it.
    public func reset() {
        session.withLock { $0 = false }
        tag.reset()
    }

    static let ok: [UInt8] = [0x90, 0x00]

    /// The answer to one APDU, status word included.
    public func answer(_ apdu: [UInt8]) -> [UInt8] {
        guard apdu.count >= 4 else { return [0x67, 0x00] }
        guard apdu[0] == 0xFF else {
            guard tag.ats != nil else { return [0x6E, 0x00] }  // a storage card takes no ISO 7816 APDUs
            switch tag.transceive(apdu) {
            case .data(let bytes): return bytes
            default: return [0x64, 0x01]
            }
        }
        let (ins, p1, p2) = (apdu[1], apdu[2], apdu[3])
        let inSession = session.withLock { $0 }
        let body = apdu.count > 5 ? Array(apdu[5..<min(apdu.count, 5 + Int(apdu[4]))]) : []
        switch ins {
        case 0xCA:  // GET DATA: P1 00 the UID, P1 01 the ATS' historical bytes
            guard p2 == 0x00 else { return [0x6A, 0x81] }
            if p1 == 0x00 { return tag.uid + Self.ok }
            if p1 == 0x01, let ats = tag.ats { return ats + Self.ok }
            return [0x6A, 0x81]
        case 0xB0 where inSession, 0xD6 where inSession:
            return [0x69, 0x85]  // conditions of use not satisfied: the host holds the card
        case 0xB0:  // READ BINARY: Le bytes from the page P2 (P1 is the address' high byte: 0)
            guard tag.ats == nil, p1 == 0x00, apdu.count == 5 else { return [0x6A, 0x81] }
            let wanted = apdu[4] == 0 ? 16 : Int(apdu[4])
            var data: [UInt8] = []
            var page = Int(p2)
            while data.count < wanted {
                guard page <= 0xFF, case .data(let bytes) = tag.transceive([0x30, UInt8(page)]) else { return [0x63, 0x00] }
                data += bytes
                page += 4
            }
            return Array(data.prefix(wanted)) + Self.ok
        case 0xD6:  // UPDATE BINARY: 4 bytes a page from P2
            guard tag.ats == nil, p1 == 0x00, !body.isEmpty, body.count % 4 == 0 else { return [0x6A, 0x81] }
            for index in stride(from: 0, to: body.count, by: 4) {
                guard case .ack = tag.transceive([0xA2, p2 &+ UInt8(index / 4)] + body[index..<index + 4]) else { return [0x63, 0x00] }
            }
            return Self.ok
        case 0x00 where p1 == 0x00 && p2 == 0x00:  // direct transmit to the reader's PN53x
            guard passThrough == .direct, body.count >= 2, body[0] == 0xD4, body[1] == 0x42 else { return [0x6A, 0x81] }
            let reply: [UInt8] = [0xD5, 0x43]
            switch tag.transceive(Array(body.dropFirst(2))) {
            case .data(let bytes): return reply + [0x00] + bytes + Self.ok
            case .ack: return reply + [0x00, 0x0A] + Self.ok
            case .nak(let code): return reply + [0x00, code] + Self.ok
            case .silent: return reply + [0x01] + Self.ok
            case .authenticationFailed: return reply + [0x14] + Self.ok
            }
        case 0xC2 where p1 == 0x00:
            guard passThrough == .transparent else { return [0x6D, 0x00] }
            guard apdu.count >= 5, apdu.count >= 5 + Int(apdu[4]) else { return [0x67, 0x00] }
            return transparent(p2, objects: Array(apdu[5..<(5 + Int(apdu[4]))]))
        default:
            return [0x6D, 0x00]
        }
    }

    /// Manage Session (P2 00) and Transparent Exchange (P2 01): the data objects in, the
    /// answer's data objects and 90 00 out; an error names the failing object in C0.
    private func transparent(_ p2: UInt8, objects: [UInt8]) -> [UInt8] {
        func error(_ index: Int, _ sw: [UInt8]) -> [UInt8] { [0xC0, 0x03, UInt8(index)] + sw + Self.ok }
        let ok: [UInt8] = [0xC0, 0x03, 0x00, 0x90, 0x00]
        // One-byte tags and lengths suffice for what clients send; 5F 46 is the one two-byte tag.
        var parsed: [(tag: UInt16, value: [UInt8])] = []
        var index = 0
        while index < objects.count {
            var tag = UInt16(objects[index])
            index += 1
            if tag & 0x1F == 0x1F, index < objects.count {
                tag = tag << 8 | UInt16(objects[index])
                index += 1
            }
            guard index < objects.count else { return error(parsed.count + 1, [0x67, 0x00]) }
            var length = Int(objects[index])
            index += 1
            if length == 0x81, index < objects.count {
                length = Int(objects[index])
                index += 1
            }
            guard length <= objects.count - index else { return error(parsed.count + 1, [0x67, 0x00]) }
            parsed.append((tag, Array(objects[index..<index + length])))
            index += length
        }
        switch p2 {
        case 0x00:  // Manage Session
            for (number, object) in parsed.enumerated() {
                switch object.tag {
                case 0x81: session.withLock { $0 = true }
                case 0x82: session.withLock { $0 = false }
                case 0x5F46: continue
                default: return error(number + 1, [0x6A, 0x81])
                }
            }
            return ok + Self.ok
        case 0x02:  // Switch Protocol: only ISO 14443 Type A, layer 3 (the tag is there already)
            guard session.withLock({ $0 }) else { return error(0, [0x69, 0x85]) }
            for (number, object) in parsed.enumerated() where object.tag != 0x8F || object.value != [0x00, 0x03] {
                return error(number + 1, [0x6A, 0x81])
            }
            return ok + Self.ok
        case 0x01:  // Transparent Exchange
            guard session.withLock({ $0 }) else { return error(0, [0x69, 0x85]) }
            var answer = ok
            for (number, object) in parsed.enumerated() {
                switch object.tag {
                case 0x5F46: continue
                case 0x90:  // transmission and reception flags: only the defaults (CRC, parity by the reader)
                    guard object.value == [0x00, 0x00] else { return error(number + 1, [0x6A, 0x80]) }
                case 0x95:
                    let reply: [UInt8]
                    var bits: UInt8 = 0
                    switch tag.transceive(object.value) {
                    case .data(let bytes): reply = bytes
                    case .ack:
                        reply = [0x0A]
                        bits = 4
                    case .nak(let code):
                        reply = [code]
                        bits = 4
                    case .silent, .authenticationFailed: return error(number + 1, [0x64, 0x01])
                    }
                    answer += [0x92, 0x01, bits, 0x96, 0x02, 0x00, 0x00, 0x97]
                    answer += reply.count < 0x80 ? [UInt8(reply.count)] : [0x81, UInt8(reply.count)]
                    answer += reply
                default: return error(number + 1, [0x6A, 0x81])
                }
            }
            return answer + Self.ok
        default:
            return [0x6A, 0x81]
        }
    }

    /// The ATR a PC/SC Part 3 reader makes up for `tag` (§3.1.3.2.3): for a storage card
    /// `3B 8F 80 01 80 4F 0C`, the RID `A0 00 00 03 06`, the standard (03: ISO 14443-A part 3),
    /// the card name (00 01 MIFARE Classic 1K, 00 02 4K, 00 26 Mini, 00 03 Ultralight and the
    /// NTAGs), four zero bytes and TCK; for an ISO 14443-4 card `3B 8n 80 01`, the historical
    /// bytes of its ATS, TCK.
    public static func atr(for tag: any EmulatedTag) -> [UInt8] {
        var bytes: [UInt8]
        if let ats = tag.ats {
            let historical = Array(historicalBytes(ats: ats).prefix(15))
            bytes = [0x3B, 0x80 | UInt8(historical.count), 0x80, 0x01] + historical
        } else {
            let name: [UInt8] =
                switch tag.selRes {
                case 0x08: [0x00, 0x01]
                case 0x18: [0x00, 0x02]
                case 0x09: [0x00, 0x26]
                default: [0x00, 0x03]
                }
            bytes = [0x3B, 0x8F, 0x80, 0x01, 0x80, 0x4F, 0x0C, 0xA0, 0x00, 0x00, 0x03, 0x06, 0x03] + name + [0, 0, 0, 0]
        }
        return bytes + [bytes.dropFirst().reduce(0, ^)]
    }

    /// The historical bytes of an ATS (TL, T0, then TA, TB, TC as T0 says, then these).
    static func historicalBytes(ats: [UInt8]) -> [UInt8] {
        guard ats.count >= 2 else { return [] }
        var start = 2
        for bit: UInt8 in [0x10, 0x20, 0x40] where ats[1] & bit != 0 { start += 1 }
        return start < ats.count ? Array(ats[start...]) : []
    }
}
