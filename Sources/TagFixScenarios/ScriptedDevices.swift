import Synchronization
public import TagFixCore
public import TagFixDevices

/// An event at a time on a mock device's timeline.
public struct Scheduled<Event: Sendable>: Sendable {
    public var at: Timestamp
    public var event: Event

    public init(at: Timestamp, _ event: Event) {
        self.at = at
        self.event = event
    }
}

/// A scripted device stream shared by the mocks: plays a timeline on the injected clock, and
/// takes events pushed by a test.
final class ScriptedStream<Event: Sendable, C: Clock>: Sendable where C.Instant == Timestamp, C.Duration == Duration {
    private let stream: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let script: [Scheduled<Event>]
    private let finishAfterScript: Bool
    private let clock: C
    private let started = Mutex(false)

    init(clock: C, script: [Scheduled<Event>], finishAfterScript: Bool) {
        (stream, continuation) = AsyncStream<Event>.makeStream()
        self.clock = clock
        self.script = script.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
        self.finishAfterScript = finishAfterScript
    }

    func events() -> AsyncStream<Event> {
        let first = started.withLock { started in
            defer { started = true }
            return !started
        }
        precondition(first, "a mock device's events() is consumed once")
        let playback = Task { [script, clock, continuation, finishAfterScript] in
            for item in script {
                do {
                    try await clock.sleep(until: item.at, tolerance: nil)
                } catch {
                    return
                }
                continuation.yield(item.event)
            }
            if finishAfterScript { continuation.finish() }
        }
        continuation.onTermination = { _ in playback.cancel() }
        return stream
    }

    func push(_ event: Event) { continuation.yield(event) }
    func finish() { continuation.finish() }
}

/// A scripted NFC reader for tests and CI: plays taps and errors on the injected clock, and
/// takes taps a test pushes with `present(…)`.
public final class MockTagReader<C: Clock>: TagReader, Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public let readerID: String
    private let clock: C
    private let stream: ScriptedStream<ReaderEvent, C>

    /// - Parameters:
    ///   - script: events and the clock times at which they happen.
    ///   - finishAfterScript: end the stream after the last scripted event (a scenario run);
    ///     `false` keeps it open for `present(…)` until `finish()`.
    public init(readerID: String = "mock", clock: C, script: [Scheduled<ReaderEvent>] = [], finishAfterScript: Bool = false) {
        self.readerID = readerID
        self.clock = clock
        self.stream = ScriptedStream(clock: clock, script: script, finishAfterScript: finishAfterScript)
    }

    public func events() -> AsyncStream<ReaderEvent> { stream.events() }

    /// A tag enters the field now (on the clock) and is read.
    @discardableResult
    public func present(uid: TagUID, type: TagType = .ntag213, url: String?, source: ScanSource = .nfc) -> TagScan {
        let scan = TagScan(readerID: readerID, uid: uid, tagType: type, url: url, time: clock.now, source: source)
        stream.push(.tagPresent(scan))
        return scan
    }

    public func fail(_ error: ReaderError) { stream.push(.failed(error)) }
    public func finish() { stream.finish() }
}

/// A scripted GPS for tests and CI: plays fixes, dropouts and status on the injected clock, and
/// takes fixes a test pushes with `send(…)`.
public final class MockFixSource<C: Clock>: FixSource, Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public let sourceID: String
    private let stream: ScriptedStream<FixEvent, C>

    public init(sourceID: String = "mock", clock: C, script: [Scheduled<FixEvent>] = [], finishAfterScript: Bool = false) {
        self.sourceID = sourceID
        self.stream = ScriptedStream(clock: clock, script: script, finishAfterScript: finishAfterScript)
    }

    public func events() -> AsyncStream<FixEvent> { stream.events() }

    public func send(_ fix: Fix) { stream.push(.fix(fix)) }
    public func send(_ event: FixEvent) { stream.push(event) }
    public func finish() { stream.finish() }
}
