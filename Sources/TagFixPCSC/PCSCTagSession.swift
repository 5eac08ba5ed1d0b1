import CPCSC
import Foundation
import Synchronization
public import TagFixCore
public import TagFixDevices
import TagFixNDEF
import TagFixTags

/// One tag, once, through pcsc-lite (a `TagSession`): wait for a card in the selected reader,
/// write the request's message to it when given (Type 2, `UPDATE BINARY`), read it back, send it
/// the raw commands asked for, and report. The calls run on the session's own thread; ending the
/// stream cancels the wait.
public final class PCSCTagSession<C: Clock>: TagSession, Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public let readerID: String
    private let selection: PCSCSelection
    private let clock: C
    private let waitSlice: Duration
    private let thread = DeviceThread()
    private let context = Mutex<PCSCContext?>(nil)

    public init(selection: PCSCSelection, clock: C, waitSlice: Duration = .milliseconds(500)) {
        self.selection = selection
        self.readerID = selection.description
        self.clock = clock
        self.waitSlice = waitSlice
    }

    public func run(_ request: TagSessionRequest) -> AsyncStream<TagSessionEvent> {
        thread.start(name: "pcsc session \(readerID)", onStop: { [self] in self.context.withLock { $0?.cancel() } }) { [self] events in
            self.serve(request, events)
        }
    }

    private func serve(_ request: TagSessionRequest, _ events: AsyncStream<TagSessionEvent>.Continuation) {
        let made: PCSCContext
        do {
            made = try PCSCContext()
        } catch {
            events.yield(.unavailable(error.readerError))
            return
        }
        context.withLock { $0 = made }
        defer {
            context.withLock { $0 = nil }
            made.release()
        }
        if thread.isStopped { return }
        do throws(PCSCError) {
            guard let (name, atr) = try waitForCard(made, events) else { return }
            let card: PCSCCard
            do {
                card = try made.connect(name)
            } catch {
                events.yield(.readFailed(error.readerError))
                return
            }
            defer { card.disconnect() }
            let tag: PCSCTag
            do {
                tag = try PCSCTag(card: card, atr: atr, passThrough: PCSCPassThrough(readerName: name))
            } catch {
                events.yield(.readFailed(error))
                return
            }
            // Before the card is let go: a reader left in a transparent session does not poll.
            defer { try? tag.link.endTransparentSession() }
            handle(tag, request, events)
        } catch {
            events.yield(.unavailable(error.readerError))
        }
    }

    /// Waits for a card in a selected reader: its reader's name and ATR, or `nil` when stopped.
    private func waitForCard(
        _ context: PCSCContext, _ events: AsyncStream<TagSessionEvent>.Continuation
    ) throws(PCSCError) -> (String, [UInt8])? {
        var announced = false
        var known: [String: DWORD] = [:]
        while !thread.isStopped && !PCSCActivity.shared.exiting {
            let names = try context.readers()
            let chosen = selection.pick(names)
            guard !chosen.isEmpty else {
                let what = selection == .any ? "pcscd has no reader" : "pcscd has no reader \(selection) (it has \(names.count))"
                events.yield(
                    .unavailable(
                        ReaderError(code: .notFound, message: what, hint: "plug the reader in; tagfix devices lists the readers pcscd has"))
                )
                return nil
            }
            if !announced {
                events.yield(.ready(description: "PC/SC " + chosen.joined(separator: ", ")))
                announced = true
            }
            var states = chosen.map { PCSCReaderState(name: $0, current: known[$0] ?? DWORD(SCARD_STATE_UNAWARE)) }
            guard try context.waitForChange(&states, timeout: waitSlice) else { continue }
            for state in states {
                known[state.name] = state.seen
                if state.cardPresent { return (state.name, state.atr) }
            }
        }
        return nil
    }

    private func handle(_ tag: PCSCTag, _ request: TagSessionRequest, _ events: AsyncStream<TagSessionEvent>.Continuation) {
        if let unsupported = tag.unsupported {
            events.yield(request.write == nil ? .readFailed(unsupported) : .writeFailed(uid: tag.uid, unsupported))
            return
        }
        let started = clock.now
        var written: NDEFWrite?
        if let message = request.write {
            switch tag.write(message) {
            case .success(let write): written = write
            case .failure(let error):
                events.yield(.writeFailed(uid: tag.uid, Self.writeError(error)))
                return
            }
        }
        // The read, then the health reads (`healthReads`): each read as a tap reads it, retried
        // when it fails on the air (`ReadRetry`). pcsc-lite keeps the card connected and hides the
        // reader's RF status, so each read starts over on the connected card and the RF errors
        // counted are the attempts that failed on the air. The first read that completes is the scan.
        var reads: [ReadEffort] = []
        var firstRead: Result<NDEFRead, NDEFReadError>?
        var firstDuration: Duration = .zero
        for _ in 0...max(0, request.healthReads) where !thread.isStopped {
            let readStarted = clock.now
            var rfErrors = 0
            let (outcome, attempts) = ReadRetry.run(reselect: { true }) {
                let result = tag.read()
                if case .failure(let error) = result, ReadRetry.isRetryable(error) { rfErrors += 1 }
                return result
            }
            let completed = (try? outcome.get()) != nil
            let duration = readStarted.duration(to: clock.now)
            reads.append(ReadEffort(attempts: attempts, rfErrors: rfErrors, duration: duration, completed: completed))
            if firstRead == nil || (completed && (try? firstRead?.get()) == nil) {
                firstRead = outcome
                firstDuration = reads.count == 1 ? started.duration(to: clock.now) : duration
            }
        }
        let read: NDEFRead
        switch firstRead {
        case .success(let result): read = result
        case .failure(let error):
            events.yield(.readFailed(PCSCReader<C>.readError(error, uid: tag.uid)))
            return
        case nil: return
        }
        var scan = tag.scan(read, readerID: readerID, time: started, duration: firstDuration, extraBytes: written?.bytesMoved ?? 0)
        scan.readEffort = reads.first
        request.dialogue?.run(tag.identity) { command in try tag.exchange(command) }
        var answers: [Result<[UInt8], ReaderError>] = []
        for command in request.exchanges {
            do throws(TagError) {
                answers.append(.success(try tag.exchange(command)))
            } catch {
                let message = "tag \(tag.uid.hex) did not answer \(Hex.encode(command.prefix(2)))… (\(error.detail))"
                answers.append(.failure(ReaderError(code: .io, message: message, hint: error.hint)))
            }
        }
        events.yield(
            .done(
                TagSessionResult(
                    identity: tag.identity, scan: scan,
                    written: written.map {
                        TagWritten(chipName: $0.chipName, pagesWritten: $0.pagesWritten, bytesMoved: $0.bytesMoved, commands: $0.commands)
                    }, answers: answers, reads: request.healthReads > 0 ? reads : [])))
    }

    static func writeError(_ error: NDEFWriteError) -> ReaderError {
        if case .unsupported = error { return ReaderError(code: .unsupportedTag, message: error.description) }
        return ReaderError(code: .writeFailed, message: error.description)
    }
}
