// NTAG 424 DNA file settings as ChangeFileSettings sends them and GetFileSettings returns them
// (NT4H2421Gx datasheet §10.7.1 and §10.7.2, Secure Dynamic Messaging options in §9.3):
//
//   FileOption ‖ AccessRights(2) [‖ SDMOptions ‖ SDMAccessRights(2) ‖ offsets …]
//
// GetFileSettings puts FileType before and FileSize (3 bytes) after the access rights. Offsets
// and lengths are 3 bytes, least significant first, counted from the start of the file (NLEN
// included).

/// An access condition: a key number 0–4, free access (E) or no access (F).
public typealias NTAG424Access = UInt8

public enum NTAG424AccessValue {
    public static let free: NTAG424Access = 0x0E
    public static let never: NTAG424Access = 0x0F
}

/// One file's settings.
public struct NTAG424FileSettings: Sendable, Hashable {
    public var commMode: NTAG424CommMode
    public var read: NTAG424Access
    public var write: NTAG424Access
    public var readWrite: NTAG424Access
    public var change: NTAG424Access
    /// Secure Dynamic Messaging, when enabled (FileOption bit 6).
    public var sdm: SDM?

    public init(
        commMode: NTAG424CommMode, read: NTAG424Access, write: NTAG424Access, readWrite: NTAG424Access, change: NTAG424Access,
        sdm: SDM? = nil
    ) {
        self.commMode = commMode
        self.read = read
        self.write = write
        self.readWrite = readWrite
        self.change = change
        self.sdm = sdm
    }

    /// What the tag mirrors into the file on a read, and where.
    public struct SDM: Sendable, Hashable {
        /// SDMOptions bit 7: mirror the UID; bit 6: mirror SDMReadCtr; bit 5: SDMReadCtrLimit
        /// present; bit 4: mirror SDMENCFileData; bit 0: ASCII encoding (the only one defined).
        public var mirrorUID: Bool
        public var mirrorReadCounter: Bool
        public var encryptFileData: Bool
        /// SDMCtrRet, SDMMetaRead, SDMFileRead: keys (0–4), E (free / plain mirroring) or F (off).
        public var counterRetrieval: NTAG424Access
        public var metaRead: NTAG424Access
        public var fileRead: NTAG424Access
        /// Plain mirroring (metaRead E): where the UID and the counter go.
        public var uidOffset: Int?
        public var readCounterOffset: Int?
        /// Encrypted mirroring (metaRead a key): where PICCData goes.
        public var piccDataOffset: Int?
        /// With a MAC (fileRead a key): the MAC input's start and the MAC's place.
        public var macInputOffset: Int?
        public var macOffset: Int?
        /// With SDMENCFileData: where the encrypted part starts and its length (ASCII characters).
        public var encOffset: Int?
        public var encLength: Int?
        /// SDMReadCtrLimit, when set (parsed and kept; the emulator does not enforce it).
        public var readCounterLimit: UInt32?

        public init(
            mirrorUID: Bool = true, mirrorReadCounter: Bool = true, encryptFileData: Bool = false,
            counterRetrieval: NTAG424Access = NTAG424AccessValue.never, metaRead: NTAG424Access, fileRead: NTAG424Access,
            uidOffset: Int? = nil, readCounterOffset: Int? = nil, piccDataOffset: Int? = nil, macInputOffset: Int? = nil,
            macOffset: Int? = nil, encOffset: Int? = nil, encLength: Int? = nil, readCounterLimit: UInt32? = nil
        ) {
            self.mirrorUID = mirrorUID
            self.mirrorReadCounter = mirrorReadCounter
            self.encryptFileData = encryptFileData
            self.counterRetrieval = counterRetrieval
            self.metaRead = metaRead
            self.fileRead = fileRead
            self.uidOffset = uidOffset
            self.readCounterOffset = readCounterOffset
            self.piccDataOffset = piccDataOffset
            self.macInputOffset = macInputOffset
            self.macOffset = macOffset
            self.encOffset = encOffset
            self.encLength = encLength
            self.readCounterLimit = readCounterLimit
        }

        /// The PICCDataTag an encrypted mirror starts with: bit 7 UID, bit 6 counter, UID length 7.
        public var piccDataTag: UInt8 { (mirrorUID ? 0x80 : 0) | (mirrorReadCounter ? 0x40 : 0) | (mirrorUID ? 0x07 : 0) }
    }

    /// The factory settings of the three files of the NDEF application (datasheet §8.2.2):
    /// CC file (1): plain, read free, write key 0; NDEF file (2): plain, read and write free;
    /// proprietary file (3): full, read key 2, write key 3.
    public static let factoryCC = NTAG424FileSettings(commMode: .plain, read: 0x0E, write: 0x00, readWrite: 0x00, change: 0x00)
    public static let factoryNDEF = NTAG424FileSettings(commMode: .plain, read: 0x0E, write: 0x0E, readWrite: 0x0E, change: 0x00)
    public static let factoryProprietary = NTAG424FileSettings(commMode: .full, read: 0x02, write: 0x03, readWrite: 0x03, change: 0x00)

    /// AccessRights as sent: `RW ‖ Change`, `Read ‖ Write` (one nibble each).
    public var accessRights: [UInt8] { [readWrite << 4 | change & 0x0F, read << 4 | write & 0x0F] }

    /// The ChangeFileSettings data (after FileNo).
    public func encoded() -> [UInt8] {
        var out: [UInt8] = [commMode.rawValue | (sdm == nil ? 0 : 0x40)] + accessRights
        guard let sdm else { return out }
        let options: UInt8 =
            (sdm.mirrorUID ? 0x80 : 0) | (sdm.mirrorReadCounter ? 0x40 : 0) | (sdm.readCounterLimit == nil ? 0 : 0x20)
            | (sdm.encryptFileData ? 0x10 : 0) | 0x01
        out += [options, 0xF0 | sdm.counterRetrieval & 0x0F, sdm.metaRead << 4 | sdm.fileRead & 0x0F]
        func three(_ value: Int?) -> [UInt8] {
            let v = value ?? 0
            return [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v >> 16)]
        }
        if sdm.metaRead == NTAG424AccessValue.free {
            if sdm.mirrorUID { out += three(sdm.uidOffset) }
            if sdm.mirrorReadCounter { out += three(sdm.readCounterOffset) }
        } else if sdm.metaRead <= 4 {
            out += three(sdm.piccDataOffset)
        }
        if sdm.fileRead != NTAG424AccessValue.never {
            out += three(sdm.macInputOffset)
            if sdm.encryptFileData { out += three(sdm.encOffset) + three(sdm.encLength) }
            out += three(sdm.macOffset)
        }
        if let limit = sdm.readCounterLimit { out += three(Int(limit)) }
        return out
    }

    /// Parses ChangeFileSettings data (FileOption first). nil when it is not well formed
    /// (truncated, trailing bytes, reserved values), as the tag answers 91 9E or 91 7E.
    public init?(encoded bytes: [UInt8]) {
        guard bytes.count >= 3, let mode = NTAG424CommMode(rawValue: bytes[0] & 0x03), bytes[0] & 0xBC == 0 else { return nil }
        commMode = mode
        readWrite = bytes[1] >> 4
        change = bytes[1] & 0x0F
        read = bytes[2] >> 4
        write = bytes[2] & 0x0F
        guard bytes[0] & 0x40 != 0 else {
            guard bytes.count == 3 else { return nil }
            sdm = nil
            return
        }
        var index = 3
        func next(_ count: Int) -> [UInt8]? {
            guard index + count <= bytes.count else { return nil }
            defer { index += count }
            return Array(bytes[index..<index + count])
        }
        func three() -> Int? { next(3).map { Int($0[0]) | Int($0[1]) << 8 | Int($0[2]) << 16 } }
        guard let head = next(3), head[0] & 0x0E == 0, head[0] & 0x01 == 1 else { return nil }
        var sdm = SDM(
            mirrorUID: head[0] & 0x80 != 0, mirrorReadCounter: head[0] & 0x40 != 0, encryptFileData: head[0] & 0x10 != 0,
            counterRetrieval: head[1] & 0x0F, metaRead: head[2] >> 4, fileRead: head[2] & 0x0F)
        let hasLimit = head[0] & 0x20 != 0
        let keyOrSpecial: (NTAG424Access) -> Bool = { $0 <= 4 || $0 >= 0x0E }
        guard keyOrSpecial(sdm.counterRetrieval), keyOrSpecial(sdm.metaRead), keyOrSpecial(sdm.fileRead) else { return nil }
        if sdm.metaRead == NTAG424AccessValue.free {
            if sdm.mirrorUID {
                guard let value = three() else { return nil }
                sdm.uidOffset = value
            }
            if sdm.mirrorReadCounter {
                guard let value = three() else { return nil }
                sdm.readCounterOffset = value
            }
        } else if sdm.metaRead <= 4 {
            guard let value = three() else { return nil }
            sdm.piccDataOffset = value
        }
        if sdm.fileRead != NTAG424AccessValue.never {
            guard let input = three() else { return nil }
            sdm.macInputOffset = input
            if sdm.encryptFileData {
                guard let offset = three(), let length = three() else { return nil }
                sdm.encOffset = offset
                sdm.encLength = length
            }
            guard let mac = three() else { return nil }
            sdm.macOffset = mac
        } else if sdm.encryptFileData {
            return nil
        }
        if hasLimit {
            guard let limit = three() else { return nil }
            sdm.readCounterLimit = UInt32(limit)
        }
        guard index == bytes.count else { return nil }
        self.sdm = sdm
    }

    /// The GetFileSettings answer's data: `FileType(00) ‖ FileOption ‖ AccessRights ‖ FileSize(3)
    /// ‖ SDM part`.
    public func getFileSettingsData(fileSize: Int) -> [UInt8] {
        let encoded = encoded()
        return [0x00] + encoded[0..<3]
            + [UInt8(truncatingIfNeeded: fileSize), UInt8(truncatingIfNeeded: fileSize >> 8), UInt8(truncatingIfNeeded: fileSize >> 16)]
            + encoded[3...]
    }

    /// Parses a GetFileSettings answer's data; nil when malformed.
    public init?(getFileSettingsData bytes: [UInt8]) {
        guard bytes.count >= 7, bytes[0] == 0x00 else { return nil }
        self.init(encoded: Array(bytes[1..<4]) + bytes[7...])
    }

    /// The file size a GetFileSettings answer states.
    public static func fileSize(getFileSettingsData bytes: [UInt8]) -> Int? {
        guard bytes.count >= 7 else { return nil }
        return Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16
    }
}

// MARK: - ChangeKey

/// The key data of ChangeKey (datasheet §10.6.1): for the key the session was opened with
/// (key 0 on NTAG 424 DNA) `NewKey ‖ KeyVer`; for another key `(NewKey ⊕ OldKey) ‖ KeyVer ‖
/// CRC32(NewKey)`. Sent in CommMode.Full after the key number.
public enum NTAG424ChangeKey {
    public static func keyData(keyNumber: UInt8, authenticatedKey: UInt8, newKey: AES128Key, oldKey: AES128Key, version: UInt8) -> [UInt8] {
        if keyNumber == authenticatedKey { return newKey.bytes + [version] }
        return zip(newKey.bytes, oldKey.bytes).map { $0 ^ $1 } + [version] + crc32(newKey.bytes)
    }

    /// CRC32 as DESFire EV2 / NTAG 424 DNA write it: the IEEE 802.3 polynomial, preset FFFFFFFF,
    /// reflected, with no final inversion (the bitwise complement of zlib's crc32), least
    /// significant byte first. AN12196's ChangeKey example pins it: CRC32(F3847D62…B966) = 789DFADC.
    public static func crc32(_ bytes: [UInt8]) -> [UInt8] {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return [
            UInt8(truncatingIfNeeded: crc), UInt8(truncatingIfNeeded: crc >> 8), UInt8(truncatingIfNeeded: crc >> 16), UInt8(crc >> 24),
        ]
    }
}
