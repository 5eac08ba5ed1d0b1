public import TagFixCore

/// A tag as a dump file describes it: identity and memory.
public struct TagImage: Sendable, Hashable {
    public enum Memory: Sendable, Hashable {
        /// Type 2: bytes from page 0, 4 per page.
        case type2(pages: [UInt8])
        /// MIFARE Classic: all blocks, 16 bytes each; `unknown` are addresses the dump could not read.
        case mifareClassic(bytes: [UInt8], unknown: Set<Int>)
        /// Type 4: the CC file and the NDEF file.
        case type4(ccFile: [UInt8], ndefFile: [UInt8])
        /// Type 3: the attribute block and the NDEF blocks.
        case type3(blocks: [UInt8])
    }

    public var format: DumpFormat
    public var uid: TagUID?
    public var atqa: [UInt8]?
    public var sak: [UInt8]?
    public var getVersion: [UInt8]?
    public var signature: [UInt8]?
    /// The chip the file names (e.g. "NTAG216"), if it names one.
    public var declaredChip: String?
    public var memory: Memory
    /// Things a person should know about the file (an edited UID…).
    public var notes: [String] = []
    /// An NTAG 424 DNA's keys and NDEF file settings, when the file declares one (memory `.type4`).
    public var ntag424: NTAG424Declaration?

    public init(
        format: DumpFormat, uid: TagUID?, atqa: [UInt8]? = nil, sak: [UInt8]? = nil, getVersion: [UInt8]? = nil,
        signature: [UInt8]? = nil, declaredChip: String? = nil, memory: Memory
    ) {
        self.format = format
        self.uid = uid
        self.atqa = atqa
        self.sak = sak
        self.getVersion = getVersion
        self.signature = signature
        self.declaredChip = declaredChip
        self.memory = memory
    }

    /// The chip, from GET_VERSION where there is one, else from what the file says and its size.
    public var chip: Type2Identification.Chip {
        switch memory {
        case .type2(let pages):
            if getVersion != nil { return Type2Identification.identify(getVersion: getVersion) }
            let declared = (declaredChip ?? "").uppercased()
            for (name, type) in [
                ("NTAG213", TagType.ntag213), ("NTAG215", .ntag215), ("NTAG216", .ntag216), ("ULTRALIGHT C", .mifareUltralightC),
            ]
            where declared.contains(name) {
                return .init(type: type, totalPages: pages.count / 4, name: declaredChip ?? name)
            }
            if declared.contains("ULTRALIGHT") {
                return .init(type: .mifareUltralight, totalPages: pages.count / 4, name: declaredChip ?? "MIFARE Ultralight")
            }
            return .init(type: .type2, totalPages: pages.count / 4, name: declaredChip ?? "Type 2 tag")
        case .mifareClassic(let bytes, _):
            let is4K = bytes.count == 4096
            return .init(
                type: is4K ? .mifareClassic4K : .mifareClassic1K, totalPages: nil, name: is4K ? "MIFARE Classic 4K" : "MIFARE Classic 1K")
        case .type4:
            return .init(type: .type4, totalPages: nil, name: declaredChip ?? "Type 4 tag")
        case .type3:
            return .init(type: .felica, totalPages: nil, name: declaredChip ?? "FeliCa Lite-S (Type 3)")
        }
    }
}

/// The NDEF content of a tag image, and the structure around it.
public struct NDEFReadout: Sendable {
    /// Why there is no NDEF message (not formatted, a broken structure); `nil` when it was read.
    public var problem: TagMemoryError?
    public var type2: Type2Contents?
    public var type4: Type4CapabilityContainer?
    public var type3: Type3AttributeBlock?
    public var mifare: MifareClassicMemory.Contents?
    /// The TLVs walked (Type 2 and MIFARE Classic).
    public var tlvs: [TagTLV] = []
    /// The NDEF message's bytes; `[]` for an empty NDEF TLV, `nil` when there is no message.
    public var messageBytes: [UInt8]?
    /// The parsed message, or why its bytes are not one.
    public var message: Result<NDEFMessage, NDEFError>?

    /// Whether the tag is NDEF-formatted (a valid CC / MAD / attribute block).
    public var formatted: Bool {
        if case .notFormatted = problem { return false }
        return type2 != nil || type4 != nil || type3 != nil || mifare != nil
    }
}

extension TagImage {
    /// Reads the image's NDEF message as a reader would: CC, TLVs / files, message.
    public func readNDEF() -> NDEFReadout {
        var readout = NDEFReadout()
        do {
            switch memory {
            case .type2(let pages):
                let contents = try Type2Memory.read(pages)
                readout.type2 = contents
                readout.tlvs = contents.tlvs
                readout.messageBytes = contents.ndefMessage
            case .mifareClassic(let bytes, let unknown):
                let contents = try MifareClassicMemory.read(bytes, unknownBytes: unknown)
                readout.mifare = contents
                readout.tlvs = contents.tlvs
                readout.messageBytes = contents.ndefMessage
            case .type4(let ccFile, let ndefFile):
                let cc = try Type4CapabilityContainer(ccFile)
                readout.type4 = cc
                readout.messageBytes = try Type4Memory.ndefMessage(file: ndefFile, cc: cc)
            case .type3(let blocks):
                let (attributes, message) = try Type3Memory.read(blocks: blocks)
                readout.type3 = attributes
                readout.messageBytes = message
            }
        } catch {
            readout.problem = error
        }
        if let bytes = readout.messageBytes {
            do {
                readout.message = .success(try NDEFMessage(bytes: bytes))
            } catch {
                readout.message = .failure(error)
            }
        }
        return readout
    }
}
