public import TagFixCore

// MARK: - Lock bits

/// Which pages of a Type 2 tag can no longer be written: the static lock bits (page 2, bytes 2–3,
/// pages 3–15) and, on NTAG21x, the dynamic lock bits (NTAG213/215/216 data sheet, §8.5.2).
public struct Type2Locks: Sendable, Hashable {
    /// Pages whose lock bit is set.
    public private(set) var lockedPages: Set<Int> = []

    /// Where an NTAG21x keeps its dynamic lock bytes, and how many pages one bit locks.
    public struct DynamicLock: Sendable, Hashable {
        public var page: Int
        public var pagesPerBit: Int
        /// The last user page the bits cover.
        public var lastPage: Int

        /// The layout for a chip, when it has dynamic lock bits.
        public static func forChip(_ type: TagType) -> DynamicLock? {
            switch type {
            case .ntag213: DynamicLock(page: 0x28, pagesPerBit: 2, lastPage: 0x27)
            case .ntag215: DynamicLock(page: 0x82, pagesPerBit: 16, lastPage: 0x81)
            case .ntag216: DynamicLock(page: 0xE2, pagesPerBit: 16, lastPage: 0xE1)
            default: nil
            }
        }
    }

    /// Reads the lock bits from a memory image starting at page 0 (pages missing from the image
    /// count as unlocked; give the dynamic lock page to know about it).
    public init(memory: [UInt8], dynamic: DynamicLock? = nil) {
        guard memory.count >= 12 else { return }
        let (lock0, lock1) = (memory[10], memory[11])
        for bit in 3..<8 where lock0 & (1 << bit) != 0 { lockedPages.insert(bit) }
        for bit in 0..<8 where lock1 & (1 << bit) != 0 { lockedPages.insert(8 + bit) }
        if let dynamic, memory.count >= dynamic.page * 4 + 3 {
            let bytes = memory[dynamic.page * 4..<dynamic.page * 4 + 2]
            for (index, byte) in bytes.enumerated() {
                for bit in 0..<8 where byte & (1 << bit) != 0 {
                    let first = 16 + (index * 8 + bit) * dynamic.pagesPerBit
                    guard first <= dynamic.lastPage else { continue }
                    for page in first...min(dynamic.lastPage, first + dynamic.pagesPerBit - 1) { lockedPages.insert(page) }
                }
            }
        }
    }

    public func isLocked(page: Int) -> Bool { lockedPages.contains(page) }
}

// MARK: - Write planning

/// One WRITE command: 4 bytes to a page.
public struct Type2PageWrite: Sendable, Hashable {
    public var page: Int
    public var bytes: [UInt8]

    public init(page: Int, bytes: [UInt8]) {
        self.page = page
        self.bytes = bytes
    }
}

/// Why a message cannot be written to a tag.
public enum Type2WriteError: Error, Sendable, Hashable, CustomStringConvertible {
    case notFormatted(String)
    case readOnly
    case locked(page: Int)
    case tooLong(needed: Int, available: Int)

    public var description: String {
        switch self {
        case .notFormatted(let why):
            "the tag is not NDEF formatted (\(why)): format it first (e.g. with NXP TagWriter), or use a formatted tag"
        case .readOnly:
            "the tag is read-only (its capability container denies writing): it was locked for good; use another tag"
        case .locked(let page):
            "page \(page) of the tag is locked by its lock bits: the tag cannot take a new message; use another tag"
        case .tooLong(let needed, let available):
            "the message needs \(needed) bytes but the tag has \(available): shorten the URL template, or use a larger tag (NTAG215/216)"
        }
    }
}

extension Type2Memory {
    /// The page writes that put `message` on a tag whose memory (from page 0 through at least the
    /// end of the data area) is `memory`, in the NFC Forum Type 2 write order: the NDEF TLV with
    /// length 0 first, then the message and a Terminator TLV, and last the page that sets the real
    /// length — so a tag pulled away mid-write holds an empty message, never half of one.
    ///
    /// Lock and Memory Control TLVs before the NDEF TLV stay where they are, their reserved bytes
    /// are skipped, and NULL TLVs pad the NDEF TLV so that its length field lies in one page
    /// (one WRITE sets it).
    /// - Throws: `Type2WriteError` for a tag that is unformatted, read-only, locked where the
    ///   message goes, or too small.
    public static func planWrite(message: [UInt8], memory: [UInt8], locks: Type2Locks) throws(Type2WriteError) -> [Type2PageWrite] {
        let contents: Type2Contents
        do {
            contents = try read(memory)
        } catch {
            switch error {
            case .notFormatted(let why), .badCapabilityContainer(let why): throw .notFormatted(why)
            default:
                // A broken TLV walk (garbage after the CC) is overwritten: the message starts at
                // the data area, and the CC alone must be sound.
                guard memory.count >= dataAreaStart, let cc = try? Type2CapabilityContainer(memory[12..<16]) else {
                    throw .notFormatted(error.description)
                }
                return try plan(message, memory: memory, cc: cc, keep: [], start: dataAreaStart, locks: locks)
            }
        }
        let cc = contents.capabilityContainer
        // Keep the control TLVs (and NULL padding) that come before anything else.
        var start = dataAreaStart
        for tlv in contents.tlvs {
            switch tlv.kind {
            case .null: start = tlv.offset + 1
            case .lockControl, .memoryControl: start = tlv.offset + 2 + tlv.length
            default: break
            }
            if case .null = tlv.kind { continue }
            if case .lockControl = tlv.kind { continue }
            if case .memoryControl = tlv.kind { continue }
            break
        }
        let keep = contents.reservedAreas.filter { $0.start >= dataAreaStart }
        return try plan(message, memory: memory, cc: cc, keep: keep, start: start, locks: locks)
    }

    private static func plan(
        _ message: [UInt8], memory: [UInt8], cc: Type2CapabilityContainer, keep: [ReservedArea], start: Int, locks: Type2Locks
    ) throws(Type2WriteError) -> [Type2PageWrite] {
        guard !cc.isReadOnly else { throw .readOnly }
        let end = dataAreaStart + cc.dataAreaSize
        let reserved = { (address: Int) in keep.contains { $0.range.contains(address) } }
        let longForm = message.count >= 0xFF
        let header: [UInt8] =
            longForm ? [0x03, 0xFF, UInt8(message.count >> 8), UInt8(message.count & 0xFF)] : [0x03, UInt8(message.count)]
        // Usable addresses from `start`, skipping reserved bytes.
        var addresses: [Int] = []
        var address = start
        let needed = header.count + message.count + 1
        var padding = 0
        while true {
            addresses = []
            address = start
            while addresses.count < padding + needed, address < end {
                if !reserved(address) { addresses.append(address) }
                address += 1
            }
            guard addresses.count == padding + needed else {
                let available = (start..<end).filter { !reserved($0) }.count
                throw .tooLong(needed: needed, available: max(0, available - padding))
            }
            // The length bytes that change last must share a page.
            let lengthBytes = longForm ? [addresses[padding + 2], addresses[padding + 3]] : [addresses[padding + 1]]
            if Set(lengthBytes.map { $0 / pageSize }).count == 1 { break }
            padding += 1
            guard padding < 4 else { break }
        }
        var image = memory
        if image.count < end { image += [UInt8](repeating: 0, count: end - image.count) }
        let body = [UInt8](repeating: 0x00, count: padding) + header + message + [0xFE]
        for (offset, byte) in body.enumerated() { image[addresses[offset]] = byte }
        let lengthPage = addresses[padding + (longForm ? 3 : 1)] / pageSize
        let pages = Set(addresses.map { $0 / pageSize }).sorted()
        for page in pages where locks.isLocked(page: page) { throw .locked(page: page) }
        let write = { (page: Int) in Type2PageWrite(page: page, bytes: Array(image[page * pageSize..<(page + 1) * pageSize])) }
        // Order: the length page with length 0 (the message reads as empty from then on), the
        // other pages in order, then the length page again with the real length.
        var zeroed = image
        let lengthAddresses = longForm ? [addresses[padding + 2], addresses[padding + 3]] : [addresses[padding + 1]]
        for address in lengthAddresses { zeroed[address] = 0 }
        var writes: [Type2PageWrite] = []
        writes.append(Type2PageWrite(page: lengthPage, bytes: Array(zeroed[lengthPage * pageSize..<(lengthPage + 1) * pageSize])))
        for page in pages where page != lengthPage { writes.append(write(page)) }
        writes.append(write(lengthPage))
        return writes
    }
}
