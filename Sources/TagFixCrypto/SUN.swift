public import TagFixCore

/// Checks NTAG 424 DNA SUN messages (Secure Dynamic Messaging, AES mode) per the NT4H2421Gx
/// datasheet §9.3 and AN12196 §3.4: decrypts the PICC data with the SDM meta-read key, derives
/// the session MAC key from the SDM file-read key, recomputes the truncated SDMMAC over the MAC
/// input and compares it in constant time; decrypts SDMENCFileData when the URL carries it.
public struct SUNVerifier: Sendable {
    /// Where the SDM file-read key (the MAC key) comes from.
    public enum FileReadKey: Sendable, Hashable {
        /// One key for every tag.
        case fixed(AES128Key)
        /// Per tag: AN10922-diversified from `master` with `UID ‖ suffix` as the input
        /// (`suffix`: application id ‖ system identifier, as the deployment chose).
        case diversified(master: AES128Key, suffix: [UInt8])
    }

    public var metaReadKey: AES128Key
    public var fileReadKey: FileReadKey
    public var names: SUNParameterNames

    /// `metaReadKey` decrypts the PICC data (unused for plain mirroring); `fileReadKey` is the MAC key.
    public init(metaReadKey: AES128Key, fileReadKey: FileReadKey, names: SUNParameterNames = SUNParameterNames()) {
        self.metaReadKey = metaReadKey
        self.fileReadKey = fileReadKey
        self.names = names
    }

    /// Checks `url`; never throws: a URL that fails any step is `valid == false` with the reason.
    public func verify(url: String) -> SUNResult {
        do {
            return try check(SUNMessage.parse(url, names: names))
        } catch {
            return .invalid(error)
        }
    }

    /// Checks a parsed message.
    public func verify(_ message: SUNMessage) -> SUNResult {
        do {
            return try check(message)
        } catch {
            return .invalid(error)
        }
    }

    private func check(_ message: SUNMessage) throws(SUNError) -> SUNResult {
        switch message {
        case .plain(let uid, let counter, let mac, let macInput):
            let picc = PICCData(uid: uid, counter: counter)
            try checkMAC(picc, mac: mac, input: macInput)
            return .verified(uid: uid, counter: counter)
        case .encrypted(let encrypted, let fileData, let mac, let macInput):
            // One block (the parse takes 16 bytes only): CBC under a zero IV is the block's ECB decryption.
            let decrypted = crypto { () throws(CryptoError) in try AES128.decryptBlock(key: metaReadKey, encrypted) }
            let picc: PICCData
            do {
                picc = try PICCData(decrypted: decrypted ?? [])
            } catch {
                // The same work as a real check, so the time taken does not tell a wrong
                // meta-read key (or altered PICC data) from a wrong MAC.
                _ = try? checkMAC(PICCData(uid: [UInt8](repeating: 0, count: 7), counter: 0), mac: mac, input: macInput)
                throw error
            }
            try checkMAC(picc, mac: mac, input: macInput)
            var plain: [UInt8]?
            if let fileData {
                guard picc.counter != nil else { throw .counterMissing }
                plain = try decryptFileData(fileData, picc: picc)
            }
            return .verified(uid: picc.uid, counter: picc.counter, fileData: plain)
        }
    }

    /// The SDM file-read key for the tag with `uid`.
    public func fileReadKey(uid: [UInt8]) -> AES128Key? {
        switch fileReadKey {
        case .fixed(let key): key
        case .diversified(let master, let suffix): try? KeyDiversification.aes128(master: master, input: uid + suffix)
        }
    }

    /// The 8-byte SDMMAC the tag would write for `picc` and `input` (AN12196 §3.4.2: CMAC of SV2
    /// gives KSesSDMFileReadMAC, whose CMAC over the input, odd bytes kept, is SDMMAC).
    public func sdmMAC(_ picc: PICCData, input: [UInt8]) -> [UInt8]? {
        guard let key = fileReadKey(uid: picc.uid) else { return nil }
        return crypto { () throws(CryptoError) in
            let session = try CMAC.aes128(key: key, picc.sv2)
            guard let sessionKey = AES128Key(session) else { throw CryptoError(operation: "session key") }
            return truncatedMAC(try CMAC.aes128(key: sessionKey, input))
        }
    }

    private func checkMAC(_ picc: PICCData, mac: [UInt8], input: [UInt8]) throws(SUNError) {
        guard let expected = sdmMAC(picc, input: input), Crypto.constantTimeEqual(expected, mac) else { throw .macMismatch }
    }

    /// SDMENCFileData: AES-128-CBC under KSesSDMFileReadENC = CMAC(file-read key, SV1), with
    /// IV = AES(KSesSDMFileReadENC, SDMReadCtr ‖ 0¹³) (datasheet §9.3.6, AN12196 §3.4.4).
    private func decryptFileData(_ data: [UInt8], picc: PICCData) throws(SUNError) -> [UInt8] {
        guard let key = fileReadKey(uid: picc.uid) else { throw .macMismatch }
        let plain = crypto { () throws(CryptoError) in
            guard let sessionKey = AES128Key(try CMAC.aes128(key: key, picc.sv1)) else { throw CryptoError(operation: "session key") }
            let iv = try AES128.encryptBlock(key: sessionKey, picc.fileDataIVInput)
            return try AES128.cbcDecrypt(key: sessionKey, iv: iv, data)
        }
        guard let plain else { throw .macMismatch }
        return plain
    }

    private func crypto<T>(_ body: () throws(CryptoError) -> T) -> T? {
        try? body()
    }
}
