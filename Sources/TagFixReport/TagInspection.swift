public import TagFixCore
public import TagFixNDEF

/// What a tag dump holds, as `tagfix inspect` shows it: the dump read as a tag would be, and
/// whether its NDEF structure is broken.
public struct TagInspection: Sendable {
    public let path: String
    public let image: TagImage
    public let readout: NDEFReadout
    /// What the dump's originality signature says about the chip (checked by the caller, as a
    /// live read is: `NXPOriginality`); `nil` for a dump without a UID.
    public let originality: Originality?
    /// Why the NDEF structure is broken (a TLV past the data area, a malformed message), if it is;
    /// a tag that is merely not NDEF formatted is not broken.
    public let broken: String?

    public init(path: String, image: TagImage, originality: Originality?) {
        self.path = path
        self.image = image
        self.originality = originality
        let readout = image.readNDEF()
        self.readout = readout
        broken = {
            if let problem = readout.problem, readout.formatted || !Self.isNotFormatted(problem) { return problem.description }
            if case .failure(let error) = readout.message { return "malformed NDEF message: \(error)" }
            return nil
        }()
    }

    /// One JSON object.
    public var json: String { InspectJSON.object(path: path, image: image, originality: originality, readout: readout, error: broken) }

    /// The text report, one line each.
    public var lines: [String] { InspectText.lines(path: path, image: image, originality: originality, readout: readout) }

    static func isNotFormatted(_ error: TagMemoryError) -> Bool {
        if case .notFormatted = error { return true }
        return false
    }
}

/// NDEF records as JSON, shared by `inspect` and `scan`.
public enum RecordJSON {
    public static func records(_ message: NDEFMessage?) -> String {
        "[" + (message?.records ?? []).map(record).joined(separator: ",") + "]"
    }

    static func record(_ record: NDEFRecord) -> String {
        var object = JSONObjectWriter()
        object.add("tnf", Int(record.tnf.rawValue))
        object.add("tnf_name", record.tnf.name)
        object.add("type", record.typeName)
        object.add("type_hex", Hex.encode(record.type))
        object.add("id", Hex.encode(record.id))
        object.add("payload", Hex.encode(record.payload))
        do {
            switch try record.decoded() {
            case .uri(let uri): object.add("uri", uri.uri)
            case .text(let text):
                object.add("text", text.text)
                object.add("language", text.language)
                object.add("encoding", text.encoding.rawValue)
            case .smartPoster(let poster):
                object.add("uri", poster.uri.uri)
                object.add("title", poster.title)
                object.add("action", poster.action?.name)
            case .mime(let type, _): object.add("mime_type", type)
            case .absoluteURI(let uri, _): object.add("absolute_uri", uri)
            case .androidApplication(let package): object.add("android_package", package)
            case .external(let type, _): object.add("external_type", type)
            case .empty, .other: break
            }
        } catch {
            object.add("decode_error", error.description)
        }
        return object.text
    }
}

/// The originality check's result as `{"status":…,"key":…}`, shared by `inspect` and `scan`.
/// Never the signature itself.
public enum OriginalityJSON {
    public static func object(_ originality: Originality?) -> String? {
        guard let originality else { return nil }
        var object = JSONObjectWriter()
        object.add("status", originality.status.rawValue)
        object.add("key", originality.key)
        return object.text
    }

    public static func text(_ originality: Originality) -> String {
        switch originality.status {
        case .genuine: "genuine (the \(originality.key ?? "NXP") signature over the UID verifies)"
        case .invalid: "invalid signature (does not verify with \(originality.key ?? "any NXP key TagFix knows")): not an original NXP chip"
        case .absent: "no signature (the chip gave none, or 32 zero bytes)"
        case .unsupported: "no originality signature on this kind of chip"
        }
    }
}

enum InspectJSON {
    static func object(path: String, image: TagImage, originality: Originality?, readout: NDEFReadout, error: String?) -> String {
        var object = JSONObjectWriter()
        let message = try? readout.message?.get()
        object.add("file", path)
        object.add("format", image.format.rawValue)
        object.add("uid", image.uid?.hex)
        object.add("tag_type", image.chip.type.rawValue)
        object.add("chip", image.chip.name)
        object.add("atqa", image.atqa.map(Hex.encode))
        object.add("sak", image.sak.map(Hex.encode))
        object.add("originality", raw: OriginalityJSON.object(originality))
        object.add("ndef", message != nil)
        object.add("cc", raw: capabilityContainer(readout))
        object.add("tlvs", raw: "[" + readout.tlvs.map(tlv).joined(separator: ",") + "]")
        object.add("message", readout.messageBytes.map(Hex.encode))
        object.add("records", raw: RecordJSON.records(message))
        object.add("url", message?.firstURL)
        object.add("problem", readout.problem?.description)
        object.add("error", error)
        object.add("notes", raw: "[" + image.notes.map(JSONValue.quoted).joined(separator: ",") + "]")
        return object.text
    }

    static func capabilityContainer(_ readout: NDEFReadout) -> String? {
        var object = JSONObjectWriter()
        if let cc = readout.type2?.capabilityContainer {
            object.add("bytes", Hex.encode(cc.bytes))
            object.add("version", "\(cc.majorVersion).\(cc.minorVersion)")
            object.add("data_area_size", cc.dataAreaSize)
            object.add("read_only", cc.isReadOnly)
        } else if let cc = readout.type4 {
            object.add("bytes", Hex.encode(cc.bytes))
            object.add("version", "\(cc.majorVersion).\(cc.minorVersion)")
            object.add("ndef_file_id", Hex.encode([UInt8(cc.ndefFileID >> 8), UInt8(cc.ndefFileID & 0xFF)]))
            object.add("capacity", cc.capacity)
            object.add("readable", cc.readable)
            object.add("writable", cc.writable)
        } else if let mad = readout.mifare?.directory {
            object.add("mad_version", mad.version)
            object.add("ndef_sectors", raw: "[" + mad.ndefSectors.map(String.init).joined(separator: ",") + "]")
        } else if let attributes = readout.type3 {
            object.add("version", "\(attributes.majorVersion).\(attributes.minorVersion)")
            object.add("max_blocks", attributes.maxBlocks)
            object.add("read_only", attributes.readOnly)
        } else {
            return nil
        }
        return object.text
    }

    static func tlv(_ tlv: TagTLV) -> String {
        var object = JSONObjectWriter()
        object.add("offset", tlv.offset)
        object.add("type", tlv.kind.name)
        object.add("length", tlv.length)
        if let area = tlv.area {
            object.add("reserved_start", area.start)
            object.add("reserved_size", area.size)
        }
        return object.text
    }
}

enum InspectText {
    static func lines(path: String, image: TagImage, originality: Originality?, readout: NDEFReadout) -> [String] {
        var lines = ["\(path): \(image.format.rawValue)"]
        var tag = "Tag:     \(image.chip.name)"
        if let uid = image.uid { tag += " — UID \(uid.hex)" }
        if let atqa = image.atqa { tag += ", ATQA \(Hex.encode(atqa))" }
        if let sak = image.sak { tag += ", SAK \(Hex.encode(sak))" }
        lines.append(tag)
        if let originality { lines.append("Origin:  \(OriginalityJSON.text(originality))") }
        switch image.memory {
        case .type2(let pages): lines.append("Memory:  \(pages.count / 4) pages of 4 bytes")
        case .mifareClassic(let bytes, let unknown):
            lines.append("Memory:  \(bytes.count / 16) blocks of 16 bytes" + (unknown.isEmpty ? "" : ", \(unknown.count) bytes unread"))
        case .type4(let cc, let file): lines.append("Memory:  CC file \(cc.count) bytes, NDEF file \(file.count) bytes")
        case .type3(let blocks): lines.append("Memory:  \(blocks.count / 16) blocks of 16 bytes")
        }
        if let cc = readout.type2?.capabilityContainer {
            lines.append(
                "CC:      \(Hex.encode(cc.bytes)) — mapping \(cc.majorVersion).\(cc.minorVersion), data area \(cc.dataAreaSize) bytes, \(cc.isReadOnly ? "read-only" : "read/write")"
            )
        }
        if let cc = readout.type4 {
            lines.append(
                "CC:      mapping \(cc.majorVersion).\(cc.minorVersion), NDEF file capacity \(cc.capacity) bytes, \(cc.readable ? "readable" : "not readable"), \(cc.writable ? "writable" : "read-only")"
            )
        }
        if let mad = readout.mifare?.directory {
            lines.append("MAD:     version \(mad.version), NDEF sectors \(mad.ndefSectors.map(String.init).joined(separator: ", "))")
        }
        if !readout.tlvs.isEmpty {
            lines.append("TLVs:")
            for tlv in readout.tlvs {
                var line = "  @\(tlv.offset)  \(tlv.kind.name)"
                if tlv.kind != .null, tlv.kind != .terminator { line += ", \(tlv.length) bytes" }
                if let area = tlv.area { line += " (reserves bytes \(area.start)–\(area.start + area.size - 1))" }
                lines.append(line)
            }
        }
        switch readout.message {
        case .none:
            lines.append("NDEF:    none — \(readout.problem?.description ?? "no NDEF message TLV")")
        case .failure(let error):
            lines.append("NDEF:    malformed — \(error)")
        case .success(let message):
            lines.append(
                "NDEF:    \(message.records.count) record\(message.records.count == 1 ? "" : "s")"
                    + (message.records.isEmpty ? " (empty message)" : ""))
            for (index, record) in message.records.enumerated() {
                lines.append("  [\(index + 1)] \(describe(record))")
            }
            lines.append("URL:     \(message.firstURL ?? "none")")
        }
        lines += image.notes.map { "Note:    \($0)" }
        return lines
    }

    static func describe(_ record: NDEFRecord) -> String {
        let head = "\(record.tnf.name) \"\(record.typeName)\", \(record.payload.count) bytes"
        do {
            switch try record.decoded() {
            case .uri(let uri): return "\(head): URI \(uri.uri)"
            case .text(let text): return "\(head): Text (\(text.language), \(text.encoding.rawValue)) \"\(text.text)\""
            case .smartPoster(let poster): return "\(head): Smart Poster \(poster.uri.uri)" + (poster.title.map { " \"\($0)\"" } ?? "")
            case .mime(let type, _): return "\(head): MIME \(type)"
            case .absoluteURI(let uri, _): return "\(head): absolute URI \(uri)"
            case .androidApplication(let package): return "\(head): Android application \(package)"
            case .external(let type, _): return "\(head): external type \(type)"
            case .empty: return "empty record"
            case .other: return head
            }
        } catch {
            return "\(head): cannot decode — \(error)"
        }
    }
}

/// A tag read as `tagfix scan` shows it: one line, or one JSON object.
public enum ScanReport {
    public static func line(_ scan: TagScan) -> String {
        let message = scan.ndefMessage.flatMap { try? NDEFMessage(bytes: $0) }
        var line = "\(scan.uid.hex)  \(scan.tagType.rawValue)  \(scan.url ?? "(no URL)")"
        if let message { line += "  \(message.records.count) record\(message.records.count == 1 ? "" : "s")" }
        if scan.ndefMessage == nil { line += "  (no NDEF message: \(scan.ndefProblem ?? "none on the tag"))" }
        if let originality = scan.originality {
            if originality.status != .unsupported {
                line += "  signature \(originality.status.rawValue)"
            } else if let why = originality.key {
                // A reader that could not ask (PC/SC without pass-through) says so.
                line += "  originality: \(why)"
            }
        }
        if let duration = scan.readDuration { line += "  \(Coordinate.format(duration.seconds * 1000, 1)) ms" }
        return line
    }

    public static func json(_ scan: TagScan) -> String {
        let message = scan.ndefMessage.flatMap { try? NDEFMessage(bytes: $0) }
        var object = JSONObjectWriter()
        object.add("time", scan.time.iso8601)
        object.add("reader", scan.readerID)
        object.add("uid", scan.uid.hex)
        object.add("tag_type", scan.tagType.rawValue)
        object.add("originality", raw: OriginalityJSON.object(scan.originality))
        object.add("url", scan.url)
        object.add("ndef", scan.ndefMessage != nil)
        object.add("problem", scan.ndefProblem)
        object.add("records", raw: RecordJSON.records(message))
        object.add("read_ms", scan.readDuration.map { $0.seconds * 1000 })
        object.add("bytes_moved", scan.bytesMoved)
        return object.text
    }
}
