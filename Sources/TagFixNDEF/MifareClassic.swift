import TagFixCore

/// MIFARE Classic memory formatted for NDEF (NXP AN1304): a MIFARE Application Directory names
/// the sectors whose application id is the NFC Forum's (03 E1); their data blocks, trailers
/// skipped, hold TLVs as on a Type 2 tag.
public enum MifareClassicMemory {
    public static let blockSize = 16
    /// The NFC Forum application id as stored in the MAD.
    public static let ndefApplicationID: [UInt8] = [0x03, 0xE1]

    /// The memory's geometry: sector → blocks.
    public static func sectorCount(forBytes count: Int) -> Int? {
        switch count {
        case 320: 5  // Mini
        case 1024: 16  // 1K
        case 2048: 32  // 2K
        case 4096: 40  // 4K
        default: nil
        }
    }

    public static func firstBlock(ofSector sector: Int) -> Int { sector < 32 ? sector * 4 : 128 + (sector - 32) * 16 }
    public static func blockCount(ofSector sector: Int) -> Int { sector < 32 ? 4 : 16 }

    /// The MAD's application ids per sector (sector 0, and 16 on a 4K card, hold the MAD itself).
    public struct Directory: Sendable, Hashable {
        public var version: Int
        public var applications: [Int: [UInt8]]

        public var ndefSectors: [Int] { applications.filter { $0.value == MifareClassicMemory.ndefApplicationID }.keys.sorted() }
    }

    /// Reads MAD1 (sector 0, blocks 1–2) and, on 4K cards, MAD2 (sector 16), checking their CRCs.
    public static func directory(_ memory: [UInt8]) throws(TagMemoryError) -> Directory {
        guard let sectors = sectorCount(forBytes: memory.count) else {
            throw .badMAD("a MIFARE Classic image has 320, 1024, 2048 or 4096 bytes, not \(memory.count)")
        }
        let madStart = firstBlock(ofSector: 16) * blockSize
        return try directory(
            mad1: Array(memory[blockSize..<3 * blockSize]), generalPurposeByte: memory[3 * blockSize + 9],
            mad2: sectors > 16 ? Array(memory[madStart..<madStart + 3 * blockSize]) : nil, sectors: sectors)
    }

    /// The directory from the MAD blocks a reader has read: MAD1 (blocks 1–2), the General
    /// Purpose Byte of sector 0's trailer, and MAD2 (blocks 64–66) on cards of more than 16
    /// sectors.
    public static func directory(mad1: [UInt8], generalPurposeByte gpb: UInt8, mad2: [UInt8]?, sectors: Int) throws(TagMemoryError)
        -> Directory
    {
        guard gpb & 0x80 != 0 else { throw .notFormatted("sector 0's general purpose byte \(Hex.encode([gpb])) has no MAD") }
        let version = Int(gpb & 0x03)
        guard version == 1 || version == 2 else { throw .badMAD("MAD version \(version) in the general purpose byte") }
        guard mad1.count == 32 else { throw .badMAD("MAD1 needs 32 bytes, got \(mad1.count)") }
        guard crc(mad1.dropFirst()) == mad1[0] else {
            throw .badMAD("MAD1 CRC \(Hex.encode([mad1[0]])) does not match \(Hex.encode([crc(mad1.dropFirst())]))")
        }
        var applications: [Int: [UInt8]] = [:]
        for sector in 1..<min(16, sectors) {
            applications[sector] = Array(mad1[2 * sector..<2 * sector + 2])
        }
        if version == 2, sectors > 16, let mad2 {
            guard mad2.count == 48 else { throw .badMAD("MAD2 needs 48 bytes, got \(mad2.count)") }
            guard crc(mad2.dropFirst()) == mad2[0] else { throw .badMAD("MAD2 CRC \(Hex.encode([mad2[0]])) does not match") }
            for sector in 17..<sectors {
                let index = 2 * (sector - 16)
                applications[sector] = Array(mad2[index..<index + 2])
            }
        }
        return Directory(version: version, applications: applications)
    }

    /// What a partly read NDEF area gives: the message (or `nil`: a Terminator before any NDEF
    /// TLV), a need for more bytes, or a broken structure.
    public enum AreaRead: Sendable, Hashable {
        case complete([UInt8]?)
        case needMore
        case failed(TagMemoryError)
    }

    /// Walks the TLVs of the first `area.count` bytes of an NDEF area of `totalSize` bytes, so a
    /// reader can stop reading sectors once the message is in hand.
    public static func ndef(partialArea area: [UInt8], totalSize: Int) -> AreaRead {
        do {
            return .complete(try TLVWalk.run(area, start: 0, end: totalSize, controlTLVs: false, stopAtNDEF: true).ndef)
        } catch {
            switch error {
            case .needMore: return .needMore
            case .failed(let failure): return .failed(failure)
            }
        }
    }

    /// The MAD CRC: CRC-8, polynomial 0x1D, preset 0xC7, over the info byte and the AIDs (the
    /// MAD sector's bytes after the CRC byte). Public for whoever writes a MAD; the real dumps'
    /// MADs in the shared test data check it.
    public static func crc(_ bytes: some Sequence<UInt8>) -> UInt8 {
        var crc: UInt8 = 0xC7
        for byte in bytes {
            crc ^= byte
            for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x1D : crc << 1 }
        }
        return crc
    }

    /// What an NDEF-formatted MIFARE Classic image holds.
    public struct Contents: Sendable, Hashable {
        public var directory: Directory
        /// The NDEF sectors' data blocks, in order, trailers removed.
        public var area: [UInt8]
        public var tlvs: [TagTLV]
        public var ndefMessage: [UInt8]?
    }

    /// Reads the MAD, gathers the NDEF sectors' data blocks and walks their TLVs.
    /// - Parameter unknownBytes: byte addresses the dump could not read (`??` in Flipper files);
    ///   NDEF data there is an error, not zeros.
    public static func read(_ memory: [UInt8], unknownBytes: Set<Int> = []) throws(TagMemoryError) -> Contents {
        let directory = try directory(memory)
        let sectors = directory.ndefSectors
        guard !sectors.isEmpty else { throw .notFormatted("the MAD names no NDEF sector (application 03E1)") }
        var area: [UInt8] = []
        var addresses: [Int] = []
        for sector in sectors {
            let first = firstBlock(ofSector: sector)
            for block in first..<first + blockCount(ofSector: sector) - 1 {
                let start = block * blockSize
                area += memory[start..<start + blockSize]
                addresses += start..<start + blockSize
            }
        }
        let result: TLVWalk.Result
        do {
            result = try TLVWalk.run(area, start: 0, end: area.count, controlTLVs: false, stopAtNDEF: false)
        } catch {
            switch error {
            case .failed(let failure): throw failure
            case .needMore(let upTo, _): throw .truncated(needed: upTo, available: area.count)
            }
        }
        if !unknownBytes.isEmpty, let ndef = result.tlvs.first(where: { $0.kind == .ndef }), let end = result.ndefEnd {
            if let unknown = (ndef.offset..<end).first(where: { unknownBytes.contains(addresses[$0]) }) {
                throw .unreadableBytes(at: addresses[unknown])
            }
        }
        // TLV offsets are reported as card addresses.
        let tlvs = result.tlvs.map { tlv in
            var copy = tlv
            copy.offset = addresses[tlv.offset]
            return copy
        }
        return Contents(directory: directory, area: area, tlvs: tlvs, ndefMessage: result.ndef)
    }
}
