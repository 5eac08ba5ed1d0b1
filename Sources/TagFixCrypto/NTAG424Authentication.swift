// AuthenticateEV2First with an AES key (NT4H2421Gx datasheet §9.1.5, AN12196 §5.x worked
// examples), both sides of the three-pass handshake:
//
//   reader → tag   90 71 00 00 02 KeyNo LenCap 00
//   tag → reader   E(K, RndB) 91 AF
//   reader → tag   90 AF 00 00 20 E(K, RndA ‖ RndB′) 00        (RndB′ = RndB rotated left by one byte)
//   tag → reader   E(K, TI ‖ RndA′ ‖ PDcap2 ‖ PCDcap2) 91 00
//
// E is AES-128-CBC with a zero IV, without padding. Both then derive the session keys from RndA
// and RndB (NTAG424Session).

/// Random bytes for RndA, RndB and TI: the system's generator (getrandom on Linux), or a fixed
/// source in tests that replay a worked example.
public typealias RandomBytes = @Sendable (Int) -> [UInt8]

/// The system's cryptographically secure generator.
public let systemRandomBytes: RandomBytes = { count in
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
}

extension Array where Element == UInt8 {
    /// The bytes rotated left by one (RndA′, RndB′).
    var rotatedLeft: [UInt8] { isEmpty ? [] : Array(self[1...]) + [self[0]] }
}

/// The reader's side of AuthenticateEV2First.
public struct NTAG424ReaderAuthentication: Sendable {
    public let keyNumber: UInt8
    private let key: AES128Key
    private let rndA: [UInt8]
    private var rndB: [UInt8]?

    /// - Parameters:
    ///   - keyNumber: the application key, 0–4.
    ///   - rndA: 16 bytes; random unless a test replays an example.
    public init(keyNumber: UInt8, key: AES128Key, rndA: [UInt8]? = nil) {
        self.keyNumber = keyNumber
        self.key = key
        self.rndA = rndA ?? systemRandomBytes(16)
    }

    /// The first command: AuthenticateEV2First with the key number and no capabilities.
    public var firstCommand: [UInt8] { NTAG424APDU.native(0x71, [keyNumber, 0x00]) }

    /// The second command, from the tag's first answer (E(K, RndB) 91 AF).
    public mutating func secondCommand(answering answer: [UInt8]) throws(NTAG424Error) -> [UInt8] {
        guard answer.count >= 2 else { throw .malformed("an answer shorter than its status word") }
        let sw1 = answer[answer.count - 2], sw2 = answer[answer.count - 1]
        guard sw1 == 0x91, sw2 == NTAG424Status.additionalFrame.rawValue else { throw .status(command: 0x71, sw1: sw1, sw2: sw2) }
        guard answer.count == 18 else { throw .malformed("AuthenticateEV2First answered \(answer.count - 2) bytes, not 16") }
        do {
            let b = try AES128.cbcDecrypt(key: key, Array(answer[0..<16]))
            rndB = b
            return NTAG424APDU.native(0xAF, try AES128.cbcEncrypt(key: key, rndA + b.rotatedLeft))
        } catch {
            throw .crypto(error)
        }
    }

    /// The session, from the tag's second answer; throws when the tag did not prove RndA (it
    /// does not hold the key, or refused: 91 AE when it found our RndB′ wrong).
    public func finish(answering answer: [UInt8]) throws(NTAG424Error) -> NTAG424Session {
        guard answer.count >= 2 else { throw .malformed("an answer shorter than its status word") }
        let sw1 = answer[answer.count - 2], sw2 = answer[answer.count - 1]
        guard sw1 == 0x91, sw2 == NTAG424Status.ok.rawValue else { throw .status(command: 0xAF, sw1: sw1, sw2: sw2) }
        guard answer.count == 34, let rndB else { throw .malformed("the second authentication answer is not 32 bytes") }
        do {
            let plain = try AES128.cbcDecrypt(key: key, Array(answer[0..<32]))
            guard Crypto.constantTimeEqual(Array(plain[4..<20]), rndA.rotatedLeft) else {
                throw NTAG424Error.authentication("the tag's RndA′ does not match (it holds another key)")
            }
            return try NTAG424Session(key: key, rndA: rndA, rndB: rndB, ti: Array(plain[0..<4]))
        } catch let error as NTAG424Error {
            throw error
        } catch let error as CryptoError {
            throw .crypto(error)
        } catch {
            throw .malformed("\(error)")
        }
    }
}

/// The tag's side of AuthenticateEV2First (the emulator's).
public struct NTAG424TagAuthentication: Sendable {
    public let keyNumber: UInt8
    private let key: AES128Key
    private let rndB: [UInt8]
    private let ti: [UInt8]

    /// - Parameters:
    ///   - rndB: 16 random bytes; `ti` 4 (the transaction identifier the tag hands out).
    public init(keyNumber: UInt8, key: AES128Key, rndB: [UInt8], ti: [UInt8]) {
        self.keyNumber = keyNumber
        self.key = key
        self.rndB = rndB
        self.ti = ti
    }

    /// The first answer's data: E(K, RndB).
    public func firstAnswer() throws(CryptoError) -> [UInt8] {
        try AES128.cbcEncrypt(key: key, rndB)
    }

    /// Checks the reader's E(K, RndA ‖ RndB′). When RndB′ is right: the second answer's data,
    /// E(K, TI ‖ RndA′ ‖ PDcap2 ‖ PCDcap2), and the session. nil when it is wrong (the reader
    /// holds another key): the tag answers 91 AE.
    public func verify(_ encrypted: [UInt8]) throws(CryptoError) -> (answer: [UInt8], session: NTAG424Session)? {
        guard encrypted.count == 32 else { return nil }
        let plain = try AES128.cbcDecrypt(key: key, encrypted)
        guard Crypto.constantTimeEqual(Array(plain[16..<32]), rndB.rotatedLeft) else { return nil }
        let rndA = Array(plain[0..<16])
        let answer = try AES128.cbcEncrypt(key: key, ti + rndA.rotatedLeft + [UInt8](repeating: 0, count: 12))
        return (answer, try NTAG424Session(key: key, rndA: rndA, rndB: rndB, ti: ti))
    }
}
