// Tag placed → verdict through pcscd: a private pcscd (PrivatePCSCD, its own mount namespace)
// with the vsmartcard reader, the card behind it emulated in this process (VPCDEmulator, a PC/SC
// Part 3 reader with an NTAG in its field). Both clients are measured on the card's side, from
// its own log, the same way: from pcscd's first word to the card (its power-on: pcscd noticed
// the card) to the answer to the client's last APDU. TagFix is the live pipeline (PCSCReader +
// LiveVerifier, mock GPS) in this process; the peer is bench/pcsc_peer.py (Debian's
// python3-pyscard), which sends exactly the APDUs TagFix sent for the same tag, taken from the
// card's log. The APDU floor is what no reader can do without: GET DATA for the UID, FAST_READs
// of the CC through the NDEF TLV's end (60 pages each) and READ_SIG; the planner's minimum adds
// the fixed first read it needs to learn the message's length (`apduFloor`).
import Foundation
import Glibc
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixPCSC
import TagFixScenarios
import TagFixTags

/// The fewest APDUs for reading `message` off an NTAG: GET DATA (the UID), FAST_READs of pages
/// 3 … the NDEF TLV's last page in 60-page pieces, READ_SIG. `planner`: as the read planner must,
/// not knowing the message's length before it has read the TLV's header: a first FAST_READ of
/// `firstReadPages` pages, then the rest in 60-page pieces.
/// Through PC/SC Part 3's transparent exchange (`transparent`), FAST_READs of at most 56 pages and
/// the session's own 3 APDUs (start, switch to ISO 14443-3, end).
func apduFloor(message: [UInt8], planner: Bool, transparent: Bool = false) -> Int {
    let header = message.count < 0xFF ? 2 : 4
    let lastPage = (16 + header + message.count - 1) / 4
    let size = transparent ? 56 : Type2NDEFReader.fastReadPages
    let pieces = { (pages: Int) in (max(0, pages) + size - 1) / size }
    let reads = planner ? 1 + pieces(lastPage - (3 + Type2NDEFReader.firstReadPages) + 1) : pieces(lastPage - 3 + 1)
    return 1 + reads + 1 + (transparent ? 3 : 0)
}

/// One read as the card saw it: pcscd's power-on → the last answer, the first APDU → the last
/// answer, and the APDUs.
struct CardSpan {
    var noticedToLast: Double
    var firstToLast: Double
    var placedToNoticed: Double
    var apdus: [[UInt8]]
}

func cardSpan(_ traffic: VPCDEmulator.Traffic, until: ContinuousClock.Instant) -> CardSpan? {
    let read = traffic.exchanges.filter { $0.answered <= until }
    guard let noticed = traffic.noticedAt, let placed = traffic.connectedAt, let first = read.first, let last = read.last else {
        return nil
    }
    return CardSpan(
        noticedToLast: (last.answered - noticed).seconds, firstToLast: (last.answered - first.received).seconds,
        placedToNoticed: (noticed - placed).seconds, apdus: read.map(\.command))
}

struct PCSCSide {
    var spans: [CardSpan] = []
    var verdict: [Double] = []
}

/// Waits (blocking) until the card has left vpcd and stayed away long enough to come back.
private func awaitGone(_ card: VPCDEmulator) async {
    while card.connected { try? await Task.sleep(for: .milliseconds(10)) }
    try? await Task.sleep(for: card.options.absence + .milliseconds(50))
}

/// TagFix: PCSCReader + LiveVerifier with a mock GPS; tag `index` placed `rounds` times.
func tagFixPCSCReads(_ card: VPCDEmulator, index: Int, rounds: Int) async -> PCSCSide {
    let clock = MonotonicClock()
    let gps = MockFixSource(sourceID: "mock", clock: clock)
    var policy = VerificationPolicy()
    policy.interpolationWait = .zero
    let verifier = Verifier(policy: policy, registry: InMemoryRegistry())
    let reader = PCSCReader(selection: .any, clock: clock)
    let (events, feed) = AsyncStream<VerifierEvent>.makeStream()
    let pipeline = Task {
        await LiveVerifier(verifier: verifier, clock: clock).run(reader: reader, gps: gps) { feed.yield($0) }
    }
    let fixes = Task {
        while !Task.isCancelled {
            gps.send(
                Fix(time: clock.now, mode: .threeD, coordinate: Coordinate(validLatitude: 53.545, longitude: 9.966), horizontalAccuracy: 3))
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
    var iterator = events.makeAsyncIterator()
    func until(_ accept: (VerifierEvent) -> Bool) async {
        while let event = await iterator.next() { if accept(event) { return } }
    }
    await until { if case .reader(.ready) = $0 { true } else { false } }
    var side = PCSCSide()
    for _ in 0..<rounds {
        card.clearTraffic()
        card.setPresent(true, tag: index)
        await until { if case .verdict = $0 { true } else { false } }
        let decided = ContinuousClock.now
        let traffic = card.traffic
        if let span = cardSpan(traffic, until: decided), let placed = traffic.connectedAt {
            side.spans.append(span)
            side.verdict.append((decided - placed).seconds)
        }
        card.setPresent(false, tag: index)
        await until { if case .reader(.tagRemoved) = $0 { true } else { false } }
        await awaitGone(card)
    }
    fixes.cancel()
    pipeline.cancel()
    feed.finish()
    return side
}

/// pyscard through bench/pcsc_peer.py, sending `apdus`.
func pyscardReads(_ card: VPCDEmulator, index: Int, rounds: Int, apdus: [[UInt8]], pcscd: PrivatePCSCD) async -> PCSCSide? {
    let list = FileManager.default.temporaryDirectory.appendingPathComponent("pcsc-apdus-\(UUID().uuidString)").path
    let text = apdus.map { $0.map { String(format: "%02x", $0) }.joined() }.joined(separator: "\n") + "\n"
    guard (try? text.write(toFile: list, atomically: true, encoding: .utf8)) != nil else { return nil }
    defer { try? FileManager.default.removeItem(atPath: list) }
    guard
        let peer = PeerProcess(
            script: "bench/pcsc_peer.py", arguments: [list, String(rounds)], environment: pcscd.environment, errors: .standardError)
    else { return nil }
    let side = await pyscardReads(card, index: index, rounds: rounds, peer: peer)
    await peer.finish()
    return side
}

/// The taps of `pyscardReads` with its peer started.
private func pyscardReads(_ card: VPCDEmulator, index: Int, rounds: Int, peer: PeerProcess) async -> PCSCSide? {
    let line = peer.line
    guard line() == "ready" else { return nil }
    var side = PCSCSide()
    for _ in 0..<rounds {
        card.clearTraffic()
        card.setPresent(true, tag: index)
        guard line()?.hasPrefix("read") == true else { return nil }
        if let span = cardSpan(card.traffic, until: .now) { side.spans.append(span) }
        card.setPresent(false, tag: index)
        guard line() == "gone" else { return nil }
        await awaitGone(card)
    }
    return side
}

/// `model`: the reader family the card answers as, under its name (`virtual`: vpcd's own; a
/// family with the transparent exchange, `acr1552u`, shows what that costs a read).
func pcscReadBenchmark(rounds: Int, model: PCSCPart3Reader.Model = .virtual) async {
    guard PrivatePCSCD.available else {
        print(#"{"bench":"pcsc-read","skipped":"needs pcscd, vsmartcard-vpcd and unshare"}"#)
        return
    }
    let pcscd: PrivatePCSCD
    do {
        pcscd = try await PrivatePCSCD.start(friendlyName: model.friendlyName)
    } catch {
        print(#"{"bench":"pcsc-read","skipped":"\#(error)"}"#)
        return
    }
    await pcscReadBenchmark(rounds: rounds, model: model, pcscd: pcscd)
    await pcscd.stop()
}

/// The benchmark on a running private pcscd.
private func pcscReadBenchmark(rounds: Int, model: PCSCPart3Reader.Model, pcscd: PrivatePCSCD) async {
    // libpcsclite reads the socket's name once, at this process's first PC/SC call: before it.
    setenv("PCSCLITE_CSOCK_NAME", pcscd.socketPath, 1)
    let cases = tagCases()
    let card = VPCDEmulator(
        tags: cases.map { try! EmulatedType2Tag.ntag($0.chip, message: $0.message) }, options: .init(port: pcscd.port, model: model))
    defer { card.stop() }
    for index in cases.indices { card.setPresent(false, tag: index) }
    await awaitGone(card)
    for (index, item) in cases.enumerated() {
        // The two clients take turns in `blocks` blocks, so that what the machine does meanwhile
        // (another program, a frequency step) falls on both; each block's first tap warms its
        // client up and is not counted (TagFix's first tap on a reader may also probe what it
        // passes through: `tagfix_apdus_first`).
        let blocks = min(3, rounds)
        var ours = PCSCSide()
        var peer: PCSCSide? = PCSCSide()
        var firstAPDUs: Int?
        for block in 0..<blocks {
            let taps = rounds / blocks + (block < rounds % blocks ? 1 : 0)
            let mine = await tagFixPCSCReads(card, index: index, rounds: taps + 1)
            if firstAPDUs == nil { firstAPDUs = mine.spans.first?.apdus.count }
            ours.spans += mine.spans.dropFirst()
            ours.verdict += mine.verdict.dropFirst()
            // The steady state's APDUs (the first tap may also learn what the reader passes through).
            let sent = ours.spans.last?.apdus ?? []
            if let theirs = await pyscardReads(card, index: index, rounds: taps + 1, apdus: sent, pcscd: pcscd) {
                peer?.spans += theirs.spans.dropFirst()
            } else {
                peer = nil
            }
        }
        let apdus = ours.spans.last?.apdus ?? []
        let ms = { (values: [Double]) in "\(median(values) * 1000)" }
        let low = { (values: [Double]) in "\((values.min() ?? .nan) * 1000)" }
        let high = { (values: [Double]) in "\((values.max() ?? .nan) * 1000)" }
        var fields: [String: String] = [
            "bench": "\"pcsc-read\"", "tag": "\"\(item.name)\"", "message_bytes": "\(item.message.count)",
            "reader": "\"\(model.rawValue)\"", "pass_through": "\"\(model.passThrough)\"",
            "floor_apdus": "\(apduFloor(message: item.message, planner: false, transparent: model.passThrough == .transparent))",
            "planner_apdus": "\(apduFloor(message: item.message, planner: true, transparent: model.passThrough == .transparent))",
            "rounds": "\(ours.spans.count)",
            "tagfix_apdus": "\(apdus.count)", "tagfix_apdus_first": "\(firstAPDUs ?? 0)", "blocks": "\(blocks)",
            "tagfix_verdict_ms": ms(ours.verdict), "tagfix_verdict_ms_min": low(ours.verdict), "tagfix_verdict_ms_max": high(ours.verdict),
            "tagfix_ms": ms(ours.spans.map(\.noticedToLast)), "tagfix_ms_min": low(ours.spans.map(\.noticedToLast)),
            "tagfix_ms_max": high(ours.spans.map(\.noticedToLast)), "tagfix_apdu_span_ms": ms(ours.spans.map(\.firstToLast)),
            "placed_to_noticed_ms": ms(ours.spans.map(\.placedToNoticed)),
            "apdu_headers": "\"" + apdus.map { $0.prefix(7).map { String(format: "%02X", $0) }.joined() }.joined(separator: " ") + "\"",
        ]
        if let peer {
            fields["pyscard_ms"] = ms(peer.spans.map(\.noticedToLast))
            fields["pyscard_ms_min"] = low(peer.spans.map(\.noticedToLast))
            fields["pyscard_ms_max"] = high(peer.spans.map(\.noticedToLast))
            fields["pyscard_apdu_span_ms"] = ms(peer.spans.map(\.firstToLast))
            fields["pyscard_apdus"] = "\(peer.spans.last?.apdus.count ?? 0)"
            fields["pyscard_same_apdus"] = "\(peer.spans.allSatisfy { $0.apdus == apdus })"
            fields["pyscard_rounds"] = "\(peer.spans.count)"
        }
        print("{" + fields.keys.sorted().map { "\"\($0)\":\(fields[$0]!)" }.joined(separator: ",") + "}")
    }
}
