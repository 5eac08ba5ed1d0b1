import Foundation
import Synchronization
import TagFixCore
public import TagFixNDEF

/// A PN532 on a pseudo-terminal, speaking the UART frame protocol to whatever opens it (libnfc's
/// `pn532_uart` driver, nfcpy's `pn532` driver), presenting emulated tags.
///
/// It is served on an `IOLoop` of its own (`ServedLine`): no thread, poll loop or sleep of its
/// own; the simulated line's wire time wakes the loop by a timerfd. Faults are injected from any thread: remove or re-present a tag,
/// remove it after N exchanges (pulled mid-read), stop answering (a hung reader), hang up the
/// line (unplugged), corrupt the next reply, answer a command late (`answerLate`).
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
        /// An answer still to go out late (`answerLate`).
        var late: LateAnswer?
        var lastResponse: [UInt8] = []
        /// The two directions of the simulated line, when `Options.baud` is set.
        var fromHost: SerialLine<ContinuousClock.Instant>?
        var toHost: SerialLine<ContinuousClock.Instant>?
        /// What the line does next, in order, each no sooner than its instant: the work of the
        /// bytes read last. Touched only on the loop's thread.
        var steps: [Step] = []
        var decoder = PN532Frame.Decoder()
    }

    /// The answer to the `remaining`th next `command` frame goes out `delay` late.
    private struct LateAnswer: Sendable {
        var command: UInt8
        var remaining: Int
        var delay: Duration
    }

    /// One thing the emulator does on the line, once `at` (when set) has come.
    private struct Step: Sendable {
        enum Work: Sendable {
            /// The host's bytes have crossed the line: the chip sees them.
            case decode([UInt8])
            /// One event of them, answered.
            case handle(PN532Frame.Event)
            /// Bytes to the host whose last byte has crossed.
            case write([UInt8])
            /// An answered command's log entry (`Options.logCommands`), answered now.
            case log(Exchange)
        }
        var at: ContinuousClock.Instant?
        var work: Work
    }

    public let path: String
    private let line: ServedLine
    private let options: Options
    private let state: Mutex<State>

    /// Opens a pty and starts answering on it, on an `IOLoop` of its own.
    public init(tags: [any EmulatedTag], felica: [EmulatedType3Tag] = [], options: Options = Options()) throws(EmulatorError) {
        line = try ServedLine(named: "pn532")
        path = line.pty.path
        self.options = options
        var chip = PN532Chip()
        chip.slots = tags.map { PN532Chip.Slot(tag: $0, present: true) }
        chip.felicaTags = felica
        let lines = options.baud.flatMap { $0 > 0 ? SerialLine<ContinuousClock.Instant>(baud: $0) : nil }
        state = Mutex(State(chip: chip, fromHost: lines, toHost: lines))
        line.start(isBusy: { [self] in state.withLock { !$0.steps.isEmpty } }) { [self] in read() }
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

    /// Whether tag `index` is in the field now: a test's look at what `removeAfter` or `lift`
    /// has done by itself.
    public func isPresent(tag index: Int = 0) -> Bool {
        state.withLock { $0.chip.slots.indices.contains(index) && $0.chip.slots[index].present }
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

    /// The answer to the `nth` next `command` frame (1: the next one; 0x4A InListPassiveTarget,
    /// 0x40 InDataExchange…), its ACK included, goes out `delay` after the frame came, and what
    /// the host sends meanwhile waits unread behind it: the emulator's thread starved on a loaded
    /// machine, made on purpose. A host whose time-out is shorter (libnfc gives a selection
    /// 300 ms) gives up on the command, and then finds its answer waiting before the next one's.
    public func answerLate(command: UInt8, nth: Int = 1, by delay: Duration) {
        state.withLock { $0.late = LateAnswer(command: command, remaining: max(1, nth), delay: delay) }
    }

    /// Stops answering (a hung reader) or resumes.
    public func setHung(_ hung: Bool) { state.withLock { $0.hung = hung } }

    /// The next reply goes out with a broken data checksum.
    public func corruptNextReply() { state.withLock { $0.corruptNext = true } }

    public var traffic: Traffic { state.withLock { $0.traffic } }

    /// Empties the command log (between measurements).
    public func clearLog() { state.withLock { $0.traffic.log.removeAll(keepingCapacity: true) } }

    /// Stops the emulator and closes the line once the answer under way (if any) is out: clients
    /// see the device go away. Returns at once; `stopped()` awaits the end.
    public func stop() { line.stop() }

    /// `stop()`, then returns once the line is closed and the emulator's loop has ended.
    public func stopped() async { await line.stopped() }

    // MARK: - The line, on the loop's thread

    /// The host has written: its bytes take their wire time too, before the chip sees them, from
    /// when they were written (read here at once), or from the end of the host's previous bytes.
    private func read() {
        guard let bytes = line.pty.read(), !bytes.isEmpty else { return }
        let arrived = ContinuousClock.now
        state.withLock { state in
            state.traffic.bytesFromHost += bytes.count
            let seen = state.fromHost?.send(bytes.count, handedOver: arrived)
            state.steps.append(Step(at: seen, work: .decode(bytes)))
        }
        work()
    }

    /// Does the steps whose time has come, in order; the first one still due later sets the
    /// line's alarm (the host's bytes wait in the pty meanwhile, unread), and the loop comes back
    /// here when it goes off.
    private func work() {
        while let step = state.withLock({ $0.steps.first }) {
            if let at = step.at, line.wait(until: at, then: { [self] in work() }) {
                line.setReading(false)
                return
            }
            let next = state.withLock { $0.steps.removeFirst() }
            // Each step's own work comes before those queued behind it.
            let more = perform(next.work)
            state.withLock { $0.steps.insert(contentsOf: more, at: 0) }
        }
        line.setReading(true)
        line.endIfStopping()
    }

    private func perform(_ work: Step.Work) -> [Step] {
        switch work {
        case .decode(let bytes):
            return state.withLock { $0.decoder.feed(bytes) }.map { Step(work: .handle($0)) }
        case .handle(let event):
            return handle(event)
        case .write(let bytes):
            line.write(bytes)
            return []
        case .log(var exchange):
            exchange.answered = ContinuousClock.now
            state.withLock { $0.traffic.log.append(exchange) }
            return []
        }
    }

    private func handle(_ event: PN532Frame.Event) -> [Step] {
        switch event {
        case .ack:
            return []  // the host aborts the running command: nothing is running here
        case .nack:
            let last = state.withLock { $0.lastResponse }
            return last.isEmpty ? [] : [send(last)]
        case .corrupt:
            return []  // a real PN532 ignores a frame it cannot check
        case .frame(let tfi, let data):
            guard tfi == 0xD4 else { return [] }
            let received = ContinuousClock.now
            let (answer, hung, corrupt, lateness) = state.withLock { state -> (PN532Chip.Answer, Bool, Bool, Duration) in
                guard !state.hung else { return (.none, true, false, .zero) }
                state.traffic.commands += 1
                let corrupt = state.corruptNext
                state.corruptNext = false
                var lateness = Duration.zero
                if var late = state.late, late.command == data.first {
                    late.remaining -= 1
                    state.late = late.remaining > 0 ? late : nil
                    if late.remaining == 0 { lateness = late.delay }
                }
                return (state.chip.handle(data), false, corrupt, lateness)
            }
            guard !hung else { return [] }
            // The answer is ready with the ACK (late, when made so): the response follows it on
            // the line at once.
            let ready = ContinuousClock.now + lateness
            var steps = [send(PN532Frame.ack, handedOver: ready)]
            var frame: [UInt8]
            switch answer {
            case .response(let response): frame = PN532Frame.encode(tfi: 0xD5, response)
            case .error: frame = PN532Frame.applicationError
            case .none: return steps
            }
            if corrupt, frame.count > 2 { frame[frame.count - 2] ^= 0xFF }
            state.withLock { $0.lastResponse = frame }
            steps.append(send(frame, handedOver: ready))
            if options.logCommands, let code = data.first {
                let found: Bool
                if case .response(let response) = answer {
                    found = code == 0x4A && response.count > 1 && response[1] > 0
                } else {
                    found = false
                }
                let exchange = Exchange(
                    command: code, bytesIn: PN532Frame.encode(tfi: 0xD4, data).count, bytesOut: PN532Frame.ack.count + frame.count,
                    received: received, answered: received, foundTarget: found)
                steps.append(Step(work: .log(exchange)))
            }
            return steps
        }
    }

    /// `bytes`, handed to the line at `handedOver`, written to the host once their last byte
    /// would have crossed it.
    private func send(_ bytes: [UInt8], handedOver: ContinuousClock.Instant = .now) -> Step {
        let crossed = state.withLock { state in
            state.traffic.bytesToHost += bytes.count
            return state.toHost?.send(bytes.count, handedOver: handedOver)
        }
        // Without a simulated line, bytes go out at once, unless handed over later (a late answer).
        return Step(at: crossed ?? (handedOver > ContinuousClock.now ? handedOver : nil), work: .write(bytes))
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
