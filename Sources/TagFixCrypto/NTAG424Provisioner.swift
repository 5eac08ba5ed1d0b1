public import TagFixCore

/// Provisions a factory-fresh NTAG 424 DNA for SUN (`tagfix enroll --sun`), over an APDU exchange
/// with the tag while it stays selected. In order, each step leaving the tag recoverable
/// (docs/trust.md#provisioning-states):
///
/// 1. authenticate with the factory key 0 (all zero); a tag whose key 0 is already this site's is
///    only read back (a re-run after step 6);
/// 2. write the NDEF file (the URL template with zeros where the tag mirrors) unless SDM is
///    already on with these settings, and turn SDM on (`ChangeFileSettings`: PICC data encrypted
///    under key 2, SDMMAC under key 1, writes and changes need key 0);
/// 3. key 1 (SDM file-read) to the site's file-read key for this UID, 4. key 2 (SDM meta-read) to
///    the site's meta-read key — each from the factory key, or found already set on a re-run;
/// 5. key 0 last, to the application key AN10922-diversified from the key set's `key` with
///    `UID ‖ 00`: until then the factory key still opens the tag;
/// 6. read the NDEF file back and verify the SUN it mirrors with the key set.
public struct NTAG424Provisioner {
    public enum Stage: String, Sendable, CaseIterable {
        case authenticated = "authenticated with the factory key 0"
        case sdmOn = "URL template written and SDM on"
        case fileReadKey = "key 1 (SDM file-read) set"
        case metaReadKey = "key 2 (SDM meta-read) set"
        case applicationKey = "key 0 (application) set"
        case verified = "one SUN read back and verified"
    }

    /// The NDEF file as written (NLEN ‖ message) and the SDM settings that mirror into it.
    public let file: [UInt8]
    public let settings: NTAG424FileSettings
    /// The URL as written (zeros at the mirrors) and where its mirrors are in `url`'s UTF-8.
    public let url: String
    let piccInURL: Int
    let macInURL: Int
    public let verifier: SUNVerifier
    public let uid: [UInt8]
    let fileReadKey: AES128Key
    let applicationKey: AES128Key

    public static let piccPlaceholder = "{picc_data}"
    public static let cmacPlaceholder = "{cmac}"

    /// A template's SUN placeholders filled with zeros (32 for the PICC data, 16 for the CMAC),
    /// and the names of the query parameters that carry them (for the registry's `sun` settings).
    public static func prepare(template: String) throws(NTAG424ProvisionError) -> (template: String, names: SUNParameterNames) {
        func parameter(before placeholder: String) throws(NTAG424ProvisionError) -> String {
            guard let range = template.firstRange(of: placeholder) else {
                throw .template("the URL template needs \(piccPlaceholder) and \(cmacPlaceholder), e.g. ?picc_data={picc_data}&cmac={cmac}")
            }
            guard template[range.upperBound...].firstRange(of: placeholder) == nil else { throw .template("\(placeholder) appears twice") }
            let head = template[..<range.lowerBound]
            guard head.hasSuffix("="), let start = head.lastIndex(where: { $0 == "?" || $0 == "&" }) else {
                throw .template("\(placeholder) must be a whole query value, as in ?name=\(placeholder)")
            }
            return String(head[head.index(after: start)..<head.index(before: head.endIndex)])
        }
        let names = SUNParameterNames(piccData: try parameter(before: piccPlaceholder), cmac: try parameter(before: cmacPlaceholder))
        let filled = template.replacing(piccPlaceholder, with: String(repeating: "0", count: 32))
            .replacing(cmacPlaceholder, with: String(repeating: "0", count: 16))
        return (filled, names)
    }

    /// - Parameters:
    ///   - url: the URL to write, with 32 zeros as `names.piccData`'s value and 16 as `names.cmac`'s.
    ///   - message: its NDEF message (one URI record: the URL's tail ends the message).
    ///   - keys: the site's key set (`SUNKeyring`), whose names are replaced by `names`.
    public init(uid: [UInt8], url: String, message: [UInt8], names: SUNParameterNames, keys: SUNVerifier) throws(NTAG424ProvisionError) {
        guard uid.count == 7 else { throw .template("an NTAG 424 DNA has a 7-byte UID, this tag \(uid.count)") }
        let bytes = Array(url.utf8)
        func position(of name: String, count: Int) throws(NTAG424ProvisionError) -> Int {
            let needle = Array("\(name)=".utf8) + Array(repeating: UInt8(ascii: "0"), count: count)
            guard
                let start = (0...max(0, bytes.count - needle.count)).first(where: { i in
                    i + needle.count <= bytes.count && Array(bytes[i..<i + needle.count]) == needle
                        && (i > 0 && (bytes[i - 1] == UInt8(ascii: "?") || bytes[i - 1] == UInt8(ascii: "&")))
                })
            else { throw .template("the URL has no \(name)= with \(count) zeros") }
            return start + name.utf8.count + 1
        }
        piccInURL = try position(of: names.piccData, count: 32)
        macInURL = try position(of: names.cmac, count: 16)
        file = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        guard file.count <= 256, message.count >= bytes.count - piccInURL else {
            throw .template("the NDEF message (\(message.count) bytes) does not fit the NDEF file (254) or does not end with the URL")
        }
        // The URL's tail ends the file: a URL position maps to the file by its distance from the end.
        let base = file.count - bytes.count
        self.url = url
        self.uid = uid
        var verifier = keys
        verifier.names = names
        self.verifier = verifier
        switch keys.fileReadKey {
        case .fixed(let key):
            fileReadKey = key
            applicationKey = try Self.diversify(key, uid + [0x00])
        case .diversified(let master, let suffix):
            fileReadKey = try Self.diversify(master, uid + suffix)
            applicationKey = try Self.diversify(master, uid + [0x00])
        }
        settings = NTAG424FileSettings(
            commMode: .plain, read: NTAG424AccessValue.free, write: 0x00, readWrite: 0x00, change: 0x00,
            sdm: .init(
                counterRetrieval: 0x01, metaRead: 0x02, fileRead: 0x01, piccDataOffset: base + piccInURL, macInputOffset: base + macInURL,
                macOffset: base + macInURL))
    }

    private static func diversify(_ master: AES128Key, _ input: [UInt8]) throws(NTAG424ProvisionError) -> AES128Key {
        do {
            return try KeyDiversification.aes128(master: master, input: input)
        } catch {
            throw .template("AN10922 diversification failed: \(error)")
        }
    }

    /// Runs the steps (skipping those a previous run finished) and returns the SUN read back.
    /// `progress` hears each stage as it is reached.
    public func run(exchange: @escaping NTAG424Commander.Exchange, progress: (Stage) -> Void = { _ in }) throws(NTAG424ProvisionError)
        -> SUNResult
    {
        var tag = NTAG424Commander(exchange: exchange)
        var reached: Stage?
        func step<T>(_ body: () throws(NTAG424Error) -> T) throws(NTAG424ProvisionError) -> T {
            do {
                return try body()
            } catch {
                throw .tag(error, reached: reached)
            }
        }
        func reach(_ stage: Stage) {
            reached = stage
            progress(stage)
        }
        try step { () throws(NTAG424Error) in try tag.selectApplication() }
        // 1. The factory key 0, or (a re-run after key 0 was set) this site's.
        do {
            try tag.authenticate(keyNumber: 0, key: .zero)
        } catch .status(_, 0x91, 0xAE) {
            do {
                try tag.selectApplication()
                try tag.authenticate(keyNumber: 0, key: applicationKey)
            } catch {
                throw .foreignKey
            }
            reach(.applicationKey)
            let result = try readBack(&tag)
            reach(.verified)
            return result
        } catch {
            throw .tag(error, reached: nil)
        }
        reach(.authenticated)
        // 2. The template and SDM, unless a previous run turned SDM on with these settings.
        let current = try step { () throws(NTAG424Error) in try tag.getFileSettings(file: 2) }
        if current != settings {
            try step { () throws(NTAG424Error) in
                try tag.selectApplication()
                try tag.updateBinary(fileID: 0xE104, file)
                try tag.selectApplication()
                try tag.authenticate(keyNumber: 0, key: .zero)
                try tag.changeFileSettings(file: 2, settings)
            }
        }
        reach(.sdmOn)
        // 3–4. Keys 1 and 2, from the factory key or already set by a previous run.
        for (number, key, stage) in [(UInt8(1), fileReadKey, Stage.fileReadKey), (2, verifier.metaReadKey, .metaReadKey)] {
            do {
                try tag.changeKey(number: number, to: key, from: .zero, version: 1)
            } catch {
                // A wrong old key fails the tag's CRC and ends the session: is it already the new one?
                try step { () throws(NTAG424Error) in
                    try tag.selectApplication()
                    try tag.authenticate(keyNumber: 0, key: .zero)
                    try tag.changeKey(number: number, to: key, from: key, version: 1)
                }
            }
            reach(stage)
        }
        // 5. Key 0 last (ends the session).
        try step { () throws(NTAG424Error) in try tag.changeKey(number: 0, to: applicationKey, from: .zero, version: 1) }
        reach(.applicationKey)
        let result = try readBack(&tag)
        reach(.verified)
        return result
    }

    /// 6. Reads the NDEF file as any phone would and verifies the SUN in it.
    private func readBack(_ tag: inout NTAG424Commander) throws(NTAG424ProvisionError) -> SUNResult {
        let read: [UInt8]
        do {
            try tag.selectApplication()
            read = try tag.readBinary(fileID: 0xE104, count: file.count)
        } catch {
            throw .tag(error, reached: .applicationKey)
        }
        guard read.count == file.count, read[0..<2] == file[0..<2] else {
            throw .readBack("the NDEF file read back is not the one written (\(read.count) bytes)")
        }
        var bytes = Array(url.utf8)
        let base = file.count - bytes.count
        bytes.replaceSubrange(piccInURL..<piccInURL + 32, with: read[base + piccInURL..<base + piccInURL + 32])
        bytes.replaceSubrange(macInURL..<macInURL + 16, with: read[base + macInURL..<base + macInURL + 16])
        let mirrored = String(decoding: bytes, as: UTF8.self)
        let result = verifier.verify(url: mirrored)
        guard result.valid, result.uid == uid else {
            throw .readBack("the SUN read back does not verify with the key set (\(result.valid ? "another UID" : "invalid"))")
        }
        return result
    }
}

/// Why provisioning stopped, and what state the tag is in.
public enum NTAG424ProvisionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The URL template cannot carry a SUN.
    case template(String)
    /// The tag refused a step, or left the field; `reached`: the last stage finished.
    case tag(NTAG424Error, reached: NTAG424Provisioner.Stage?)
    /// Key 0 is neither the factory key nor this key set's: another site's tag.
    case foreignKey
    case readBack(String)

    public var description: String {
        switch self {
        case .template(let why): return "--write-url: \(why)"
        case .tag(let error, let reached):
            let state = reached.map { "the tag's last finished step: \($0.rawValue)" } ?? "the tag is unchanged"
            return "provisioning stopped: \(error); \(state). Run the same command again: it resumes (docs/trust.md#provisioning-states)"
        case .foreignKey:
            return
                "the tag's key 0 is neither the factory key nor this key set's: it was provisioned by another site or key set; nothing was changed"
        case .readBack(let why):
            return "\(why): the tag is keyed but its SUN fails; check the key file's key set, then run the same command again"
        }
    }
}
