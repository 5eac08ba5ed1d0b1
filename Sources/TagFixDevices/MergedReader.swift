/// Several readers as one `TagReader`, for one live verifier: their events merged in the order
/// they come. Each scan names its reader (`TagScan.readerID`), so a verdict says which reader
/// read the tag; the other events do not, so a caller that must tell the readers' states apart
/// wraps each reader before merging (`tagfix serve` does: `ServeHub.watching`).
///
/// The merged stream ends when every reader's has ended; ending it (its consumer cancelled, or
/// gone) ends every reader's.
public struct MergedReader: TagReader {
    public let readers: [any TagReader]

    public init(_ readers: [any TagReader]) { self.readers = readers }

    /// The readers' ids, comma-separated.
    public var readerID: String { readers.map(\.readerID).joined(separator: ",") }

    public func events() -> AsyncStream<ReaderEvent> {
        let (stream, continuation) = AsyncStream<ReaderEvent>.makeStream()
        let streams = readers.map { $0.events() }
        let pump = Task {
            await withTaskGroup(of: Void.self) { group in
                for events in streams {
                    group.addTask {
                        for await event in events { continuation.yield(event) }
                    }
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in pump.cancel() }
        return stream
    }
}
