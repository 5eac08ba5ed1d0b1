import Foundation
import Synchronization
import TagFixCore
public import TagFixNDEF

/// A PN532 on a pseudo-terminal, speaking the UART frame protocol to whatever opens it (libnfc's
/// `pn532_uart` driver, nfcpy's `pn532` driver), presenting emulated tags.
///
/// It runs on its own thread. Faults are injected from any thread: remove or re-present a tag,
/// remove it after N exchanges (pulled mid-read), stop answering (a hung reader), hang up the
/// line (unplugged), corrupt the next reply.
public final class PN532Emulator: Sendable {
    public struct Options: Sendable {
        /// Simulated line speed: each byte costs 10 bits of time, both ways. `nil`: no delay.
        public var baud: Int?
        /// Keep a timestamped log of every command (`Traffic.log`).
        public var logCommands: Bool
        /// Seed of the weak tags' faults (`setWeak`): tag N's draw from `seed + N`.
        public var seed: UInt64
        public init(baud: Int? = nil, logCommands: Bool = false, seed: UInt64 = 1) {
            self.baud = baud
            self.logCommands = logCommands
            self.seed = seed
        }
    }

    /// Bytes and frames that crossed the line, for tests and benchmarks.
    public struct Traffic: Sendable, Hashable {
        public var bytesFromHost = 0
        public var bytesToHost = 0
        public var commands = 0
        /// Each command, when `Options.logCommands` is set: what and when (monotonic).
        public var log: [Exchange] = []
    }

    /// One command and its answer, as the emulator saw them: for benchmarks that measure on the
    /// wire (the same way for every client).
    public struct Exchange: Sendable, Hashable {
        /// The PN532 command code (D4 xx), e.g. 0x4A InListPassiveTarget, 0x40 InDataExchange.
        public var command: UInt8
        /// Frame bytes from the host (the command frame) and to it (ACK and response frames).
        public var bytesIn: Int
        public var bytesOut: Int
        /// When the command frame was complete, and when the answer had been sent.
        public var received: ContinuousClock.Instant
        public var answered: ContinuousClock.Instant
        /// Whether a tag answered a target-selecting InListPassiveTarget.
        public var foundTarget: Bool
    }

    private struct State: Sendable {
        var chip = PN532Chip()
        var traffic = Traffic()
        var hung = false
        var corruptNext = false
        var lastResponse: [UInt8] = []
        /// The two directions of the simulated line, when `Options.baud` is set.
        var fromHost: SerialLine<ContinuousClock.Instant>?
        var toHost: SerialLine<ContinuousClock.Instant>?
    }

    public let path: String
    private let line: ServedLine
    private var pty: PseudoTerminal { line.pty }
    private let options: Options
    private let state: Mutex<State>

    /// Opens a pty and starts answering on it.
    public init(tags: [any EmulatedTag], felica: [EmulatedType3Tag] = [], options: Options = Options()) throws(EmulatorError) {
        line = try ServedLine()
        path = line.pty.path
        self.options = options
        var chip = PN532Chip()
        chip.slots = tags.map { PN532Chip.Slot(tag: $0, present: true) }
        chip.felicaTags = felica
        let lines = options.baud.flatMap { $0 > 0 ? SerialLine<ContinuousClock.Instant>(baud: $0) : nil }
        state = Mutex(State(chip: chip, fromHost: lines, toHost: lines))
        line.start(name: "PN532 emulator \(path)") { [self] in serve() }
    }

    // MARK: - Faults and inspection

    /// Takes tag `index` out of the field, or puts it back.
    public func setPresent(_ present: Bool, tag index: Int = 0) {
        state.withLock { $0.chip.setPresent(present, slot: index) }
    }

    /// Lifts tag `index` out of the field and puts it back once the reader's selections have
    /// found it gone `selections` times: a tap lifted and made again as a hand makes it, however
    /// fast the test (4: the libnfc reader's selections after a missed presence check, and its
    /// next poll).
    public func lift(tag index: Int = 0, selections: Int = 4) {
        state.withLock { $0.chip.lift(slot: index, selections: selections) }
    }

    /// The tags answer `count` more exchanges, then leave the field (a tag pulled mid-read).
    public func removeAfter(exchanges count: Int) {
        state.withLock { $0.chip.exchangesBeforeRemoval = count }
    }

    /// Makes tag `index` read badly: each exchange with it fails on the air at `rfErrorRate`
    /// (an RF status byte), and at `lossRate` it browns out until selected again
    /// (`PN532Chip.Weakness`); rates of 0 make it a healthy tag again. Deterministic from
    /// `Options.seed`.
    public func setWeak(rfErrorRate: Double, lossRate: Double = 0, tag index: Int = 0) {
        let weakness =
            rfErrorRate > 0 || lossRate > 0
            ? PN532Chip.Weakness(rfErrorRate: rfErrorRate, lossRate: lossRate, seed: options.seed &+ UInt64(max(0, index))) : nil
        state.withLock { $0.chip.setWeakness(weakness, slot: index) }
    }

    /// Stops answering (a hung reader) or resumes.
    public func setHung(_ hung: Bool) { state.withLock { $0.hung = hung } }

    /// The next reply goes out with a broken data checksum.
    public func corruptNextReply() { state.withLock { $0.corruptNext = true } }

    public var traffic: Traffic { state.withLock { $0.traffic } }

    /// Empties the command log (between measurements).
    public func clearLog() { state.withLock { $0.traffic.log.removeAll(keepingCapacity: true) } }

    /// Stops the emulator and closes the line: clients see the device go away.
    public func stop() { line.stop() }

    // MARK: - The line

    private func serve() {
        var decoder = PN532Frame.Decoder()
        while !line.isStopped {
            guard let bytes = pty.read(timeout: 20) else { break }
            guard !bytes.isEmpty else { continue }
            // The host's bytes take their wire time too, before the chip sees them: from when
            // they were written (read here at once), or from the end of the host's previous bytes.
            let arrived = ContinuousClock.now
            let seen = state.withLock { state in
                state.traffic.bytesFromHost += bytes.count
                return state.fromHost?.send(bytes.count, handedOver: arrived)
            }
            seen?.waitUntilReached()
            for event in decoder.feed(bytes) {
                handle(event)
            }
        }
    }

    private func handle(_ event: PN532Frame.Event) {
        switch event {
        case .ack:
            return  // the host aborts the running command: nothing is running here
        case .nack:
            let last = state.withLock { $0.lastResponse }
            if !last.isEmpty { send(last) }
        case .corrupt:
            return  // a real PN532 ignores a frame it cannot check
        case .frame(let tfi, let data):
            guard tfi == 0xD4 else { return }
            let received = ContinuousClock.now
            let (answer, hung, corrupt) = state.withLock { state -> (PN532Chip.Answer, Bool, Bool) in
                guard !state.hung else { return (.none, true, false) }
                state.traffic.commands += 1
                let corrupt = state.corruptNext
                state.corruptNext = false
                return (state.chip.handle(data), false, corrupt)
            }
            guard !hung else { return }
            // The answer is ready with the ACK: the response follows it on the line at once.
            let ready = ContinuousClock.now
            send(PN532Frame.ack, handedOver: ready)
            var frame: [UInt8]
            switch answer {
            case .response(let response): frame = PN532Frame.encode(tfi: 0xD5, response)
            case .error: frame = PN532Frame.applicationError
            case .none: return
            }
            if corrupt, frame.count > 2 { frame[frame.count - 2] ^= 0xFF }
            state.withLock { $0.lastResponse = frame }
            send(frame, handedOver: ready)
            if options.logCommands, let code = data.first {
                let found: Bool
                if case .response(let response) = answer {
                    found = code == 0x4A && response.count > 1 && response[1] > 0
                } else {
                    found = false
                }
                let exchange = Exchange(
                    command: code, bytesIn: PN532Frame.encode(tfi: 0xD4, data).count, bytesOut: PN532Frame.ack.count + frame.count,
                    received: received, answered: ContinuousClock.now, foundTarget: found)
                state.withLock { $0.traffic.log.append(exchange) }
            }
        }
    }

    /// Writes `bytes`, handed to the line at `handedOver`, to the host once their last byte would
    /// have crossed it.
    private func send(_ bytes: [UInt8], handedOver: ContinuousClock.Instant = .now) {
        let crossed = state.withLock { state in
            state.traffic.bytesToHost += bytes.count
            return state.toHost?.send(bytes.count, handedOver: handedOver)
        }
        crossed?.waitUntilReached()
        pty.write(bytes)
    }
}

extension PN532Emulator {
    /// An emulator presenting the tags of dump files (any format `TagDump` reads).
    public convenience init(dumps: [TagImage], options: Options = Options()) throws(EmulatorError) {
        var tags: [any EmulatedTag] = []
        var felica: [EmulatedType3Tag] = []
        for image in dumps {
            if case .type3 = image.memory {
                felica.append(try image.emulatedType3Tag())
            } else {
                tags.append(try image.emulatedTag())
            }
        }
        try self.init(tags: tags, felica: felica, options: options)
    }
}
