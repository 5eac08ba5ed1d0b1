// Tag placed → verdict, on the PN532 emulator at 115200 baud (wire time simulated both ways),
// measured on the wire by the emulator's own command log, the same way for every client:
// TagFix (libnfc + the read planner + the live verifier), nfcpy (PyPI, its pn532 driver), and
// Debian's nfc-mfultralight full dump as a reference. The wire floor is the fewest bytes that must
// cross the UART for the tag: one InListPassiveTarget, FAST_READs of the CC through the NDEF
// TLV's end and READ_SIG for the originality check, each as command frame + ACK + response frame.
import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixNFC
import TagFixScenarios

let baud = 115_200

struct TagCase {
    var name: String
    var chip: Int
    var message: [UInt8]
}

func tagCases() -> [TagCase] {
    let short = NDEFMessage(records: [.uri("https://t.example/A1")]).encoded()
    let medium = NDEFMessage(records: [
        .uri("https://tags.harbourworks.example/t/T0123456789?lat=53.5453593&lon=9.9672095&r=20&site=harbour-works-north-gate")
    ]).encoded()
    var records: [NDEFRecord] = [.uri("https://tags.harbourworks.example/t/T0123456789?lat=53.5453593&lon=9.9672095&r=20")]
    while NDEFMessage(records: records).encoded().count < 700 {
        records.append(
            try! .text("Inspection note \(records.count): pump house, north wall, 1.2 m above ground; check the seal.", language: "en"))
    }
    return [
        TagCase(name: "NTAG213, short URL", chip: 213, message: short),
        TagCase(name: "NTAG215, ~100-byte URL", chip: 215, message: medium),
        TagCase(name: "NTAG216, long multi-record message", chip: 216, message: NDEFMessage(records: records).encoded()),
    ]
}

/// The fewest bytes for reading `message` off an NTAG: select, then FAST_READ pages 3 … end,
/// each exchange as the command frame, the ACK and the response frame.
func wireFloor(_ tag: EmulatedType2Tag, message: [UInt8]) -> Int {
    let ack = PN532Frame.ack.count
    func exchange(_ command: [UInt8], _ response: [UInt8]) -> Int {
        PN532Frame.encode(tfi: 0xD4, command).count + ack + PN532Frame.encode(tfi: 0xD5, response).count
    }
    // InListPassiveTarget 1 target at 106 kbps A → 4B NbTg Tg ATQA(2) SAK UIDlen UID
    var bytes = exchange([0x4A, 0x01, 0x00], [0x4B, 0x01, 0x01, 0x00, 0x44, 0x00, UInt8(tag.uid.count)] + tag.uid)
    let header = message.count < 0xFF ? 2 : 4
    let end = 16 + header + message.count + 1
    var page = 3
    let lastPage = (end - 1) / 4
    while page <= lastPage {
        let last = min(lastPage, page + 59)
        bytes += exchange(
            [0x40, 0x01, 0x3A, UInt8(page), UInt8(last)], [0x41, 0x00] + [UInt8](repeating: 0, count: 4 * (last - page + 1)))
        page = last + 1
    }
    // READ_SIG (3C 00, 32 bytes back): the originality check (docs/trust.md) is part of every read.
    bytes += exchange([0x40, 0x01, 0x3C, 0x00], [0x41, 0x00] + [UInt8](repeating: 0, count: 32))
    return bytes
}

/// The wire span of one read in the log: from the start of the InListPassiveTarget that found the
/// tag to the end of the last answer before `until`.
func span(_ log: [PN532Emulator.Exchange], until: ContinuousClock.Instant) -> (seconds: Double, bytes: Int)? {
    guard let start = log.firstIndex(where: { $0.foundTarget }) else { return nil }
    let read = log[start...].filter { $0.answered <= until }
    guard let last = read.last else { return nil }
    let wireIn = Duration.seconds(Double(log[start].bytesIn * 10) / Double(baud))
    let begin = log[start].received - wireIn
    return ((last.answered - begin).seconds, read.reduce(0) { $0 + $1.bytesIn + $1.bytesOut })
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
}

/// TagFix: the live pipeline (LibNFCReader + LiveVerifier) with a mock GPS at `spot`, `rounds`
/// taps of `tag` on the PN532 emulator, checked by `verifier` (by default one with an empty
/// registry). Returns each tap's placed → verdict and wire times, the last tap's bytes and the
/// verdicts.
func tagFixReads(
    _ tag: any EmulatedTag, verifier: Verifier? = nil, spot: Coordinate = Coordinate(validLatitude: 53.545, longitude: 9.966),
    rounds: Int
) async -> (verdict: [Double], wire: [Double], bytes: Int, verdicts: [Verdict]) {
    let emulator = try! PN532Emulator(tags: [tag], options: .init(baud: baud, logCommands: true))
    defer { emulator.stop() }
    emulator.setPresent(false)
    let clock = MonotonicClock()
    let gps = MockFixSource(sourceID: "mock", clock: clock)
    let verifier = verifier ?? Verifier(policy: benchPolicy, registry: InMemoryRegistry())
    let reader = LibNFCReader(connstring: "pn532_uart:\(emulator.path)", clock: clock)
    let (events, feed) = AsyncStream<VerifierEvent>.makeStream()
    let pipeline = Task {
        await LiveVerifier(verifier: verifier, clock: clock).run(reader: reader, gps: gps) { feed.yield($0) }
    }
    let fixes = Task {
        while !Task.isCancelled {
            gps.send(Fix(time: clock.now, mode: .threeD, coordinate: spot, horizontalAccuracy: 3))
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
    var iterator = events.makeAsyncIterator()
    var verdicts: [Verdict] = []
    func until(_ accept: (VerifierEvent) -> Bool) async {
        while let event = await iterator.next() { if accept(event) { return } }
    }
    await until { if case .reader(.ready) = $0 { true } else { false } }
    var verdictTimes: [Double] = [], wireTimes: [Double] = []
    var bytes = 0
    for _ in 0..<rounds {
        emulator.clearLog()
        emulator.setPresent(true)
        await until {
            guard case .verdict(let verdict) = $0 else { return false }
            verdicts.append(verdict)
            return true
        }
        let decided = ContinuousClock.now
        let log = emulator.traffic.log
        if let wire = span(log, until: decided), let start = log.first(where: { $0.foundTarget }) {
            wireTimes.append(wire.seconds)
            bytes = wire.bytes
            verdictTimes.append((decided - (start.received - .seconds(Double(start.bytesIn * 10) / Double(baud)))).seconds)
        }
        emulator.setPresent(false)
        await until { if case .reader(.tagRemoved) = $0 { true } else { false } }
    }
    fixes.cancel()
    pipeline.cancel()
    feed.finish()
    return (verdictTimes, wireTimes, bytes, verdicts)
}

/// A verifier that decides as soon as a fix after the scan is in (no interpolation wait).
let benchPolicy: VerificationPolicy = {
    var policy = VerificationPolicy()
    policy.interpolationWait = .zero
    return policy
}()

/// nfcpy through bench/nfcpy_peer.py.
func nfcpyReads(_ tag: EmulatedType2Tag, rounds: Int, python: String) -> (wire: [Double], bytes: Int)? {
    let emulator = try! PN532Emulator(tags: [tag], options: .init(baud: baud, logCommands: true))
    defer { emulator.stop() }
    emulator.setPresent(false)
    guard
        let peer = PeerProcess(
            python: python, script: "bench/nfcpy_peer.py", arguments: [emulator.path, String(rounds)], errors: .nullDevice)
    else { return nil }
    defer { peer.stop() }
    let line = peer.line
    guard line() == "ready" else { return nil }
    var times: [Double] = []
    var bytes = 0
    for _ in 0..<rounds {
        emulator.clearLog()
        emulator.setPresent(true)
        guard line()?.hasPrefix("read") == true else { return nil }
        let done = ContinuousClock.now
        if let wire = span(emulator.traffic.log, until: done) {
            times.append(wire.seconds)
            bytes = wire.bytes
        }
        emulator.setPresent(false)
        guard line() == "gone" else { return nil }
    }
    return (times, bytes)
}

/// Debian's nfc-mfultralight r: a full dump, as a reference.
func mfultralightRead(_ tag: EmulatedType2Tag, rounds: Int) -> (wire: [Double], bytes: Int)? {
    let binary = "/usr/bin/nfc-mfultralight"
    guard FileManager.default.isExecutableFile(atPath: binary) else { return nil }
    var times: [Double] = []
    var bytes = 0
    for _ in 0..<rounds {
        let emulator = try! PN532Emulator(tags: [tag], options: .init(baud: baud, logCommands: true))
        let dump = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString).mfd").path
        var environment = ProcessInfo.processInfo.environment
        environment["LIBNFC_DEVICE"] = "pn532_uart:\(emulator.path)"
        // Its standard input, output and error on /dev/null (ChildProcess's default).
        guard let process = try? BenchChildren.start(executable: binary, arguments: ["r", dump], environment: environment) else {
            return nil
        }
        while process.isRunning { usleep(10_000) }
        let log = emulator.traffic.log
        emulator.stop()
        try? FileManager.default.removeItem(atPath: dump)
        if let wire = span(log, until: ContinuousClock.now) {
            times.append(wire.seconds)
            bytes = wire.bytes
        }
    }
    return (times, bytes)
}

func tagReadBenchmark(rounds: Int, python: String?) async {
    for item in tagCases() {
        let make = { try! EmulatedType2Tag.ntag(item.chip, message: item.message) }
        let floor = wireFloor(make(), message: item.message)
        let ours = await tagFixReads(make(), rounds: rounds)
        let peer = python.flatMap { nfcpyReads(make(), rounds: rounds, python: $0) }
        let reference = mfultralightRead(make(), rounds: 3)
        var fields: [String: String] = [
            "bench": "\"tag-read\"", "tag": "\"\(item.name)\"", "message_bytes": "\(item.message.count)",
            "floor_bytes": "\(floor)", "floor_ms": "\(Double(floor * 10) / Double(baud) * 1000)",
            "tagfix_verdict_ms": "\(median(ours.verdict) * 1000)", "tagfix_verdict_ms_min": "\((ours.verdict.min() ?? .nan) * 1000)",
            "tagfix_verdict_ms_max": "\((ours.verdict.max() ?? .nan) * 1000)", "tagfix_wire_ms": "\(median(ours.wire) * 1000)",
            "tagfix_bytes": "\(ours.bytes)", "rounds": "\(ours.verdict.count)",
        ]
        if let peer {
            fields["nfcpy_ms"] = "\(median(peer.wire) * 1000)"
            fields["nfcpy_ms_min"] = "\((peer.wire.min() ?? .nan) * 1000)"
            fields["nfcpy_ms_max"] = "\((peer.wire.max() ?? .nan) * 1000)"
            fields["nfcpy_bytes"] = "\(peer.bytes)"
        }
        if let reference {
            fields["mfultralight_ms"] = "\(median(reference.wire) * 1000)"
            fields["mfultralight_bytes"] = "\(reference.bytes)"
        }
        print("{" + fields.keys.sorted().map { "\"\($0)\":\(fields[$0]!)" }.joined(separator: ",") + "}")
    }
}
