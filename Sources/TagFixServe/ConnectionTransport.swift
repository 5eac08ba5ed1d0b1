import TagFixSystem

/// What a transport's read or write did.
enum TransportResult: Sendable, Hashable {
    /// This many bytes moved (more than 0).
    case bytes(Int)
    /// Nothing can move now: wait until the descriptor is ready again (for writing too when
    /// `wantsWritable` says so).
    case wouldBlock
    /// The peer has gone, or the connection failed: close it.
    case closed
    /// The peer sent its last byte (a read reached the end of its side; it may still read):
    /// nothing more will be read, and what it waits for may still be written.
    case ended
}

/// How one connection's bytes move between its socket and its `ServeConnection`: the plain
/// socket (`PlainSocketTransport`) now; TLS next, which puts its records, its handshake and its
/// own buffers between them without the state machine knowing. Called on the server's loop
/// thread only, never concurrently; nothing here may wait.
protocol ConnectionTransport {
    /// The descriptor the loop watches (and closes through `close()`).
    var descriptor: FileDescriptor { get }
    /// Reads what has arrived into `buffer` (from its start, at most `buffer.count` bytes).
    mutating func read(into buffer: inout [UInt8]) -> TransportResult
    /// Writes from the start of `bytes`: `.bytes(n)` says how many were taken.
    mutating func write(_ bytes: ArraySlice<UInt8>) -> TransportResult
    /// Whether the loop must say when the socket can be written although nothing is queued (a
    /// TLS handshake's or record's bytes pending; a read that needs a write first). The loop
    /// reads again when the socket becomes writable while this holds.
    var wantsWritable: Bool { get }
    /// Whether bytes have been read from the socket that `read` has yet to return (a TLS
    /// record decrypted in part): the loop reads again without waiting for the socket.
    var hasBufferedInput: Bool { get }
    /// Whether the fan-out may `send` a watcher's lines straight to `descriptor` from another
    /// thread (`MSG_DONTWAIT`): only a transport that adds nothing to the bytes.
    var allowsDirectSends: Bool { get }
    /// Ends the connection and closes the descriptor.
    mutating func close()
}

extension ConnectionTransport {
    var wantsWritable: Bool { false }
    var hasBufferedInput: Bool { false }
    var allowsDirectSends: Bool { false }
}

/// The bytes as they are, on the socket itself.
struct PlainSocketTransport: ConnectionTransport {
    let descriptor: FileDescriptor

    init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }

    func read(into buffer: inout [UInt8]) -> TransportResult {
        do {
            let count = try descriptor.receive(into: &buffer)
            return count > 0 ? .bytes(count) : .ended
        } catch .wouldBlock {
            return .wouldBlock
        } catch {
            return .closed
        }
    }

    func write(_ bytes: ArraySlice<UInt8>) -> TransportResult {
        do {
            let count = try descriptor.send(bytes)
            return count > 0 ? .bytes(count) : .closed
        } catch .wouldBlock {
            return .wouldBlock
        } catch {
            return .closed
        }
    }

    var allowsDirectSends: Bool { true }

    func close() { _ = try? descriptor.close() }
}
