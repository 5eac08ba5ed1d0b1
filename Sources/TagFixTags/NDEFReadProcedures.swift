public import TagFixCore
import TagFixCrypto
public import TagFixNDEF

/// Something that carries one command to a tag and brings back its answer (a libnfc device in the
/// field, a PC/SC card, an emulated tag in tests): the one thing a reader backend supplies to the
/// read and write procedures here.
public protocol TagTransport {
    /// One exchange with easy framing (the reader adds and checks CRCs and framing).
    /// - Throws: `TagError` (`tagLost` / `timeout` when the tag is gone, `refused` when it NAKs),
    ///   mapped from the backend's own errors.
    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8]
    /// The most pages one FAST_READ may ask for through this transport; the Type 2 read plans
    /// its FAST_READs in pieces of this many. Default: `Type2NDEFReader.fastReadPages` (the
    /// PN53x's frame).
    var fastReadPages: Int { get }
}

extension TagTransport {
    public var fastReadPages: Int { Type2NDEFReader.fastReadPages }
}

/// What reading a tag's NDEF gave.
public struct NDEFRead: Sendable, Hashable {
    public var tagType: TagType
    public var chipName: String
    /// The NDEF message's bytes; `nil` when the tag holds none (not formatted, no NDEF TLV).
    public var message: [UInt8]?
    /// Why there is no message, when there is none.
    public var problem: String?
    /// Application bytes sent and received (commands and answers, no framing).
    public var bytesMoved: Int
    public var commands: Int
    /// Whether `problem` is a failure to read NDEF data the tag has (a broken or unsupported
    /// capability container, a refused read) rather than a tag without NDEF (not formatted, no
    /// message): a verifier must not take such a tag for an unregistered one.
    public var failed = false
    /// The chip's NXP originality signature (`READ_SIG`), when it was asked and answered 32 bytes.
    public var signature: [UInt8]?
    /// Whether `READ_SIG` was sent (only to chips that answered FAST_READ: every NXP Type 2 chip
    /// with FAST_READ also has READ_SIG).
    public var askedSignature = false
}

extension NDEFRead {
    /// What the chip's originality signature says (`unsupported` for chips that were not asked:
    /// no FAST_READ, Type 4, MIFARE Classic).
    public func originality(uid: TagUID) -> Originality {
        NXPOriginality.check(uid: uid, signature: signature, type: tagType)
    }
}

/// Why a read did not finish. A read that does not finish never yields a message.
public enum NDEFReadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The tag stopped answering partway: nothing of what was read is used.
    case incompleteRead(after: Int, TagError)
    case malformed(String)

    public var description: String {
        switch self {
        case .incompleteRead(let commands, let error):
            "incomplete read: the tag stopped answering after \(commands) command\(commands == 1 ? "" : "s") (\(error.detail)); hold the tag still until the read completes"
        case .malformed(let detail): "the tag's NDEF structure is broken: \(detail)"
        }
    }
}

/// Counts bytes and commands over a transport.
struct CountingTransport<T: TagTransport> {
    var base: T
    var bytes = 0
    var commands = 0

    mutating func send(_ command: [UInt8]) throws(NDEFReadError) -> [UInt8] {
        commands += 1
        bytes += command.count
        do {
            let answer = try base.transceive(command)
            bytes += answer.count
            return answer
        } catch {
            throw .incompleteRead(after: commands - 1, error)
        }
    }

    /// A command a tag may legitimately refuse (GET_VERSION on a MIFARE Ultralight).
    mutating func probe(_ command: [UInt8]) -> [UInt8]? {
        commands += 1
        bytes += command.count
        guard let answer = try? base.transceive(command) else { return nil }
        bytes += answer.count
        return answer
    }
}

/// The NFC Forum Type 2 read procedure, moving as few bytes as the tag allows: one FAST_READ of
/// the CC and the first data bytes (pages 3 to 10), then only the pages the read planner asks for.
/// No GET_VERSION: the CC's data-area size names the NTAG, which saves an exchange on every tap
/// (a short URL then costs two exchanges, the selection and one read). A tag without FAST_READ
/// (MIFARE Ultralight, Ultralight C) NAKs it, goes idle, is selected again and read with READ.
/// Never a full dump.
public enum Type2NDEFReader {
    /// The most pages one FAST_READ asks for: 60 pages = 240 bytes, inside the PN53x's frame.
    public static let fastReadPages = 60
    /// Pages the first FAST_READ takes: the CC (page 3) and 28 data bytes, enough for a short URL.
    public static let firstReadPages = 8

    /// Reads the NDEF message.
    /// - Parameter reselect: called when FAST_READ was refused (a tag that NAKs goes idle and
    ///   must be selected again before it answers anything else).
    /// - Parameter readSignature: whether to end with `READ_SIG` (`3C 00`, 32 bytes back) on a chip
    ///   that answered FAST_READ, for the originality check (`NXPOriginality`).
    public static func read<T: TagTransport>(
        _ transport: inout T, readSignature: Bool = true, reselect: () throws(TagError) -> Void
    ) throws(NDEFReadError) -> NDEFRead {
        var link = CountingTransport(base: transport)
        defer { transport = link.base }
        var result = try readNDEF(&link, reselect: reselect)
        // Chips without FAST_READ (MIFARE Ultralight, Ultralight C, NTAG203) have no signature
        // either: asking would make them NAK and go idle.
        if readSignature, result.fastRead {
            result.read.askedSignature = true
            if let answer = link.probe([0x3C, 0x00]), answer.count == 32 {
                result.read.signature = answer
            } else {
                // A NAK leaves the tag idle: select it again so presence checks still find it.
                try? reselect()
            }
            result.read.bytesMoved = link.bytes
            result.read.commands = link.commands
        }
        return result.read
    }

    private static func readNDEF<T: TagTransport>(
        _ link: inout CountingTransport<T>, reselect: () throws(TagError) -> Void
    ) throws(NDEFReadError) -> (read: NDEFRead, fastRead: Bool) {
        var known = [UInt8](repeating: 0, count: 12)
        var fast = true
        if let first = link.probe([0x3A, 0x03, UInt8(3 + firstReadPages - 1)]), first.count == firstReadPages * 4 {
            known += first
        } else {
            fast = false
            do {
                try reselect()
            } catch {
                throw .incompleteRead(after: link.commands, error)
            }
            // READ 3 returns pages 3–6: the CC and 12 data bytes.
            let first = try link.send([0x30, 0x03])
            guard first.count == 16 else { throw .malformed("READ answered \(first.count) bytes, not 16") }
            known += first
        }
        let chip = Type2Identification.identify(capabilityContainer: Array(known[12..<16]), fastRead: fast)
        while true {
            switch Type2Memory.plan(known: known) {
            case .complete(let contents):
                let read = NDEFRead(
                    tagType: chip.type, chipName: chip.name, message: contents.ndefMessage, problem: nil,
                    bytesMoved: link.bytes, commands: link.commands)
                return (read, fast)
            case .noNDEF(let error):
                var notFormatted = error == nil
                if case .notFormatted = error { notFormatted = true }
                let read = NDEFRead(
                    tagType: chip.type, chipName: chip.name, message: nil, problem: error?.description ?? "no NDEF message TLV",
                    bytesMoved: link.bytes, commands: link.commands, failed: !notFormatted)
                return (read, fast)
            case .read(let pages):
                known += try readPages(&link, pages, fast: fast)
            }
        }
    }
}

extension Type2NDEFReader {
    /// Pages `pages` in order: FAST_READ in chunks of the transport's `fastReadPages`, or READ (4 pages a command,
    /// keeping only those asked for so page numbers stay aligned) on tags without FAST_READ.
    static func readPages<T: TagTransport>(
        _ link: inout CountingTransport<T>, _ pages: ClosedRange<Int>, fast: Bool
    ) throws(NDEFReadError) -> [UInt8] {
        var data: [UInt8] = []
        var page = pages.lowerBound
        while page <= pages.upperBound {
            if fast {
                let last = min(pages.upperBound, page + max(1, link.base.fastReadPages) - 1)
                let answer = try link.send([0x3A, UInt8(page), UInt8(last)])
                guard answer.count == (last - page + 1) * 4 else { throw .malformed("FAST_READ answered \(answer.count) bytes") }
                data += answer
                page = last + 1
            } else {
                let answer = try link.send([0x30, UInt8(page)])
                guard answer.count == 16 else { throw .malformed("READ answered \(answer.count) bytes, not 16") }
                let take = min(4, pages.upperBound - page + 1)
                data += answer.prefix(take * 4)
                page += take
            }
        }
        return data
    }
}

/// The NFC Forum Type 4 read procedure: SELECT the NDEF application (D2760000850101, falling
/// back to …0100), the CC file E103, then the NDEF file, READ BINARY in MLe-sized chunks.
public enum Type4NDEFReader {
    ///
    /// - Parameter known: the capability container the chip is known to have
    ///   (`Type4CapabilityContainer.layout(answerToSelect:)`): the CC file is then neither
    ///   selected nor read, which saves three of a SUN tap's seven exchanges (the CC is 23 bytes: two reads). When the NDEF file
    ///   cannot be selected or read as that CC says, the whole procedure runs as for any tag.
    /// - Parameter expectedLength: with `known`, the message length the reader expects (the last
    ///   one it read: a site's tags share a URL template): NLEN and that many bytes are asked for
    ///   in one READ BINARY, and only what NLEN says is kept (the rest is read when NLEN says more).
    public static func read<T: TagTransport>(
        _ transport: inout T, known: Type4CapabilityContainer? = nil, expectedLength: Int? = nil
    ) throws(NDEFReadError) -> NDEFRead {
        var link = CountingTransport(base: transport)
        defer { transport = link.base }
        func apdu(_ bytes: [UInt8]) throws(NDEFReadError) -> (data: [UInt8], ok: Bool) {
            let answer = try link.send(bytes)
            guard answer.count >= 2 else { throw .malformed("an APDU answer shorter than its status word") }
            return (Array(answer.dropLast(2)), answer[answer.count - 2] == 0x90 && answer[answer.count - 1] == 0x00)
        }
        func none(_ why: String, failed: Bool = true) -> NDEFRead {
            NDEFRead(
                tagType: .type4, chipName: "Type 4 tag", message: nil, problem: why, bytesMoved: link.bytes, commands: link.commands,
                failed: failed)
        }
        var selected = try apdu([0x00, 0xA4, 0x04, 0x00, 0x07] + Type4CapabilityContainer.ndefApplication + [0x00]).ok
        if !selected { selected = try apdu([0x00, 0xA4, 0x04, 0x00, 0x07] + Type4CapabilityContainer.legacyNDEFApplication + [0x00]).ok }
        guard selected else { return none("no NDEF application", failed: false) }
        /// The NDEF file as `cc` describes it: NLEN, then the message in MLe-sized chunks; `nil`
        /// when the file cannot be selected or NLEN read (only for a CC taken on trust).
        func readFile(_ cc: Type4CapabilityContainer, trusted: Bool) throws(NDEFReadError) -> NDEFRead? {
            let id = [UInt8(cc.ndefFileID >> 8), UInt8(cc.ndefFileID & 0xFF)]
            guard try apdu([0x00, 0xA4, 0x00, 0x0C, 0x02] + id).ok else {
                return trusted ? nil : none("the NDEF file cannot be selected")
            }
            let chunk = max(1, min(cc.maxResponseLength, 0xFF))
            let expected = trusted ? min(max(expectedLength ?? 0, 0), cc.capacity, chunk - cc.lengthFieldSize) : 0
            let head = try apdu([0x00, 0xB0, 0x00, 0x00, UInt8(cc.lengthFieldSize + expected)])
            guard head.ok, head.data.count >= cc.lengthFieldSize else {
                if trusted { return nil }
                throw .malformed("NLEN cannot be read")
            }
            let length = head.data.prefix(cc.lengthFieldSize).reduce(0) { $0 << 8 | Int($1) }
            guard length <= cc.capacity else { throw .malformed("NLEN \(length) exceeds the file's capacity \(cc.capacity)") }
            var message = Array(head.data.dropFirst(cc.lengthFieldSize).prefix(length))
            var offset = cc.lengthFieldSize + message.count
            while message.count < length {
                let count = min(chunk, length - message.count)
                let part = try apdu([0x00, 0xB0, UInt8(offset >> 8), UInt8(offset & 0xFF), UInt8(count)])
                guard part.ok, !part.data.isEmpty else { throw .malformed("READ BINARY at \(offset) failed") }
                message += part.data.prefix(count)
                offset += part.data.count
            }
            return NDEFRead(
                tagType: .type4, chipName: "Type 4 tag", message: message, problem: nil, bytesMoved: link.bytes, commands: link.commands)
        }
        if let known, let read = try readFile(known, trusted: true) { return read }
        guard try apdu([0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x03]).ok else { return none("no capability container file") }
        // The CC's first 15 bytes (mapping 1.0 and 2.0 CCs have no more), then, when CCLEN says
        // there is more (mapping 3.0's extended NDEF File Control TLV: CCLEN 17), the rest, so the
        // parser sees the whole file as it does in a dump.
        var ccRead = try apdu([0x00, 0xB0, 0x00, 0x00, 0x0F])
        guard ccRead.ok else { return none("the capability container cannot be read") }
        if ccRead.data.count >= 2 {
            let ccLength = Int(ccRead.data[0]) << 8 | Int(ccRead.data[1])
            if ccLength > ccRead.data.count, ccLength <= 0xFF {
                let offset = ccRead.data.count
                let rest = try apdu([0x00, 0xB0, 0x00, UInt8(offset), UInt8(ccLength - offset)])
                guard rest.ok else { return none("the capability container cannot be read past byte \(offset)") }
                ccRead.data += rest.data
            }
        }
        let cc: Type4CapabilityContainer
        do {
            cc = try Type4CapabilityContainer(ccRead.data)
        } catch {
            return none(error.description)
        }
        guard cc.readable else { return none("the NDEF file is not readable (read access \(Hex.encode([cc.readAccess])))") }
        return try readFile(cc, trusted: false) ?? none("the NDEF file cannot be read")
    }
}

/// The NFC Forum read procedure for MIFARE Classic (NXP AN1304): authenticate sector 0 with the
/// public MAD key, read the MAD (and MAD2 on 4K cards), then authenticate each NDEF sector with
/// the public NFC Forum key and read its data blocks until the NDEF TLV is complete.
public enum MifareClassicNDEFReader {
    public static let madKey: [UInt8] = [0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5]
    public static let ndefKey: [UInt8] = [0xD3, 0xF7, 0xD3, 0xF7, 0xD3, 0xF7]

    /// - Parameters:
    ///   - uid: the card's UID; AUTH carries its last 4 bytes.
    ///   - sectors: 16 (1K) or 40 (4K), from the SAK.
    ///   - reselect: called after a refused authentication (the card halts).
    public static func read<T: TagTransport>(
        _ transport: inout T, uid: [UInt8], sectors: Int, reselect: () throws(TagError) -> Void
    ) throws(NDEFReadError) -> NDEFRead {
        var link = CountingTransport(base: transport)
        defer { transport = link.base }
        let type: TagType = sectors > 16 ? .mifareClassic4K : .mifareClassic1K
        let name = sectors > 16 ? "MIFARE Classic 4K" : "MIFARE Classic 1K"
        func none(_ why: String, failed: Bool = true) -> NDEFRead {
            NDEFRead(
                tagType: type, chipName: name, message: nil, problem: why, bytesMoved: link.bytes, commands: link.commands, failed: failed)
        }
        /// AUTH with key A; false when the card refuses the key.
        func authenticate(block: Int, key: [UInt8]) throws(NDEFReadError) -> Bool {
            let command = [0x60, UInt8(block)] + key + Array(uid.suffix(4))
            link.commands += 1
            link.bytes += command.count
            do {
                _ = try link.base.transceive(command)
                return true
            } catch {
                guard error.kind == .authenticationFailed else { throw .incompleteRead(after: link.commands - 1, error) }
                do {
                    try reselect()
                } catch {
                    throw .incompleteRead(after: link.commands, error)
                }
                return false
            }
        }
        func block(_ number: Int) throws(NDEFReadError) -> [UInt8] {
            let data = try link.send([0x30, UInt8(number)])
            guard data.count == 16 else { throw .malformed("READ of block \(number) answered \(data.count) bytes") }
            return data
        }

        guard try authenticate(block: 3, key: madKey) else {
            return none("sector 0 refuses the public MAD key: not NFC Forum formatted", failed: false)
        }
        let mad1 = try block(1) + block(2)
        let gpb = try block(3)[9]
        var mad2: [UInt8]?
        if sectors > 16, gpb & 0x03 == 2 {
            guard try authenticate(block: 64, key: madKey) else { return none("sector 16 refuses the public MAD key") }
            mad2 = try block(64) + block(65) + block(66)
        }
        let directory: MifareClassicMemory.Directory
        do {
            directory = try MifareClassicMemory.directory(mad1: mad1, generalPurposeByte: gpb, mad2: mad2, sectors: sectors)
        } catch {
            return none(error.description)
        }
        let ndefSectors = directory.ndefSectors
        guard !ndefSectors.isEmpty else { return none("the MAD names no NDEF sector (application 03E1)", failed: false) }
        let total = ndefSectors.reduce(0) { $0 + (MifareClassicMemory.blockCount(ofSector: $1) - 1) * 16 }
        var area: [UInt8] = []
        for sector in ndefSectors {
            let first = MifareClassicMemory.firstBlock(ofSector: sector)
            guard try authenticate(block: first, key: ndefKey) else { return none("sector \(sector) refuses the public NFC Forum key") }
            for number in first..<first + MifareClassicMemory.blockCount(ofSector: sector) - 1 {
                area += try block(number)
                switch MifareClassicMemory.ndef(partialArea: area, totalSize: total) {
                case .complete(let message):
                    return NDEFRead(
                        tagType: type, chipName: name, message: message, problem: message == nil ? "no NDEF message TLV" : nil,
                        bytesMoved: link.bytes, commands: link.commands)
                case .failed(let error): return none(error.description)
                case .needMore: continue
                }
            }
        }
        return none("the NDEF area ends without an NDEF message")
    }
}

/// The NFC Forum Type 3 read procedure (FeliCa): Read Without Encryption of the attribute block
/// (block 0 of service 000B), then of the blocks holding Ln bytes, Nbr blocks at a time.
public enum Type3NDEFReader {
    public static func read<T: TagTransport>(_ transport: inout T, idm: [UInt8]) throws(NDEFReadError) -> NDEFRead {
        var link = CountingTransport(base: transport)
        defer { transport = link.base }
        func none(_ why: String) -> NDEFRead {
            NDEFRead(
                tagType: .felica, chipName: "FeliCa (Type 3)", message: nil, problem: why, bytesMoved: link.bytes, commands: link.commands,
                failed: true)
        }
        /// Read Without Encryption: LEN 06 IDm, one service (000B, little-endian), the block list.
        func read(_ numbers: [Int]) throws(NDEFReadError) -> [UInt8] {
            var frame: [UInt8] = [0x06] + idm + [0x01, 0x0B, 0x00, UInt8(numbers.count)]
            for number in numbers { frame += [0x80, UInt8(number)] }
            let answer = try link.send([UInt8(frame.count + 1)] + frame)
            guard answer.count >= 13, answer[1] == 0x07, Array(answer[2..<10]) == idm else {
                throw .malformed("a Read Without Encryption answer that does not match")
            }
            guard answer[10] == 0x00, answer[11] == 0x00 else {
                throw .malformed("the tag refused the read (status \(Hex.encode([answer[10], answer[11]])))")
            }
            let data = Array(answer[13...])
            guard data.count == numbers.count * 16 else { throw .malformed("\(data.count) bytes for \(numbers.count) blocks") }
            return data
        }
        let attributes: Type3AttributeBlock
        do {
            attributes = try Type3AttributeBlock(try read([0]))
        } catch let error as TagMemoryError {
            return none(error.description)
        } catch {
            throw error as? NDEFReadError ?? .malformed("\(error)")
        }
        guard !attributes.writeInProgress else { return none("a write was interrupted (WriteF = 0F): the data is not valid") }
        let needed = (attributes.length + 15) / 16
        let perRead = max(1, min(attributes.blocksPerRead, 12))
        var data: [UInt8] = []
        var next = 1
        while next <= needed {
            let numbers = Array(next..<min(needed + 1, next + perRead))
            data += try read(numbers)
            next += numbers.count
        }
        return NDEFRead(
            tagType: .felica, chipName: "FeliCa (Type 3)", message: Array(data.prefix(attributes.length)), problem: nil,
            bytesMoved: link.bytes, commands: link.commands)
    }
}
