import TagFixCore
import TagFixNDEF
import TagFixTags
import Testing

/// A Type 2 tag as a few lines of memory: the whole of what a new reader backend must supply to
/// the procedures (`TagTransport`). It answers READ, FAST_READ and WRITE, and refuses the rest
/// (GET_VERSION, READ_SIG) as a tag NAKs them. No libnfc, no emulator: the public seam alone.
private struct InMemoryType2Tag: TagTransport {
    var pages: [[UInt8]]
    var exchanges = 0
    /// The tag leaves the field after this many exchanges.
    var leavesAfter = Int.max

    /// An NTAG213-sized tag (45 pages, 144 data bytes) holding `message`.
    init(message: [UInt8]) {
        pages = [[0x04, 0x11, 0x22, 0x33], [0x44, 0x55, 0x66, 0x77], [0x00, 0x48, 0x00, 0x00], [0xE1, 0x10, 0x12, 0x00]]
        var data = [0x03, UInt8(message.count)] + message + [0xFE]
        data += [UInt8](repeating: 0, count: 144 - data.count)
        for page in stride(from: 0, to: data.count, by: 4) { pages.append(Array(data[page..<page + 4])) }
        pages += [[0, 0, 0, 0xBD], [0x04, 0, 0, 0xFF], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    }

    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        exchanges += 1
        guard exchanges <= leavesAfter else { throw TagError(.tagLost, detail: "gone") }
        switch command.first {
        case 0x30 where command.count == 2:  // READ: 4 pages from the one named, wrapping
            return (0..<4).flatMap { pages[(Int(command[1]) + $0) % pages.count] }
        case 0x3A where command.count == 3 && command[1] <= command[2] && Int(command[2]) < pages.count:  // FAST_READ
            return (Int(command[1])...Int(command[2])).flatMap { pages[$0] }
        case 0xA2 where command.count == 6 && Int(command[1]) < pages.count:  // WRITE one page
            pages[Int(command[1])] = Array(command[2..<6])
            return []
        default:
            throw TagError(.refused, detail: "NAK")
        }
    }
}

@Suite("A fake transport through the public seam (TagFixTags alone)")
struct FakeTransportTests {
    @Test("reads the URL, writes another and reads it back, over a transport written here")
    func readWriteReadBack() throws {
        let first = NDEFMessage(records: [NDEFRecord.uri("https://example.org/t/A1")]).encoded()
        var tag = InMemoryType2Tag(message: first)
        var reselected = 0
        let read = try Type2NDEFReader.read(&tag) { () throws(TagError) -> Void in reselected += 1 }
        #expect(try NDEFMessage(bytes: try #require(read.message)).firstURL == "https://example.org/t/A1")
        #expect(read.askedSignature && read.signature == nil, "READ_SIG was refused: no signature")
        #expect(reselected == 1, "a refused READ_SIG leaves the tag idle: it is selected again")

        let second = NDEFMessage(records: [NDEFRecord.uri("https://example.org/t/B22?lat=53.5&lon=9.9&r=20")]).encoded()
        let written = try Type2NDEFWriter.write(second, &tag) { () throws(TagError) -> Void in }
        #expect(written.readBack == second)
        #expect(written.pagesWritten > 0)
        let again = try Type2NDEFReader.read(&tag, readSignature: false) { () throws(TagError) -> Void in }
        #expect(try NDEFMessage(bytes: try #require(again.message)).firstURL == "https://example.org/t/B22?lat=53.5&lon=9.9&r=20")
        #expect(tag.pages[4][0] == 0x03 && Int(tag.pages[4][1]) == second.count, "the NDEF TLV holds the new length")
    }

    @Test("a tag that leaves mid-read is an incomplete read that names the transport's error and what to do")
    func leaves() throws {
        var tag = InMemoryType2Tag(
            message: NDEFMessage(records: [NDEFRecord.uri("https://example.org/" + String(repeating: "x", count: 60))]).encoded())
        tag.leavesAfter = 1
        #expect {
            _ = try Type2NDEFReader.read(&tag, readSignature: false) { () throws(TagError) -> Void in }
        } throws: { error in
            guard case .incompleteRead(let after, let cause) = error as? NDEFReadError else { return false }
            return after == 1 && cause.kind == .tagLost && "\(error)".contains("(gone); hold the tag still")
        }
    }

    @Test("a write the tag leaves before is nothing written, and says so")
    func leavesBeforeWrite() throws {
        var tag = InMemoryType2Tag(message: NDEFMessage(records: [NDEFRecord.uri("https://example.org/a")]).encoded())
        tag.leavesAfter = 0
        let before = tag.pages
        #expect {
            _ = try Type2NDEFWriter.write([0xD1, 0x01, 0x01, 0x55, 0x00], &tag) { () throws(TagError) -> Void in throw TagError(.tagLost) }
        } throws: { error in
            guard case .nothingWritten(let cause) = error as? NDEFWriteError else { return false }
            return cause.kind == .tagLost && "\(error)".contains("before anything was written")
        }
        #expect(tag.pages == before)
    }
}
