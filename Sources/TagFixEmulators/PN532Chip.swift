import TagFixCore

/// A PN532 as the host sees it: the commands libnfc 1.8.0 and nfcpy send, answered from a
/// register file and the emulated tags in the field. Pure: one command in, one answer out.
public struct PN532Chip: Sendable {
    public enum Answer: Sendable, Hashable {
        /// The response frame's data (TFI D5 added by the framer): command code + 1, then data.
        case response([UInt8])
        /// The application-level error frame.
        case error
        /// No answer at all (a hung chip).
        case none
    }

    /// A tag in the field, and whether the field holds it right now.
    public struct Slot: Sendable {
        public var tag: any EmulatedTag
        public var present: Bool
        /// A tag that reads badly (on metal, behind glass, detuned), when it is one.
        public var weakness: Weakness?
        /// The weak tag lost power mid-read: it answers nothing until it is selected again.
        var browned = false

        public init(tag: any EmulatedTag, present: Bool) {
            self.tag = tag
            self.present = present
        }
    }

    /// A weak tag's faults: each exchange with it fails on the air at `rfErrorRate` (the chip
    /// answers a status byte of the PN532 user manual's error table: 0x01 time-out, 0x02 CRC
    /// error, 0x03 parity error, 0x05 framing error; libnfc turns each into NFC_ERFTRANS), and at
    /// `lossRate` the tag browns out: the exchange times out (0x01) and the tag stays silent
    /// until the reader selects it again, so a read that does not select it again fails. Drawn
    /// from a generator seeded with `seed`: the same exchanges fail on every run.
    public struct Weakness: Sendable {
        public var rfErrorRate: Double
        public var lossRate: Double
        var generator: SeededGenerator

        /// The RF status bytes a weak tag's exchanges fail with, in turn as the generator picks.
        public static let rfStatuses: [UInt8] = [0x01, 0x02, 0x03, 0x05]

        public init(rfErrorRate: Double, lossRate: Double = 0, seed: UInt64) {
            self.rfErrorRate = min(1, max(0, rfErrorRate))
            self.lossRate = min(1, max(0, lossRate))
            generator = SeededGenerator(seed: seed)
        }

        /// What this exchange suffers: nil (it goes through), an RF status, or a brown-out.
        mutating func draw() -> (status: UInt8, lost: Bool)? {
            let u = generator.unit()
            if u < lossRate { return (0x01, true) }
            guard u < lossRate + rfErrorRate else { return nil }
            return (Self.rfStatuses[Int(generator.next() % UInt64(Self.rfStatuses.count))], false)
        }
    }

    public var slots: [Slot] = []
    /// FeliCa tags in the field (listed at 212 and 424 kbps).
    public var felicaTags: [EmulatedType3Tag] = []
    private var activeFelica: EmulatedType3Tag?
    /// Pages (or APDUs) each tag still answers before it "leaves the field" (a tag pulled
    /// mid-read); `nil` for no limit.
    public var exchangesBeforeRemoval: Int?
    /// Lifted tags (by slot) put back once the reader's ISO 14443A selections have found them
    /// gone this many more times (`lift`).
    private var liftedFor: [Int: Int] = [:]
    /// Counters for tests and benchmarks.
    public private(set) var commandCount = 0
    public private(set) var lastCommands: [UInt8] = []

    private var registers: [UInt16: UInt8] = PN532Chip.defaultRegisters
    private var activeTargets: [Int] = []  // slot indexes listed by InListPassiveTarget, Tg = index + 1
    private var rfOn = false
    /// Several tags take turns: the slot a list starts from, and the slot listed first since the
    /// reader last let its targets go (InRelease, the field off, PowerDown: a client finishing or
    /// reopening). The next list then starts after it, so each new reader session, or a tag
    /// coming back after a removal, gets the next tag rather than always the first.
    private var rotation = 0
    private var listedFirst: Int?

    public init() {}

    /// The reader let its targets go: the next list starts with the tag after the last one read.
    private mutating func targetsReleased() {
        guard let first = listedFirst, !slots.isEmpty else { return }
        rotation = (first + 1) % slots.count
        listedFirst = nil
    }

    /// Slot indexes in the order a list visits them.
    private var listingOrder: [Int] { slots.indices.map { (rotation + $0) % slots.count } }

    /// CIU register defaults after reset (UM0701-02 / PN533 user manual), the ones libnfc reads.
    static let defaultRegisters: [UInt16: UInt8] = [
        0x6302: 0x80, 0x6303: 0x80,  // CIU_TxMode / CIU_RxMode: CRC on, 106 kbps
        0x6305: 0x00, 0x6306: 0x00,  // CIU_TxAuto, CIU_TxSel
        0x630C: 0x00, 0x630D: 0x00,  // CIU_CWGsP, CIU_ModGsP
        0x6316: 0x84, 0x6317: 0x4D,  // CIU_RxThreshold, CIU_Demod
        0x633C: 0x10, 0x633D: 0x00,  // CIU_Control, CIU_BitFraming
        0x6331: 0x00, 0x6338: 0x00,
        0x6106: 0x00, 0x6107: 0x00,  // SIC clock control
    ]

    /// Answers one command (the data after TFI D4).
    public mutating func handle(_ command: [UInt8]) -> Answer {
        guard let code = command.first else { return .error }
        commandCount += 1
        lastCommands.append(code)
        if lastCommands.count > 64 { lastCommands.removeFirst(lastCommands.count - 64) }
        let parameters = Array(command.dropFirst())
        let reply = code &+ 1
        switch code {
        case 0x00:  // Diagnose: NumTst 0 is the communication line test (echo)
            guard let test = parameters.first else { return .error }
            switch test {
            case 0x00: return .response([reply] + parameters)
            case 0x06: return .response([reply, selectedTag == nil ? 0x01 : 0x00])  // card presence
            default: return .response([reply, 0x00])
            }
        case 0x02:  // GetFirmwareVersion: PN532, version 1.6, ISO14443A/B + ISO18092
            return .response([reply, 0x32, 0x01, 0x06, 0x07])
        case 0x04:  // GetGeneralStatus: no error, field, no targets
            return .response([reply, 0x00, rfOn ? 0x01 : 0x00, 0x00, 0x00])
        case 0x06:  // ReadRegister: addresses as big-endian pairs
            guard parameters.count % 2 == 0, !parameters.isEmpty else { return .error }
            var values: [UInt8] = []
            for i in stride(from: 0, to: parameters.count, by: 2) {
                values.append(registers[UInt16(parameters[i]) << 8 | UInt16(parameters[i + 1])] ?? 0x00)
            }
            return .response([reply] + values)
        case 0x08:  // WriteRegister: (address, value) triples
            guard parameters.count % 3 == 0, !parameters.isEmpty else { return .error }
            for i in stride(from: 0, to: parameters.count, by: 3) {
                registers[UInt16(parameters[i]) << 8 | UInt16(parameters[i + 1])] = parameters[i + 2]
            }
            return .response([reply])
        case 0x0E, 0x0C:  // WriteGPIO / ReadGPIO
            return code == 0x0C ? .response([reply, 0xFF, 0xFF, 0x00]) : .response([reply])
        case 0x10:  // SetSerialBaudRate
            return .response([reply])
        case 0x12:  // SetParameters
            return .response([reply])
        case 0x14:  // SAMConfiguration
            return .response([reply])
        case 0x16:  // PowerDown: status
            rfOn = false
            targetsReleased()
            return .response([reply, 0x00])
        case 0x32:  // RFConfiguration: item 1 switches the field
            if parameters.first == 0x01, parameters.count >= 2 {
                rfOn = parameters[1] & 0x01 != 0
                if !rfOn { targetsReleased() }
            }
            return .response([reply])
        case 0x4A:  // InListPassiveTarget MaxTg BrTy [InitiatorData]
            return listPassiveTargets(parameters)
        case 0x40:  // InDataExchange Tg DataOut
            guard let tg = parameters.first else { return .error }
            if let felica = activeFelica, tg & 0x0F == 1 {
                switch felica.transceive(Array(parameters.dropFirst())) {
                case .data(let bytes): return .response([reply, 0x00] + bytes)
                default: return .response([reply, 0x01])
                }
            }
            return exchange(target: Int(tg & 0x0F), Array(parameters.dropFirst()))
        case 0x42:  // InCommunicateThru DataOut: raw frames to the selected target, if any
            guard !activeTargets.isEmpty else { return .response([reply, 0x01]) }
            // CIU_TxMode / CIU_RxMode bit 7: whether the chip adds (and checks) CRC_A, or the
            // host does. nfcpy turns receive-CRC off and checks the CRC itself.
            var data = parameters
            if (registers[0x6302] ?? 0x80) & 0x80 == 0 {
                guard data.count >= 2, Self.crcA(data.dropLast(2)) == Array(data.suffix(2)) else { return .response([reply, 0x02]) }
                data.removeLast(2)
            }
            return exchange(target: 1, data, thru: true, appendCRC: (registers[0x6303] ?? 0x80) & 0x80 == 0)
        case 0x44:  // InDeselect: the targets are no longer selected; raw frames reach no one
            activeTargets = []
            activeFelica = nil
            return .response([reply, 0x00])
        case 0x50:  // InSelect
            return .response([reply, activeTargets.isEmpty ? 0x27 : 0x00])
        case 0x52:  // InRelease
            targetsReleased()
            activeTargets = []
            activeFelica = nil
            return .response([reply, 0x00])
        case 0x58:  // InPSL
            return .response([reply, 0x00])
        case 0x60:  // InAutoPoll PollNr Period Type1..
            return autoPoll(parameters)
        default:
            return .error
        }
    }

    /// Lifts tag `index` out of the field and puts it back after the reader's next `selections`
    /// ISO 14443A selections have not found it: a lift as long as a hand's, seen the way a reader
    /// sees one (a tag gone and back between two selections is a tag that never left).
    public mutating func lift(slot index: Int, selections: Int) {
        guard slots.indices.contains(index) else { return }
        setPresent(false, slot: index)
        liftedFor[index] = max(1, selections)
    }

    /// Makes tag `index` a weak one (`nil`: a healthy one again).
    public mutating func setWeakness(_ weakness: Weakness?, slot index: Int) {
        guard slots.indices.contains(index) else { return }
        slots[index].weakness = weakness
        slots[index].browned = false
    }

    /// Puts a tag in the field or takes it out. A tag that leaves is deselected: when it comes
    /// back it is idle and answers nothing until it is selected again, as a real tag.
    public mutating func setPresent(_ present: Bool, slot index: Int) {
        guard slots.indices.contains(index) else { return }
        slots[index].present = present
        liftedFor[index] = nil
        if !present { activeTargets.removeAll { $0 == index } }
    }

    private var selectedTag: (any EmulatedTag)? {
        guard let first = activeTargets.first, slots.indices.contains(first), slots[first].present else { return nil }
        return slots[first].tag
    }

    private mutating func listPassiveTargets(_ p: [UInt8]) -> Answer {
        guard p.count >= 2 else { return .error }
        let maxTargets = max(1, min(2, Int(p[0])))
        if p[1] == 0x01 || p[1] == 0x02 {
            // FeliCa polling: InitiatorData is 00 SC SC RC TSN.
            activeFelica = nil
            guard p.count >= 7, p[2] == 0x00 else { return .response([0x4B, 0x00]) }
            let code = [p[3], p[4]]
            guard let tag = felicaTags.first(where: { $0.answers(systemCode: code) }) else { return .response([0x4B, 0x00]) }
            activeTargets = []
            activeFelica = tag
            return .response([0x4B, 0x01, 0x01] + tag.pollingResponse(requestSystemCode: p[5] == 0x01))
        }
        guard p[1] == 0x00 else {
            // Type B, Jewel: none of our tags answer.
            return .response([0x4B, 0x00])
        }
        let filter = Array(p.dropFirst(2))
        activeTargets = []
        activeFelica = nil
        // A lifted tag stays out of the field for as many selections as its lift lasts.
        for (index, remaining) in liftedFor {
            if remaining == 0 {
                liftedFor[index] = nil
                slots[index].present = true
            } else {
                liftedFor[index] = remaining - 1
            }
        }
        var body: [UInt8] = []
        for index in listingOrder where slots[index].present && activeTargets.count < maxTargets {
            let slot = slots[index]
            let uid = slot.tag.uid
            // The UID filter may carry the cascade tag 0x88 before a double-size UID.
            guard
                filter.isEmpty || filter == uid || filter == [0x88] + uid
                    || (uid.count == 7 && filter == [0x88] + uid.prefix(3) + uid.suffix(4))
            else { continue }
            slot.tag.reset()
            slots[index].browned = false
            activeTargets.append(index)
            body += [UInt8(activeTargets.count)] + slot.tag.sensRes + [slot.tag.selRes, UInt8(uid.count)] + uid
            if let ats = slot.tag.ats { body += ats }
        }
        if listedFirst == nil { listedFirst = activeTargets.first }
        return .response([0x4B, UInt8(activeTargets.count)] + body)
    }

    private mutating func autoPoll(_ p: [UInt8]) -> Answer {
        guard p.count >= 3 else { return .error }
        activeTargets = []
        guard let index = listingOrder.first(where: { slots[$0].present }) else { return .response([0x61, 0x00]) }
        if listedFirst == nil { listedFirst = index }
        let tag = slots[index].tag
        tag.reset()
        slots[index].browned = false
        activeTargets = [index]
        var target: [UInt8] = [0x01] + tag.sensRes + [tag.selRes, UInt8(tag.uid.count)] + tag.uid
        if let ats = tag.ats { target += ats }
        let type: UInt8 = tag.ats == nil ? 0x10 : 0x20  // Generic 106 kbps A / ISO-DEP
        return .response([0x61, 0x01, type, UInt8(target.count)] + target)
    }

    /// ISO/IEC 14443-3 CRC_A: preset 0x6363, polynomial 0x8408 (reflected), sent LSB first.
    static func crcA(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var crc: UInt16 = 0x6363
        for byte in bytes {
            var b = UInt16(byte) ^ (crc & 0xFF)
            b = (b ^ (b << 4)) & 0xFF
            crc = (crc >> 8) ^ (b << 8) ^ (b << 3) ^ (b >> 4)
        }
        return [UInt8(crc & 0xFF), UInt8(crc >> 8)]
    }

    private mutating func exchange(target: Int, _ data: [UInt8], thru: Bool = false, appendCRC: Bool = false) -> Answer {
        let reply: UInt8 = thru ? 0x43 : 0x41
        let index = target - 1
        guard activeTargets.indices.contains(index) else {
            // No such target: "the target is not in a state to execute" (status 0x27).
            return .response([reply, 0x27])
        }
        let slot = activeTargets[index]
        guard slots.indices.contains(slot), slots[slot].present else { return .response([reply, 0x01]) }  // timeout
        if let remaining = exchangesBeforeRemoval {
            if remaining <= 0 {
                exchangesBeforeRemoval = nil
                setPresent(false, slot: slot)
                return .response([reply, 0x01])
            }
            exchangesBeforeRemoval = remaining - 1
        }
        if slots[slot].browned { return .response([reply, 0x01]) }
        if let fault = slots[slot].weakness?.draw() {
            if fault.lost { slots[slot].browned = true }
            return .response([reply, fault.status])
        }
        switch slots[slot].tag.transceive(data) {
        case .data(let bytes): return .response([reply, 0x00] + bytes + (appendCRC ? Self.crcA(bytes) : []))
        case .ack: return .response([reply, 0x00] + (thru ? [0x0A] : []))
        case .nak(let code):
            // A 4-bit NAK where a CRC'd frame was expected: the PN532 reports an erroneous bit
            // count, which libnfc turns into NFC_ERFTRANS. Through InCommunicateThru the host
            // sees the nibble.
            return thru ? .response([reply, 0x00, code]) : .response([reply, 0x04])
        case .silent: return .response([reply, 0x01])
        case .authenticationFailed: return .response([reply, 0x14])
        }
    }
}
