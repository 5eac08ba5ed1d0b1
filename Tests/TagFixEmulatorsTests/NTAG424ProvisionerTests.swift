import Synchronization
import TagFixCore
import TagFixCrypto
import TagFixEmulators
import TagFixNDEF
import Testing

/// `NTAG424Provisioner` against the emulated NTAG 424 DNA: a factory tag ends keyed and mirroring
/// a SUN the key set verifies; a run cut off after any exchange leaves a tag the next run finishes.
@Suite struct NTAG424ProvisionerTests {
    static let uid: [UInt8] = [0x04, 0x31, 0x52, 0x73, 0x94, 0xB5, 0x80]
    static let keys = SUNVerifier(
        metaReadKey: AES128Key(hex: "5D1A0B9C2E3F40516273849506A7B8C9")!,
        fileReadKey: .diversified(master: AES128Key(hex: "00112233445566778899AABBCCDDEEFF")!, suffix: [0x01]))

    static func provisioner(_ template: String = "https://tags.example.org/t/P1?e={picc_data}&c={cmac}") throws -> NTAG424Provisioner {
        let (url, names) = try NTAG424Provisioner.prepare(template: template)
        let message = NDEFMessage(records: [NDEFRecord.uri(url)]).encoded()
        return try NTAG424Provisioner(uid: uid, url: url, message: message, names: names, keys: keys)
    }

    /// The tag's exchange, failing (the tag pulled away) once `limit` exchanges have gone through.
    static func exchange(_ tag: EmulatedNTAG424Tag, limit: Int = .max, count: Sent = Sent()) -> NTAG424Commander.Exchange {
        { apdu in
            let allowed = count.value.withLock { sent in
                sent += 1
                return sent <= limit
            }
            guard allowed, case .data(let answer) = tag.transceive(apdu) else { throw NTAG424Error.transport("the tag left the field") }
            return answer
        }
    }

    @Test func placeholdersNameTheParameters() throws {
        let (url, names) = try NTAG424Provisioner.prepare(template: "https://t.example/{id}?e={picc_data}&c={cmac}")
        #expect(url == "https://t.example/{id}?e=" + String(repeating: "0", count: 32) + "&c=" + String(repeating: "0", count: 16))
        #expect(names.piccData == "e" && names.cmac == "c")
        #expect(throws: NTAG424ProvisionError.self) { try NTAG424Provisioner.prepare(template: "https://t.example/x?e={picc_data}") }
        #expect(throws: NTAG424ProvisionError.self) { try NTAG424Provisioner.prepare(template: "https://t.example/{picc_data}?c={cmac}") }
    }

    @Test func aFactoryTagEndsKeyedAndMirroringAVerifiedSUN() throws {
        let tag = try EmulatedNTAG424Tag(uid: Self.uid)
        var stages: [NTAG424Provisioner.Stage] = []
        let result = try Self.provisioner().run(exchange: Self.exchange(tag)) { stages.append($0) }
        #expect(result == .verified(uid: Self.uid, counter: 1))
        #expect(stages == NTAG424Provisioner.Stage.allCases)
        let keys = tag.snapshot.keys
        #expect(
            keys[1] == (try KeyDiversification.aes128(master: AES128Key(hex: "00112233445566778899AABBCCDDEEFF")!, input: Self.uid + [1])))
        #expect(keys[2] == Self.keys.metaReadKey)
        #expect(keys[0] != .zero && keys[0] != keys[1], "key 0 is the diversified application key")
        // A later tap mirrors the next counter, and the old SUN no longer matches the file.
        tag.reset()
        let again = try Self.provisioner().run(exchange: Self.exchange(tag))
        #expect(again == .verified(uid: Self.uid, counter: 2), "a re-run on a finished tag only reads back")
    }

    /// Cut off after each exchange of a full run in turn (the tag pulled away at every step): the
    /// tag stays recoverable and the same run, started again, finishes it.
    @Test func interruptedAfterAnyExchangeTheNextRunFinishes() throws {
        let full = Sent()
        _ = try Self.provisioner().run(exchange: Self.exchange(try EmulatedNTAG424Tag(uid: Self.uid), count: full))
        let total = full.value.withLock { $0 }
        #expect(total > 10)
        for limit in 0..<total {
            let tag = try EmulatedNTAG424Tag(uid: Self.uid)
            #expect(throws: NTAG424ProvisionError.self, "cut after \(limit)") {
                try Self.provisioner().run(exchange: Self.exchange(tag, limit: limit))
            }
            tag.reset()
            let result = try Self.provisioner().run(exchange: Self.exchange(tag))
            #expect(result.valid && result.uid == Self.uid, "cut after \(limit) exchanges")
            #expect(tag.snapshot.keys[2] == Self.keys.metaReadKey && tag.snapshot.keys[0] != .zero)
        }
    }

    @Test func aTagOfAnotherSiteIsLeftAlone() throws {
        let other = AES128Key(hex: "0F0E0D0C0B0A09080706050403020100")!
        let tag = try EmulatedNTAG424Tag(uid: Self.uid, keys: [other, other, other, .zero, .zero])
        #expect(throws: NTAG424ProvisionError.foreignKey) { try Self.provisioner().run(exchange: Self.exchange(tag)) }
        #expect(tag.snapshot.keys == [other, other, other, .zero, .zero])
    }
}

/// Exchanges sent so far.
final class Sent: Sendable {
    let value = Mutex(0)
}
