import Synchronization

// How the verifier checks a registry tag that is an NTAG 424 DNA with SUN mirroring (issue 21):
// the tag's settings in the registry, the keys (behind `SUNAuthenticator`, implemented in
// TagFixCrypto: the core does no cryptography) and the durable read counters (behind
// `SUNCounterStore`). docs/trust.md#sun says what each verdict means.

/// A registry tag's SUN settings: which key set checks it and where its URL carries the mirrored
/// data. Written in a registry's `sun` column as `KEY[;picc=NAME][;cmac=NAME][;uid=NAME]
/// [;ctr=NAME][;enc=NAME][;mac_from=NAME]`, e.g. `site;picc=e;cmac=c`. Never a key itself: keys
/// live in the key file the run is given (`verify --sun-keys`).
public struct SUNSettings: Sendable, Hashable, CustomStringConvertible {
    /// The name of the key set in the key file (`[NAME]` section; `default` for the lines before any).
    public var keyName: String
    public var names: SUNParameterNames

    public init(keyName: String = "default", names: SUNParameterNames = SUNParameterNames()) {
        self.keyName = keyName
        self.names = names
    }

    private static let fields = ["picc", "cmac", "uid", "ctr", "enc", "mac_from"]

    /// Parses the `sun` column's text. - Throws: a message naming the part that is wrong.
    public init(spec: String) throws(SUNSettingsError) {
        let parts = spec.split(separator: ";", omittingEmptySubsequences: false).map { String($0) }
        guard let key = parts.first, Self.isName(key) else { throw .badKeyName(parts.first ?? "") }
        var names = SUNParameterNames()
        var seen: Set<String> = []
        for part in parts.dropFirst() {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map { String($0) }
            guard pair.count == 2, Self.fields.contains(pair[0]) else { throw .badField(part) }
            guard seen.insert(pair[0]).inserted else { throw .repeated(pair[0]) }
            guard Self.isParameter(pair[1]) else { throw .badParameter(pair[1]) }
            switch pair[0] {
            case "picc": names.piccData = pair[1]
            case "cmac": names.cmac = pair[1]
            case "uid": names.uid = pair[1]
            case "ctr": names.counter = pair[1]
            case "enc": names.encryptedFileData = pair[1]
            default: names.macInputFrom = pair[1]
            }
        }
        self.init(keyName: key, names: names)
    }

    /// The `sun` column's text: only what differs from the defaults, so `parse(description)` is `self`.
    public var description: String {
        let defaults = SUNParameterNames()
        var text = keyName
        if names.piccData != defaults.piccData { text += ";picc=" + names.piccData }
        if names.cmac != defaults.cmac { text += ";cmac=" + names.cmac }
        if names.uid != defaults.uid { text += ";uid=" + names.uid }
        if names.counter != defaults.counter { text += ";ctr=" + names.counter }
        if let enc = names.encryptedFileData { text += ";enc=" + enc }
        if let from = names.macInputFrom { text += ";mac_from=" + from }
        return text
    }

    /// A key set's name: 1–64 of letters, digits, `_`, `-`, `.`.
    static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || [0x2D, 0x2E, 0x5F].contains($0)
            }
    }

    /// A query parameter's name: 1–32 printable ASCII characters that are not `&`, `=`, `;`, `#`, `?`.
    static func isParameter(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 32 && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !Array("&=;#?".utf8).contains($0) }
    }
}

/// Why a registry's `sun` text could not be read.
public enum SUNSettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    case badKeyName(String)
    case badField(String)
    case repeated(String)
    case badParameter(String)

    public var description: String {
        switch self {
        case .badKeyName(let name):
            "sun \"\(name)\" does not start with a key set's name (letters, digits, _ - .): write KEY[;picc=NAME][;cmac=NAME]…"
        case .badField(let part):
            "sun part \"\(part)\" is not one of picc=, cmac=, uid=, ctr=, enc=, mac_from="
        case .repeated(let field): "sun gives \(field)= twice"
        case .badParameter(let name): "sun parameter name \"\(name)\" is empty, too long, or holds & = ; # ? or a space"
        }
    }
}

/// Checks SUN URLs with the run's keys (TagFixCrypto's `SUNKeyring`).
public protocol SUNAuthenticator: Sendable {
    /// Whether a key set of this name is loaded.
    func hasKeys(named name: String) -> Bool
    /// Checks `url` with the key set `settings.keyName` and its parameter names; `nil` when no
    /// such key set is loaded.
    func verify(url: String, settings: SUNSettings) -> SUNResult?
}

/// The last SDMReadCtr accepted for each SUN tag, kept where a crash cannot lose it.
public protocol SUNCounterStore: Sendable {
    /// The highest counter accepted for `uid`, or `nil` when none has been.
    func lastAccepted(uid: TagUID) throws(RegistryError) -> UInt32?
    /// Accepts `counter` for `uid` only if it is above the last accepted one, durably, before
    /// returning: `true` when accepted, `false` when it was not above (a replay).
    func accept(uid: TagUID, counter: UInt32, tagID: String) throws(RegistryError) -> Bool
    /// Accepts each of `counters` in order, as `accept` would one after another, and all of them
    /// durably before returning (a store that can: in one transaction): whether each was accepted.
    /// Default: one `accept` each.
    /// - Throws: when they could not be stored; then none may be taken as accepted.
    func acceptAll(_ counters: [SUNCounterAcceptance]) throws(RegistryError) -> [Bool]
    /// The highest counter accepted for each of `uids` (a tag none was accepted for is absent).
    /// Default: one `lastAccepted(uid:)` each.
    func lastAccepted(uids: [TagUID]) throws(RegistryError) -> [TagUID: UInt32]
    /// Whether `lastAccepted(uids:)` costs much less than a `lastAccepted(uid:)` each (a store
    /// across the network answers many in one round trip), so a group of taps reads its tags'
    /// counters up front. Default: false.
    var readsManyAtOnce: Bool { get }
}

/// One counter for `SUNCounterStore.acceptAll`: what `accept` takes.
public struct SUNCounterAcceptance: Sendable, Hashable {
    public var uid: TagUID
    public var counter: UInt32
    public var tagID: String

    public init(uid: TagUID, counter: UInt32, tagID: String) {
        self.uid = uid
        self.counter = counter
        self.tagID = tagID
    }
}

extension SUNCounterStore {
    public func lastAccepted(uids: [TagUID]) throws(RegistryError) -> [TagUID: UInt32] {
        var last: [TagUID: UInt32] = [:]
        for uid in uids { if let counter = try lastAccepted(uid: uid) { last[uid] = counter } }
        return last
    }

    public var readsManyAtOnce: Bool { false }

    public func acceptAll(_ counters: [SUNCounterAcceptance]) throws(RegistryError) -> [Bool] {
        var accepted: [Bool] = []
        accepted.reserveCapacity(counters.count)
        for item in counters { accepted.append(try accept(uid: item.uid, counter: item.counter, tagID: item.tagID)) }
        return accepted
    }
}

/// Counters kept in memory: for tests and scenario replays (a live run keeps them in SQLite).
public final class InMemorySUNCounters: SUNCounterStore {
    private let counters = Mutex<[TagUID: UInt32]>([:])

    public init(_ initial: [TagUID: UInt32] = [:]) { counters.withLock { $0 = initial } }

    public func lastAccepted(uid: TagUID) -> UInt32? { counters.withLock { $0[uid] } }

    public func accept(uid: TagUID, counter: UInt32, tagID: String) -> Bool {
        counters.withLock { table in
            if let last = table[uid], counter <= last { return false }
            table[uid] = counter
            return true
        }
    }
}

/// What a verified SUN proved about a scan, carried to its verdict so the counter is accepted
/// (`SUNCounterStore.accept`) before the verdict is logged or shown.
///
/// Plain bits, no reference: the UID's bytes are packed into two integers, so the evidence adds
/// no retain, release or copy witness to the verdicts and expectations of the many tags that are
/// not SUN tags (with a `TagUID` field, callgrind counted +59 instructions a verdict).
public struct SUNEvidence: Sendable, Hashable {
    private let low: UInt64
    private let high: UInt16
    private let length: UInt8
    /// SDMReadCtr, when the tag mirrors it.
    public let counter: UInt32?

    public init(uid: TagUID, counter: UInt32?) {
        let bytes = uid.bytes
        var low: UInt64 = 0
        var high: UInt16 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 { low |= UInt64(byte) << (8 * UInt64(index)) } else { high |= UInt16(byte) << (8 * UInt16(index - 8)) }
        }
        self.low = low
        self.high = high
        self.length = UInt8(bytes.count)
        self.counter = counter
    }

    /// The UID decrypted from (or mirrored in) the URL.
    public var uid: TagUID {
        let bytes = (0..<Int(length)).map { index in
            index < 8 ? UInt8(truncatingIfNeeded: low >> (8 * UInt64(index))) : UInt8(truncatingIfNeeded: high >> (8 * UInt16(index - 8)))
        }
        // 4 to 10 bytes by construction: a TagUID's.
        return TagUID(checkedBytes: bytes)
    }
}

extension Verifier {
    /// The keys and the counters a run checks SUN tags with.
    public struct SUNCheck: Sendable {
        public var authenticator: any SUNAuthenticator
        public var counters: any SUNCounterStore

        public init(authenticator: any SUNAuthenticator, counters: any SUNCounterStore) {
            self.authenticator = authenticator
            self.counters = counters
        }
    }

    /// What `checkSUN` found.
    enum SUNOutcome {
        /// The proof verified: accept this counter with the verdict.
        case proven(SUNEvidence)
        /// The scan is decided without a fix.
        case failed(Verdict.Kind)
    }

    /// Checks a SUN registry tag's scan: the CMAC, then the counter against the last accepted,
    /// then the decrypted UID against the enrolled one. `.success` carries what to accept.
    func checkSUN(_ scan: TagScan, placement: Placement) -> SUNOutcome {
        let tag = placement.id
        let settings: SUNSettings
        do {
            guard let found = try registry.entry(forID: placement.id)?.sun else {
                return .failed(.untrusted(.sunInvalid(tag: tag, problem: .missingParameter("sun settings"))))
            }
            settings = found
        } catch {
            return .failed(.inconclusive(.registryUnavailable(error)))
        }
        guard let sun else { return .failed(.inconclusive(.sunUnchecked(tag: tag, keyName: settings.keyName))) }
        guard let url = scan.url else {
            return .failed(.untrusted(.sunInvalid(tag: tag, problem: .missingParameter(settings.names.cmac))))
        }
        guard let result = sun.authenticator.verify(url: url, settings: settings) else {
            return .failed(.inconclusive(.sunUnchecked(tag: tag, keyName: settings.keyName)))
        }
        guard result.valid, let uidBytes = result.uid, let uid = try? TagUID(bytes: uidBytes) else {
            return .failed(.untrusted(.sunInvalid(tag: tag, problem: result.failure ?? .macMismatch)))
        }
        if let counter = result.counter {
            let last: UInt32?
            do {
                last = try sun.counters.lastAccepted(uid: uid)
            } catch {
                return .failed(.inconclusive(.registryUnavailable(error)))
            }
            if let last, counter <= last { return .failed(.untrusted(.sunReplayed(tag: tag, counter: counter, last: last))) }
        }
        if let enrolled = placement.uid, enrolled != uid {
            return .failed(.untrusted(.uidMismatch(read: uid, enrolled: enrolled, tagID: tag)))
        }
        return .proven(SUNEvidence(uid: uid, counter: result.counter))
    }
}
