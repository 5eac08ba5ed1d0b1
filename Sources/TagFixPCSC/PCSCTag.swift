import Synchronization
import TagFixCore
import TagFixDevices
import TagFixNDEF
import TagFixTags

/// How a reader passes raw tag commands through, learnt from its answers and kept for the
/// reader's life: a way the reader refused is not tried again.
///
/// - `direct`: ACS's direct transmit carrying a PN532 `InCommunicateThru` (`FF 00 00 00 Lc
///   D4 42 …`), as the ACR122U and ACR1252U take it.
/// - `transparent`: PC/SC Part 3 Transparent Exchange (`FF C2 00 01 … 95 len frame`) inside a
///   transparent session (`PCSCTransparentExchange`), as the ACR1552U takes it and the OMNIKEY
///   and Identiv (SCM) readers, co-authors of that supplement, are documented to.
///
/// Which is tried first comes from the reader's name (`candidates(forReader:)`); a reader whose
/// name says nothing (vpcd, an unknown model) is probed with each in turn, and one that takes
/// none is read with READ BINARY and its scans say `originality: unsupported by this reader`.
public final class PCSCPassThrough: Sendable {
    public enum Method: String, Sendable, Hashable { case direct, transparent }
    public enum State: Sendable, Hashable {
        case unknown
        case supported(Method)
        case unsupported
    }
    /// The ways still to try, in order, until one answers.
    private let state: Mutex<(current: State, untried: [Method])>
    public let readerName: String

    public init(readerName: String = "") {
        self.readerName = readerName
        state = Mutex((.unknown, Self.candidates(forReader: readerName)))
    }

    /// The pass-throughs a reader of this name may have, the likeliest first. ACS's PN53x
    /// readers (ACR122U, ACR1252U…) answer the direct transmit; the ACR1552U, HID OMNIKEY and
    /// Identiv / SCM readers the PC/SC Part 3 transparent exchange; other names get both.
    public static func candidates(forReader name: String) -> [Method] {
        let lowered = name.lowercased()
        if ["acr1552"].contains(where: lowered.contains) { return [.transparent] }
        if ["acr122", "acr1252", "acr1222", "acr1251", "acr1255"].contains(where: lowered.contains) { return [.direct] }
        if ["omnikey", "utrust", "identiv", "identive", "cloud 37", "cloud 47", "scm "].contains(where: lowered.contains) {
            return [.transparent]
        }
        return [.direct, .transparent]
    }

    public var current: State { state.withLock { $0.current } }
    /// The way to try next while none is known; `nil` when it is known (or none is left).
    var next: Method? {
        state.withLock { state in
            if case .supported(let method) = state.current { return method }
            return state.current == .unsupported ? nil : state.untried.first
        }
    }
    func learn(_ method: Method, supported: Bool) {
        state.withLock { state in
            guard state.current == .unknown else { return }
            if supported {
                state.current = .supported(method)
                return
            }
            state.untried.removeAll { $0 == method }
            if state.untried.isEmpty { state.current = .unsupported }
        }
    }
}

/// What the transports need of a connected card: `PCSCCard` (SCardTransmit, SCardReconnect,
/// SCardDisconnect), or a test's channel to an emulated reader.
protocol PCSCChannel {
    /// Sends one APDU; the answer ends with its status word.
    func transmit(_ apdu: [UInt8]) throws(PCSCError) -> [UInt8]
    /// Resets the card and connects again.
    mutating func reset() throws(PCSCError)
    func disconnect()
}

extension PCSCCard: PCSCChannel {}

/// The connection to one card, shared by the transports over it and the procedures' `reselect`.
/// Used on the device thread only.
final class PCSCLink {
    var card: any PCSCChannel
    let passThrough: PCSCPassThrough
    /// A raw command was refused: the tag is idle until the reader selects it again.
    var tagIdle = false
    /// A transparent session is open: the reader leaves the card to the host (no READ BINARY)
    /// until it is ended.
    var transparentSession = false
    /// APDUs sent, for the debug log.
    var apdus = 0

    init(card: any PCSCChannel, passThrough: PCSCPassThrough) {
        self.card = card
        self.passThrough = passThrough
    }

    /// One APDU and its answer; both logged with `TAGFIX_LOG_LEVEL=debug` (what a reader that
    /// is not confirmed here answered is then in the report).
    func send(_ bytes: [UInt8]) throws(TagError) -> [UInt8] {
        apdus += 1
        do {
            let answer = try card.transmit(bytes)
            DebugLog.debug("\(passThrough.readerName): \(Hex.encode(bytes)) → \(Hex.encode(answer))")
            return answer
        } catch {
            DebugLog.debug("\(passThrough.readerName): \(Hex.encode(bytes)) → \(error)")
            throw error.tagError
        }
    }

    /// Ends the transparent session, if one is open (before READ BINARY, and before the card
    /// is let go: a reader left in a session does not poll for the next card).
    func endTransparentSession() throws(TagError) {
        guard transparentSession else { return }
        transparentSession = false
        let answer = try send(PCSCTransparentExchange.endSession)
        do throws(PCSCTransparentExchange.Failure) {
            try PCSCTransparentExchange.checkSession(answer)
        } catch {
            throw TagError(.readerFailed, detail: "ending the transparent session: \(error)")
        }
    }
}

/// A Type 2 tag behind a PC/SC reader as a `TagTransport` for the procedures in TagFixTags: the
/// tag's commands become the reader's pseudo-APDUs (PC/SC Part 3) — READ (30) becomes
/// `FF B0 00 page 10`, WRITE (A2) `FF D6 00 page 04 …`; FAST_READ, READ_SIG and GET_VERSION go
/// through the reader's pass-through where it has one (ACS's direct transmit or the PC/SC Part 3
/// transparent exchange, `PCSCPassThrough`), and FAST_READ becomes READ BINARY where it has
/// not. pcsc-lite's and the reader's errors become `TagError`s.
struct PCSCType2Transport: TagTransport {
    let link: PCSCLink
    var passThrough: PCSCPassThrough { link.passThrough }
    /// The most pages one FAST_READ asks for through a transparent exchange: its answer
    /// (C0, 92, 96 and 97's headers, 17 bytes with the status word) must fit 256 bytes.
    static let transparentFastReadPages = 56

    init(link: PCSCLink) { self.link = link }

    /// Through a transparent exchange the read is planned in 56-page pieces, not split after
    /// being planned in 60-page ones (a 56 and a 4: an APDU more for every piece).
    var fastReadPages: Int {
        passThrough.next == .transparent ? Self.transparentFastReadPages : Type2NDEFReader.fastReadPages
    }

    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        guard let code = command.first else { throw TagError(.protocolError, detail: "an empty command") }
        switch code {
        case 0x30 where command.count == 2:
            return try readBinary(page: command[1], bytes: 16)
        case 0xA2 where command.count == 6:
            try link.endTransparentSession()
            _ = try apdu([0xFF, 0xD6, 0x00, command[1], 0x04] + command[2...], expect: 0)
            return [0x0A]
        case 0x3A where command.count == 3 && passThrough.current == .unsupported:
            return try fastReadByReadBinary(first: Int(command[1]), last: Int(command[2]))
        default:
            while let method = passThrough.next {
                let answer: [UInt8]?
                switch method {
                case .direct: answer = try direct(command)
                case .transparent: answer = try transparent(command)
                }
                if let answer { return answer }
            }
            if code == 0x3A, command.count == 3 { return try fastReadByReadBinary(first: Int(command[1]), last: Int(command[2])) }
            throw TagError(.refused, detail: "this reader does not pass \(Hex.encode([code])) through")
        }
    }

    /// Selects the tag again after a refused raw command (a reset of the card: the reader selects
    /// it anew); nothing to do when nothing was refused.
    func reselect() throws(TagError) {
        guard link.tagIdle else { return }
        // A reset ends any transparent session with the card.
        link.transparentSession = false
        do {
            try link.card.reset()
        } catch {
            throw error.tagError
        }
        link.tagIdle = false
    }

    /// `FF 00 00 00 Lc D4 42 command`: the answer's data, or `nil` when the reader does not pass
    /// raw commands through (it answers anything but `D5 43`).
    private mutating func direct(_ command: [UInt8]) throws(TagError) -> [UInt8]? {
        let frame: [UInt8] = [0xD4, 0x42] + command
        let answer = try send([0xFF, 0x00, 0x00, 0x00, UInt8(frame.count)] + frame)
        guard answer.count >= 5, answer[0] == 0xD5, answer[1] == 0x43, answer.suffix(2) == [0x90, 0x00] else {
            // A reader known to pass through that answers unframed garbles, it does not refuse:
            // an error, not a reason to ask again (which would never end).
            guard passThrough.current == .unknown else {
                throw TagError(.protocolError, detail: "direct transmit answered \(Hex.encode(answer.prefix(8)))")
            }
            passThrough.learn(.direct, supported: false)
            return nil
        }
        passThrough.learn(.direct, supported: true)
        let status = answer[2] & 0x3F
        let data = Array(answer[3..<(answer.count - 2)])
        switch status {
        case 0x00:
            return try tagAnswer(data)
        case 0x01:
            link.tagIdle = true
            throw TagError(.timeout, detail: "PN53x status 01 (no answer from the tag)")
        default:
            link.tagIdle = true
            throw TagError(.refused, detail: "PN53x status \(Hex.encode([status]))")
        }
    }

    /// The tag's answer as a pass-through gave it: a 4-bit NAK means the tag refused and is idle.
    private func tagAnswer(_ data: [UInt8]) throws(TagError) -> [UInt8] {
        if data.count == 1, data[0] & 0xF0 == 0, data[0] != 0x0A {
            link.tagIdle = true
            throw TagError(.refused, detail: "NAK \(Hex.encode(data))")
        }
        return data
    }

    /// The command in PC/SC Part 3 transparent exchanges (a session started first, once), or
    /// `nil` when the reader has no transparent exchange. FAST_READ is split so each answer
    /// fits a short APDU.
    private mutating func transparent(_ command: [UInt8]) throws(TagError) -> [UInt8]? {
        if command[0] == 0x3A, command.count == 3, Int(command[2]) - Int(command[1]) >= Self.transparentFastReadPages {
            var data: [UInt8] = []
            var page = Int(command[1])
            while page <= Int(command[2]) {
                let last = min(Int(command[2]), page + Self.transparentFastReadPages - 1)
                guard let part = try transparent([0x3A, UInt8(page), UInt8(last)]) else { return nil }
                data += part
                page = last + 1
            }
            return data
        }
        if !link.transparentSession {
            let started = try send(PCSCTransparentExchange.startSession)
            do throws(PCSCTransparentExchange.Failure) {
                try PCSCTransparentExchange.checkSession(started)
            } catch {
                return try failed(error)
            }
            link.transparentSession = true
            // To ISO 14443-A layer 3, where a Type 2 tag is; a reader that refuses the switch is
            // used as it is.
            let switched = try send(PCSCTransparentExchange.switchToTypeALayer3)
            do throws(PCSCTransparentExchange.Failure) {
                try PCSCTransparentExchange.checkSession(switched)
            } catch {
                DebugLog.debug("\(passThrough.readerName): no protocol switch (\(error)); going on without it")
            }
        }
        let apdu: [UInt8]
        do throws(PCSCTransparentExchange.Failure) {
            apdu = try PCSCTransparentExchange.transceive(command)
        } catch {
            throw TagError(.protocolError, detail: "\(error)")
        }
        let answer = try send(apdu)
        let data: [UInt8]
        do throws(PCSCTransparentExchange.Failure) {
            data = try PCSCTransparentExchange.response(answer)
        } catch {
            return try failed(error)
        }
        passThrough.learn(.transparent, supported: true)
        return try tagAnswer(data)
    }

    /// What a transparent exchange's failure means: `nil` (the reader has none: try another
    /// way) while the pass-through is not known yet, else the tag's or the reader's error.
    private func failed(_ failure: PCSCTransparentExchange.Failure) throws(TagError) -> [UInt8]? {
        switch failure {
        case .unsupported where passThrough.current == .unknown:
            passThrough.learn(.transparent, supported: false)
            return nil
        case .noAnswer:
            passThrough.learn(.transparent, supported: true)
            link.tagIdle = true
            throw TagError(.timeout, detail: "transparent exchange: no answer from the tag")
        case .transmission:
            passThrough.learn(.transparent, supported: true)
            link.tagIdle = true
            throw TagError(.protocolError, detail: "transparent exchange: \(failure)")
        default:
            throw TagError(.protocolError, detail: "\(failure)")
        }
    }

    private mutating func send(_ bytes: [UInt8]) throws(TagError) -> [UInt8] { try link.send(bytes) }

    private mutating func readBinary(page: UInt8, bytes: Int) throws(TagError) -> [UInt8] {
        try link.endTransparentSession()
        return try apdu([0xFF, 0xB0, 0x00, page, UInt8(bytes)], expect: bytes)
    }

    /// FAST_READ on a reader without pass-through: READ BINARY four pages at a time.
    private mutating func fastReadByReadBinary(first: Int, last: Int) throws(TagError) -> [UInt8] {
        guard first <= last else { throw TagError(.protocolError, detail: "FAST_READ \(first)–\(last)") }
        var data: [UInt8] = []
        var page = first
        while page <= last {
            let answer = try readBinary(page: UInt8(page), bytes: 16)
            data += answer.prefix(min(4, last - page + 1) * 4)
            page += 4
        }
        return data
    }

    /// Sends a pseudo-APDU that answers `expect` data bytes and 90 00.
    private mutating func apdu(_ bytes: [UInt8], expect: Int) throws(TagError) -> [UInt8] {
        let answer = try send(bytes)
        guard answer.count >= 2 else { throw TagError(.protocolError, detail: "an answer without a status word") }
        let status = Array(answer.suffix(2))
        guard status == [0x90, 0x00] else {
            // 63 00: the reader's operation failed (the tag did not answer); 6A 82, 6B 00…: the
            // address is outside the tag.
            throw TagError(status == [0x63, 0x00] ? .tagLost : .refused, detail: "SW \(Hex.encode(status))")
        }
        let data = Array(answer.dropLast(2))
        guard expect == 0 || data.count == expect else {
            throw TagError(.protocolError, detail: "\(data.count) bytes where \(expect) were asked")
        }
        return data
    }
}

/// An ISO 14443-4 card behind a PC/SC reader: APDUs go to it as they are.
struct PCSCAPDUTransport: TagTransport {
    let link: PCSCLink

    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        link.apdus += 1
        do {
            return try link.card.transmit(command)
        } catch {
            throw error.tagError
        }
    }
}

/// A card in a PC/SC reader, connected: who it is (ATR, `GET DATA` UID) and the shared
/// procedures over it. Used on the device thread only.
struct PCSCTag {
    let link: PCSCLink
    let atr: [UInt8]
    let kind: PCSCCardKind
    let uid: TagUID
    var passThrough: PCSCPassThrough { link.passThrough }
    var apdus: Int { link.apdus }

    /// Identifies the card: its kind from the ATR, its UID from `FF CA 00 00 00`.
    init(card: any PCSCChannel, atr: [UInt8], passThrough: PCSCPassThrough) throws(ReaderError) {
        link = PCSCLink(card: card, passThrough: passThrough)
        self.atr = atr
        kind = PCSCCardKind(atr: atr)
        let answer: [UInt8]
        link.apdus += 1
        do {
            answer = try card.transmit([0xFF, 0xCA, 0x00, 0x00, 0x00])
        } catch {
            throw ReaderError(code: .incompleteRead, message: "GET DATA (UID) failed (\(error.name))", hint: error.hint)
        }
        guard answer.count >= 2, answer.suffix(2) == [0x90, 0x00] else {
            throw ReaderError(
                code: .unsupportedTag, message: "the reader gave no UID (GET DATA answered \(Hex.encode(answer.suffix(2))))",
                hint: "only contactless cards are read")
        }
        do {
            uid = try TagUID(bytes: Array(answer.dropLast(2)))
        } catch {
            throw ReaderError(code: .unsupportedTag, message: "a tag with a \(answer.count - 2)-byte UID")
        }
    }

    /// Reads the NDEF message with the shared procedure for the card's kind.
    func read(readSignature: Bool = true) -> Result<NDEFRead, NDEFReadError> {
        do {
            if kind.isType2 {
                var transport = PCSCType2Transport(link: link)
                let reselecting = transport
                var read = try Type2NDEFReader.read(&transport, readSignature: readSignature && passThrough.current != .unsupported) {
                    () throws(TagError) -> Void in try reselecting.reselect()
                }
                if passThrough.current == .unsupported { read.askedSignature = false }
                return .success(read)
            }
            if kind.isISODEP {
                var transport = PCSCAPDUTransport(link: link)
                return .success(try Type4NDEFReader.read(&transport))
            }
            return .failure(.malformed("\(kind): only Type 2 (NTAG, Ultralight) and Type 4 tags are read through PC/SC"))
        } catch {
            return .failure(error)
        }
    }

    /// Writes an NDEF message (Type 2 only), then reads it back, with the shared procedure.
    func write(_ message: [UInt8]) -> Result<NDEFWrite, NDEFWriteError> {
        guard kind.isType2 else { return .failure(.unsupported("\(kind)")) }
        var transport = PCSCType2Transport(link: link)
        let reselecting = transport
        do {
            return .success(try Type2NDEFWriter.write(message, &transport) { () throws(TagError) -> Void in try reselecting.reselect() })
        } catch {
            return .failure(error)
        }
    }

    /// One raw command to the tag: a Type 2 command through the reader's pass-through, an APDU
    /// to an ISO 14443-4 card as it is.
    func exchange(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        if kind.isType2 {
            var transport = PCSCType2Transport(link: link)
            return try transport.transceive(command)
        }
        var transport = PCSCAPDUTransport(link: link)
        return try transport.transceive(command)
    }

    /// The scan for a read, with what the reader could not ask said plainly.
    func scan(_ read: NDEFRead, readerID: String, time: Timestamp, duration: Duration, extraBytes: Int = 0) -> TagScan {
        var scan = read.scan(readerID: readerID, uid: uid, time: time, duration: duration, extraBytes: extraBytes)
        if kind.isType2, passThrough.current == .unsupported {
            scan.originality = Originality(status: .unsupported, key: "unsupported by this reader")
        }
        return scan
    }

    var identity: TagIdentity { TagIdentity(uid: uid, answerToSelect: atr) }

    /// Why this card is not read through PC/SC, when it is not (MIFARE Classic, FeliCa, a
    /// contact card): said as an unsupported tag, not as a broken one.
    var unsupported: ReaderError? {
        guard !kind.isType2, !kind.isISODEP else { return nil }
        return ReaderError(
            code: .unsupportedTag,
            message: "tag \(uid.hex) is \(kind): only Type 2 (NTAG, Ultralight) and Type 4 tags are read through PC/SC",
            hint: "read MIFARE Classic and FeliCa tags with a libnfc reader (--reader pn532_uart:…)")
    }

    /// Lets the card go, ending any transparent session first (a reader left in one would not
    /// poll for the next card).
    func disconnect() {
        try? link.endTransparentSession()
        link.card.disconnect()
    }
}
