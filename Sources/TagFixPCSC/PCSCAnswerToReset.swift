import TagFixCore

/// What a contactless card is, from the ATR a PC/SC reader makes up for it (PC/SC Part 3,
/// §3.1.3.2.3): a storage card (no ISO-DEP: Type 2, MIFARE Classic, FeliCa…) gets
/// `3B 8F 80 01 80 4F 0C A0 00 00 03 06 SS NN NN 00 00 00 00 TCK` — the PC/SC RID, the standard
/// byte SS and the card name NN NN; an ISO 14443-4 card (Type 4, DESFire, NTAG 424) gets
/// `3B 8n 80 01` + the historical bytes of its ATS + TCK.
public enum PCSCCardKind: Sendable, Hashable, CustomStringConvertible {
    /// A storage card, by the PC/SC standard byte and card name.
    case storage(standard: UInt8, name: UInt16)
    /// An ISO 14443-4 (ISO-DEP) card, with the historical bytes of its ATR.
    case isoDEP(historical: [UInt8])
    /// An ATR of neither form (a contact card in a dual reader, a reader's own encoding).
    case other

    /// The registered application provider id PC/SC Part 3 puts in a storage card's ATR.
    public static let rid: [UInt8] = [0xA0, 0x00, 0x00, 0x03, 0x06]

    /// PC/SC Part 3 standard bytes (§3.1.3.2.3.2, table 3-6).
    public enum Standard {
        public static let iso14443APart3: UInt8 = 0x03
        public static let felica: UInt8 = 0x11
    }

    /// PC/SC Part 3 card names (supplemental document, "card names").
    public enum CardName {
        public static let mifareClassic1K: UInt16 = 0x0001
        public static let mifareClassic4K: UInt16 = 0x0002
        public static let mifareUltralight: UInt16 = 0x0003
        public static let mifareMini: UInt16 = 0x0026
        public static let mifareUltralightC: UInt16 = 0x003A
        public static let felica212: UInt16 = 0x003B
    }

    public init(atr: [UInt8]) {
        guard atr.count >= 4, atr[0] == 0x3B, atr[1] & 0xF0 == 0x80, atr[2] == 0x80, atr[3] == 0x01 else {
            self = .other
            return
        }
        let count = Int(atr[1] & 0x0F)
        // Historical bytes follow TD1 (80) and TD2 (01); the last byte is TCK.
        guard atr.count >= 4 + count else {
            self = .other
            return
        }
        let historical = Array(atr[4..<(4 + count)])
        if historical.count >= 10, historical[0] == 0x80, historical[1] == 0x4F, Array(historical[3..<8]) == Self.rid {
            self = .storage(standard: historical[8], name: UInt16(historical[9]) << 8 | UInt16(historical.count > 10 ? historical[10] : 0))
        } else {
            self = .isoDEP(historical: historical)
        }
    }

    /// Whether the card is read as an NFC Forum Type 2 tag (NTAG, MIFARE Ultralight): a storage
    /// card of ISO 14443-A part 3 that is not a MIFARE Classic.
    public var isType2: Bool {
        guard case .storage(let standard, let name) = self, standard == Standard.iso14443APart3 else { return false }
        return ![CardName.mifareClassic1K, CardName.mifareClassic4K, CardName.mifareMini].contains(name)
    }

    public var isISODEP: Bool {
        if case .isoDEP = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .storage(let standard, let name):
            "a PC/SC storage card (standard \(Hex.encode([standard])), card name \(Hex.encode([UInt8(name >> 8), UInt8(name & 0xFF)])))"
        case .isoDEP: "an ISO 14443-4 card"
        case .other: "a card whose ATR is not a contactless one"
        }
    }
}
