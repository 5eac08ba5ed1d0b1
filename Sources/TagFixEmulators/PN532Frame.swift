/// The PN532's UART frames (NXP UM0701-02 §6.2): normal and extended information frames, ACK,
/// NACK and the application-level error frame. Pure: bytes in, events out.
public enum PN532Frame {
    public static let ack: [UInt8] = [0x00, 0x00, 0xFF, 0x00, 0xFF, 0x00]
    public static let nack: [UInt8] = [0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00]
    /// The answer to a frame the chip cannot execute (a syntax error, an unknown command).
    public static let applicationError: [UInt8] = [0x00, 0x00, 0xFF, 0x01, 0xFF, 0x7F, 0x81, 0x00]

    /// Encodes an information frame with TFI `tfi` (D4 host→chip, D5 chip→host): a normal frame
    /// up to 254 bytes of TFI+data, an extended one (FF FF LENM LENL LCS) above.
    public static func encode(tfi: UInt8, _ data: [UInt8]) -> [UInt8] {
        let length = data.count + 1
        var frame: [UInt8] = [0x00, 0x00, 0xFF]
        if length <= 0xFF - 1 {
            frame += [UInt8(length), UInt8((0x100 - length) & 0xFF)]
        } else {
            let m = UInt8(length >> 8), l = UInt8(length & 0xFF)
            frame += [0xFF, 0xFF, m, l, UInt8((0x100 - (Int(m) + Int(l))) & 0xFF)]
        }
        frame.append(tfi)
        frame += data
        let sum = data.reduce(Int(tfi)) { $0 + Int($1) }
        frame += [UInt8((0x100 - (sum & 0xFF)) & 0xFF), 0x00]
        return frame
    }

    /// What the decoder found in the byte stream.
    public enum Event: Sendable, Hashable {
        /// An information frame: TFI and data.
        case frame(tfi: UInt8, data: [UInt8])
        case ack
        case nack
        /// A frame whose length or data checksum does not add up.
        case corrupt(String)
    }

    /// An incremental decoder: feed bytes as they arrive (in any pieces), take events. Wake-up
    /// bytes (0x55) and zero padding between frames are skipped.
    public struct Decoder: Sendable {
        private var buffer: [UInt8] = []
        /// Frames longer than this are refused (the PN532's buffer is 265 bytes).
        public static let maximumLength = 512

        public init() {}

        public mutating func feed(_ bytes: [UInt8]) -> [Event] { feed(bytes[...]) }

        /// Concrete rather than generic over `Sequence`: a generic entry point is not specialised
        /// across the module boundary, and every call then paid for a metadata lookup.
        public mutating func feed(_ bytes: ArraySlice<UInt8>) -> [Event] {
            buffer += bytes
            var events: [Event] = []
            while let event = next() { events.append(event) }
            return events
        }

        /// Bytes waiting for the rest of a frame.
        public var pending: Int { buffer.count }

        private mutating func next() -> Event? {
            // Find the start code 00 FF (the leading preamble 00 is optional).
            guard let start = startCode() else {
                // Keep a trailing 00 (it may begin a start code); drop the rest.
                // In place, keeping the buffer's storage (a new array for every stray byte was
                // most of the decoder's cost when bytes arrive one at a time).
                buffer.removeFirst(buffer.last == 0x00 ? buffer.count - 1 : buffer.count)
                return nil
            }
            if start > 0 { buffer.removeFirst(start) }
            // buffer[0..1] == 00 FF
            guard buffer.count >= 4 else { return nil }
            let len = buffer[2], lcs = buffer[3]
            if len == 0x00, lcs == 0xFF {
                buffer.removeFirst(4)
                dropPostamble()
                return .ack
            }
            if len == 0xFF, lcs == 0x00 {
                buffer.removeFirst(4)
                dropPostamble()
                return .nack
            }
            var headerLength = 4
            var length = Int(len)
            if len == 0xFF, lcs == 0xFF {
                guard buffer.count >= 7 else { return nil }
                length = Int(buffer[4]) << 8 | Int(buffer[5])
                guard (Int(buffer[4]) + Int(buffer[5]) + Int(buffer[6])) & 0xFF == 0 else {
                    buffer.removeFirst(2)
                    return .corrupt("extended length checksum mismatch")
                }
                headerLength = 7
            } else {
                guard (Int(len) + Int(lcs)) & 0xFF == 0 else {
                    buffer.removeFirst(2)
                    return .corrupt("length checksum mismatch")
                }
            }
            guard length >= 1, length <= Self.maximumLength else {
                buffer.removeFirst(2)
                return .corrupt("frame length \(length) out of range")
            }
            guard buffer.count >= headerLength + length + 1 else { return nil }
            let body = Array(buffer[headerLength..<headerLength + length])
            let dcs = buffer[headerLength + length]
            buffer.removeFirst(headerLength + length + 1)
            dropPostamble()
            guard (body.reduce(0) { $0 + Int($1) } + Int(dcs)) & 0xFF == 0 else { return .corrupt("data checksum mismatch") }
            return .frame(tfi: body[0], data: Array(body.dropFirst()))
        }

        private func startCode() -> Int? {
            guard buffer.count >= 2 else { return nil }
            for i in 0..<(buffer.count - 1) where buffer[i] == 0x00 && buffer[i + 1] == 0xFF {
                return i
            }
            return nil
        }

        private mutating func dropPostamble() {
            if buffer.first == 0x00, buffer.count >= 2, buffer[1] != 0xFF { buffer.removeFirst() }
        }
    }
}
