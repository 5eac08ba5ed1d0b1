public import TagFixCore

// MARK: - One tag, once

/// One tag, once (`tagfix enroll`): open the reader, wait for a tag, write to it when asked (then
/// read it back and compare), read it, send it the raw commands asked for, and report. Backends
/// implement it (`LibNFCTagSession`; `ReaderTagSession` turns any `TagReader` into a read-only
/// one); commands get one from the reader factory (TagFixReaders) and never know which.
///
/// Ending the stream (the consumer is cancelled, or its timeout passes) stops the wait and
/// releases the reader.
public protocol TagSession: Sendable {
    /// The reader's name in output and logs, as `TagReader.readerID`.
    var readerID: String { get }
    /// Starts the session: the stream ends after `.done`, a failure, or when it is dropped.
    func run(_ request: TagSessionRequest) -> AsyncStream<TagSessionEvent>
}

extension TagSession {
    /// Reads the tag, after writing `message` to it (and reading it back) when given.
    public func run(writing message: [UInt8]?) -> AsyncStream<TagSessionEvent> {
        run(TagSessionRequest(write: message))
    }
}

/// What a session does with the tag.
public struct TagSessionRequest: Sendable, Hashable {
    /// An NDEF message to write before the read; the session reads it back and compares.
    public var write: [UInt8]?
    /// Raw commands sent after the read, in order, while the tag is still selected, each as it
    /// is (the reader adds the framing): what a trust check asks the chip (`READ_SIG`,
    /// `GET_VERSION`, an ISO 7816 APDU). Their answers come back in `TagSessionResult.answers`.
    public var exchanges: [[UInt8]]
    /// Run after the read, before `exchanges`, while the tag is still selected (backends that
    /// cannot exchange commands skip it).
    public var dialogue: TagDialogue?
    /// Reads of the tag after the first, each with the tag selected again, to measure how well
    /// it reads (`TagSessionResult.reads`; enrolment's read health). Backends that cannot select
    /// again make none.
    public var healthReads: Int

    public init(write: [UInt8]? = nil, exchanges: [[UInt8]] = [], dialogue: TagDialogue? = nil, healthReads: Int = 0) {
        self.write = write
        self.exchanges = exchanges
        self.dialogue = dialogue
        self.healthReads = healthReads
    }
}

/// Who the tag said it is when it was selected.
public struct TagIdentity: Sendable, Hashable {
    public var uid: TagUID
    /// ISO 14443-A ATQA (2 bytes) and SAK; `nil` for a tag of another technology.
    public var atqa: [UInt8]?
    public var sak: UInt8?
    /// An ISO-DEP tag's ATS, or a PC/SC card's ATR; empty when there is none.
    public var answerToSelect: [UInt8]

    public init(uid: TagUID, atqa: [UInt8]? = nil, sak: UInt8? = nil, answerToSelect: [UInt8] = []) {
        self.uid = uid
        self.atqa = atqa
        self.sak = sak
        self.answerToSelect = answerToSelect
    }
}

/// What a session's write did (the procedure's own report is `NDEFWrite`, TagFixTags).
public struct TagWritten: Sendable, Hashable {
    public var chipName: String
    /// Page (or block) writes sent.
    public var pagesWritten: Int
    public var bytesMoved: Int
    public var commands: Int

    public init(chipName: String, pagesWritten: Int, bytesMoved: Int, commands: Int) {
        self.chipName = chipName
        self.pagesWritten = pagesWritten
        self.bytesMoved = bytesMoved
        self.commands = commands
    }
}

/// What a session that finished gives.
public struct TagSessionResult: Sendable, Hashable {
    public var identity: TagIdentity
    /// The tag as read (after writing, when asked).
    public var scan: TagScan
    public var written: TagWritten?
    /// The answers to `TagSessionRequest.exchanges`, in order.
    public var answers: [Result<[UInt8], ReaderError>]
    /// How each read went, when the reader knows: the first read's, then the health reads'
    /// (`TagSessionRequest.healthReads`). Empty for a reader that does not tell.
    public var reads: [ReadEffort]

    public init(
        identity: TagIdentity, scan: TagScan, written: TagWritten? = nil, answers: [Result<[UInt8], ReaderError>] = [],
        reads: [ReadEffort] = []
    ) {
        self.identity = identity
        self.scan = scan
        self.written = written
        self.answers = answers
        self.reads = reads
    }
}

/// What a tag session reports.
public enum TagSessionEvent: Sendable, Hashable {
    /// The reader is open; waiting for a tag.
    case ready(description: String)
    /// The tag was read (and, when asked, written and read back, and sent the raw commands).
    case done(TagSessionResult)
    /// The tag could not be written; nothing was recorded. The error says what state the tag is in.
    case writeFailed(uid: TagUID, ReaderError)
    /// The tag could not be read.
    case readFailed(ReaderError)
    /// The reader could not be opened.
    case unavailable(ReaderError)
}

// MARK: - Any reader as a read-only session

/// A read-only `TagSession` over any `TagReader` (a mock reader, a backend without a session of
/// its own): the first tag the reader reports is the session's. It cannot write nor send raw
/// commands: a write request fails on the tag, and each raw command is answered with an error.
public struct ReaderTagSession: TagSession {
    public let reader: any TagReader
    public var readerID: String { reader.readerID }

    public init(reader: any TagReader) { self.reader = reader }

    public func run(_ request: TagSessionRequest) -> AsyncStream<TagSessionEvent> {
        let reader = self.reader
        let (stream, events) = AsyncStream<TagSessionEvent>.makeStream()
        let task = Task {
            defer { events.finish() }
            var ready = false
            for await event in reader.events() {
                switch event {
                case .ready(let description):
                    ready = true
                    events.yield(.ready(description: description))
                case .tagPresent(let scan):
                    if request.write != nil {
                        let error = ReaderError(code: .unsupportedTag, message: "reader \(reader.readerID) cannot write tags")
                        events.yield(.writeFailed(uid: scan.uid, error))
                        return
                    }
                    let refused = ReaderError(code: .unsupportedTag, message: "reader \(reader.readerID) cannot send raw commands")
                    events.yield(
                        .done(
                            TagSessionResult(
                                identity: TagIdentity(uid: scan.uid), scan: scan,
                                answers: request.exchanges.map { _ in .failure(refused) }, reads: scan.readEffort.map { [$0] } ?? [])))
                    return
                case .failed(let error):
                    events.yield(.readFailed(error))
                    return
                case .disconnected(let error):
                    events.yield(ready ? .readFailed(error) : .unavailable(error))
                    return
                case .tagRemoved:
                    continue
                }
            }
        }
        events.onTermination = { _ in task.cancel() }
        return stream
    }
}
