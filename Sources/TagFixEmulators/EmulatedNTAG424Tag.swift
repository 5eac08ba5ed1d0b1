import Synchronization
import TagFixCore
public import TagFixCrypto
public import TagFixNDEF

/// An NXP NTAG 424 DNA (NT4H2421Gx) in the emulated field: ISO-DEP with the NDEF application
/// (D2760000850101) and its three files (CC E103, NDEF E104, proprietary E105), ISO SELECT /
/// READ BINARY / UPDATE BINARY, and the native commands wrapped in ISO 7816 (`90 cmd 00 00 Lc …
/// 00`): GetVersion, AuthenticateEV2First, GetFileSettings, ChangeFileSettings, ChangeKey,
/// GetFileCounters, ReadData and WriteData, with AES secure messaging (CommMode.MAC and Full).
/// With Secure Dynamic Messaging on, every read of the NDEF file mirrors the UID and SDMReadCtr
/// (plain or encrypted), SDMENCFileData and the SDMMAC into it.
///
/// What it leaves out is in docs/hardware.md ("The emulated NTAG 424 DNA"): LRP, the
/// originality signature (Read_Sig), TagTamper, SDMReadCtrLimit, the failed-authentication delay,
/// ISO 7816 command chaining and the ISO-DEP frame size (APDUs arrive whole).
public final class EmulatedNTAG424Tag: EmulatedTag {
    public let uid: [UInt8]
    public let sensRes: [UInt8] = [0x03, 0x44]
    public let selRes: UInt8 = 0x20
    /// TL 06, T0 77 (FSCI 7: 128-byte frames), TA 77, TB 71, TC 02, historical byte 80.
    public let ats: [UInt8]? = [0x06, 0x77, 0x77, 0x71, 0x02, 0x80]

    /// The state a provisioning run changes and a test inspects.
    public struct Snapshot: Sendable, Hashable {
        public var keys: [AES128Key]
        public var keyVersions: [UInt8]
        public var ndefFile: [UInt8]
        public var ndefSettings: NTAG424FileSettings
        public var sdmReadCounter: UInt32
    }

    struct File: Sendable {
        var isoID: UInt16
        var contents: [UInt8]
        var settings: NTAG424FileSettings
        var readCounter: UInt32 = 0
    }

    struct State: Sendable {
        var keys: [AES128Key]
        var keyVersions: [UInt8] = [0, 0, 0, 0, 0]
        var files: [UInt8: File]
        var applicationSelected = false
        var selectedFile: UInt8?
        /// The NDEF file as mirrored for the current selection: computed at its first read, so
        /// the reads that follow (READ BINARY in chunks) see the same counter and MAC.
        var mirrored: [UInt8]?
        var pendingAuthentication: NTAG424TagAuthentication?
        var session: NTAG424Session?
        var sessionKey: UInt8?
        /// GetVersion frames still to send after 91 AF.
        var versionFrames: [[UInt8]] = []
    }

    private let state: Mutex<State>
    private let random: RandomBytes

    /// - Parameters:
    ///   - keys: the five application keys (key 0 first); all zero on a factory-fresh tag.
    ///   - ndefFile: the NDEF file's contents (NLEN ‖ message), up to 256 bytes; padded with zeros.
    ///   - ndefSettings: the NDEF file's settings; the factory's by default.
    ///   - sdmReadCounter: SDMReadCtr as the tag holds it (the last value mirrored).
    ///   - random: RndB and TI (the system's generator unless a test fixes them).
    public init(
        uid: [UInt8], keys: [AES128Key] = [AES128Key](repeating: .zero, count: 5), ndefFile: [UInt8] = [0, 0],
        ndefSettings: NTAG424FileSettings = .factoryNDEF, sdmReadCounter: UInt32 = 0, ccFile: [UInt8]? = nil,
        random: @escaping RandomBytes = systemRandomBytes
    ) throws(EmulatorError) {
        guard uid.count == 7 else { throw .unsupportedTag("an NTAG 424 DNA has a 7-byte UID") }
        guard keys.count == 5 else { throw .unsupportedTag("an NTAG 424 DNA has 5 application keys, not \(keys.count)") }
        guard ndefFile.count <= 256 else { throw .unsupportedTag("the NDEF file holds 256 bytes, not \(ndefFile.count)") }
        self.uid = uid
        self.random = random
        let cc = ccFile ?? Self.factoryCCFile
        let files: [UInt8: File] = [
            1: File(isoID: 0xE103, contents: cc + [UInt8](repeating: 0, count: max(0, 32 - cc.count)), settings: .factoryCC),
            2: File(
                isoID: 0xE104, contents: ndefFile + [UInt8](repeating: 0, count: 256 - ndefFile.count), settings: ndefSettings,
                readCounter: sdmReadCounter),
            3: File(isoID: 0xE105, contents: [UInt8](repeating: 0, count: 128), settings: .factoryProprietary),
        ]
        state = Mutex(State(keys: keys, files: files))
    }

    /// The CC file as NXP ships it (NTAG424Declaration.factoryCCFile).
    public static var factoryCCFile: [UInt8] { NTAG424Declaration.factoryCCFile }

    /// The tag a dump declares (TagFix tag JSON with an `ntag424` member).
    public convenience init(
        declaration: NTAG424Declaration, uid: [UInt8], ccFile: [UInt8], ndefFile: [UInt8], random: @escaping RandomBytes = systemRandomBytes
    ) throws(EmulatorError) {
        let keys = declaration.keys.compactMap(AES128Key.init)
        guard keys.count == 5 else { throw .unsupportedTag("an NTAG 424 DNA has 5 AES-128 keys") }
        var settings = NTAG424FileSettings.factoryNDEF
        if let bytes = declaration.ndefFileSettings {
            guard let parsed = NTAG424FileSettings(encoded: bytes) else {
                throw .unsupportedTag("ndef_file_settings_hex is not valid ChangeFileSettings data (datasheet §10.7.1)")
            }
            settings = parsed
        }
        try self.init(
            uid: uid, keys: keys, ndefFile: ndefFile, ndefSettings: settings, sdmReadCounter: declaration.sdmReadCounter, ccFile: ccFile,
            random: random)
    }

    public var snapshot: Snapshot {
        state.withLock { state in
            let ndef = state.files[2]!
            return Snapshot(
                keys: state.keys, keyVersions: state.keyVersions, ndefFile: ndef.contents, ndefSettings: ndef.settings,
                sdmReadCounter: ndef.readCounter)
        }
    }

    public func reset() {
        state.withLock { state in
            state.applicationSelected = false
            state.selectedFile = nil
            state.mirrored = nil
            endSession(&state)
            state.versionFrames = []
        }
    }

    public func transceive(_ command: [UInt8]) -> TagAnswer {
        .data(state.withLock { process(command, &$0) })
    }

    // MARK: - Dispatch

    private static let isoOK: [UInt8] = [0x90, 0x00]

    private func process(_ apdu: [UInt8], _ state: inout State) -> [UInt8] {
        guard apdu.count >= 4 else { return [0x67, 0x00] }
        // Lc and the data, when there are any (case 3 / 4 short APDUs); Le is ignored.
        var body: [UInt8] = []
        if apdu.count > 5 {
            let lc = Int(apdu[4])
            guard apdu.count == 5 + lc || apdu.count == 6 + lc else { return apdu[0] == 0x90 ? status(.lengthError) : [0x67, 0x00] }
            body = Array(apdu[5..<5 + lc])
        }
        switch apdu[0] {
        case 0x00: return iso(apdu, body: body, &state)
        case 0x90:
            guard apdu[2] == 0, apdu[3] == 0 else { return status(.parameterError) }
            return native(apdu[1], body, &state)
        default: return [0x6E, 0x00]
        }
    }

    private func status(_ code: NTAG424Status) -> [UInt8] { [0x91, code.rawValue] }

    private func endSession(_ state: inout State) {
        state.session = nil
        state.sessionKey = nil
        state.pendingAuthentication = nil
    }

    // MARK: - ISO 7816-4

    private func iso(_ apdu: [UInt8], body: [UInt8], _ state: inout State) -> [UInt8] {
        let (ins, p1, p2) = (apdu[1], apdu[2], apdu[3])
        switch ins {
        case 0xA4:  // ISOSelectFile: ends any session
            endSession(&state)
            state.mirrored = nil
            if p1 == 0x04 {
                guard body == [0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01] else { return [0x6A, 0x82] }
                state.applicationSelected = true
                state.selectedFile = nil
                return Self.isoOK
            }
            guard p1 == 0x00, body.count == 2, state.applicationSelected else { return [0x6A, 0x82] }
            let id = UInt16(body[0]) << 8 | UInt16(body[1])
            guard let number = state.files.first(where: { $0.value.isoID == id })?.key else { return [0x6A, 0x82] }
            state.selectedFile = number
            _ = p2  // 0C (no FCI) or 00: both answer 90 00 here
            return Self.isoOK
        case 0xB0:  // ISOReadBinary: plain, free read access only
            guard let number = state.selectedFile, let file = state.files[number] else { return [0x69, 0x86] }
            guard file.settings.read == NTAG424AccessValue.free || file.settings.readWrite == NTAG424AccessValue.free else {
                return [0x69, 0x82]
            }
            let offset = Int(p1 & 0x7F) << 8 | Int(p2)
            let le = apdu.count == 5 ? (apdu[4] == 0 ? 256 : Int(apdu[4])) : 256
            guard offset < file.contents.count else { return [0x6B, 0x00] }
            let contents = readContents(number, &state)
            return Array(contents[offset..<min(contents.count, offset + le)]) + Self.isoOK
        case 0xD6:  // ISOUpdateBinary: plain, free write access only
            guard let number = state.selectedFile, var file = state.files[number] else { return [0x69, 0x86] }
            guard file.settings.write == NTAG424AccessValue.free || file.settings.readWrite == NTAG424AccessValue.free else {
                return [0x69, 0x82]
            }
            let offset = Int(p1 & 0x7F) << 8 | Int(p2)
            guard !body.isEmpty, offset + body.count <= file.contents.count else { return [0x6B, 0x00] }
            file.contents.replaceSubrange(offset..<offset + body.count, with: body)
            state.files[number] = file
            state.mirrored = nil
            return Self.isoOK
        default:
            return [0x6D, 0x00]
        }
    }

    // MARK: - Native commands

    private func native(_ command: UInt8, _ body: [UInt8], _ state: inout State) -> [UInt8] {
        if command != 0xAF {
            state.versionFrames = []
            if state.pendingAuthentication != nil { endSession(&state) }
        }
        switch command {
        case 0x60:  // GetVersion
            state.versionFrames = [
                [0x04, 0x04, 0x02, 0x01, 0x00, 0x11, 0x05],
                uid + [0x00, 0x00, 0x00, 0x00, 0x04, 0x10, 0x24],
            ]
            return [0x04, 0x04, 0x02, 0x30, 0x00, 0x11, 0x05] + status(.additionalFrame)
        case 0xAF:  // additional frame: GetVersion or the second pass of AuthenticateEV2First
            if !state.versionFrames.isEmpty {
                let frame = state.versionFrames.removeFirst()
                return frame + status(state.versionFrames.isEmpty ? .ok : .additionalFrame)
            }
            return authenticateSecondPass(body, &state)
        case 0x71: return authenticateFirst(body, &state)
        case 0xF5: return getFileSettings(body, &state)
        case 0x5F: return changeFileSettings(body, &state)
        case 0xC4: return changeKey(body, &state)
        case 0xF6: return getFileCounters(body, &state)
        case 0xAD: return readData(body, &state)
        case 0x8D: return writeData(body, &state)
        default:
            endSession(&state)
            return status(.illegalCommand)
        }
    }

    private func authenticateFirst(_ body: [UInt8], _ state: inout State) -> [UInt8] {
        endSession(&state)
        guard state.applicationSelected else { return status(.permissionDenied) }
        guard body.count >= 2, body.count == 2 + Int(body[1]) else { return status(.lengthError) }
        guard body[0] < 5 else { return status(.noSuchKey) }
        let handshake = NTAG424TagAuthentication(
            keyNumber: body[0], key: state.keys[Int(body[0])], rndB: random(16), ti: random(4))
        guard let first = try? handshake.firstAnswer() else { return status(.memoryError) }
        state.pendingAuthentication = handshake
        return first + status(.additionalFrame)
    }

    private func authenticateSecondPass(_ body: [UInt8], _ state: inout State) -> [UInt8] {
        guard let handshake = state.pendingAuthentication else { return status(.illegalCommand) }
        endSession(&state)
        guard body.count == 32 else { return status(.lengthError) }
        guard let result = try? handshake.verify(body) else { return status(.authenticationError) }
        state.session = result.session
        state.sessionKey = handshake.keyNumber
        return result.answer + status(.ok)
    }

    /// A command of the session in `mode`: checks the MAC over `header ‖ data'` and decrypts
    /// data' (Full). On a wrong MAC or padding the tag answers 91 1E and drops the session.
    private func unwrap(
        _ command: UInt8, _ body: [UInt8], headerLength: Int, mode: NTAG424CommMode, _ state: inout State
    ) -> Result<(header: [UInt8], data: [UInt8]), NTAG424Status> {
        guard body.count >= headerLength else { return .failure(.lengthError) }
        let header = Array(body[..<headerLength])
        guard mode != .plain else {
            return .success((header, Array(body[headerLength...])))
        }
        guard let session = state.session else { return .failure(.authenticationError) }
        guard body.count >= headerLength + 8 else {
            endSession(&state)
            return .failure(.lengthError)
        }
        let sent = Array(body[headerLength..<body.count - 8])
        guard let mac = try? session.commandMAC(command: command, header: header, data: sent),
            Crypto.constantTimeEqual(mac, Array(body.suffix(8)))
        else {
            endSession(&state)
            return .failure(.integrityError)
        }
        guard mode == .full else { return .success((header, sent)) }
        guard let plain = try? session.decryptCommandData(sent) else {
            endSession(&state)
            return .failure(.integrityError)
        }
        return .success((header, plain))
    }

    /// The answer to a successful command in `mode` (the counter advances first for plain
    /// commands of a session, after the MAC for MAC'd ones: both sides compute with CmdCtr+1).
    private func wrap(_ data: [UInt8], mode: NTAG424CommMode, _ state: inout State) -> [UInt8] {
        guard let session = state.session else { return data + status(.ok) }
        var out = data
        if mode != .plain {
            let sent = mode == .full ? ((try? session.encryptResponseData(data)) ?? []) : data
            out = sent + ((try? session.responseMAC(status: 0x00, data: sent)) ?? [])
        }
        state.session?.commandCounter &+= 1
        return out + status(.ok)
    }

    /// Whether the session allows access condition `access` (a key number), or it is free.
    private func allows(_ access: NTAG424Access, _ state: State) -> Bool {
        access == NTAG424AccessValue.free || (access <= 4 && state.sessionKey == access && state.session != nil)
    }

    private func getFileSettings(_ body: [UInt8], _ state: inout State) -> [UInt8] {
        let mode: NTAG424CommMode = state.session == nil ? .plain : .mac
        switch unwrap(0xF5, body, headerLength: 1, mode: mode, &state) {
        case .failure(let code): return status(code)
        case .success(let (header, data)):
            guard data.isEmpty else { return status(.lengthError) }
            guard let file = state.files[header[0]] else { return status(.fileNotFound) }
            return wrap(file.settings.getFileSettingsData(fileSize: file.contents.count), mode: mode, &state)
        }
    }

    private func changeFileSettings(_ body: [UInt8], _ state: inout State) -> [UInt8] {
        guard let number = body.first, let file = state.files[number] else { return status(.fileNotFound) }
        let free = file.settings.change == NTAG424AccessValue.free
        guard free || allows(file.settings.change, state) else {
            endSession(&state)
            return status(file.settings.change == NTAG424AccessValue.never ? .permissionDenied : .authenticationError)
        }
        let mode: NTAG424CommMode = free ? .plain : .full
        switch unwrap(0x5F, body, headerLength: 1, mode: mode, &state) {
        case .failure(let code): return status(code)
        case .success(let (_, data)):
            guard let settings = NTAG424FileSettings(encoded: data) else {
                endSession(&state)
                return status(.parameterError)
            }
            guard number == 2 || settings.sdm == nil else { return status(.parameterError) }
            if let sdm = settings.sdm, !sdmFits(sdm, size: file.contents.count) {
                endSession(&state)
                return status(.parameterError)
            }
            if settings.sdm != nil, file.settings.sdm == nil { state.files[number]?.readCounter = 0 }
            state.files[number]?.settings = settings
            state.mirrored = nil
            return wrap([], mode: mode == .plain ? .plain : .mac, &state)
        }
    }

    /// The mirrors must lie inside the file and not overlap the way the datasheet forbids
    /// (checked as far as the emulator needs: inside the file, the MAC input before the MAC).
    private func sdmFits(_ sdm: NTAG424FileSettings.SDM, size: Int) -> Bool {
        var spans: [(Int?, Int)] = [(sdm.uidOffset, 14), (sdm.readCounterOffset, 6), (sdm.piccDataOffset, 32), (sdm.macOffset, 16)]
        if sdm.encryptFileData {
            guard let length = sdm.encLength, length > 0, length % 32 == 0 else { return false }
            spans.append((sdm.encOffset, length))
        }
        for (offset, length) in spans {
            if let offset, offset + length > size { return false }
        }
        if let input = sdm.macInputOffset, let mac = sdm.macOffset, input > mac { return false }
        return true
    }

    private func changeKey(_ body: [UInt8], _ state: inout State) -> [UInt8] {
        guard state.session != nil, state.sessionKey == 0 else {
            endSession(&state)
            return status(.authenticationError)
        }
        switch unwrap(0xC4, body, headerLength: 1, mode: .full, &state) {
        case .failure(let code): return status(code)
        case .success(let (header, data)):
            let number = Int(header[0] & 0x0F)
            guard number < 5 else { return status(.noSuchKey) }
            if number == 0 {
                guard data.count == 17, let key = AES128Key(Array(data[0..<16])) else {
                    endSession(&state)
                    return status(.lengthError)
                }
                state.keys[0] = key
                state.keyVersions[0] = data[16]
                // The session's own key changed: the session ends, the answer carries no MAC.
                endSession(&state)
                return status(.ok)
            }
            guard data.count == 21 else {
                endSession(&state)
                return status(.lengthError)
            }
            let newBytes = zip(data[0..<16], state.keys[number].bytes).map { $0 ^ $1 }
            guard let key = AES128Key(newBytes), NTAG424ChangeKey.crc32(newBytes) == Array(data[17..<21]) else {
                endSession(&state)
                return status(.integrityError)
            }
            state.keys[number] = key
            state.keyVersions[number] = data[16]
            return wrap([], mode: .mac, &state)
        }
    }

    private func getFileCounters(_ body: [UInt8], _ state: inout State) -> [UInt8] {
        guard let number = body.first, let file = state.files[number] else { return status(.fileNotFound) }
        guard let sdm = file.settings.sdm, sdm.counterRetrieval != NTAG424AccessValue.never else { return status(.permissionDenied) }
        let free = sdm.counterRetrieval == NTAG424AccessValue.free
        guard free || allows(sdm.counterRetrieval, state) else {
            endSession(&state)
            return status(.authenticationError)
        }
        let mode: NTAG424CommMode = free ? .plain : .full
        switch unwrap(0xF6, body, headerLength: 1, mode: mode, &state) {
        case .failure(let code): return status(code)
        case .success(let (_, data)):
            guard data.isEmpty else { return status(.lengthError) }
            let counter = file.readCounter
            return wrap(
                [
                    UInt8(truncatingIfNeeded: counter), UInt8(truncatingIfNeeded: counter >> 8), UInt8(truncatingIfNeeded: counter >> 16),
                    0, 0,
                ],
                mode: mode, &state)
        }
    }

    /// ReadData / WriteData: the file's CommMode with a key's access, plain with free access.
    private func dataMode(_ access: [NTAG424Access], file: File, _ state: State) -> NTAG424CommMode? {
        if access.contains(NTAG424AccessValue.free) { return .plain }
        guard access.contains(where: { allows($0, state) }) else { return nil }
        return file.settings.commMode
    }

    private func readData(_ body: [UInt8], _ state: inout State) -> [UInt8] {
        guard let number = body.first, let file = state.files[number] else { return status(.fileNotFound) }
        guard let mode = dataMode([file.settings.read, file.settings.readWrite], file: file, state) else {
            endSession(&state)
            return status(.authenticationError)
        }
        switch unwrap(0xAD, body, headerLength: 7, mode: mode, &state) {
        case .failure(let code): return status(code)
        case .success(let (header, data)):
            guard data.isEmpty else { return status(.lengthError) }
            let offset = Int(header[1]) | Int(header[2]) << 8 | Int(header[3]) << 16
            var length = Int(header[4]) | Int(header[5]) << 8 | Int(header[6]) << 16
            guard offset < file.contents.count else { return status(.boundaryError) }
            if length == 0 { length = file.contents.count - offset }
            guard offset + length <= file.contents.count else { return status(.boundaryError) }
            let contents = mode == .plain ? readContents(number, &state) : file.contents
            return wrap(Array(contents[offset..<offset + length]), mode: mode, &state)
        }
    }

    private func writeData(_ body: [UInt8], _ state: inout State) -> [UInt8] {
        guard let number = body.first, let file = state.files[number] else { return status(.fileNotFound) }
        guard let mode = dataMode([file.settings.write, file.settings.readWrite], file: file, state) else {
            endSession(&state)
            return status(.authenticationError)
        }
        switch unwrap(0x8D, body, headerLength: 7, mode: mode, &state) {
        case .failure(let code): return status(code)
        case .success(let (header, data)):
            let offset = Int(header[1]) | Int(header[2]) << 8 | Int(header[3]) << 16
            let length = Int(header[4]) | Int(header[5]) << 8 | Int(header[6]) << 16
            guard data.count == length, length > 0 else { return status(.lengthError) }
            guard offset + length <= file.contents.count else { return status(.boundaryError) }
            state.files[number]?.contents.replaceSubrange(offset..<offset + length, with: data)
            state.mirrored = nil
            return wrap([], mode: mode == .plain ? .plain : .mac, &state)
        }
    }

    // MARK: - Secure Dynamic Messaging

    /// The file as a plain read sees it: for the NDEF file with SDM, the mirrored image of this
    /// selection. Its first read increments SDMReadCtr (datasheet §9.3.3: the counter counts
    /// reads with SDM on; it is reset when ChangeFileSettings turns SDM on).
    private func readContents(_ number: UInt8, _ state: inout State) -> [UInt8] {
        guard let file = state.files[number] else { return [] }
        guard let sdm = file.settings.sdm else { return file.contents }
        if let mirrored = state.mirrored { return mirrored }
        let counter = min(file.readCounter + 1, 0xFF_FFFF)
        state.files[number]?.readCounter = counter
        let image = mirror(file.contents, sdm: sdm, counter: counter, keys: state.keys)
        state.mirrored = image
        return image
    }

    /// Writes the SDM mirrors into `contents` (ASCII, upper-case hex): plain UID and counter,
    /// or encrypted PICCData; SDMENCFileData; then the SDMMAC over the MAC input.
    func mirror(_ contents: [UInt8], sdm: NTAG424FileSettings.SDM, counter: UInt32, keys: [AES128Key]) -> [UInt8] {
        var out = contents
        func put(_ bytes: [UInt8], at offset: Int?) {
            guard let offset else { return }
            let text = Array(SUNHex.encode(bytes).utf8)
            guard offset + text.count <= out.count else { return }
            out.replaceSubrange(offset..<offset + text.count, with: text)
        }
        let picc = PICCData(uid: sdm.mirrorUID ? uid : [], counter: sdm.mirrorReadCounter ? counter : nil)
        let counterLSB = [
            UInt8(truncatingIfNeeded: counter), UInt8(truncatingIfNeeded: counter >> 8), UInt8(truncatingIfNeeded: counter >> 16),
        ]
        if sdm.metaRead == NTAG424AccessValue.free {
            if sdm.mirrorUID { put(uid, at: sdm.uidOffset) }
            // In ASCII the counter is written most significant byte first (datasheet §9.3.3).
            if sdm.mirrorReadCounter { put(counterLSB.reversed(), at: sdm.readCounterOffset) }
        } else if sdm.metaRead <= 4 {
            var plain = [sdm.piccDataTag] + (sdm.mirrorUID ? uid : []) + (sdm.mirrorReadCounter ? counterLSB : [])
            plain += random(16 - plain.count)
            if let encrypted = try? AES128.cbcEncrypt(key: keys[Int(sdm.metaRead)], plain) { put(encrypted, at: sdm.piccDataOffset) }
        }
        guard sdm.fileRead <= 4 else { return out }
        let fileReadKey = keys[Int(sdm.fileRead)]
        if sdm.encryptFileData, let offset = sdm.encOffset, let length = sdm.encLength, offset + length <= out.count {
            // The file's bytes at the placeholder's first half are the plaintext (datasheet §9.3.6).
            let plain = Array(out[offset..<offset + length / 2])
            if let key = try? CMAC.aes128(key: fileReadKey, picc.sv1), let sessionKey = AES128Key(key),
                let iv = try? AES128.encryptBlock(key: sessionKey, picc.fileDataIVInput),
                let encrypted = try? AES128.cbcEncrypt(key: sessionKey, iv: iv, plain)
            {
                put(encrypted, at: offset)
            }
        }
        if let macOffset = sdm.macOffset, let inputOffset = sdm.macInputOffset, inputOffset <= macOffset, macOffset <= out.count,
            let key = try? CMAC.aes128(key: fileReadKey, picc.sv2), let sessionKey = AES128Key(key),
            let mac = try? CMAC.aes128(key: sessionKey, Array(out[inputOffset..<macOffset]))
        {
            put(truncatedMAC(mac), at: macOffset)
        }
        return out
    }
}
