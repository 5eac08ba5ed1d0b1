import CPCSC
import Foundation
import Synchronization
public import TagFixCore
public import TagFixDevices
import TagFixNDEF
import TagFixTags

/// Which PC/SC reader (or readers) an address names, among those pcscd has.
public enum PCSCSelection: Sendable, Hashable, CustomStringConvertible {
    /// Every reader: the first to hold a card is read (`pcsc:`).
    case any
    /// The N-th reader pcscd lists, from 0 (`pcsc:N`).
    case index(Int)
    /// The reader whose name contains this (`pcsc:NAME`, as `pcsc_scan` prints it).
    case name(String)

    /// The readers among `names` this selection watches.
    public func pick(_ names: [String]) -> [String] {
        switch self {
        case .any: names
        case .index(let index): names.indices.contains(index) ? [names[index]] : []
        case .name(let name): names.filter { $0 == name }.isEmpty ? names.filter { $0.contains(name) }.prefix(1).map { $0 } : [name]
        }
    }

    public var description: String {
        switch self {
        case .any: "pcsc:"
        case .index(let index): "pcsc:\(index)"
        case .name(let name): "pcsc:\(name)"
        }
    }
}

/// A contactless reader through pcsc-lite (`pcscd`): ACR122U, ACR1252U, Omnikey, uTrust… or the
/// vsmartcard virtual reader `tagfix emulate pcsc` answers behind.
///
/// Presence comes from `SCardGetStatusChange` (pcscd's own polling: no loop here); each card
/// placed is connected, identified from its ATR and `GET DATA`, read with the shared procedures
/// (TagFixTags), and reported once, then its removal. Every blocking call runs on the reader's
/// own thread; ending the stream cancels the wait (`SCardCancel`). pcscd stopped or restarted,
/// the reader unplugged: `.disconnected`, then the context is made again with backoff.
public final class PCSCReader<C: Clock>: TagReader, Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public struct Options: Sendable {
        /// Longest single wait for a change: how soon a stop is noticed if SCardCancel came
        /// between two waits.
        public var waitSlice: Duration = .milliseconds(500)
        /// First pause before making the context again; doubles up to `maximumBackoff`.
        public var reconnectDelay: Duration = .milliseconds(200)
        public var maximumBackoff: Duration = .seconds(2)
        public init() {}
    }

    public let readerID: String
    private let selection: PCSCSelection
    private let clock: C
    private let options: Options
    private let thread = DeviceThread()
    private let context = Mutex<PCSCContext?>(nil)
    private let passThrough = Mutex<[String: PCSCPassThrough]>([:])

    public init(selection: PCSCSelection, clock: C, options: Options = Options()) {
        self.selection = selection
        self.readerID = selection.description
        self.clock = clock
        self.options = options
    }

    public func events() -> AsyncStream<ReaderEvent> {
        thread.start(name: "pcsc \(readerID)", onStop: { [self] in self.context.withLock { $0?.cancel() } }) { [self] events in
            self.run(events)
        }
    }

    private var isStopped: Bool { thread.isStopped || PCSCActivity.shared.exiting }

    /// What the pass-through of the reader named `name` is known to do.
    func passThrough(of name: String) -> PCSCPassThrough {
        passThrough.withLock { known in
            if let found = known[name] { return found }
            let made = PCSCPassThrough(readerName: name)
            known[name] = made
            return made
        }
    }

    // MARK: - The device thread

    private func run(_ events: AsyncStream<ReaderEvent>.Continuation) {
        var backoff = options.reconnectDelay
        var reportedDown = false
        while !isStopped {
            let made: PCSCContext
            do {
                made = try PCSCContext()
            } catch {
                if !reportedDown {
                    events.yield(.disconnected(error.readerError))
                    reportedDown = true
                }
                DebugLog.debug("reader \(readerID): \(error); retrying in \(backoff.seconds) s")
                thread.pause(backoff)
                backoff = min(backoff * 2, options.maximumBackoff)
                continue
            }
            context.withLock { $0 = made }
            if isStopped { made.cancel() }
            do {
                try watch(made, events, reportedDown: &reportedDown, backoff: &backoff)
            } catch {
                if !isStopped, !reportedDown {
                    events.yield(.disconnected(error.readerError))
                    reportedDown = true
                }
            }
            context.withLock { $0 = nil }
            made.release()
            if !isStopped {
                thread.pause(backoff)
                backoff = min(backoff * 2, options.maximumBackoff)
            }
        }
    }

    /// Watches the selected readers for cards until stopped; throws when pcscd goes away.
    private func watch(
        _ context: PCSCContext, _ events: AsyncStream<ReaderEvent>.Continuation, reportedDown: inout Bool, backoff: inout Duration
    ) throws(PCSCError) {
        var announced: [String]?
        var known: [String: DWORD] = [:]
        var readerCount = DWORD(0)
        while !isStopped {
            let names = try context.readers()
            let chosen = selection.pick(names)
            var states = [PCSCReaderState(name: PCSCContext.plugAndPlay, current: readerCount << 16)]
            if chosen.isEmpty {
                if !reportedDown {
                    let what = selection == .any ? "pcscd has no reader" : "pcscd has no reader \(selection) (it has \(names.count))"
                    events.yield(
                        .disconnected(
                            ReaderError(
                                code: .notFound, message: what, hint: "plug the reader in; tagfix devices lists the readers pcscd has")))
                    reportedDown = true
                }
                announced = nil
            } else if announced != chosen {
                events.yield(.ready(description: "PC/SC " + chosen.joined(separator: ", ")))
                announced = chosen
                reportedDown = false
                backoff = options.reconnectDelay
            }
            states += chosen.map { PCSCReaderState(name: $0, current: known[$0] ?? DWORD(SCARD_STATE_UNAWARE)) }
            guard try context.waitForChange(&states, timeout: options.waitSlice) else { continue }
            readerCount = states[0].event >> 16
            for state in states.dropFirst() {
                let wasPresent = (known[state.name] ?? 0) & DWORD(SCARD_STATE_PRESENT) != 0
                known[state.name] = state.seen
                guard state.cardPresent, !wasPresent, !isStopped else { continue }
                if let final = try tap(context, state, events) { known[state.name] = final }
            }
            // Readers that went away are listed afresh next time round.
            if states.contains(where: \.readerGone) { known = known.filter { name, _ in names.contains(name) } }
        }
    }

    /// Reads the card in `state`'s reader, reports it, and waits for it to leave. Returns the
    /// reader's state once the card has gone.
    private func tap(
        _ context: PCSCContext, _ state: PCSCReaderState, _ events: AsyncStream<ReaderEvent>.Continuation
    ) throws(PCSCError) -> DWORD? {
        let started = clock.now
        let card: PCSCCard
        do {
            card = try context.connect(state.name)
        } catch {
            if error.serviceGone { throw error }
            // Gone before it could be connected, or held by another program: nothing was read.
            if error.code == PCSCError.sharingViolation { events.yield(.failed(error.readerError)) }
            return nil
        }
        let tag: PCSCTag
        do {
            tag = try PCSCTag(card: card, atr: state.atr, passThrough: passThrough(of: state.name))
        } catch {
            card.disconnect()
            events.yield(.failed(error))
            return try waitForRemoval(context, state, events, uid: nil)
        }
        if let unsupported = tag.unsupported {
            tag.disconnect()
            events.yield(.failed(unsupported))
            return try waitForRemoval(context, state, events, uid: tag.uid)
        }
        // A read that fails on the air is read again (`ReadRetry`); the card stays connected, so
        // the next attempt starts over on it. pcsc-lite hides the reader's RF status: the RF
        // errors counted are the attempts that failed on the air.
        var rfErrors = 0
        let (outcome, attempts) = ReadRetry.run(reselect: { true }) {
            let result = tag.read()
            if case .failure(let error) = result, ReadRetry.isRetryable(error) { rfErrors += 1 }
            return result
        }
        switch outcome {
        case .success(let read):
            let duration = started.duration(to: clock.now)
            DebugLog.debug(
                "read \(tag.uid.hex) (\(read.chipName)) on \(state.name): \(tag.apdus) APDUs, \(read.bytesMoved) bytes moved, \(Coordinate.format(duration.seconds * 1000, 1)) ms, \(attempts) attempt\(attempts == 1 ? "" : "s")"
            )
            var scan = tag.scan(read, readerID: readerID, time: started, duration: duration)
            scan.readEffort = ReadEffort(attempts: attempts, rfErrors: rfErrors, duration: duration)
            events.yield(.tagPresent(scan))
        case .failure(let error):
            events.yield(.failed(Self.readError(error, uid: tag.uid)))
        }
        tag.disconnect()
        return try waitForRemoval(context, state, events, uid: tag.uid)
    }

    /// Waits until the card in `state`'s reader is gone (or the reader is), then reports it.
    private func waitForRemoval(
        _ context: PCSCContext, _ state: PCSCReaderState, _ events: AsyncStream<ReaderEvent>.Continuation, uid: TagUID?
    ) throws(PCSCError) -> DWORD? {
        var watched = [PCSCReaderState(name: state.name, current: state.seen)]
        while !isStopped {
            do {
                guard try context.waitForChange(&watched, timeout: options.waitSlice) else { continue }
            } catch {
                if error.readerGone { break }
                throw error
            }
            watched[0].current = watched[0].seen
            if !watched[0].cardPresent || watched[0].readerGone { break }
        }
        if let uid, !isStopped { events.yield(.tagRemoved(uid, at: clock.now)) }
        return watched[0].seen
    }

    static func readError(_ error: NDEFReadError, uid: TagUID) -> ReaderError {
        switch error {
        case .incompleteRead(let commands, let cause):
            ReaderError(
                code: .incompleteRead,
                message: "incomplete read of \(uid.hex): the tag stopped answering after \(commands) commands (\(cause.detail))",
                hint: "hold the tag still until the read completes")
        case .malformed(let detail):
            ReaderError(
                code: .malformedTag, message: "tag \(uid.hex): \(detail)",
                hint: "rewrite the tag, or inspect a dump of it with tagfix inspect")
        }
    }
}
