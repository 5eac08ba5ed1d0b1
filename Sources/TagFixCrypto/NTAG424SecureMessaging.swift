import TagFixCore

// NTAG 424 DNA secure messaging with AES keys (NXP NT4H2421Gx datasheet §9.1, "Secure
// messaging"; AN12196 §4 and its worked examples): the session keys AuthenticateEV2First
// derives, the command counter, the IVs, the padding and the truncated MACs of CommMode.MAC and
// CommMode.Full. Both sides use these: the reader (TagFix provisioning a tag) and the emulated
// tag. Only AES; LRP is not implemented.

/// How a command's data travels (FileOption bits 1–0, datasheet §10.7).
public enum NTAG424CommMode: UInt8, Sendable, Hashable {
    /// In clear.
    case plain = 0x00
    /// In clear, with a truncated CMAC.
    case mac = 0x01
    /// Encrypted, with a truncated CMAC.
    case full = 0x03
}

/// The second status byte of a native command's answer (SW1 is 0x91; datasheet §10.2 Table 23).
public enum NTAG424Status: UInt8, Error, Sendable, Hashable {
    case ok = 0x00
    case illegalCommand = 0x1C
    case integrityError = 0x1E
    case noSuchKey = 0x40
    case lengthError = 0x7E
    case permissionDenied = 0x9D
    case parameterError = 0x9E
    case authenticationDelay = 0xAD
    case authenticationError = 0xAE
    case additionalFrame = 0xAF
    case boundaryError = 0xBE
    case commandAborted = 0xCA
    case memoryError = 0xEE
    case fileNotFound = 0xF0
}

/// Why an NTAG 424 DNA exchange failed, from the reader's side.
public enum NTAG424Error: Error, Sendable, Hashable, CustomStringConvertible {
    /// The tag answered a status word other than success.
    case status(command: UInt8, sw1: UInt8, sw2: UInt8)
    /// The tag's answer carries a MAC that does not verify: the answer was altered, or the
    /// session is not the tag's.
    case responseMAC(command: UInt8)
    /// The answer has the wrong shape (length, padding).
    case malformed(String)
    /// AuthenticateEV2First: the tag's proof of RndA is wrong (it does not hold the key).
    case authentication(String)
    /// A command that needs a session ran without one.
    case notAuthenticated
    /// The exchange function failed (the tag left the field, a reader error).
    case transport(String)
    case crypto(CryptoError)

    public var description: String {
        switch self {
        case .status(let command, let sw1, let sw2):
            let name = sw1 == 0x91 ? NTAG424Status(rawValue: sw2).map { " (\($0))" } ?? "" : ""
            return "the tag refused command \(SUNHex.encode([command])) with status \(SUNHex.encode([sw1, sw2]))\(name)"
        case .responseMAC(let command):
            return "the tag's answer to command \(SUNHex.encode([command])) has a wrong MAC (an altered answer, or another session)"
        case .malformed(let what): return "malformed answer: \(what)"
        case .authentication(let what): return "authentication failed: \(what)"
        case .notAuthenticated: return "the command needs an authenticated session (authenticate first)"
        case .transport(let what): return "exchange failed: \(what)"
        case .crypto(let error): return "\(error)"
        }
    }
}

/// ISO/IEC 9797-1 padding method 2 (`80 00 …` to a whole block, a full block when the data is
/// already whole), as CommMode.Full uses.
public enum ISO9797Padding {
    public static func pad(_ data: [UInt8]) -> [UInt8] {
        let padded = data + [0x80]
        return padded + [UInt8](repeating: 0, count: (16 - padded.count % 16) % 16)
    }

    /// The data without its padding; nil when the padding is not method 2's (in the last block).
    public static func unpad(_ data: [UInt8]) -> [UInt8]? {
        guard !data.isEmpty, data.count % 16 == 0 else { return nil }
        var end = data.count - 1
        while end >= data.count - 16, data[end] == 0 { end -= 1 }
        guard end >= data.count - 16, data[end] == 0x80 else { return nil }
        return Array(data[..<end])
    }
}

/// An authenticated AES session (EV2): the session keys, the transaction identifier and the
/// command counter (datasheet §9.1.2–§9.1.7).
public struct NTAG424Session: Sendable, Hashable {
    /// SesAuthENCKey and SesAuthMACKey.
    public let encKey: AES128Key
    public let macKey: AES128Key
    /// The 4-byte transaction identifier the tag chose.
    public let ti: [UInt8]
    /// CmdCtr: 0 after AuthenticateEV2First, +1 after each command of the session.
    public var commandCounter: UInt16

    public init(encKey: AES128Key, macKey: AES128Key, ti: [UInt8], commandCounter: UInt16 = 0) {
        self.encKey = encKey
        self.macKey = macKey
        self.ti = ti
        self.commandCounter = commandCounter
    }

    /// The session of an AuthenticateEV2First with `key`, RndA and RndB (16 bytes each):
    /// SesAuthENCKey = CMAC(key, SV1), SesAuthMACKey = CMAC(key, SV2) (datasheet §9.1.7).
    public init(key: AES128Key, rndA: [UInt8], rndB: [UInt8], ti: [UInt8]) throws(CryptoError) {
        guard rndA.count == 16, rndB.count == 16 else { throw CryptoError(operation: "session keys: RndA and RndB are 16 bytes") }
        guard let enc = AES128Key(try CMAC.aes128(key: key, Self.sessionVector(label: [0xA5, 0x5A], rndA: rndA, rndB: rndB))),
            let mac = AES128Key(try CMAC.aes128(key: key, Self.sessionVector(label: [0x5A, 0xA5], rndA: rndA, rndB: rndB)))
        else { throw CryptoError(operation: "session keys") }
        self.init(encKey: enc, macKey: mac, ti: ti)
    }

    /// SV1 (label A55A) / SV2 (label 5AA5): `label ‖ 0001 0080 ‖ RndA[15..14] ‖ (RndA[13..8] ⊕
    /// RndB[15..10]) ‖ RndB[9..0] ‖ RndA[7..0]`, byte 15 being the first byte sent.
    static func sessionVector(label: [UInt8], rndA: [UInt8], rndB: [UInt8]) -> [UInt8] {
        var vector = label + [0x00, 0x01, 0x00, 0x80] + rndA[0..<2]
        vector += (0..<6).map { rndA[2 + $0] ^ rndB[$0] }
        return vector + rndB[6..<16] + rndA[8..<16]
    }

    private var counterBytes: [UInt8] { [UInt8(truncatingIfNeeded: commandCounter), UInt8(truncatingIfNeeded: commandCounter >> 8)] }
    private var nextCounterBytes: [UInt8] {
        let next = commandCounter &+ 1
        return [UInt8(truncatingIfNeeded: next), UInt8(truncatingIfNeeded: next >> 8)]
    }

    /// IVc = E(SesAuthENCKey, A55A ‖ TI ‖ CmdCtr ‖ 0⁸) (datasheet §9.1.4).
    public func commandIV() throws(CryptoError) -> [UInt8] {
        try AES128.encryptBlock(key: encKey, [0xA5, 0x5A] + ti + counterBytes + [UInt8](repeating: 0, count: 8))
    }

    /// IVr = E(SesAuthENCKey, 5AA5 ‖ TI ‖ CmdCtr+1 ‖ 0⁸): the answer's counter is the next one.
    public func responseIV() throws(CryptoError) -> [UInt8] {
        try AES128.encryptBlock(key: encKey, [0x5A, 0xA5] + ti + nextCounterBytes + [UInt8](repeating: 0, count: 8))
    }

    /// MACt of a command: the odd bytes of CMAC(SesAuthMACKey, Cmd ‖ CmdCtr ‖ TI ‖ header ‖ data),
    /// `data` as sent (encrypted in CommMode.Full) (datasheet §9.1.9).
    public func commandMAC(command: UInt8, header: [UInt8], data: [UInt8]) throws(CryptoError) -> [UInt8] {
        truncatedMAC(try CMAC.aes128(key: macKey, [command] + counterBytes + ti + header + data))
    }

    /// MACt of an answer: CMAC(SesAuthMACKey, RC ‖ CmdCtr+1 ‖ TI ‖ data), RC the status byte (SW2).
    public func responseMAC(status: UInt8, data: [UInt8]) throws(CryptoError) -> [UInt8] {
        truncatedMAC(try CMAC.aes128(key: macKey, [status] + nextCounterBytes + ti + data))
    }

    /// Command data for CommMode.Full: padded, then AES-CBC under IVc. Empty data stays empty.
    public func encryptCommandData(_ plain: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard !plain.isEmpty else { return [] }
        return try AES128.cbcEncrypt(key: encKey, iv: commandIV(), ISO9797Padding.pad(plain))
    }

    /// The tag's side: decrypts and unpads command data; nil when the padding is wrong.
    public func decryptCommandData(_ encrypted: [UInt8]) throws(CryptoError) -> [UInt8]? {
        guard !encrypted.isEmpty else { return [] }
        guard encrypted.count % 16 == 0 else { return nil }
        return ISO9797Padding.unpad(try AES128.cbcDecrypt(key: encKey, iv: commandIV(), encrypted))
    }

    /// The tag's side: answer data for CommMode.Full, padded and encrypted under IVr.
    public func encryptResponseData(_ plain: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard !plain.isEmpty else { return [] }
        return try AES128.cbcEncrypt(key: encKey, iv: responseIV(), ISO9797Padding.pad(plain))
    }

    /// Decrypts and unpads answer data; nil when the padding is wrong.
    public func decryptResponseData(_ encrypted: [UInt8]) throws(CryptoError) -> [UInt8]? {
        guard !encrypted.isEmpty else { return [] }
        guard encrypted.count % 16 == 0 else { return nil }
        return ISO9797Padding.unpad(try AES128.cbcDecrypt(key: encKey, iv: responseIV(), encrypted))
    }

    // MARK: - The reader's side

    /// The APDU of native command `command` in `mode`: `90 cmd 00 00 Lc header ‖ data' ‖ MACt 00`,
    /// data' encrypted in CommMode.Full. The counter is not advanced: `answer` does that.
    public func apdu(_ command: UInt8, header: [UInt8] = [], data: [UInt8] = [], mode: NTAG424CommMode) throws(CryptoError) -> [UInt8] {
        switch mode {
        case .plain:
            return NTAG424APDU.native(command, header + data)
        case .mac:
            return NTAG424APDU.native(command, header + data + (try commandMAC(command: command, header: header, data: data)))
        case .full:
            let encrypted = try encryptCommandData(data)
            return NTAG424APDU.native(command, header + encrypted + (try commandMAC(command: command, header: header, data: encrypted)))
        }
    }

    /// Checks the tag's answer to `command` sent in `mode` and returns its data (decrypted in
    /// CommMode.Full); advances the counter. A refusal or a wrong MAC throws, and the counter
    /// stays (the session is then over: authenticate again).
    public mutating func answer(to command: UInt8, _ answer: [UInt8], mode: NTAG424CommMode) throws(NTAG424Error) -> [UInt8] {
        guard answer.count >= 2 else { throw .malformed("an answer shorter than its status word") }
        let sw1 = answer[answer.count - 2], sw2 = answer[answer.count - 1]
        guard sw1 == 0x91, sw2 == NTAG424Status.ok.rawValue else { throw .status(command: command, sw1: sw1, sw2: sw2) }
        let body = Array(answer.dropLast(2))
        var data = body
        do {
            if mode != .plain {
                guard body.count >= 8 else { throw NTAG424Error.malformed("an answer without its MAC") }
                data = Array(body.dropLast(8))
                guard Crypto.constantTimeEqual(try responseMAC(status: sw2, data: data), Array(body.suffix(8))) else {
                    throw NTAG424Error.responseMAC(command: command)
                }
            }
            if mode == .full {
                guard let plain = try decryptResponseData(data) else { throw NTAG424Error.malformed("the answer's padding is wrong") }
                data = plain
            }
        } catch let error as NTAG424Error {
            throw error
        } catch let error as CryptoError {
            throw .crypto(error)
        } catch {
            throw .malformed("\(error)")
        }
        commandCounter &+= 1
        return data
    }
}

/// ISO 7816-4 APDUs as NTAG 424 DNA takes them.
public enum NTAG424APDU {
    /// A native command wrapped in ISO 7816 (datasheet §8.4): `90 cmd 00 00 [Lc data] 00`.
    public static func native(_ command: UInt8, _ data: [UInt8]) -> [UInt8] {
        data.isEmpty ? [0x90, command, 0x00, 0x00, 0x00] : [0x90, command, 0x00, 0x00, UInt8(data.count)] + data + [0x00]
    }

    /// ISOSelectFile of the NDEF application by name (D2760000850101).
    public static let selectApplication: [UInt8] = [0x00, 0xA4, 0x04, 0x0C, 0x07, 0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01, 0x00]

    /// ISOSelectFile of an elementary file by its ISO identifier (E103, E104, E105).
    public static func selectFile(_ id: UInt16) -> [UInt8] { [0x00, 0xA4, 0x00, 0x0C, 0x02, UInt8(id >> 8), UInt8(id & 0xFF)] }
}
