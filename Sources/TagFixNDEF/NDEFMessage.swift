import TagFixCore

/// One record as it stands on the wire: its flags and fields, chunks not reassembled (what
/// ndeflib's record decoder returns).
public struct NDEFWireRecord: Sendable, Hashable {
    public var messageBegin: Bool
    public var messageEnd: Bool
    public var chunked: Bool
    public var shortRecord: Bool
    public var tnf: TypeNameFormat
    public var type: [UInt8]
    public var id: [UInt8]
    public var payload: [UInt8]
    /// Byte offset of the record's header in the parsed input.
    public var offset: Int

    /// Decodes one record starting at `offset`, with the TNF rules checked. MB and ME are read, not
    /// required. Returns the record and the offset just after it.
    public static func decode(_ bytes: [UInt8], at offset: Int = 0) throws(NDEFError) -> (NDEFWireRecord, next: Int) {
        var cursor = offset
        guard cursor < bytes.count else { throw .truncated(.header, offset: cursor) }
        let header = bytes[cursor]
        cursor += 1
        guard let tnf = TypeNameFormat(rawValue: header & 0x07) else { throw .reservedTNF(offset: offset) }
        let shortRecord = header & 0x10 != 0
        let hasID = header & 0x08 != 0
        let lengthBytes = 1 + (shortRecord ? 1 : 4) + (hasID ? 1 : 0)
        guard bytes.count - cursor >= lengthBytes else { throw .truncated(.typeLength, offset: cursor) }
        let typeLength = Int(bytes[cursor])
        cursor += 1
        var payloadLength = 0
        if shortRecord {
            payloadLength = Int(bytes[cursor])
            cursor += 1
        } else {
            for _ in 0..<4 {
                payloadLength = payloadLength << 8 | Int(bytes[cursor])
                cursor += 1
            }
        }
        var idLength = 0
        if hasID {
            idLength = Int(bytes[cursor])
            cursor += 1
        }
        try NDEFRecord.check(tnf: tnf, typeLength: typeLength, idLength: idLength, payloadLength: payloadLength, offset: offset)
        func take(_ count: Int, _ field: NDEFField) throws(NDEFError) -> [UInt8] {
            guard bytes.count - cursor >= count else { throw .truncated(field, offset: cursor) }
            defer { cursor += count }
            return Array(bytes[cursor..<cursor + count])
        }
        let type = try take(typeLength, .type)
        let id = try take(idLength, .id)
        let payload = try take(payloadLength, .payload)
        let record = NDEFWireRecord(
            messageBegin: header & 0x80 != 0, messageEnd: header & 0x40 != 0, chunked: header & 0x20 != 0,
            shortRecord: shortRecord, tnf: tnf, type: type, id: id, payload: payload, offset: offset)
        return (record, cursor)
    }
}

/// An NDEF message: logical records in order.
public struct NDEFMessage: Sendable, Hashable {
    public var records: [NDEFRecord]

    public init(records: [NDEFRecord]) {
        self.records = records
    }

    /// Parses a complete message: MB on the first record, ME on the last, nothing after it, chunked
    /// records reassembled. Empty input is the empty message.
    /// - Throws: `NDEFError` with the byte offset of the problem.
    public init(bytes: [UInt8]) throws(NDEFError) {
        self.init(records: try Self.reassemble(try Self.wireRecords(bytes)))
    }

    /// The records of a message as they stand on the wire (chunks not reassembled), with the
    /// message structure checked: MB on the first record only, ME on the last, no CF on the last,
    /// nothing after ME.
    public static func wireRecords(_ bytes: [UInt8]) throws(NDEFError) -> [NDEFWireRecord] {
        var records: [NDEFWireRecord] = []
        var offset = 0
        while offset < bytes.count {
            let (record, next) = try NDEFWireRecord.decode(bytes, at: offset)
            if records.isEmpty {
                guard record.messageBegin else { throw .missingMessageBegin(offset: offset) }
            } else {
                guard !record.messageBegin else { throw .messageBeginInMiddle(offset: offset) }
            }
            records.append(record)
            if record.messageEnd {
                guard !record.chunked else { throw .chunkFlagOnLastRecord(offset: offset) }
                guard next == bytes.count else { throw .trailingBytes(offset: next) }
                return records
            }
            offset = next
        }
        guard records.isEmpty else { throw .missingMessageEnd(offset: offset) }
        return []
    }

    /// Joins chunked records (NDEF 1.0 §2.3.3): the first chunk carries TNF, type and id; middle and
    /// terminating chunks are TNF `unchanged` with no type or id; the payloads are concatenated.
    static func reassemble(_ wire: [NDEFWireRecord]) throws(NDEFError) -> [NDEFRecord] {
        var records: [NDEFRecord] = []
        var open: (first: NDEFWireRecord, payload: [UInt8])?
        for record in wire {
            if var chunk = open {
                guard record.tnf == .unchanged else { throw .chunk(.followingChunkNotUnchanged, offset: record.offset) }
                guard record.type.isEmpty, record.id.isEmpty else { throw .chunk(.followingChunkHasTypeOrID, offset: record.offset) }
                chunk.payload += record.payload
                if record.chunked {
                    open = chunk
                } else {
                    // The whole record obeys its TNF's rules too: an `empty` first chunk with
                    // payload in the chunks after it is as malformed as an empty record with one
                    // (found by fuzzing: it decoded, then failed to decode once re-encoded).
                    try NDEFRecord.check(
                        tnf: chunk.first.tnf, typeLength: chunk.first.type.count, idLength: chunk.first.id.count,
                        payloadLength: chunk.payload.count, offset: chunk.first.offset)
                    records.append(
                        NDEFRecord(unchecked: chunk.first.tnf, type: chunk.first.type, id: chunk.first.id, payload: chunk.payload))
                    open = nil
                }
                continue
            }
            guard record.tnf != .unchanged else {
                throw .chunk(record.chunked ? .initialChunkUnchanged : .unchangedOutsideChunk, offset: record.offset)
            }
            if record.chunked {
                open = (record, record.payload)
            } else {
                records.append(NDEFRecord(unchecked: record.tnf, type: record.type, id: record.id, payload: record.payload))
            }
        }
        if let open { throw .chunk(.unterminated, offset: open.first.offset) }
        return records
    }

    /// The shortest encoding: short records (SR) for payloads under 256 bytes, no chunking, IL
    /// only with an id. The empty message encodes as no bytes.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        for (index, record) in records.enumerated() {
            let short = record.payload.count < 256
            var header = record.tnf.rawValue
            if index == 0 { header |= 0x80 }
            if index == records.count - 1 { header |= 0x40 }
            if short { header |= 0x10 }
            if !record.id.isEmpty { header |= 0x08 }
            out.append(header)
            out.append(UInt8(record.type.count))
            if short {
                out.append(UInt8(record.payload.count))
            } else {
                let length = UInt32(record.payload.count)
                out += [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
            }
            if !record.id.isEmpty { out.append(UInt8(record.id.count)) }
            out += record.type
            out += record.id
            out += record.payload
        }
        return out
    }
}
