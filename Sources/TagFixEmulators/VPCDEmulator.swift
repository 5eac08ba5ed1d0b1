import Foundation
import Glibc
import Synchronization
import TagFixCore
public import TagFixNDEF

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
/// It runs on its own thread; faults come from any thread (`apply`, `setPresent`…).
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
        var stopped = false
        /// When the card last left: it connects again no sooner than `absence` after.
        var leftAt: ContinuousClock.Instant?
        var traffic = Traffic()
    }

    public let options: Options
    public let readers: [PCSCPart3Reader]
    private let state: Mutex<State>
    private let done = DispatchSemaphore(value: 0)

    /// Starts presenting `tags` (each present, the first in the field) to vpcd on `options.port`.
    public init(tags: [any EmulatedTag], options: Options) {
        self.options = options
        readers = tags.map { PCSCPart3Reader(tag: $0, model: options.model) }
        state = Mutex(State(present: tags.map { _ in true }))
        let thread = Thread { [self] in
            serve()
            done.signal()
        }
        thread.name = "vpcd card :\(options.port)"
        thread.start()
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
    }

    /// The card answers `count` more APDUs, then leaves the field (a tag pulled mid-read).
    public func removeAfter(exchanges count: Int) { state.withLock { $0.exchangesBeforeRemoval = count } }

    /// Stops answering (a hung reader) or resumes.
    public func setHung(_ hung: Bool) { state.withLock { $0.hung = hung } }

    /// The next answer goes out cut short (a garbled answer).
    public func corruptNextReply() { state.withLock { $0.corruptNext = true } }

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

    /// Stops the emulator: the card leaves and nothing connects again. Waits for the thread.
    public func stop() {
        let first = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return !state.stopped
        }
        if first { done.wait() }
    }

    // MARK: - The socket thread

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func serve() {
        while !isStopped {
            // The slot to put in the field: the first present one, once the last card has been
            // away long enough.
            let slot = state.withLock { state -> Int? in
                if let left = state.leftAt, ContinuousClock.now - left < options.absence { return nil }
                return state.present.firstIndex(of: true)
            }
            guard let slot, let socket = connect() else {
                usleep(20_000)
                continue
            }
            readers[slot].reset()
            state.withLock { state in
                state.inField = slot
                state.traffic.connections += 1
                state.traffic.connectedAt = .now
                state.traffic.noticedAt = nil
            }
            converse(socket, slot: slot)
            close(socket)
            state.withLock { state in
                state.inField = nil
                state.leftAt = .now
            }
        }
    }

    /// Answers vpcd until the card leaves the field, the emulator stops or vpcd goes away.
    private func converse(_ socket: Int32, slot: Int) {
        let reader = readers[slot]
        while true {
            let (leave, hung) = state.withLock { state in (state.stopped || !state.present[slot], state.hung) }
            if leave { return }
            guard let ready = Self.waitReadable(socket, milliseconds: 20) else { return }
            guard ready else { continue }
            guard let message = Self.receive(socket) else { return }
            let received = ContinuousClock.now
            if hung { continue }
            state.withLock { state in
                if state.traffic.noticedAt == nil { state.traffic.noticedAt = received }
            }
            if message.count == 1 {
                switch message[0] {
                case 0x02: reader.reset()  // reset: the tag is selected again, any session ends
                case 0x04: guard Self.send(socket, reader.atr) else { return }
                default: break  // power on / off: nothing to answer
                }
                continue
            }
            let (gone, corrupt) = state.withLock { state -> (Bool, Bool) in
                if let remaining = state.exchangesBeforeRemoval {
                    if remaining <= 0 {
                        state.exchangesBeforeRemoval = nil
                        state.present[slot] = false
                        return (true, false)
                    }
                    state.exchangesBeforeRemoval = remaining - 1
                }
                state.traffic.apdus += 1
                state.traffic.headers.append(Array(message.prefix(4)))
                defer { state.corruptNext = false }
                return (false, state.corruptNext)
            }
            // Pulled mid-read: gone without an answer, as a card leaving the field is.
            if gone { return }
            var answer = reader.answer(message)
            if corrupt { answer = Array(answer.prefix(1)) }
            guard Self.send(socket, answer) else { return }
            let exchange = Exchange(command: message, received: received, answered: .now)
            state.withLock { $0.traffic.exchanges.append(exchange) }
        }
    }

    /// A TCP connection to vpcd with Nagle's delay and delayed ACKs off (each costs up to 40 ms
    /// an exchange), or `nil` while vpcd does not listen.
    private func connect() -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(options.host)
        address.sin_port = in_port_t(UInt16(options.port).bigEndian)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            return nil
        }
        Self.setFast(fd)
        return fd
    }

    private static func setFast(_ fd: Int32) {
        var on: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_QUICKACK, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Whether `fd` has bytes (or end of file) within `milliseconds`; `nil` on an error.
    private static func waitReadable(_ fd: Int32, milliseconds: Int32) -> Bool? {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let result = poll(&entry, 1, milliseconds)
        if result < 0 { return errno == EINTR ? false : nil }
        return result > 0
    }

    /// One message: the 2-byte length, then the bytes; `nil` when vpcd has gone.
    private static func receive(_ fd: Int32) -> [UInt8]? {
        guard let header = readExactly(fd, 2) else { return nil }
        let length = Int(header[0]) << 8 | Int(header[1])
        guard length > 0 else { return [] }
        return readExactly(fd, length)
    }

    private static func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            // vpcd writes the length and the bytes separately, and Nagle's algorithm holds the
            // second write until the first is acknowledged: acknowledge at once. The kernel turns
            // quick ACKs off again by itself, so this is set before every read.
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_QUICKACK, &on, socklen_t(MemoryLayout<Int32>.size))
            let n = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return nil }
            got += n
        }
        return bytes
    }

    private static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        let message = [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        var sent = 0
        while sent < message.count {
            let n = message.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, message.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }
}
