import TagFixCore

/// The PC/SC Part 3 "Transparent Exchange" commands (Interoperability Specification for ICCs and
/// Personal Computer Systems, Part 3 Supplemental Document for Contactless ICCs, rev. 2.02):
/// a raw ISO 14443-3 frame to the card in a BER-TLV data object, through the pseudo-APDU class
/// `FF C2`. The ACR1552U, and by that supplement the OMNIKEY and Identiv (SCM) readers, pass raw
/// commands this way; ACS's PN53x readers use their direct transmit instead.
///
/// - `FF C2 00 00 Lc 81 00 00`: Manage Session, start a transparent session (the reader stops
///   polling and leaves the card to the host); `… 82 00 00` ends it.
/// - `FF C2 00 01 Lc [5F 46 04 timer] [95 len frame] 00`: Transparent Exchange, the frame sent
///   with the reader's default framing (CRC appended and checked, parity per byte: what a Type 2
///   command needs) and the card's answer waited for at most `timer` µs (little-endian).
///
/// The answer is data objects, then SW1 SW2: `C0 03 index SW1 SW2` (the generic error status:
/// `00 90 00` when all went well, else which data object failed and why), `92 01 bits` (valid
/// bits in the last byte received), `96 02 status` (the response status: CRC, collision,
/// parity, framing errors), `97 len data` (the card's answer). Pure: bytes in, bytes or a typed
/// error out.
public enum PCSCTransparentExchange {
    /// The Manage Session APDU that starts a transparent session.
    public static let startSession: [UInt8] = [0xFF, 0xC2, 0x00, 0x00, 0x02, 0x81, 0x00, 0x00]
    /// The Manage Session APDU that ends it (the reader polls again).
    public static let endSession: [UInt8] = [0xFF, 0xC2, 0x00, 0x00, 0x02, 0x82, 0x00, 0x00]
    /// Switch Protocol to ISO 14443 Type A, layer 3 (`8F 02 00 03`): where a Type 2 tag's
    /// commands go. Public ACR1552U drivers send it after starting the session; a reader that
    /// refuses it is used without it.
    public static let switchToTypeALayer3: [UInt8] = [0xFF, 0xC2, 0x00, 0x02, 0x04, 0x8F, 0x02, 0x00, 0x03, 0x00]

    /// How long the reader waits for the card's answer: 50 ms, far more than a Type 2 tag needs
    /// (READ_SIG, the slowest, answers within 5 ms).
    public static let defaultTimeout: UInt32 = 50_000

    /// The longest frame one Transparent Exchange carries (Lc is one byte).
    public static let maximumFrame = 0xFF - 7 - 3

    /// The Transparent Exchange APDU that sends `frame` to the card.
    public static func transceive(_ frame: [UInt8], timeoutMicroseconds: UInt32 = defaultTimeout) throws(Failure) -> [UInt8] {
        guard !frame.isEmpty, frame.count <= maximumFrame else { throw .frameLength(frame.count) }
        let timer: [UInt8] = [0x5F, 0x46, 0x04] + (0..<4).map { UInt8(truncatingIfNeeded: timeoutMicroseconds >> (8 * $0)) }
        var objects = timer + [0x95]
        objects += frame.count < 0x80 ? [UInt8(frame.count)] : [0x81, UInt8(frame.count)]
        objects += frame
        return [0xFF, 0xC2, 0x00, 0x01, UInt8(objects.count)] + objects + [0x00]
    }

    /// Why an answer is not a card's answer. Each says what failed, for the scan's log.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The reader does not take the command (its status word, or the failing object's):
        /// it has no transparent exchange, or not this data object.
        case unsupported(sw: [UInt8])
        /// The reader took it but the card did not answer in time (`64 01`, or no 97 object).
        case noAnswer
        /// The card answered with a CRC, parity, collision or framing error (96's bits).
        case transmission(status: UInt16)
        /// The reader reported another error in the generic error status: `index` of the
        /// failing data object (0: the whole APDU) and its status word.
        case failed(index: UInt8, sw: [UInt8])
        /// The answer is not what the supplement defines: too short, a length past its end,
        /// a data object of the wrong size, no generic error status.
        case malformed(String)
        /// A frame the APDU cannot carry.
        case frameLength(Int)

        public var description: String {
            switch self {
            case .unsupported(let sw): "the reader has no transparent exchange (SW \(Hex.encode(sw)))"
            case .noAnswer: "no answer from the tag"
            case .transmission(let status):
                "a transmission error (response status \(Hex.encode([UInt8(status >> 8), UInt8(status & 0xFF)])))"
            case .failed(let index, let sw): "data object \(index) failed (SW \(Hex.encode(sw)))"
            case .malformed(let why): "a malformed transparent-exchange answer: \(why)"
            case .frameLength(let count): "a \(count)-byte frame does not fit one transparent exchange"
            }
        }
    }

    /// One data object of an answer.
    public struct DataObject: Sendable, Hashable {
        public var tag: UInt16
        public var value: [UInt8]
    }

    /// The data objects of `bytes` (BER-TLV: one- or two-byte tags, lengths 0–127, 81 xx or
    /// 82 xx xx), or why they cannot be read.
    public static func dataObjects(_ bytes: [UInt8]) throws(Failure) -> [DataObject] {
        var objects: [DataObject] = []
        var index = 0
        while index < bytes.count {
            var tag = UInt16(bytes[index])
            index += 1
            if tag & 0x1F == 0x1F {
                guard index < bytes.count else { throw .malformed("a two-byte tag cut short") }
                tag = tag << 8 | UInt16(bytes[index])
                index += 1
            }
            guard index < bytes.count else { throw .malformed("data object \(Hex.encode(tagBytes(tag))) without a length") }
            var length = Int(bytes[index])
            index += 1
            if length & 0x80 != 0 {
                let count = length & 0x7F
                guard count == 1 || count == 2 else { throw .malformed("a length of \(count) bytes") }
                guard index + count <= bytes.count else { throw .malformed("a length cut short") }
                length = bytes[index..<index + count].reduce(0) { $0 << 8 | Int($1) }
                index += count
            }
            guard length <= bytes.count - index else {
                throw .malformed("data object \(Hex.encode(tagBytes(tag))) says \(length) bytes, \(bytes.count - index) follow")
            }
            objects.append(DataObject(tag: tag, value: Array(bytes[index..<index + length])))
            index += length
        }
        return objects
    }

    private static func tagBytes(_ tag: UInt16) -> [UInt8] { tag > 0xFF ? [UInt8(tag >> 8), UInt8(tag & 0xFF)] : [UInt8(tag)] }

    /// The generic error status of a Manage Session answer: nothing when the session started
    /// (or ended), the failure otherwise.
    public static func checkSession(_ answer: [UInt8]) throws(Failure) {
        _ = try status(answer)
    }

    /// The card's answer in a Transparent Exchange answer. A 4-bit ACK or NAK comes back as
    /// one byte (92 says 4 valid bits).
    public static func response(_ answer: [UInt8]) throws(Failure) -> [UInt8] {
        let objects = try status(answer)
        if let status = objects.first(where: { $0.tag == 0x96 }) {
            guard status.value.count == 2 else { throw .malformed("a response status of \(status.value.count) bytes") }
            let bits = UInt16(status.value[0]) << 8 | UInt16(status.value[1])
            // b0 CRC, b1 collision, b2 parity, b3 framing error (first byte: the low nibble).
            if status.value[0] & 0x0F != 0 { throw .transmission(status: bits) }
        }
        if let bits = objects.first(where: { $0.tag == 0x92 }), bits.value.count != 1 {
            throw .malformed("a bit-framing object of \(bits.value.count) bytes")
        }
        let answers = objects.filter { $0.tag == 0x97 }
        guard answers.count <= 1 else { throw .malformed("\(answers.count) response data objects") }
        guard let data = answers.first?.value, !data.isEmpty else { throw .noAnswer }
        return data
    }

    /// The data objects of an answer whose generic error status says all went well; the
    /// failure the status (or the status word) names otherwise.
    static func status(_ answer: [UInt8]) throws(Failure) -> [DataObject] {
        guard answer.count >= 2 else { throw .malformed("\(answer.count) bytes, not even a status word") }
        var sw = Array(answer.suffix(2))
        // A reader without the FF C2 commands refuses the APDU outright, without data objects.
        if sw != [0x90, 0x00], answer.count == 2 { throw sw == [0x64, 0x01] ? .noAnswer : .unsupported(sw: sw) }
        var objects: [DataObject]
        do {
            objects = try dataObjects(Array(answer.dropLast(2)))
        } catch {
            // Some answers captured from an ACR1552U end with the C0 object itself, no status
            // word after it: taken when the whole answer is data objects with a C0.
            guard let whole = try? dataObjects(answer), let generic = whole.first(where: { $0.tag == 0xC0 }), generic.value.count == 3
            else { throw error }
            objects = whole
            sw = Array(generic.value[1...])
        }
        guard let generic = objects.first(where: { $0.tag == 0xC0 }) else {
            throw .malformed("no generic error status (C0) in \(Hex.encode(answer))")
        }
        guard generic.value.count == 3 else { throw .malformed("a generic error status of \(generic.value.count) bytes") }
        let failing = generic.value[0]
        let status = Array(generic.value[1...])
        switch status {
        case [0x90, 0x00]:
            guard sw == [0x90, 0x00] else { throw .failed(index: 0, sw: sw) }
            return objects
        case [0x64, 0x01], [0x64, 0x00]: throw .noAnswer
        case [0x6A, 0x81]: throw .unsupported(sw: status)
        default: throw .failed(index: failing, sw: status)
        }
    }
}
