import Foundation
public import TagFixCore
public import TagFixDevices
import TagFixNDEF

/// What a one-shot tag session (`tagfix enroll`) reports.
public enum TagSessionEvent: Sendable, Hashable {
    /// The reader is open; waiting for a tag.
    case ready(description: String)
    /// The tag was read (and, when asked, written and read back): the scan as read after writing.
    case done(TagScan, NDEFWrite?)
    /// The tag could not be written; nothing was recorded.
    case writeFailed(uid: TagUID, NDEFWriteError)
    /// The tag could not be read.
    case readFailed(ReaderError)
    /// The reader could not be opened.
    case unavailable(ReaderError)
}

/// One tag, once: open the reader, wait for a tag, write `message` to it when given (Type 2 only),
/// read it back and report. The device lives on its own thread; ending the stream (the consumer
/// is cancelled, or a timeout passes) stops the wait and releases the reader.
public final class LibNFCTagSession<C: Clock>: Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public let readerID: String
    private let connstring: String?
    private let clock: C
    private let pollInterval: Duration
    private let thread = DeviceThread()

    public init(connstring: String?, clock: C, pollInterval: Duration = .milliseconds(50)) {
        self.connstring = connstring
        self.readerID = connstring ?? "default"
        self.clock = clock
        self.pollInterval = pollInterval
    }

    /// Starts the session: the stream ends after `.done`, a failure, or when it is dropped.
    public func run(writing message: [UInt8]?) -> AsyncStream<TagSessionEvent> {
        thread.start(name: "libnfc session \(readerID)") { [self] events in
            self.serve(message, events)
        }
    }

    private func serve(_ message: [UInt8]?, _ events: AsyncStream<TagSessionEvent>.Continuation) {
        let device: NFCDeviceHandle
        do {
            device = try NFCDeviceHandle(context: try NFCContext.shared(), connstring: connstring)
            try device.initiatorInit()
        } catch {
            events.yield(.unavailable(LibNFCReader<C>.readerError(error)))
            return
        }
        defer { device.close() }
        events.yield(.ready(description: device.label))
        while !thread.isStopped {
            let target: ISO14443ATarget
            do {
                guard let found = try device.selectISO14443A() else {
                    thread.pause(pollInterval)
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
            let reselect = { () throws(NFCError) -> Void in
                device.deselect()
                _ = try device.selectISO14443A(uid: target.uid)
            }
            var written: NDEFWrite?
            if let message {
                guard target.isType2 else {
                    events.yield(.writeFailed(uid: uid, .unsupported("a tag with SAK \(Hex.encode([target.sak]))")))
                    return
                }
                do {
                    written = try Type2NDEFWriter.write(message, &transport, reselect: reselect)
                } catch {
                    events.yield(.writeFailed(uid: uid, error))
                    return
                }
            }
            do {
                let read: NDEFRead
                if target.isType2 {
                    read = try Type2NDEFReader.read(&transport, reselect: reselect)
                } else if target.isISODEP {
                    read = try Type4NDEFReader.read(&transport)
                } else {
                    events.yield(
                        .readFailed(
                            ReaderError(code: .unsupportedTag, message: "a tag with SAK \(Hex.encode([target.sak])): not Type 2 or 4")))
                    return
                }
                let parsed = read.message.flatMap { try? NDEFMessage(bytes: $0) }
                var scan = TagScan(
                    readerID: readerID, uid: uid, tagType: read.tagType, url: parsed?.firstURL, time: started, ndefMessage: read.message,
                    readDuration: started.duration(to: clock.now), bytesMoved: read.bytesMoved + (written?.bytesMoved ?? 0))
                scan.ndefProblem = read.problem
                scan.ndefReadFailed = read.failed
                scan.originality = read.originality(uid: uid)
                events.yield(.done(scan, written))
            } catch {
                events.yield(.readFailed(LibNFCReader<C>.readError(error, uid: uid)))
            }
            return
        }
    }
}
