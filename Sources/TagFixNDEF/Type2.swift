public import TagFixCore

// MARK: - Capability container

/// A Type 2 tag's capability container: page 3 (bytes 12–15).
public struct Type2CapabilityContainer: Sendable, Hashable {
    public let bytes: [UInt8]

    /// Checks the magic number (E1) and the mapping version (major 1, any minor).
    public init(_ bytes: some Collection<UInt8>) throws(TagMemoryError) {
        let cc = Array(bytes)
        guard cc.count == 4 else { throw .badCapabilityContainer("needs 4 bytes, got \(cc.count)") }
        guard cc[0] == 0xE1 else { throw .notFormatted("capability container \(Hex.encode(cc)) has magic \(Hex.encode([cc[0]])), not E1") }
        guard cc[1] >> 4 == 1 else { throw .unsupportedVersion(major: Int(cc[1] >> 4), minor: Int(cc[1] & 0x0F)) }
        self.bytes = cc
    }

    public var majorVersion: Int { Int(bytes[1] >> 4) }
    public var minorVersion: Int { Int(bytes[1] & 0x0F) }
    /// Size of the data area in bytes (CC byte 2 × 8), starting at byte 16.
    public var dataAreaSize: Int { Int(bytes[2]) * 8 }
    /// Read access: 0 is granted.
    public var readAccess: UInt8 { bytes[3] >> 4 }
    /// Write access: 0 is granted, F is none (read-only).
    public var writeAccess: UInt8 { bytes[3] & 0x0F }
    public var isReadOnly: Bool { writeAccess == 0x0F }
}

// MARK: - TLVs

/// One TLV of a Type 2 (or MIFARE Classic) data area.
public struct TagTLV: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case null
        case lockControl
        case memoryControl
        case ndef
        case proprietary
        case terminator
        case unknown(UInt8)

        public var name: String {
            switch self {
            case .null: "NULL"
            case .lockControl: "Lock Control"
            case .memoryControl: "Memory Control"
            case .ndef: "NDEF Message"
            case .proprietary: "Proprietary"
            case .terminator: "Terminator"
            case .unknown(let type): "unknown type \(Hex.encode([type]))"
            }
        }
    }

    public var kind: Kind
    /// Byte address of the T byte.
    public var offset: Int
    /// Length of the value (0 for NULL and Terminator).
    public var length: Int
    /// Whether the length used the 3-byte format (FF + 2 bytes).
    public var longLength: Bool
    /// For Lock and Memory Control TLVs: the bytes they reserve.
    public var area: ReservedArea?
}

/// Bytes that lock bits or reserved memory occupy; TLV values skip them.
public struct ReservedArea: Sendable, Hashable {
    public var start: Int
    public var size: Int
    public var range: Range<Int> { start..<start + size }

    public init(start: Int, size: Int) {
        self.start = start
        self.size = size
    }

    /// From a Lock Control TLV's value: position (page nibble, byte nibble), size in bits, and
    /// the major-offset exponent in the low nibble of the third byte.
    static func lockControl(_ value: [UInt8]) -> ReservedArea {
        let bits = value[1] == 0 ? 256 : Int(value[1])
        return ReservedArea(start: Int(value[0] >> 4) << Int(value[2] & 0x0F) + Int(value[0] & 0x0F), size: (bits + 7) / 8)
    }

    /// From a Memory Control TLV's value: position, size in bytes, page-size exponent.
    static func memoryControl(_ value: [UInt8]) -> ReservedArea {
        ReservedArea(start: Int(value[0] >> 4) << Int(value[2] & 0x0F) + Int(value[0] & 0x0F), size: value[1] == 0 ? 256 : Int(value[1]))
    }
}

/// What a Type 2 tag's memory holds.
public struct Type2Contents: Sendable, Hashable {
    public var capabilityContainer: Type2CapabilityContainer
    /// TLVs in order, up to the Terminator (or the end of the data area).
    public var tlvs: [TagTLV]
    /// The first NDEF TLV's value, reserved bytes removed; `nil` when there is no NDEF TLV.
    public var ndefMessage: [UInt8]?
    /// The byte address just after the NDEF TLV's last value byte.
    public var ndefEnd: Int?
    public var reservedAreas: [ReservedArea]
}

// MARK: - Reading

/// Type 2 tag memory (NTAG21x, MIFARE Ultralight / EV1 / C) as the NFC Forum Type 2 Tag
/// specification lays it out: pages of 4 bytes, the CC in page 3, TLVs from byte 16.
public enum Type2Memory {
    public static let pageSize = 4
    public static let dataAreaStart = 16

    /// Reads the CC and walks the TLVs of a complete memory image (at least the data area).
    /// - Throws: `TagMemoryError` for a tag that is not NDEF formatted, an unsupported version, a
    ///   TLV running past the data area, or an image too short for what it declares.
    public static func read(_ memory: [UInt8]) throws(TagMemoryError) -> Type2Contents {
        do {
            return try walk(memory, stopAtNDEF: false)
        } catch {
            switch error {
            case .needMore(let upTo, _): throw .truncated(needed: upTo, available: memory.count)
            case .failed(let failure): throw failure
            }
        }
    }

    enum Stop: Error {
        /// Bytes up to `upTo` are needed; `exact` when that is the end of the NDEF value (nothing
        /// beyond it is needed), otherwise it is a header and more may follow.
        case needMore(upTo: Int, exact: Bool)
        case failed(TagMemoryError)
    }

    /// The CC, then the TLV walk over the data area it declares.
    static func walk(_ memory: [UInt8], stopAtNDEF: Bool) throws(Stop) -> Type2Contents {
        guard memory.count >= dataAreaStart else { throw .needMore(upTo: dataAreaStart, exact: false) }
        let cc: Type2CapabilityContainer
        do {
            cc = try Type2CapabilityContainer(memory[12..<16])
        } catch {
            throw .failed(error)
        }
        let result = try TLVWalk.run(
            memory, start: dataAreaStart, end: dataAreaStart + cc.dataAreaSize, controlTLVs: true, stopAtNDEF: stopAtNDEF)
        return Type2Contents(
            capabilityContainer: cc, tlvs: result.tlvs, ndefMessage: result.ndef, ndefEnd: result.ndefEnd,
            reservedAreas: result.reserved)
    }
}

/// The TLV walk of the NFC Forum tag types that use TLVs (Type 2, MIFARE Classic). Bytes in
/// reserved areas (declared by Lock and Memory Control TLVs met so far, when `controlTLVs`) are
/// skipped wherever they fall, also inside the NDEF TLV's value. TLVs after the first NDEF TLV are
/// listed as far as they parse; a broken tail never hides the message.
enum TLVWalk {
    struct Result {
        var tlvs: [TagTLV] = []
        var ndef: [UInt8]?
        var ndefEnd: Int?
        var reserved: [ReservedArea] = []
    }

    static func run(
        _ memory: [UInt8], start: Int, end: Int, controlTLVs: Bool, stopAtNDEF: Bool
    ) throws(Type2Memory.Stop) -> Result {
        var result = Result()
        var position = start

        func skipReserved(_ address: Int) -> Int {
            var a = address
            while let area = result.reserved.first(where: { $0.range.contains(a) }) { a = area.range.upperBound }
            return a
        }
        func byte(_ address: Int) throws(Type2Memory.Stop) -> UInt8 {
            guard address < memory.count else { throw .needMore(upTo: address + 1, exact: false) }
            return memory[address]
        }
        /// One TLV at `position`; `nil` at the end of the area or after a Terminator.
        func next() throws(Type2Memory.Stop) -> (TagTLV, [UInt8])? {
            position = skipReserved(position)
            guard position < end else { return nil }
            let tlvStart = position
            let type = try byte(position)
            position += 1
            if type == 0x00 { return (TagTLV(kind: .null, offset: tlvStart, length: 0, longLength: false), []) }
            if type == 0xFE { return (TagTLV(kind: .terminator, offset: tlvStart, length: 0, longLength: false), []) }
            // Length: one byte, or FF and two more.
            var length = 0
            var lengthBytes = 1
            var index = 0
            while index < lengthBytes {
                position = skipReserved(position)
                guard position < end else {
                    throw .failed(.tlvOverrunsDataArea(tlvOffset: tlvStart, length: lengthBytes, dataAreaEnd: end))
                }
                let value = Int(try byte(position))
                position += 1
                if index == 0, value == 0xFF {
                    lengthBytes = 3
                } else {
                    length = length << 8 | value
                }
                index += 1
            }
            // The value's addresses, skipping reserved bytes; it must end inside the area.
            var addresses: [Int] = []
            addresses.reserveCapacity(min(length, end - position))
            var cursor = position
            for _ in 0..<length {
                cursor = skipReserved(cursor)
                guard cursor < end else { throw .failed(.tlvOverrunsDataArea(tlvOffset: tlvStart, length: length, dataAreaEnd: end)) }
                addresses.append(cursor)
                cursor += 1
            }
            if let last = addresses.last, last >= memory.count { throw .needMore(upTo: last + 1, exact: type == 0x03) }
            position = cursor
            var tlv = TagTLV(kind: .unknown(type), offset: tlvStart, length: length, longLength: lengthBytes == 3)
            switch type {
            case 0x01: tlv.kind = .lockControl
            case 0x02: tlv.kind = .memoryControl
            case 0x03: tlv.kind = .ndef
            case 0xFD: tlv.kind = .proprietary
            default: break
            }
            return (tlv, addresses.map { memory[$0] })
        }

        while true {
            let item: (TagTLV, [UInt8])?
            if result.ndef == nil {
                item = try next()
            } else {
                do {
                    item = try next()
                } catch {
                    break  // the tail after the message is informational only
                }
            }
            guard let (found, value) = item else { break }
            var tlv = found
            // Control TLVs of the wrong size are opaque: skipped by length, as nfcpy does.
            if controlTLVs, value.count == 3 {
                if tlv.kind == .lockControl { tlv.area = .lockControl(value) }
                if tlv.kind == .memoryControl { tlv.area = .memoryControl(value) }
                if let area = tlv.area { result.reserved.append(area) }
            }
            result.tlvs.append(tlv)
            if tlv.kind == .terminator { break }
            if tlv.kind == .ndef, result.ndef == nil {
                result.ndef = value
                result.ndefEnd = position
                if stopAtNDEF { break }
            }
        }
        return result
    }
}

// MARK: - Read planner

/// Plans the smallest page range a reader must move to get the NDEF message, from the pages it
/// has so far (starting at page 0), so a URL costs a few FAST_READs instead of a full dump.
public enum Type2ReadPlan: Sendable, Hashable {
    /// Everything needed is in hand.
    case complete(Type2Contents)
    /// Read these pages next, then plan again with them appended.
    case read(pages: ClosedRange<Int>)
    /// The tag holds no NDEF message (or is not formatted): stop reading.
    case noNDEF(TagMemoryError?)
}

extension Type2Memory {
    /// What to read next, given the bytes read so far from page 0 (a whole number of pages).
    ///
    /// - Parameter lookahead: pages to ask for when the next TLV header is not in hand yet (one
    ///   READ command returns 4 pages).
    public static func plan(known: [UInt8], lookahead: Int = 4) -> Type2ReadPlan {
        let knownPages = known.count / pageSize
        do {
            let contents = try walk(Array(known.prefix(knownPages * pageSize)), stopAtNDEF: true)
            return contents.ndefMessage == nil ? .noNDEF(nil) : .complete(contents)
        } catch {
            switch error {
            case .failed(let failure):
                return .noNDEF(failure)
            case .needMore(let upTo, let exact):
                let lastPage = (upTo - 1) / pageSize
                // The NDEF value's end is known exactly; a header asks for the lookahead.
                let endPage = exact ? lastPage : max(lastPage, knownPages + lookahead - 1)
                return .read(pages: knownPages...max(knownPages, min(endPage, capPage(known, lastPage))))
            }
        }
    }

    /// Never plan past the data area once the CC is known.
    private static func capPage(_ known: [UInt8], _ needed: Int) -> Int {
        guard known.count >= 16, let cc = try? Type2CapabilityContainer(known[12..<16]) else { return max(needed, 3) }
        return max(needed, (dataAreaStart + cc.dataAreaSize - 1) / pageSize)
    }
}

// MARK: - Identification

/// Which Type 2 chip answered GET_VERSION (NXP's 8-byte reply: header, vendor, product type,
/// subtype, major, minor, storage size, protocol).
public enum Type2Identification {
    public struct Chip: Sendable, Hashable {
        public var type: TagType
        /// Pages of user-visible memory, including the four header pages.
        public var totalPages: Int?
        public var name: String
    }

    /// Identifies a chip from its capability container when GET_VERSION was not asked: the data
    /// area's size names the NTAG21x (144, 496, 872 bytes); a tag that refused FAST_READ is a
    /// MIFARE Ultralight or Ultralight C; anything else is a generic Type 2 tag.
    public static func identify(capabilityContainer cc: [UInt8], fastRead: Bool) -> Chip {
        guard cc.count == 4, cc[0] == 0xE1 else { return Chip(type: .type2, totalPages: nil, name: "Type 2 tag") }
        let size = Int(cc[2]) * 8
        if !fastRead {
            switch size {
            case 48: return Chip(type: .type2, totalPages: 16, name: "MIFARE Ultralight")
            case 144: return Chip(type: .type2, totalPages: 48, name: "MIFARE Ultralight C")
            default: return Chip(type: .type2, totalPages: nil, name: "Type 2 tag (\(size)-byte data area, no FAST_READ)")
            }
        }
        switch size {
        case 144: return Chip(type: .ntag213, totalPages: 45, name: "NTAG213")
        case 496: return Chip(type: .ntag215, totalPages: 135, name: "NTAG215")
        case 872: return Chip(type: .ntag216, totalPages: 231, name: "NTAG216")
        default: return Chip(type: .type2, totalPages: nil, name: "Type 2 tag (\(size)-byte data area)")
        }
    }

    /// Identifies a chip from its GET_VERSION bytes; `nil` bytes (tags without GET_VERSION, such as
    /// MIFARE Ultralight and Ultralight C) or an unknown vendor give a generic Type 2 tag.
    public static func identify(getVersion bytes: [UInt8]?) -> Chip {
        guard let v = bytes, v.count == 8, v[1] == 0x04 else {
            return Chip(type: .type2, totalPages: nil, name: "Type 2 tag")
        }
        switch (v[2], v[3], v[4], v[6]) {
        case (0x04, _, 0x01, 0x0B) where v[5] == 0: return Chip(type: .ntag210, totalPages: 20, name: "NTAG210")
        case (0x04, _, 0x01, 0x0E) where v[5] == 0: return Chip(type: .ntag212, totalPages: 41, name: "NTAG212")
        case (0x04, 0x02, 0x01, 0x0F), (0x04, 0x04, 0x01, 0x0F): return Chip(type: .ntag213, totalPages: 45, name: "NTAG213")
        case (0x04, 0x02, 0x01, 0x11): return Chip(type: .ntag215, totalPages: 135, name: "NTAG215")
        case (0x04, 0x02, 0x01, 0x13): return Chip(type: .ntag216, totalPages: 231, name: "NTAG216")
        case (0x04, 0x05, _, 0x13): return Chip(type: TagType(rawValue: "ntag_i2c_1k"), totalPages: 231, name: "NTAG I2C 1k")
        case (0x04, 0x05, _, 0x15): return Chip(type: TagType(rawValue: "ntag_i2c_2k"), totalPages: 485, name: "NTAG I2C 2k")
        case (0x03, _, 0x01, 0x0B): return Chip(type: .mifareUltralightEV1, totalPages: 20, name: "MIFARE Ultralight EV1 (MF0UL11)")
        case (0x03, _, 0x01, 0x0E): return Chip(type: .mifareUltralightEV1, totalPages: 41, name: "MIFARE Ultralight EV1 (MF0UL21)")
        default:
            let product = v[2] == 0x04 ? "NTAG" : v[2] == 0x03 ? "MIFARE Ultralight" : "NXP Type 2"
            return Chip(type: .type2, totalPages: nil, name: "\(product) (GET_VERSION \(Hex.encode(v)))")
        }
    }
}
