import TagFixCore

/// A PC/SC Part 3 contactless reader as a client of pcsc-lite sees it through the card it
/// presents: the ATR it makes up for the tag, and its answers to APDUs. Pure: one APDU in, one
/// answer (data + status word) out; the tag's behaviour is the shared emulated tag's.
///
/// - `FF CA 00 00 00` (GET DATA): the UID.
/// - `FF B0 00 page Le` (READ BINARY) and `FF D6 00 page Lc …` (UPDATE BINARY): Type 2 READ and
///   WRITE, 4 pages (16 bytes) per READ.
/// - `FF 00 00 00 Lc D4 42 …` (direct transmit of a PN532 `InCommunicateThru`, as the ACR122U
///   takes it): any raw command to the tag (FAST_READ, READ_SIG, GET_VERSION), answered
///   `D5 43 status data 90 00`.
/// - Anything else goes to an ISO 14443-4 tag as it is (ISO 7816-4: SELECT, READ BINARY…).
public struct PCSCPart3Reader: Sendable {
    public let tag: any EmulatedTag
    /// The ATR pcscd reports for the card.
    public let atr: [UInt8]
    /// Whether it passes raw commands through (`FF 00 00 00 … D4 42`); a reader without lets
    /// tests see what TagFix does then.
    public var passesThrough: Bool

    public init(tag: any EmulatedTag, passesThrough: Bool = true) {
        self.tag = tag
        self.passesThrough = passesThrough
        atr = Self.atr(for: tag)
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
        let body = apdu.count > 5 ? Array(apdu[5..<min(apdu.count, 5 + Int(apdu[4]))]) : []
        switch ins {
        case 0xCA:  // GET DATA: P1 00 the UID, P1 01 the ATS' historical bytes
            guard p2 == 0x00 else { return [0x6A, 0x81] }
            if p1 == 0x00 { return tag.uid + Self.ok }
            if p1 == 0x01, let ats = tag.ats { return ats + Self.ok }
            return [0x6A, 0x81]
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
            guard passesThrough, body.count >= 2, body[0] == 0xD4, body[1] == 0x42 else { return [0x6A, 0x81] }
            let reply: [UInt8] = [0xD5, 0x43]
            switch tag.transceive(Array(body.dropFirst(2))) {
            case .data(let bytes): return reply + [0x00] + bytes + Self.ok
            case .ack: return reply + [0x00, 0x0A] + Self.ok
            case .nak(let code): return reply + [0x00, code] + Self.ok
            case .silent: return reply + [0x01] + Self.ok
            case .authenticationFailed: return reply + [0x14] + Self.ok
            }
        default:
            return [0x6D, 0x00]
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
