import Foundation
public import TagFixCore
public import TagFixDevices
import TagFixNDEF
import TagFixTags

/// One tag, once, through libnfc (a `TagSession`): open the reader, wait for a tag, write the
/// request's message to it when given (Type 2 only), read it back, send it the raw commands asked
/// for, and report. The device lives on its own thread; ending the stream (the consumer is
/// cancelled, or a timeout passes) stops the wait and releases the reader.
public final class LibNFCTagSession<C: Clock>: TagSession, Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public let readerID: String
    private let connstring: String?
    private let clock: C
    private let pollInterval: Duration
    private let thread = DeviceThread()
    /// The consumer has gone, or the process is ending (`NFCActivity`).
    private var isStopped: Bool { thread.isStopped || NFCActivity.shared.exiting }

    public init(connstring: String?, clock: C, pollInterval: Duration = .milliseconds(50)) {
        self.connstring = connstring
        self.readerID = connstring ?? "default"
        self.clock = clock
        self.pollInterval = pollInterval
    }

    /// Starts the session: the stream ends after `.done`, a failure, or when it is dropped.
    public func run(_ request: TagSessionRequest) -> AsyncStream<TagSessionEvent> {
        thread.start(name: "libnfc session \(readerID)") { [self] events in
            self.serve(request, events)
        }
    }

    private func serve(_ request: TagSessionRequest, _ events: AsyncStream<TagSessionEvent>.Continuation) {
        let device: NFCDeviceHandle
        do {
            device = try NFCDeviceHandle(context: try NFCContext.shared(), connstring: connstring, while: { !isStopped })
            try device.initiatorInit()
        } catch {
            events.yield(.unavailable(LibNFCReader<C>.readerError(error)))
            return
        }
        defer { device.close() }
        events.yield(.ready(description: device.label))
        while !isStopped {
            let target: ISO14443ATarget
            do {
                guard let found = try device.selectISO14443A() else {
                    thread.pause(pollInterval, or: { NFCActivity.shared.exiting })
                    continue
                }
                target = found
            } catch {
                events.yield(.unavailable(LibNFCReader<C>.readerError(error)))
                return
            }
            guard let uid = try? TagUID(bytes: target.uid) else {
                events.yield(.readFailed(ReaderError(code: .unsupportedTag, message: "a tag with a \(target.uid.count)-byte UID")))
                return
            }
            let started = clock.now
            var transport = DeviceTransport(device: device)
            let link = transport
            let reselect = { () throws(TagError) -> Void in try link.reselect(target) }
            var written: NDEFWrite?
            if let message = request.write {
                guard target.isType2 else {
                    events.yield(.writeFailed(uid: uid, Self.writeError(.unsupported("a tag with SAK \(Hex.encode([target.sak]))"))))
                    return
                }
                do {
                    written = try Type2NDEFWriter.write(message, &transport, reselect: reselect)
                } catch {
                    events.yield(.writeFailed(uid: uid, Self.writeError(error)))
                    return
                }
            }
            // One read of the tag as it is selected now, with its retries (`ReadRetry`).
            func readOnce(_ transport: inout DeviceTransport) -> Result<NDEFRead, NDEFReadError> {
                do throws(NDEFReadError) {
                    if target.isType2 { return .success(try Type2NDEFReader.read(&transport, reselect: reselect)) }
                    return .success(try Type4NDEFReader.read(&transport, known: .layout(answerToSelect: target.ats)))
                } catch {
                    return .failure(error)
                }
            }
            guard target.isType2 || target.isISODEP else {
                events.yield(
                    .readFailed(ReaderError(code: .unsupportedTag, message: "a tag with SAK \(Hex.encode([target.sak])): not Type 2 or 4")))
                return
            }
            // The read, then the health reads, each with the tag selected again as a new tap
            // selects it; the first read that completes is the scan. A first read that fails
            // is not the end when health reads were asked for: they say how badly it reads.
            var reads: [ReadEffort] = []
            var firstRead: Result<NDEFRead, NDEFReadError>?
            for index in 0...max(0, request.healthReads) where !isStopped {
                let readStarted = clock.now
                let rfAtStart = link.failures.rfErrors
                let (outcome, attempts) = ReadRetry.run(reselect: { link.reselectIfPresent(target) }) {
                    guard index == 0 || link.reselectIfPresent(target) else {
                        return .failure(.incompleteRead(after: 0, TagError(.tagLost, detail: "no answer to its selection")))
                    }
                    return readOnce(&transport)
                }
                let completed = (try? outcome.get()) != nil
                reads.append(
                    ReadEffort(
                        attempts: attempts, rfErrors: link.failures.rfErrors - rfAtStart, duration: readStarted.duration(to: clock.now),
                        completed: completed))
                if firstRead == nil || (completed && (try? firstRead?.get()) == nil) { firstRead = outcome }
            }
            if request.healthReads > 0 { _ = link.reselectIfPresent(target) }
            do {
                guard let firstRead else { return }
                let read = try firstRead.get()
                var scan = read.scan(
                    readerID: readerID, uid: uid, time: started, duration: reads[0].duration,
                    extraBytes: written?.bytesMoved ?? 0)
                scan.readEffort = reads.first
                let identity = TagIdentity(uid: uid, atqa: target.atqa, sak: target.sak, answerToSelect: target.ats)
                request.dialogue?.run(identity) { command in try transport.transceive(command) }
                var answers: [Result<[UInt8], ReaderError>] = []
                for command in request.exchanges {
                    do throws(TagError) {
                        answers.append(.success(try transport.transceive(command)))
                    } catch {
                        let message = "tag \(uid.hex) did not answer \(Hex.encode(command.prefix(2)))… (\(error.detail))"
                        answers.append(.failure(ReaderError(code: .io, message: message, hint: error.hint)))
                    }
                }
                events.yield(
                    .done(
                        TagSessionResult(
                            identity: identity, scan: scan,
                            written: written.map {
                                TagWritten(
                                    chipName: $0.chipName, pagesWritten: $0.pagesWritten, bytesMoved: $0.bytesMoved, commands: $0.commands)
                            }, answers: answers, reads: reads)))
            } catch {
                events.yield(.readFailed(LibNFCReader<C>.readError(error, uid: uid)))
            }
            return
        }
    }

    /// A write that failed, as the session reports it: the message says what state the tag is in.
    static func writeError(_ error: NDEFWriteError) -> ReaderError {
        if case .unsupported = error { return ReaderError(code: .unsupportedTag, message: error.description) }
        return ReaderError(code: .writeFailed, message: error.description)
    }
}
