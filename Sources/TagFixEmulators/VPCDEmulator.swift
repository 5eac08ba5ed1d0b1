import Foundation
import Glibc
import Synchronization
import TagFixCore
public import TagFixNDEF
import TagFixSystem

/// A contactless card behind pcscd's vsmartcard reader driver (`vpcd`, Debian vsmartcard-vpcd),
/// answering as a PC/SC Part 3 reader with an emulated tag would (`PCSCPart3Reader`).
///
/// vpcd listens on a TCP port (the reader's `CHANNELID` in reader.conf); a virtual card is a
/// client that connects to it. Each message is a 2-byte big-endian length and that many bytes;
/// a one-byte message is a control (0 power off, 1 power on, 2 reset, 4 the ATR, which is
/// answered), anything longer an APDU, answered with its response. pcscd sees the card present
/// while it is connected and answers, and removed once the connection is gone: a tag taken out
/// of the field closes the connection and stays away at least `Options.absence` (pcscd polls
/// the card's presence; a shorter gap would look like no removal at all), and one put back
/// connects again.
///
/// Its socket is served on an `IOLoop` of its own; faults come from any thread (`apply`, `setPresent`…).
public final class VPCDEmulator: Sendable {
    public struct Options: Sendable {
        /// vpcd's host and port (the reader's CHANNELID).
        public var host: String
        public var port: Int
        /// How long a removed card stays away before it may come back.
        public var absence: Duration
        /// The reader family the card answers as (its raw pass-through).
        public var model: PCSCPart3Reader.Model

        public init(
            host: String = "127.0.0.1", port: Int, absence: Duration = .milliseconds(1100), model: PCSCPart3Reader.Model = .virtual
        ) {
            self.host = host
            self.port = port
            self.absence = absence
            self.model = model
        }
    }

    /// What crossed the socket, for tests and benchmarks.
    public struct Traffic: Sendable, Hashable {
        /// APDUs answered (controls not counted), and each APDU's first four bytes.
        public var apdus = 0
        public var headers: [[UInt8]] = []
        /// Times the card connected to vpcd.
        public var connections = 0
        /// When the card last connected (put in the field), and when pcscd first spoke to it
        /// on that connection (its power-on: pcscd noticed the card).
        public var connectedAt: ContinuousClock.Instant?
        public var noticedAt: ContinuousClock.Instant?
        /// Every APDU answered, whole, with when it arrived and when its answer went out.
        public var exchanges: [Exchange] = []
    }

    /// One APDU and its answer, as the card saw them (benchmarks measure from these).
    public struct Exchange: Sendable, Hashable {
        public var command: [UInt8]
        public var received: ContinuousClock.Instant
        public var answered: ContinuousClock.Instant
    }

    private struct State: Sendable {
        var present: [Bool]
        /// The slot in the field now (the first present one when a card connects).
        var inField: Int?
        var exchangesBeforeRemoval: Int?
        var hung = false
        var corruptNext = false
        /// The APDUs still to answer before one is held (`holdAnswer(after:)`).
        var answersBeforeHold: Int?
        /// The APDU held unanswered, and when it came, until `releaseHeld()` (or the card leaves
        /// the field: its connection, and the APDU's reader session, are gone).
        var held: (apdu: [UInt8], received: ContinuousClock.Instant)?
        var stopped = false
        /// When the card last left: it connects again no sooner than `absence` after.
        var leftAt: ContinuousClock.Instant?
        var traffic = Traffic()
    }

    public let options: Options
    public let readers: [PCSCPart3Reader]
    private let state: Mutex<State>
    /// The loop the card's socket is served on: its thread is the card's.
    private let loop: IOLoop<ContinuousClock>
    /// The connection to vpcd and the pending retry: touched only on the loop's thread.
    private let link = Mutex(Link())

    /// The card's connection to vpcd: the socket, what has arrived of the next message, what has
    /// yet to go out of the last answer.
    private struct Connection {
        var socket: FileDescriptor
        var registration: IORegistration
        var slot: Int
        var received: [UInt8] = []
        var outgoing: [UInt8] = []
        var waitingToWrite = false
    }

    private struct Link {
        var connection: Connection?
        /// When the card tries to connect next (vpcd not listening yet, or the absence not over).
        var retry: IOTimer?
    }

    /// Starts presenting `tags` (each present, the first in the field) to vpcd on `options.port`.
    public init(tags: [any EmulatedTag], options: Options) {
        self.options = options
        readers = tags.map { PCSCPart3Reader(tag: $0, model: options.model) }
        state = Mutex(State(present: tags.map { _ in true }))
        do {
            loop = try IOLoop(name: "vpcd card :\(options.port)")
        } catch {
            fatalError("vpcd card: no I/O loop for its socket (\(error)): too many open files or threads (ulimit -n, ulimit -u)?")
        }
        loop.execute { [self] in connectWhenDue() }
    }

    /// An emulator presenting the tags of dump files (Type 2, Type 4, NTAG 424 DNA).
    public convenience init(dumps: [TagImage], options: Options) throws(EmulatorError) {
        var tags: [any EmulatedTag] = []
        for image in dumps {
            if case .type3 = image.memory { throw .unsupportedTag("a FeliCa tag cannot be presented behind vpcd (ISO 14443-A only)") }
            tags.append(try image.emulatedTag())
        }
        self.init(tags: tags, options: options)
    }

    // MARK: - Faults and inspection

    /// Takes tag `index` out of the field, or puts it back.
    public func setPresent(_ present: Bool, tag index: Int = 0) {
        state.withLock { state in
            guard state.present.indices.contains(index) else { return }
            state.present[index] = present
        }
        loop.execute { [self] in reconsider() }
    }

    /// The card answers `count` more APDUs, then leaves the field (a tag pulled mid-read).
    public func removeAfter(exchanges count: Int) { state.withLock { $0.exchangesBeforeRemoval = count } }

    /// Stops answering (a hung reader) or resumes.
    public func setHung(_ hung: Bool) { state.withLock { $0.hung = hung } }

    /// The next answer goes out cut short (a garbled answer).
    public func corruptNextReply() { state.withLock { $0.corruptNext = true } }

    /// The card answers `count` more APDUs, then holds the next one unanswered until
    /// `releaseHeld()` (a slow tag, or a test that makes something happen mid-read: the reader,
    /// and pcscd's lock on it, wait for that answer meanwhile). A card that leaves the field forgets both.
    public func holdAnswer(after count: Int) { state.withLock { $0.answersBeforeHold = count } }

    /// Whether an APDU is held unanswered (`holdAnswer(after:)`).
    public var holding: Bool { state.withLock { $0.held != nil } }

    /// Answers the APDU held, if any, and goes on.
    public func releaseHeld() {
        loop.execute { [self] in
            guard let (apdu, received) = state.withLock({ $0.held.take() }), let slot = link.withLock({ $0.connection?.slot }) else {
                return
            }
            if !answer(apdu, slot: slot, releasing: received) { leave() }
        }
    }

    public var traffic: Traffic { state.withLock { $0.traffic } }

    /// Forgets the traffic so far (a benchmark's next round).
    public func clearTraffic() { state.withLock { $0.traffic = Traffic() } }

    /// Whether a card is connected to vpcd now.
    public var connected: Bool { state.withLock { $0.inField != nil } }

    /// Carries out one scripted fault. Returns false for `hangup` (the caller stops the emulator).
    public func apply(_ action: FaultScript.Action) -> Bool {
        switch action {
        case .remove(let tag): setPresent(false, tag: tag)
        case .present(let tag): setPresent(true, tag: tag)
        case .removeAfter(let exchanges): removeAfter(exchanges: exchanges)
        case .hang: setHung(true)
        case .resume: setHung(false)
        case .corrupt: corruptNextReply()
        case .weak: break  // refused when the script is loaded (PCSCLab): a card behind vpcd has no air to fail on
        case .hangUp: return false
        }
        return true
    }

    /// Stops the emulator: the card leaves and nothing connects again. Returns at once (the card
    /// leaves on the loop's thread, which then ends); `stopped()` awaits the end.
    public func stop() {
        let first = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return !state.stopped
        }
        guard first else { return }
        // Closures handed before `close` run before the loop ends: the card leaves first.
        loop.execute { [self] in leave() }
        loop.close {}
    }

    /// `stop()`, then returns once the card has left and the loop's thread has ended.
    public func stopped() async {
        stop()
        await loop.close()
    }

    // MARK: - The socket, on the loop's thread

    /// Connects the first present card once the last one has been away long enough, or arranges
    /// to try again: when the absence is over, or in 20 ms while vpcd does not listen. With no
    /// card present it waits for `setPresent`.
    private func connectWhenDue() {
        if let retry = link.withLock({ $0.retry.take() }) { loop.cancel(retry) }
        guard link.withLock({ $0.connection == nil }) else { return }
        enum Next { case wait, retry(at: ContinuousClock.Instant), connect(slot: Int) }
        let next = state.withLock { state -> Next in
            if state.stopped { return .wait }
            if let left = state.leftAt, ContinuousClock.now - left < options.absence { return .retry(at: left + options.absence) }
            guard let slot = state.present.firstIndex(of: true) else { return .wait }
            return .connect(slot: slot)
        }
        switch next {
        case .wait:
            return
        case .retry(let deadline):
            retry(at: deadline)
        case .connect(let slot):
            guard let socket = connect() else {
                retry(at: .now + .milliseconds(20))
                return
            }
            readers[slot].reset()
            let registration: IORegistration
            do {
                registration = try loop.register(socket, for: .readable) { [self] events in serve(events) }
            } catch {
                // The loop is closing: the emulator is stopping.
                _ = try? socket.close()
                return
            }
            link.withLock { $0.connection = Connection(socket: socket, registration: registration, slot: slot) }
            state.withLock { state in
                state.inField = slot
                state.traffic.connections += 1
                state.traffic.connectedAt = .now
                state.traffic.noticedAt = nil
            }
        }
    }

    private func retry(at deadline: ContinuousClock.Instant) {
        let timer = loop.schedule(at: deadline) { [self] in connectWhenDue() }
        link.withLock { $0.retry = timer }
    }

    /// A card taken out of the field (or the emulator stopping) leaves; one put back may connect.
    private func reconsider() {
        if let slot = link.withLock({ $0.connection?.slot }) {
            if mustLeave(slot) { leave() }
        } else {
            connectWhenDue()
        }
    }

    private func mustLeave(_ slot: Int) -> Bool {
        state.withLock { state in state.stopped || !state.present[slot] }
    }

    /// The card leaves the field: the connection closes (pcscd sees the card removed), and it
    /// comes back no sooner than `absence` after.
    private func leave() {
        guard let connection = link.withLock({ $0.connection.take() }) else { return }
        loop.deregister(connection.registration)
        _ = try? connection.socket.close()
        state.withLock { state in
            state.inField = nil
            state.leftAt = .now
            state.held = nil
            state.answersBeforeHold = nil
        }
        connectWhenDue()
    }

    /// vpcd's socket is ready: the rest of the last answer goes out, then what has arrived is
    /// answered, message by message, until the card leaves the field, the emulator stops or vpcd
    /// goes away.
    private func serve(_ events: IOEvents) {
        guard let slot = link.withLock({ $0.connection?.slot }) else { return }
        if events.contains(.writable) && !flush() { return leave() }
        guard !events.isDisjoint(with: [.readable, .hangUp, .error]) else { return }
        if mustLeave(slot) { return leave() }
        guard let bytes = receive() else { return leave() }
        link.withLock { $0.connection?.received += bytes }
        while let message = nextMessage() {
            if mustLeave(slot) { return leave() }
            guard answer(message, slot: slot) else { return leave() }
        }
    }

    /// Answers one message; false when the card is to leave (pulled mid-read, or vpcd gone).
    /// `releasing`: the APDU held (`releaseHeld()`), counted when it came (then).
    private func answer(_ message: [UInt8], slot: Int, releasing: ContinuousClock.Instant? = nil) -> Bool {
        let reader = readers[slot]
        let received = releasing ?? ContinuousClock.now
        if state.withLock({ $0.hung }) { return true }
        state.withLock { state in
            if state.traffic.noticedAt == nil { state.traffic.noticedAt = received }
        }
        if message.count == 1 {
            switch message[0] {
            case 0x02: reader.reset()  // reset: the tag is selected again, any session ends
            case 0x04: return send(reader.atr)
            default: break  // power on / off: nothing to answer
            }
            return true
        }
        let (gone, corrupt, hold) = state.withLock { state -> (Bool, Bool, Bool) in
            // A held APDU, released, was counted when it came.
            if releasing == nil {
                let holds = state.answersBeforeHold.map { $0 <= 0 } ?? false
                if !holds, let remaining = state.exchangesBeforeRemoval {
                    if remaining <= 0 {
                        state.exchangesBeforeRemoval = nil
                        state.present[slot] = false
                        return (true, false, false)
                    }
                    state.exchangesBeforeRemoval = remaining - 1
                }
                state.traffic.apdus += 1
                state.traffic.headers.append(Array(message.prefix(4)))
                if let remaining = state.answersBeforeHold {
                    state.answersBeforeHold = holds ? nil : remaining - 1
                    if holds {
                        state.held = (message, received)
                        return (false, false, true)
                    }
                }
            }
            defer { state.corruptNext = false }
            return (false, state.corruptNext, false)
        }
        // Held: answered by `releaseHeld()` (pcscd sends nothing more to the reader meanwhile).
        if hold { return true }
        // Pulled mid-read: gone without an answer, as a card leaving the field is.
        if gone { return false }
        var answer = reader.answer(message)
        if corrupt { answer = Array(answer.prefix(1)) }
        guard send(answer) else { return false }
        let exchange = Exchange(command: message, received: received, answered: .now)
        state.withLock { $0.traffic.exchanges.append(exchange) }
        return true
    }

    /// A TCP connection to vpcd with Nagle's delay and delayed ACKs off (each costs up to 40 ms
    /// an exchange), or `nil` while vpcd does not listen. Blocking: vpcd is on this machine.
    private func connect() -> FileDescriptor? {
        guard let vpcd = SocketAddress.ipv4(options.host, port: options.port),
            let socket = try? FileDescriptor.socket(domain: AF_INET, type: FileDescriptor.stream)
        else { return nil }
        do {
            try socket.connect(to: vpcd)
        } catch {
            _ = try? socket.close()
            return nil
        }
        _ = try? socket.setOption(level: Int32(IPPROTO_TCP), name: TCP_NODELAY, to: 1)
        _ = try? socket.setOption(level: Int32(IPPROTO_TCP), name: TCP_QUICKACK, to: 1)
        return socket
    }

    /// What has arrived (`[]`: nothing yet), or `nil` when vpcd has gone.
    private func receive() -> [UInt8]? {
        guard let socket = link.withLock({ $0.connection?.socket }) else { return nil }
        // vpcd writes the length and the bytes separately, and Nagle's algorithm holds the
        // second write until the first is acknowledged: acknowledge at once. The kernel turns
        // quick ACKs off again by itself, so this is set before every read.
        _ = try? socket.setOption(level: Int32(IPPROTO_TCP), name: TCP_QUICKACK, to: 1)
        var bytes = [UInt8](repeating: 0, count: 4096)
        do {
            let count = try socket.receive(into: &bytes, flags: Int32(MSG_DONTWAIT))
            return count > 0 ? Array(bytes[..<count]) : nil
        } catch Errno.wouldBlock {
            return []
        } catch {
            return nil
        }
    }

    /// The next whole message arrived (a 2-byte length, then the bytes), taken off the buffer.
    private func nextMessage() -> [UInt8]? {
        link.withLock { link -> [UInt8]? in
            guard let received = link.connection?.received, received.count >= 2 else { return nil }
            let length = Int(received[0]) << 8 | Int(received[1])
            guard received.count >= 2 + length else { return nil }
            link.connection?.received.removeFirst(2 + length)
            return Array(received[2..<(2 + length)])
        }
    }

    /// Sends a message (its length, then `bytes`); false when vpcd has gone.
    private func send(_ bytes: [UInt8]) -> Bool {
        let message = [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        link.withLock { $0.connection?.outgoing += message }
        return flush()
    }

    /// Sends what the socket takes of the answers waiting, and watches it for room while some
    /// remain; false when vpcd has gone.
    private func flush() -> Bool {
        guard let connection = link.withLock({ $0.connection }) else { return false }
        let pending = connection.outgoing
        var sent = 0
        do {
            while sent < pending.count {
                let count = try connection.socket.send(pending[sent...], flags: Int32(MSG_DONTWAIT))
                guard count > 0 else { return false }
                sent += count
            }
        } catch Errno.wouldBlock {
            // The socket is full: the rest goes when it has room.
        } catch {
            return false
        }
        let waiting = sent < pending.count
        link.withLock { link in
            link.connection?.outgoing.removeFirst(sent)
            link.connection?.waitingToWrite = waiting
        }
        if waiting != connection.waitingToWrite {
            do {
                try loop.modify(connection.registration, interest: waiting ? [.readable, .writable] : .readable)
            } catch {
                return false
            }
        }
        return true
    }
}
