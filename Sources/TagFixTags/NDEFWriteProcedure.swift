public import TagFixCore
public import TagFixNDEF

/// What writing an NDEF message gave.
public struct NDEFWrite: Sendable, Hashable {
    public var tagType: TagType
    public var chipName: String
    /// WRITE commands sent (4 bytes each).
    public var pagesWritten: Int
    /// The message read back from the tag after writing: equal to the one written.
    public var readBack: [UInt8]
    public var bytesMoved: Int
    public var commands: Int
}

/// Why a write did not finish, and what state it left the tag in.
public enum NDEFWriteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The tag cannot take the message: read-only, locked, too small, not formatted.
    case refused(Type2WriteError)
    /// The tag stopped answering before the first write: it is as it was.
    case nothingWritten(TagError)
    /// The tag stopped answering after `written` of `of` page writes. Its NDEF length is 0
    /// (the first write set it so), so it reads as an empty message, never half of the new one.
    case interrupted(written: Int, of: Int, TagError)
    /// The message read back differs from the one written.
    case verificationFailed(read: [UInt8]?)
    case unsupported(String)
    case read(NDEFReadError)

    public var description: String {
        switch self {
        case .refused(let error): "\(error)"
        case .nothingWritten(let error):
            "the tag stopped answering before anything was written (\(error.detail)): hold it still on the reader and try again"
        case .interrupted(let written, let total, let error):
            "the tag left after \(written) of \(total) page writes (\(error.detail)): it now holds an empty NDEF message; hold it still and write it again"
        case .verificationFailed(let read):
            "the message read back \(read.map { "(\($0.count) bytes)" } ?? "(none)") differs from the one written: the tag may be faulty; write it again or use another tag"
        case .unsupported(let what): "\(what): only NFC Forum Type 2 tags (NTAG21x, MIFARE Ultralight) can be written"
        case .read(let error): "\(error)"
        }
    }
}

/// The NFC Forum Type 2 write procedure: identify the chip, read its memory through the data
/// area (and the NTAG dynamic lock bytes), check the lock bits and capacity, then WRITE page by
/// page — NDEF TLV length 0 first, the real length last — and read the message back to compare.
public enum Type2NDEFWriter {
    public static func write<T: TagTransport>(
        _ message: [UInt8], _ transport: inout T, reselect: () throws(TagError) -> Void
    ) throws(NDEFWriteError) -> NDEFWrite {
        var link = CountingTransport(base: transport)
        defer { transport = link.base }
        let version = link.probe([0x60]).flatMap { $0.count == 8 ? $0 : nil }
        if version == nil {
            do {
                try reselect()
            } catch {
                throw .nothingWritten(error)
            }
        }
        let chip = Type2Identification.identify(getVersion: version)
        let memory: [UInt8]
        do {
            memory = try readMemory(&link, fast: version != nil, chip: chip)
        } catch {
            if case .incompleteRead(_, let cause) = error { throw .nothingWritten(cause) }
            throw .read(error)
        }
        let dynamic = Type2Locks.DynamicLock.forChip(chip.type)
        let writes: [Type2PageWrite]
        do {
            writes = try Type2Memory.planWrite(message: message, memory: memory, locks: Type2Locks(memory: memory, dynamic: dynamic))
        } catch {
            throw .refused(error)
        }
        for (index, write) in writes.enumerated() {
            do {
                _ = try link.base.transceive([0xA2, UInt8(write.page)] + write.bytes)
                link.commands += 1
                link.bytes += 6
            } catch {
                throw index == 0 ? .nothingWritten(error) : .interrupted(written: index, of: writes.count, error)
            }
        }
        let check: NDEFRead
        do {
            check = try Type2NDEFReader.read(&link.base, readSignature: false, reselect: reselect)
        } catch {
            throw .read(error)
        }
        guard check.message == message else { throw .verificationFailed(read: check.message) }
        return NDEFWrite(
            tagType: chip.type, chipName: chip.name, pagesWritten: writes.count, readBack: check.message ?? [],
            bytesMoved: link.bytes + check.bytesMoved, commands: link.commands + check.commands)
    }

    /// Pages 0 through the end of the data area, plus the dynamic lock page where the chip has one.
    private static func readMemory<T: TagTransport>(
        _ link: inout CountingTransport<T>, fast: Bool, chip: Type2Identification.Chip
    ) throws(NDEFReadError) -> [UInt8] {
        func pages(_ first: Int, _ last: Int) throws(NDEFReadError) -> [UInt8] {
            try Type2NDEFReader.readPages(&link, first...last, fast: fast)
        }
        var memory = try pages(0, 3)
        guard let cc = try? Type2CapabilityContainer(memory[12..<16]) else {
            throw .malformed("capability container \(Hex.encode(memory[12..<16])) is not an NDEF one (not formatted)")
        }
        var lastData = (Type2Memory.dataAreaStart + cc.dataAreaSize - 1) / Type2Memory.pageSize
        if let total = chip.totalPages { lastData = min(lastData, total - 1) }
        if lastData >= 4 { memory += try pages(4, lastData) }
        if let dynamic = Type2Locks.DynamicLock.forChip(chip.type), dynamic.page < (chip.totalPages ?? 0) {
            let lock = try pages(dynamic.page, dynamic.page)
            if memory.count < dynamic.page * 4 { memory += [UInt8](repeating: 0, count: dynamic.page * 4 - memory.count) }
            memory += lock
        }
        return memory
    }
}
