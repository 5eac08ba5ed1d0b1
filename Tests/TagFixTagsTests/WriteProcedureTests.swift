import Foundation
import TagFixCore
import TagFixEmulators
import TagFixNDEF
import TagFixTags
import Testing

/// A message of about `bytes` bytes: one URI record, or several records for a long message.
func message(bytes: Int) -> [UInt8] {
    if bytes < 200 {
        let url = { (path: String) in NDEFMessage(records: [.uri("https://tags.example.org/t/A1/\(path)?lat=53.545&lon=9.966&r=25")]) }
        let overhead = url("").encoded().count
        return url(String(repeating: "p", count: max(0, bytes - overhead))).encoded()
    }
    var records: [NDEFRecord] = [.uri("https://tags.example.org/t/LONG?lat=53.545&lon=9.966&r=25")]
    while NDEFMessage(records: records).encoded().count < bytes {
        records.append(.uri("https://tags.example.org/info/\(records.count)/" + String(repeating: "x", count: 60)))
    }
    return NDEFMessage(records: records).encoded()
}

private func pages(_ tag: EmulatedType2Tag) -> [UInt8] { tag.pages }

/// Stops answering after `limit` WRITE commands: a tag pulled away mid-write.
struct PullAfterWrites: TagTransport {
    var base: DirectTransport
    var limit: Int
    var writes = 0
    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        if command.first == 0xA2 {
            guard writes < limit else { throw TagError(.tagLost) }
            writes += 1
        }
        return try base.transceive(command)
    }
}

@Suite("Type 2 write procedure (enrol --write-url)")
struct Type2WriteProcedureTests {
    static let cases: [(chip: Int, bytes: Int)] = [(213, 40), (213, 135), (215, 100), (215, 400), (216, 100), (216, 800)]

    @Test("a message written reads back the same, and only through WRITE of the data area", arguments: cases)
    func writeAndReadBack(chip: Int, bytes: Int) throws {
        let tag = try EmulatedType2Tag.ntag(chip, message: NDEFMessage(records: [.uri("https://old.example/x")]).encoded())
        let new = message(bytes: bytes)
        var transport = DirectTransport(tag)
        let result = try Type2NDEFWriter.write(new, &transport) { () throws(TagError) -> Void in }
        #expect(result.readBack == new)
        #expect(result.chipName == "NTAG\(chip)")
        let writes = transport.log.filter { $0.first == 0xA2 }
        #expect(writes.count == result.pagesWritten)
        #expect(writes.allSatisfy { $0[1] >= 4 && Int($0[1]) < 4 + (chip == 213 ? 36 : chip == 215 ? 124 : 218) }, "user pages only")
        // The NDEF length is zero at the first write and set by the last.
        #expect(writes.first.map { $0[1] } == writes.last.map { $0[1] })
        var fresh = DirectTransport(tag)
        #expect(try Type2NDEFReader.read(&fresh) { () throws(TagError) -> Void in }.message == new)
    }

    @Test(
        "pulled away after any number of writes, the tag holds the old message, an empty one, or the new one — never a part",
        arguments: [(213, 135), (215, 400)])
    func neverHalfWritten(chip: Int, bytes: Int) throws {
        let old = NDEFMessage(records: [.uri("https://old.example/x")]).encoded()
        let new = message(bytes: bytes)
        let total = try {
            var transport = DirectTransport(try EmulatedType2Tag.ntag(chip, message: old))
            return try Type2NDEFWriter.write(new, &transport) { () throws(TagError) -> Void in }.pagesWritten
        }()
        for limit in 0..<total {
            let tag = try EmulatedType2Tag.ntag(chip, message: old)
            var transport = PullAfterWrites(base: DirectTransport(tag), limit: limit)
            #expect(throws: NDEFWriteError.self) { try Type2NDEFWriter.write(new, &transport) { () throws(TagError) -> Void in } }
            var reader = DirectTransport(tag)
            let found = try Type2NDEFReader.read(&reader) { () throws(TagError) -> Void in }.message
            #expect(found == (limit == 0 ? old : []), "after \(limit) of \(total) writes")
        }
    }

    @Test("read-only, locked and too-small tags are refused before anything is written")
    func refused() throws {
        let small = NDEFMessage(records: [.uri("https://a.example/")]).encoded()
        // CC write access F: read-only.
        let readOnly = try EmulatedType2Tag.ntag(213, message: small)
        var memory = readOnly.pages
        memory[15] = 0x0F
        let locked = EmulatedType2Tag(
            uid: readOnly.uid, pages: memory, getVersion: [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x0F, 0x03], signature: nil)
        var transport = DirectTransport(locked)
        #expect(throws: NDEFWriteError.refused(.readOnly)) {
            try Type2NDEFWriter.write(small, &transport) { () throws(TagError) -> Void in }
        }
        #expect(!transport.log.contains { $0.first == 0xA2 })

        // Static lock bits for pages 3–7.
        var staticLocked = readOnly.pages
        staticLocked[10] = 0xF8
        let tag2 = EmulatedType2Tag(
            uid: readOnly.uid, pages: staticLocked, getVersion: [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x0F, 0x03], signature: nil)
        var transport2 = DirectTransport(tag2)
        #expect(throws: NDEFWriteError.refused(.locked(page: 4))) {
            try Type2NDEFWriter.write(small, &transport2) { () throws(TagError) -> Void in }
        }
        // The chip refuses the write too, whatever the client believes.
        #expect(tag2.transceive([0xA2, 0x05, 1, 2, 3, 4]) == .nak(0x0))

        // NTAG213 dynamic lock bits (page 0x28): the first bit locks pages 16–17.
        var dynamic = readOnly.pages
        dynamic[0x28 * 4] = 0x01
        let tag3 = EmulatedType2Tag(
            uid: readOnly.uid, pages: dynamic, getVersion: [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x0F, 0x03], signature: nil)
        var transport3 = DirectTransport(tag3)
        #expect(throws: NDEFWriteError.refused(.locked(page: 16))) {
            try Type2NDEFWriter.write(message(bytes: 135), &transport3) { () throws(TagError) -> Void in }
        }
        #expect(tag3.transceive([0xA2, 0x11, 1, 2, 3, 4]) == .nak(0x0))
        var transport3b = DirectTransport(tag3)
        #expect(throws: Never.self) { try Type2NDEFWriter.write(small, &transport3b) { () throws(TagError) -> Void in } }

        var transport4 = DirectTransport(try EmulatedType2Tag.ntag(213, message: small))
        #expect(
            performing: { try Type2NDEFWriter.write(message(bytes: 400), &transport4) { () throws(TagError) -> Void in } },
            throws: { error in
                guard case .refused(.tooLong(let needed, let available))? = error as? NDEFWriteError else { return false }
                return available == 144 && needed > 144
            })
    }

    @Test("Lock Control TLVs stay in place and their reserved bytes are skipped and left untouched")
    func lockControl() throws {
        // An NTAG216-sized tag whose data area starts with a Lock Control TLV reserving bytes
        // 160–161 (page 40), inside the data area.
        let base = try EmulatedType2Tag.ntag(216, message: [])
        var memory = base.pages
        let tlvs: [UInt8] = [0x01, 0x03, 0xA0, 0x10, 0x44, 0x03, 0x00, 0xFE]
        memory.replaceSubrange(16..<16 + tlvs.count, with: tlvs)
        memory[160] = 0x5A
        memory[161] = 0xA5
        let tag = EmulatedType2Tag(
            uid: base.uid, pages: memory, getVersion: [0x00, 0x04, 0x04, 0x02, 0x01, 0x00, 0x13, 0x03], signature: nil)
        let new = message(bytes: 300)
        var transport = DirectTransport(tag)
        let result = try Type2NDEFWriter.write(new, &transport) { () throws(TagError) -> Void in }
        #expect(result.readBack == new)
        #expect(Array(tag.pages[16..<21]) == [0x01, 0x03, 0xA0, 0x10, 0x44], "the Lock Control TLV is kept")
        #expect(tag.pages[160] == 0x5A && tag.pages[161] == 0xA5, "reserved bytes are not overwritten")
    }

    @Test("the length field never straddles two pages: NULL TLVs pad it into one", arguments: 0..<4)
    func lengthInOnePage(offset: Int) throws {
        // NULL TLVs before the NDEF TLV move it to each position within a page.
        let base = try EmulatedType2Tag.ntag(215, message: [])
        var memory = base.pages
        let lead = [UInt8](repeating: 0x00, count: offset) + [0x03, 0x00, 0xFE]
        memory.replaceSubrange(16..<16 + lead.count, with: lead)
        let writes = try Type2Memory.planWrite(message: message(bytes: 400), memory: memory, locks: Type2Locks(memory: memory))
        let last = try #require(writes.last)
        let first = try #require(writes.first)
        #expect(first.page == last.page, "one page carries the length: zero first, then the real length")
        #expect(first.bytes != last.bytes)
    }
}
