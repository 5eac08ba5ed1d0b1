public import TagFixCore

/// The dump formats TagFix reads, detected by content.
public enum DumpFormat: String, Sendable, Hashable, CaseIterable {
    case flipper = "Flipper NFC device"
    case proxmark = "Proxmark3 JSON"
    case mfultralightBinary = "nfc-mfultralight binary dump"
    case mfclassicBinary = "nfc-mfclassic binary dump"
    case tagfixJSON = "TagFix tag JSON"
}

/// Loading tag images from the files field techs and labs already have.
public enum TagDump {
    /// Loads a dump, detecting its format by content (the name is only used in messages).
    /// - Throws: `DataFileError` naming the line (text formats) of the first problem.
    public static func load(_ bytes: [UInt8]) throws(DataFileError) -> TagImage {
        let text = String(validating: bytes, as: UTF8.self)
        if let text {
            let trimmed = text.drop { $0 == "\u{FEFF}" || $0.isWhitespace }
            if trimmed.hasPrefix("Filetype:") { return try flipper(text) }
            if trimmed.hasPrefix("{") {
                let root: JSONValue
                do {
                    root = try JSONValue.parse(text)
                } catch {
                    throw DataFileError(error)
                }
                if root["Created"]?.string?.lowercased().hasPrefix("proxmark") == true || root["blocks"]?.members != nil {
                    return try proxmark(root)
                }
                if root["memory_hex"] != nil || root["cc_file_hex"] != nil || root["blocks_hex"] != nil || root["ntag424"] != nil {
                    return try tagfixJSON(root)
                }
                throw DataFileError(
                    line: root.line,
                    message:
                        "a JSON object that is neither a Proxmark3 dump (\"Created\": \"proxmark3\") nor TagFix tag JSON (\"memory_hex\")")
            }
        }
        if MifareClassicMemory.sectorCount(forBytes: bytes.count) != nil, bytes.count != 2048 || text == nil {
            return try mfclassicBinary(bytes)
        }
        if text == nil || bytes.contains(0), bytes.count % 4 == 0, bytes.count >= 16, bytes.count <= 4 * 1024 {
            return try mfultralightBinary(bytes)
        }
        throw DataFileError(
            line: nil,
            message:
                "unknown dump format: expected a Flipper .nfc file, Proxmark3 JSON, an nfc-mfultralight or nfc-mfclassic binary dump, or TagFix tag JSON"
        )
    }

    // MARK: - Flipper

    /// Flipper Zero `.nfc` files, versions 2–4: NTAG / Ultralight pages and MIFARE Classic blocks.
    static func flipper(_ text: String) throws(DataFileError) -> TagImage {
        let file = try FlipperFile(text)
        let fields = file.fields
        guard fields["Filetype"]?.value == "Flipper NFC device" else {
            throw DataFileError(line: fields["Filetype"]?.line ?? 1, message: "not a Flipper NFC file (Filetype: Flipper NFC device)")
        }
        guard let version = fields["Version"], let number = Int(version.value), (2...4).contains(number) else {
            throw DataFileError(line: fields["Version"]?.line ?? 2, message: "Flipper NFC file version must be 2, 3 or 4")
        }
        guard let device = fields["Device type"] else { throw DataFileError(line: nil, message: "no \"Device type\" line") }
        var uid: TagUID?
        if let field = fields["UID"] {
            do {
                uid = try TagUID(hex: field.value)
            } catch {
                throw DataFileError(line: field.line, message: error.description)
            }
        }
        let chipName =
            fields["NTAG/Ultralight type"]?.value ?? fields["Mifare Classic type"].map { "MIFARE Classic \($0.value)" } ?? device.value
        if device.value.hasPrefix("NTAG") || device.value.hasPrefix("Mifare Ultralight") {
            return try flipperType2(file, uid: uid, chipName: chipName, deviceLine: device.line)
        }
        if device.value.hasPrefix("Mifare Classic") {
            return try flipperClassic(file, uid: uid, chipName: chipName, deviceLine: device.line)
        }
        throw DataFileError(
            line: device.line,
            message: "device type \"\(device.value)\" holds no memory TagFix reads (NTAG / Ultralight pages or MIFARE Classic blocks)")
    }

    /// An NTAG / Ultralight dump: its pages, from 0 without gaps.
    static func flipperType2(_ file: FlipperFile, uid: TagUID?, chipName: String, deviceLine: Int) throws(DataFileError) -> TagImage {
        let pages = file.pages
        guard !pages.isEmpty else { throw DataFileError(line: deviceLine, message: "no \"Page N:\" lines") }
        var memory: [UInt8] = []
        for number in 0..<pages.count {
            guard let (bytes, _) = pages[number] else {
                throw DataFileError(line: nil, message: "page \(number) is missing (pages must run from 0 without gaps)")
            }
            memory += bytes
        }
        var image = TagImage(
            format: .flipper, uid: uid, atqa: try file.hex("ATQA"), sak: try file.hex("SAK"),
            getVersion: try file.hex("Mifare version"), signature: try file.hex("Signature"), declaredChip: chipName,
            memory: .type2(pages: memory))
        image.notes += uidNotes(uid, pages: memory)
        if let total = file.fields["Pages total"].flatMap({ Int($0.value) }), total > pages.count {
            image.notes.append("the dump holds \(pages.count) of the tag's \(total) pages")
        }
        return image
    }

    /// A MIFARE Classic dump: its blocks, `??` bytes unknown (read as 0).
    static func flipperClassic(_ file: FlipperFile, uid: TagUID?, chipName: String, deviceLine: Int) throws(DataFileError) -> TagImage {
        guard !file.blocks.isEmpty else { throw DataFileError(line: deviceLine, message: "no \"Block N:\" lines") }
        let expected = (file.fields["Mifare Classic type"]?.value).map { $0.uppercased() }
        let blockCount = expected == "4K" ? 256 : expected == "MINI" ? 20 : expected == "2K" ? 128 : 64
        var memory: [UInt8] = []
        var unknown = Set<Int>()
        for number in 0..<blockCount {
            let bytes = file.blocks[number]?.0 ?? Array(repeating: nil, count: 16)
            for (offset, byte) in bytes.enumerated() {
                if byte == nil { unknown.insert(number * 16 + offset) }
                memory.append(byte ?? 0)
            }
        }
        return TagImage(
            format: .flipper, uid: uid, atqa: try file.hex("ATQA"), sak: try file.hex("SAK"), declaredChip: chipName,
            memory: .mifareClassic(bytes: memory, unknown: unknown))
    }

    /// A Flipper `.nfc` file's lines: `Key: value` fields, `Page N:` and `Block N:` lines.
    struct FlipperFile {
        var fields: [String: (value: String, line: Int)] = [:]
        var pages: [Int: ([UInt8], Int)] = [:]
        var blocks: [Int: ([UInt8?], Int)] = [:]

        init(_ text: String) throws(DataFileError) {
            for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
                let line = index + 1
                let content = TagDump.trimmed(rawLine)
                guard !content.isEmpty, !content.hasPrefix("#") else { continue }
                guard let colon = content.firstIndex(of: ":") else {
                    throw DataFileError(line: line, message: "expected \"Key: value\", found \"\(content.prefix(40))\"")
                }
                let key = String(content[..<colon])
                let value = String(TagDump.trimmed(content[content.index(after: colon)...]))
                if key.hasPrefix("Page "), let number = Int(key.dropFirst(5)) {
                    guard let bytes = Hex.decode(value), bytes.count == 4 else {
                        throw DataFileError(line: line, message: "page \(number) must be 4 hex bytes, found \"\(value)\"")
                    }
                    guard pages[number] == nil else { throw DataFileError(line: line, message: "page \(number) appears twice") }
                    pages[number] = (bytes, line)
                } else if key.hasPrefix("Block "), let number = Int(key.dropFirst(6)) {
                    blocks[number] = (try Self.block(value, number: number, line: line), line)
                } else {
                    fields[key] = (value, line)
                }
            }
        }

        /// A block's 16 bytes, each hex or `??` (unknown).
        static func block(_ value: String, number: Int, line: Int) throws(DataFileError) -> [UInt8?] {
            var bytes: [UInt8?] = []
            for part in value.split(separator: " ") {
                if part == "??" {
                    bytes.append(nil)
                } else if let byte = Hex.decode(part), byte.count == 1 {
                    bytes.append(byte[0])
                } else {
                    throw DataFileError(line: line, message: "block \(number): \"\(part)\" is not a hex byte or ??")
                }
            }
            guard bytes.count == 16 else {
                throw DataFileError(line: line, message: "block \(number) must be 16 bytes, found \(bytes.count)")
            }
            return bytes
        }

        func hex(_ key: String) throws(DataFileError) -> [UInt8]? {
            guard let field = fields[key] else { return nil }
            guard let bytes = Hex.decode(field.value) else {
                throw DataFileError(line: field.line, message: "\(key) \"\(field.value)\" is not hex bytes")
            }
            return bytes
        }
    }

    /// The line without its leading and trailing spaces and tabs (by Character, so a space that
    /// carries a combining mark stays), as a slice of the line rather than a copy.
    static func trimmed(_ text: Substring) -> Substring {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isBlank($0) }), let last = text.lastIndex(where: { !isBlank($0) }) else {
            return text[text.endIndex...]
        }
        return text[first...last]
    }

    /// A header UID that differs from the one in pages 0–1 (files edited by hand).
    static func uidNotes(_ uid: TagUID?, pages memory: [UInt8]) -> [String] {
        guard let uid, uid.bytes.count == 7, memory.count >= 8 else { return [] }
        let fromPages = Array(memory[0..<3]) + Array(memory[4..<8])
        return fromPages == uid.bytes ? [] : ["the header's UID \(uid.hex) differs from the UID in pages 0–1 (\(Hex.encode(fromPages)))"]
    }

    // MARK: - Proxmark3

    /// Proxmark3 `hf mfu dump` (FileType mfu) and `hf mf dump` (FileType mfcard) JSON.
    static func proxmark(_ root: JSONValue) throws(DataFileError) -> TagImage {
        let card = root["Card"]
        func hex(_ value: JSONValue?, _ what: String) throws(DataFileError) -> [UInt8]? {
            guard let value, !value.isNull else { return nil }
            guard let text = value.string, let bytes = Hex.decode(text) else {
                throw DataFileError(line: value.line, message: "\(what) must be a hex string")
            }
            return bytes
        }
        guard let blockMembers = root["blocks"]?.members else {
            throw DataFileError(line: root.line, message: "a Proxmark3 dump needs a \"blocks\" object")
        }
        var blocks: [Int: [UInt8]] = [:]
        var blockSize: Int?
        for member in blockMembers {
            guard let number = Int(member.key), number >= 0, number < 4096 else {
                throw DataFileError(line: member.value.line, message: "block number \"\(member.key)\" is not a number")
            }
            guard let bytes = try hex(member.value, "block \(number)") else { continue }
            if let size = blockSize, size != bytes.count {
                throw DataFileError(line: member.value.line, message: "block \(number) has \(bytes.count) bytes, the others \(size)")
            }
            blockSize = bytes.count
            blocks[number] = bytes
        }
        guard let size = blockSize, size == 4 || size == 16 else {
            throw DataFileError(line: root.line, message: "blocks must be 4 bytes (Ultralight/NTAG) or 16 bytes (MIFARE Classic)")
        }
        var memory: [UInt8] = []
        for number in 0..<blocks.count {
            guard let bytes = blocks[number] else { throw DataFileError(line: root.line, message: "block \(number) is missing") }
            memory += bytes
        }
        var uid: TagUID?
        if let text = card?["UID"]?.string {
            do {
                uid = try TagUID(hex: text)
            } catch {
                throw DataFileError(line: card?["UID"]?.line, message: error.description)
            }
        }
        if size == 4 {
            var image = TagImage(
                format: .proxmark, uid: uid, getVersion: try hex(card?["Version"], "Version"),
                signature: try hex(card?["Signature"], "Signature"), memory: .type2(pages: memory))
            image.notes += uidNotes(uid, pages: memory)
            return image
        }
        guard MifareClassicMemory.sectorCount(forBytes: memory.count) != nil else {
            throw DataFileError(line: root.line, message: "\(blocks.count) blocks of 16 bytes is not a MIFARE Classic size")
        }
        return TagImage(
            format: .proxmark, uid: uid, atqa: try hex(card?["ATQA"], "ATQA"), sak: try hex(card?["SAK"], "SAK"),
            memory: .mifareClassic(bytes: memory, unknown: []))
    }

    // MARK: - libnfc binaries

    /// `nfc-mfultralight r FILE`: the pages, nothing else. The UID comes from pages 0–1.
    static func mfultralightBinary(_ bytes: [UInt8]) throws(DataFileError) -> TagImage {
        let uid = try? TagUID(bytes: Array(bytes[0..<3]) + Array(bytes[4..<8]))
        var image = TagImage(format: .mfultralightBinary, uid: uid, memory: .type2(pages: bytes))
        image.declaredChip =
            switch bytes.count / 4 {
            case 45: "NTAG213 (by size)"
            case 135: "NTAG215 (by size)"
            case 231: "NTAG216 (by size)"
            case 16: "MIFARE Ultralight (by size)"
            case 48: "MIFARE Ultralight C (by size)"
            default: nil
            }
        return image
    }

    /// `nfc-mfclassic r a FILE`: all blocks. The UID comes from block 0 (4-byte NUID when the BCC
    /// checks, else 7 bytes).
    static func mfclassicBinary(_ bytes: [UInt8]) throws(DataFileError) -> TagImage {
        let bcc = bytes[0] ^ bytes[1] ^ bytes[2] ^ bytes[3]
        let uid = try? TagUID(bytes: bcc == bytes[4] ? Array(bytes[0..<4]) : Array(bytes[0..<7]))
        return TagImage(format: .mfclassicBinary, uid: uid, memory: .mifareClassic(bytes: bytes, unknown: []))
    }

    // MARK: - TagFix tag JSON

    /// TagFix's own JSON (docs/tag-json.md): `uid_hex` and `memory_hex` (Type 2 pages, or MIFARE
    /// Classic blocks with `block_size: 16`), or `cc_file_hex` and `ndef_file_hex` (Type 4), or
    /// `blocks_hex` (Type 3). Other members are ignored.
    static func tagfixJSON(_ root: JSONValue) throws(DataFileError) -> TagImage {
        func hex(_ key: String) throws(DataFileError) -> [UInt8]? {
            guard let value = root[key], !value.isNull else { return nil }
            guard let text = value.string, let bytes = Hex.decode(text) else {
                throw DataFileError(line: value.line, message: "\"\(key)\" must be a hex string")
            }
            return bytes
        }
        var uid: TagUID?
        if let text = root["uid_hex"]?.string {
            do {
                uid = try TagUID(hex: text)
            } catch {
                throw DataFileError(line: root["uid_hex"]?.line, message: error.description)
            }
        }
        let chip = root["chip"]?.string
        let memory: TagImage.Memory
        let ntag424 = try root["ntag424"].map { (value: JSONValue) throws(DataFileError) in try NTAG424Declaration(json: value) }
        if let ntag424 {
            let file = try hex("ndef_file_hex") ?? [0x00, 0x00]
            guard file.count <= 256 else {
                throw DataFileError(
                    line: root["ndef_file_hex"]?.line, message: "an NTAG 424 DNA's NDEF file holds 256 bytes, not \(file.count)")
            }
            memory = .type4(
                ccFile: try hex("cc_file_hex") ?? ntag424.ccFile, ndefFile: file + [UInt8](repeating: 0, count: 256 - file.count))
        } else if let ccFile = try hex("cc_file_hex") {
            guard let ndefFile = try hex("ndef_file_hex") else {
                throw DataFileError(line: root.line, message: "a Type 4 tag needs \"ndef_file_hex\" with \"cc_file_hex\"")
            }
            memory = .type4(ccFile: ccFile, ndefFile: ndefFile)
        } else if let blocks = try hex("blocks_hex") {
            memory = .type3(blocks: blocks)
        } else if let bytes = try hex("memory_hex") {
            if root["block_size"]?.double == 16 || (chip ?? "").lowercased().contains("classic") {
                guard MifareClassicMemory.sectorCount(forBytes: bytes.count) != nil else {
                    throw DataFileError(line: root["memory_hex"]?.line, message: "\(bytes.count) bytes is not a MIFARE Classic size")
                }
                memory = .mifareClassic(bytes: bytes, unknown: [])
            } else {
                guard bytes.count % 4 == 0, bytes.count >= 16 else {
                    throw DataFileError(
                        line: root["memory_hex"]?.line, message: "Type 2 memory must be whole 4-byte pages from page 0 (at least 4)")
                }
                memory = .type2(pages: bytes)
            }
        } else {
            throw DataFileError(
                line: root.line, message: "no memory: give \"memory_hex\", \"cc_file_hex\" + \"ndef_file_hex\", or \"blocks_hex\"")
        }
        var image = TagImage(
            format: .tagfixJSON, uid: uid, atqa: try hex("atqa_hex"), sak: try hex("sak_hex"), getVersion: try hex("get_version_hex"),
            signature: try hex("signature_hex"), declaredChip: chip, memory: memory)
        if case .type2(let pages) = memory { image.notes += uidNotes(uid, pages: pages) }
        image.ntag424 = ntag424
        return image
    }
}
