// `TagFixBench sun-tap [ROUNDS]`: an NTAG 424 DNA SUN tap, tag placed → verdict, on the PN532
// emulator at 115200 baud (wire time simulated both ways), read by the real libnfc, checked by the
// live verifier with the site's key set and the read counters in SQLite (fsync'd per accepted
// counter, as `verify --sun-keys` keeps them). Measured on the wire by the emulator's own command
// log, as `tag-read` measures Type 2 reads.
//
// The wire floor is the fewest bytes a SUN tap must move: one InListPassiveTarget (the PN532
// fetches the ATS itself), ISO SELECT of the NDEF application by name, SELECT of the NDEF file,
// and one READ BINARY of NLEN ‖ message, as if the reader knew the length. A reader following
// the NFC Forum Type 4 procedure also selects and reads the capability container (where the NDEF
// file is, how much one READ BINARY may return) and reads NLEN first; both are counted in
// TagFix's bytes, not in the floor.
import Foundation
import TagFixCore
import TagFixCrypto
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixNFC
import TagFixScenarios
import TagFixStore

func type4WireFloor(uid: [UInt8], ats: [UInt8], file: [UInt8]) -> Int {
    let ack = PN532Frame.ack.count
    func exchange(_ command: [UInt8], _ response: [UInt8]) -> Int {
        PN532Frame.encode(tfi: 0xD4, command).count + ack + PN532Frame.encode(tfi: 0xD5, response).count
    }
    func apdu(_ command: [UInt8], _ response: [UInt8]) -> Int {
        exchange([0x40, 0x01] + command, [0x41, 0x00] + response + [0x90, 0x00])
    }
    var bytes = exchange([0x4A, 0x01, 0x00], [0x4B, 0x01, 0x01, 0x00, 0x44, 0x20, UInt8(uid.count)] + uid + ats)
    bytes += apdu([0x00, 0xA4, 0x04, 0x00, 0x07, 0xD2, 0x76, 0x00, 0x00, 0x85, 0x01, 0x01, 0x00], [])
    bytes += apdu([0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x04], [])
    bytes += apdu([0x00, 0xB0, 0x00, 0x00, UInt8(file.count)], file)
    return bytes
}

func sunTapBenchmark(rounds: Int) async -> String {
    let uid: [UInt8] = [0x04, 0x5A, 0x11, 0x42, 0x9C, 0x3D, 0x80]
    let meta = AES128Key(hex: "5D1A0B9C2E3F40516273849506A7B8C9")!
    let fileKey = AES128Key(hex: "00112233445566778899AABBCCDDEEFF")!
    let (url, names) = try! NTAG424Provisioner.prepare(
        template: "https://tags.example.org/t/S1?picc_data=\(NTAG424Provisioner.piccPlaceholder)&cmac=\(NTAG424Provisioner.cmacPlaceholder)"
    )
    let message = NDEFMessage(records: [.uri(url)]).encoded()
    let keys = SUNVerifier(metaReadKey: meta, fileReadKey: .fixed(fileKey), names: names)
    let plan = try! NTAG424Provisioner(uid: uid, url: url, message: message, names: names, keys: keys)
    let tag = try! EmulatedNTAG424Tag(
        uid: uid, keys: [.zero, fileKey, meta, .zero, .zero], ndefFile: plan.file, ndefSettings: plan.settings)
    let floor = type4WireFloor(uid: uid, ats: tag.ats ?? [], file: plan.file)

    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-sun-tap-\(getpid())").path
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // TAGFIX_BENCH_SUN_COUNTERS=memory: the counters in memory, to see what the durable commit costs.
    let inMemory = ProcessInfo.processInfo.environment["TAGFIX_BENCH_SUN_COUNTERS"] == "memory"
    let counters: any SUNCounterStore =
        inMemory ? InMemorySUNCounters() : try! SQLiteSUNCounters(path: folder + "/counters.sqlite", create: true)
    let spot = Coordinate(validLatitude: 53.545, longitude: 9.966)
    let registry = try! InMemoryRegistry([
        RegistryEntry(
            id: "S1", uid: try! TagUID(bytes: uid), region: try! CircularRegion(center: spot, radius: 25, identifier: "S1"), name: nil,
            sun: SUNSettings(keyName: "site", names: names))
    ])
    let verifier = Verifier(
        policy: benchPolicy, registry: registry,
        sun: Verifier.SUNCheck(authenticator: SUNKeyring(sets: ["site": keys]), counters: counters))
    let (verdictTimes, wireTimes, bytes, verdicts) = await tagFixReads(tag, verifier: verifier, spot: spot, rounds: rounds)
    let confirmed = verdicts.filter { $0.kind == .confirmed }.count
    let fields: [String: String] = [
        "bench": "\"sun-tap\"", "tag": "\"NTAG 424 DNA, SUN URL\"", "file_bytes": "\(plan.file.count)",
        "floor_bytes": "\(floor)", "floor_ms": "\(Double(floor * 10) / Double(baud) * 1000)",
        "tagfix_verdict_ms": "\(median(verdictTimes) * 1000)", "tagfix_verdict_ms_min": "\((verdictTimes.min() ?? .nan) * 1000)",
        "tagfix_verdict_ms_max": "\((verdictTimes.max() ?? .nan) * 1000)", "tagfix_wire_ms": "\(median(wireTimes) * 1000)",
        "tagfix_bytes": "\(bytes)", "counters": "\"\(inMemory ? "memory" : "sqlite")\"", "rounds": "\(verdictTimes.count)",
        "confirmed": "\(confirmed)",
    ]
    return "{" + fields.keys.sorted().map { "\"\($0)\":\(fields[$0]!)" }.joined(separator: ",") + "}"
}
