// The reader's side of the NTAG 424 DNA commands a provisioning run needs, over any ISO-DEP
// exchange (`[UInt8] → [UInt8]`, one APDU in, its answer with the status word out): a libnfc
// target, the emulator in-process, a PC/SC card. `tagfix enroll --sun` drives a tag through this.

/// An NTAG 424 DNA over an APDU exchange, with the session of the last authentication.
public struct NTAG424Commander {
    /// Sends one APDU and returns the answer (data ‖ SW1 SW2). Errors become `.transport`.
    public typealias Exchange = ([UInt8]) throws -> [UInt8]

    private let exchange: Exchange
    /// The current session (nil before authentication, and after ChangeKey of the session's key
    /// or any refused command, which end it on the tag too).
    public private(set) var session: NTAG424Session?
    public private(set) var authenticatedKey: UInt8?
    private let random: RandomBytes

    public init(random: @escaping RandomBytes = systemRandomBytes, exchange: @escaping Exchange) {
        self.exchange = exchange
        self.random = random
    }

    private func send(_ apdu: [UInt8]) throws(NTAG424Error) -> [UInt8] {
        do {
            return try exchange(apdu)
        } catch let error as NTAG424Error {
            throw error
        } catch {
            throw .transport("\(error)")
        }
    }

    /// ISOSelectFile of the NDEF application (ends any session, as on the tag).
    public mutating func selectApplication() throws(NTAG424Error) {
        session = nil
        let answer = try send(NTAG424APDU.selectApplication)
        guard answer.suffix(2) == [0x90, 0x00] else {
            throw .status(command: 0xA4, sw1: answer.dropLast().last ?? 0, sw2: answer.last ?? 0)
        }
    }

    /// GetVersion: the three frames' data (hardware, software, UID and production), 28 bytes
    /// for a 7-byte UID. Plain (sent before authentication).
    public func getVersion() throws(NTAG424Error) -> [UInt8] {
        var data: [UInt8] = []
        var apdu = NTAG424APDU.native(0x60, [])
        for _ in 0..<3 {
            let answer = try send(apdu)
            guard answer.count >= 2, answer[answer.count - 2] == 0x91 else { throw .malformed("GetVersion answered no 91 xx") }
            data += answer.dropLast(2)
            if answer.last == NTAG424Status.ok.rawValue { return data }
            guard answer.last == NTAG424Status.additionalFrame.rawValue else {
                throw .status(command: 0x60, sw1: 0x91, sw2: answer.last ?? 0)
            }
            apdu = NTAG424APDU.native(0xAF, [])
        }
        throw .malformed("GetVersion sent more than three frames")
    }

    /// AuthenticateEV2First with key `number` (0–4). Throws `.status(…, 0x91, 0xAE)` when the tag
    /// finds the key wrong.
    public mutating func authenticate(keyNumber number: UInt8, key: AES128Key, rndA: [UInt8]? = nil) throws(NTAG424Error) {
        session = nil
        authenticatedKey = nil
        var handshake = NTAG424ReaderAuthentication(keyNumber: number, key: key, rndA: rndA ?? random(16))
        let second = try handshake.secondCommand(answering: try send(handshake.firstCommand))
        session = try handshake.finish(answering: try send(second))
        authenticatedKey = number
    }

    /// A command in the session: sends it in `mode`, checks the answer, advances the counter.
    /// Any failure ends the session (the tag drops it too).
    public mutating func command(_ code: UInt8, header: [UInt8] = [], data: [UInt8] = [], mode: NTAG424CommMode) throws(NTAG424Error)
        -> [UInt8]
    {
        guard var current = session else { throw .notAuthenticated }
        session = nil
        let apdu: [UInt8]
        do {
            apdu = try current.apdu(code, header: header, data: data, mode: mode)
        } catch {
            throw .crypto(error)
        }
        let result = try current.answer(to: code, try send(apdu), mode: mode)
        session = current
        return result
    }

    /// GetFileSettings (CommMode.MAC in a session, plain without one).
    public mutating func getFileSettings(file: UInt8) throws(NTAG424Error) -> NTAG424FileSettings {
        let data: [UInt8]
        if session != nil {
            data = try command(0xF5, header: [file], mode: .mac)
        } else {
            let answer = try send(NTAG424APDU.native(0xF5, [file]))
            guard answer.suffix(2) == [0x91, 0x00] else {
                throw .status(command: 0xF5, sw1: answer.dropLast().last ?? 0, sw2: answer.last ?? 0)
            }
            data = Array(answer.dropLast(2))
        }
        guard let settings = NTAG424FileSettings(getFileSettingsData: data) else { throw .malformed("GetFileSettings data") }
        return settings
    }

    /// ChangeFileSettings (CommMode.Full; needs a session with the file's Change key).
    public mutating func changeFileSettings(file: UInt8, _ settings: NTAG424FileSettings) throws(NTAG424Error) {
        _ = try command(0x5F, header: [file], data: settings.encoded(), mode: .full)
    }

    /// ChangeKey (CommMode.Full; needs a session with key 0). Changing the session's own key ends
    /// the session: its answer has no MAC.
    public mutating func changeKey(number: UInt8, to newKey: AES128Key, from oldKey: AES128Key, version: UInt8) throws(NTAG424Error) {
        guard var current = session, let authenticated = authenticatedKey else { throw .notAuthenticated }
        let data = NTAG424ChangeKey.keyData(
            keyNumber: number, authenticatedKey: authenticated, newKey: newKey, oldKey: oldKey, version: version)
        guard number == authenticated else {
            _ = try command(0xC4, header: [number], data: data, mode: .full)
            return
        }
        session = nil
        authenticatedKey = nil
        let apdu: [UInt8]
        do {
            apdu = try current.apdu(0xC4, header: [number], data: data, mode: .full)
        } catch {
            throw .crypto(error)
        }
        _ = try current.answer(to: 0xC4, try send(apdu), mode: .plain)
    }

    /// GetFileCounters (CommMode.Full): SDMReadCtr of a file with SDM.
    public mutating func getFileCounters(file: UInt8) throws(NTAG424Error) -> UInt32 {
        let data = try command(0xF6, header: [file], mode: .full)
        guard data.count == 5 else { throw .malformed("GetFileCounters gave \(data.count) bytes, not 5") }
        return UInt32(data[0]) | UInt32(data[1]) << 8 | UInt32(data[2]) << 16
    }

    /// Writes `bytes` at `offset` of the file with ISO identifier `id` by ISOSelectFile and
    /// ISOUpdateBinary, in chunks of at most `chunk` bytes (plain: the NDEF file's factory write
    /// access is free). Ends any session, as ISOSelectFile does on the tag.
    public mutating func updateBinary(fileID id: UInt16, offset: Int = 0, _ bytes: [UInt8], chunk: Int = 128) throws(NTAG424Error) {
        session = nil
        try iso(NTAG424APDU.selectFile(id), command: 0xA4)
        var position = 0
        while position < bytes.count {
            let count = min(chunk, bytes.count - position, 0xFF)
            let at = offset + position
            try iso([0x00, 0xD6, UInt8(at >> 8), UInt8(at & 0xFF), UInt8(count)] + bytes[position..<position + count], command: 0xD6)
            position += count
        }
    }

    /// Reads `count` bytes from `offset` of the file with ISO identifier `id` (ISOReadBinary).
    public mutating func readBinary(fileID id: UInt16, offset: Int = 0, count: Int) throws(NTAG424Error) -> [UInt8] {
        session = nil
        try iso(NTAG424APDU.selectFile(id), command: 0xA4)
        var data: [UInt8] = []
        while data.count < count {
            let at = offset + data.count
            let answer = try iso([0x00, 0xB0, UInt8(at >> 8), UInt8(at & 0xFF), UInt8(min(count - data.count, 0xFF))], command: 0xB0)
            guard !answer.isEmpty else { break }
            data += answer
        }
        return data
    }

    @discardableResult
    private func iso(_ apdu: [UInt8], command: UInt8) throws(NTAG424Error) -> [UInt8] {
        let answer = try send(apdu)
        guard answer.count >= 2 else { throw .malformed("an answer shorter than its status word") }
        guard answer.suffix(2) == [0x90, 0x00] else {
            throw .status(command: command, sw1: answer[answer.count - 2], sw2: answer[answer.count - 1])
        }
        return Array(answer.dropLast(2))
    }
}
