import TagFixCore

/// A Type 4 tag's capability container file (E103), NFC Forum Type 4 Tag mapping 1.0–3.0.
public struct Type4CapabilityContainer: Sendable, Hashable {
    /// The NDEF Tag Application (mapping 2.0 and later).
    public static let ndefApplication: [UInt8] = [0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01]
    /// The application name mapping 1.0 used.
    public static let legacyNDEFApplication: [UInt8] = [0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x00]
    public static let fileID: UInt16 = 0xE103

    public let bytes: [UInt8]
    public let majorVersion: Int
    public let minorVersion: Int
    /// MLe: the most bytes one READ BINARY may return.
    public let maxResponseLength: Int
    /// MLc: the most bytes one UPDATE BINARY may send.
    public let maxCommandLength: Int
    public let ndefFileID: UInt16
    /// The NDEF file's size, NLEN included.
    public let ndefFileMaxSize: Int
    public let readAccess: UInt8
    public let writeAccess: UInt8
    /// Mapping 3.0's extended NDEF File Control TLV (T=06, 4-byte sizes and ENLEN).
    public let extended: Bool

    /// Parses the CC file: CCLEN ≥ 15, mapping version major 1–3, MLe ≥ 15, MLc ≥ 1, and an NDEF
    /// File Control TLV (T=04 L=06, or T=06 L=08 from mapping 3.0).
    public init(_ file: [UInt8]) throws(TagMemoryError) {
        guard file.count >= 15 else { throw .badCapabilityContainer("CC file has \(file.count) bytes; at least 15") }
        let ccLength = Int(file[0]) << 8 | Int(file[1])
        guard ccLength >= 15, ccLength <= file.count else {
            throw .badCapabilityContainer("CCLEN \(ccLength) is below 15 or beyond the \(file.count) bytes read")
        }
        majorVersion = Int(file[2] >> 4)
        minorVersion = Int(file[2] & 0x0F)
        guard (1...3).contains(majorVersion) else { throw .unsupportedVersion(major: majorVersion, minor: minorVersion) }
        maxResponseLength = Int(file[3]) << 8 | Int(file[4])
        maxCommandLength = Int(file[5]) << 8 | Int(file[6])
        guard maxResponseLength >= 0x0F else { throw .badCapabilityContainer("MLe \(maxResponseLength) is below 15") }
        guard maxCommandLength >= 1 else { throw .badCapabilityContainer("MLc is 0") }
        switch (file[7], file[8]) {
        case (0x04, 0x06):
            extended = false
            ndefFileID = UInt16(file[9]) << 8 | UInt16(file[10])
            ndefFileMaxSize = Int(file[11]) << 8 | Int(file[12])
            readAccess = file[13]
            writeAccess = file[14]
        case (0x06, 0x08) where majorVersion >= 3 && ccLength >= 17:
            extended = true
            ndefFileID = UInt16(file[9]) << 8 | UInt16(file[10])
            ndefFileMaxSize = Int(file[11]) << 24 | Int(file[12]) << 16 | Int(file[13]) << 8 | Int(file[14])
            readAccess = file[15]
            writeAccess = file[16]
        default:
            throw .badCapabilityContainer(
                "NDEF File Control TLV is T=\(Hex.encode([file[7]])) L=\(Hex.encode([file[8]])), expected T=04 L=06")
        }
        guard ![0x0000, 0xE102, 0xE103, 0x3F00, 0x3FFF, 0xFFFF].contains(ndefFileID) else {
            throw .badCapabilityContainer("NDEF file id \(Hex.encode([UInt8(ndefFileID >> 8), UInt8(ndefFileID & 0xFF)])) is reserved")
        }
        guard ndefFileMaxSize >= (extended ? 5 : 3) else { throw .badCapabilityContainer("NDEF file size \(ndefFileMaxSize) is too small") }
        bytes = Array(file.prefix(ccLength))
    }

    /// NTAG 424 DNA's capability container as NXP ships it (NT4H2421Gx datasheet, "CC file"):
    /// the NDEF file E104 of 256 bytes, MLe 256, MLc 255, free read and write access. The chip's
    /// file layout is fixed, so a reader that recognises the chip (`layout(answerToSelect:)`) may
    /// take it instead of selecting and reading E103.
    public static let ntag424DNA = try! Type4CapabilityContainer([
        0x00, 0x17, 0x20, 0x01, 0x00, 0x00, 0xFF, 0x04, 0x06, 0xE1, 0x04, 0x01, 0x00, 0x00, 0x00, 0x05, 0x06, 0xE1, 0x05, 0x00, 0x80,
        0x82, 0x83,
    ])

    /// The capability container a chip with this answer to select (ATS) is known to have, or
    /// `nil`. NTAG 424 DNA answers `06 77 77 71 02 80` (TL T0 TA TB TC and one historical byte);
    /// libnfc hands the ATS over without TL, PC/SC readers with it, so both are taken.
    public static func layout(answerToSelect ats: [UInt8]) -> Type4CapabilityContainer? {
        let body: [UInt8] = [0x77, 0x77, 0x71, 0x02, 0x80]
        return ats == body || ats == [0x06] + body ? ntag424DNA : nil
    }

    /// Read access 00 is granted; anything else (80–FE proprietary, FF none) is not.
    public var readable: Bool { readAccess == 0x00 }
    public var writable: Bool { writeAccess == 0x00 }
    /// Bytes of NLEN before the message.
    public var lengthFieldSize: Int { extended ? 4 : 2 }
    /// The largest message the NDEF file holds.
    public var capacity: Int { ndefFileMaxSize - lengthFieldSize }
}

/// Type 4 NDEF files.
public enum Type4Memory {
    /// The message in an NDEF file: NLEN (2 bytes, or ENLEN 4) then the message.
    /// - Throws: `TagMemoryError.badNDEFFile` when NLEN exceeds the file or the declared size.
    public static func ndefMessage(file: [UInt8], cc: Type4CapabilityContainer) throws(TagMemoryError) -> [UInt8] {
        let n = cc.lengthFieldSize
        guard file.count >= n else { throw .badNDEFFile("the file has \(file.count) bytes, fewer than its length field") }
        let length = file.prefix(n).reduce(0) { $0 << 8 | Int($1) }
        guard length <= cc.capacity else { throw .badNDEFFile("NLEN \(length) exceeds the file's capacity of \(cc.capacity)") }
        guard length <= file.count - n else { throw .badNDEFFile("NLEN \(length) exceeds the \(file.count - n) bytes read") }
        return Array(file[n..<n + length])
    }
}

/// A Type 3 (FeliCa Lite-S) attribute information block, block 0 of the NDEF area.
public struct Type3AttributeBlock: Sendable, Hashable {
    public let majorVersion: Int
    public let minorVersion: Int
    /// Blocks one CHECK may read (Nbr) and one UPDATE may write (Nbw).
    public let blocksPerRead: Int
    public let blocksPerWrite: Int
    /// Blocks available for NDEF data (Nmaxb).
    public let maxBlocks: Int
    /// WriteF = 0F: a write was interrupted and the data is not valid.
    public let writeInProgress: Bool
    public let readOnly: Bool
    /// Ln: the NDEF message's length in bytes.
    public let length: Int

    /// Parses and checks the 16-byte block: version 1.x, the checksum (sum of bytes 0–13), and Ln
    /// within Nmaxb blocks.
    public init(_ block: [UInt8]) throws(TagMemoryError) {
        guard block.count == 16 else { throw .badCapabilityContainer("attribute block has \(block.count) bytes, not 16") }
        let sum = block[0..<14].reduce(0) { $0 + Int($1) }
        let checksum = Int(block[14]) << 8 | Int(block[15])
        guard sum == checksum else { throw .badCapabilityContainer("attribute block checksum \(checksum) ≠ \(sum)") }
        majorVersion = Int(block[0] >> 4)
        minorVersion = Int(block[0] & 0x0F)
        guard majorVersion == 1 else { throw .unsupportedVersion(major: majorVersion, minor: minorVersion) }
        blocksPerRead = Int(block[1])
        blocksPerWrite = Int(block[2])
        maxBlocks = Int(block[3]) << 8 | Int(block[4])
        guard block[9] == 0x00 || block[9] == 0x0F else { throw .badCapabilityContainer("WriteF is \(block[9]), not 00 or 0F") }
        writeInProgress = block[9] == 0x0F
        guard block[10] <= 0x01 else { throw .badCapabilityContainer("RWFlag is \(block[10]), not 00 or 01") }
        readOnly = block[10] == 0x00
        length = Int(block[11]) << 16 | Int(block[12]) << 8 | Int(block[13])
        guard length <= maxBlocks * 16 else { throw .badCapabilityContainer("Ln \(length) exceeds Nmaxb \(maxBlocks) blocks") }
    }
}

/// Type 3 NDEF areas.
public enum Type3Memory {
    /// The message in blocks 0 (attribute) and up: Ln bytes from block 1.
    public static func read(blocks: [UInt8]) throws(TagMemoryError) -> (attributes: Type3AttributeBlock, message: [UInt8]) {
        guard blocks.count >= 16 else { throw .truncated(needed: 16, available: blocks.count) }
        let attributes = try Type3AttributeBlock(Array(blocks[0..<16]))
        guard !attributes.writeInProgress else { throw .badNDEFFile("a write was interrupted (WriteF = 0F): the data is not valid") }
        guard blocks.count >= 16 + attributes.length else { throw .truncated(needed: 16 + attributes.length, available: blocks.count) }
        return (attributes, Array(blocks[16..<16 + attributes.length]))
    }
}
