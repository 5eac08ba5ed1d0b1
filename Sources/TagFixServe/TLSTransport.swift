import Synchronization
import TagFixSystem
public import TagFixTLS

/// `serve --tls-cert FILE --tls-key FILE`: the server's TLS context, replaced whole when SIGHUP
/// reloads the files. Each HTTP connection takes the context of the moment when it is accepted
/// and keeps it to its end.
public final class ServeTLS: Sendable {
    private let context: Mutex<TLSServerContext>

    public init(_ context: TLSServerContext) { self.context = Mutex(context) }

    /// Loads the certificate chain and key.
    /// - Throws: `TLSError` naming the file at fault.
    public convenience init(certificate: String, key: String) throws(TLSError) {
        self.init(try TLSServerContext(certificate: certificate, key: key))
    }

    /// Replaces the context (SIGHUP): connections accepted from now on use it.
    public func replace(with context: TLSServerContext) { self.context.withLock { $0 = context } }

    /// A new connection's transport, or `nil` when libssl could not make a session.
    func transport(for descriptor: FileDescriptor) -> (any ConnectionTransport)? {
        guard let session = try? context.withLock({ context throws(TLSError) in try context.session() }) else { return nil }
        return TLSTransport(descriptor, session: session)
    }
}

/// One HTTPS connection: ciphertext moves between the socket and the `TLSSession` (memory
/// buffers), plaintext between the session and the `ServeConnection`. Never waits: what the
/// socket does not take is kept and sent when it is writable again (`wantsWritable`).
struct TLSTransport: ConnectionTransport {
    let descriptor: FileDescriptor
    let session: TLSSession
    /// Ciphertext the socket has not taken yet.
    private var outgoing: [UInt8] = []
    /// The last read filled the buffer: the session may hold more plaintext.
    private var buffered = false
    private var failed = false
    private var scratch = [UInt8](repeating: 0, count: 16 * 1024)

    init(_ descriptor: FileDescriptor, session: TLSSession) {
        self.descriptor = descriptor
        self.session = session
    }

    mutating func read(into buffer: inout [UInt8]) -> TransportResult {
        while true {
            let result: TLSSession.ReadResult
            do {
                result = try session.read(maximum: buffer.count)
            } catch {
                return .closed
            }
            switch result {
            case .data(let plaintext):
                buffer.replaceSubrange(0..<plaintext.count, with: plaintext)
                buffered = plaintext.count == buffer.count
                sendOutput()
                return failed ? .closed : .bytes(plaintext.count)
            case .closed:
                // close_notify: the client's side has ended cleanly (it may still read), as a
                // plain socket's read of 0 bytes: an answer it waits for is still written.
                return .ended
            case .wantMore:
                break
            }
            buffered = false
            // The handshake's answers (and alerts) go out before more is read.
            sendOutput()
            if failed { return .closed }
            do {
                let count = try descriptor.receive(into: &scratch)
                // TCP's end of the client's side without close_notify: as close_notify, an end,
                // not a failure. What came before it came in whole records, each checked, so
                // nothing read was cut short, and a request cut short is never answered (its
                // connection ends unanswered). An answer it waits for is still written; a client
                // that has gone altogether fails that write.
                guard count > 0 else { return .ended }
                session.receive(scratch[0..<count])
            } catch .wouldBlock {
                return .wouldBlock
            } catch {
                return .closed
            }
        }
    }

    mutating func write(_ bytes: ArraySlice<UInt8>) -> TransportResult {
        // What the socket has not taken yet goes first: the records stay in order.
        sendOutput()
        if failed { return .closed }
        // Before the handshake is done nothing can be sent, and the server only writes then to
        // end the connection (its request is overdue, the server stops): it ends now, instead
        // of waiting, writable, for a peer that says nothing.
        guard session.isHandshakeComplete else { return .closed }
        guard outgoing.isEmpty else { return .wouldBlock }
        let taken: Int
        do {
            taken = try session.write(bytes.prefix(16 * 1024))
        } catch {
            return .closed
        }
        sendOutput()
        if failed { return .closed }
        return taken > 0 ? .bytes(taken) : .wouldBlock
    }

    var wantsWritable: Bool { !outgoing.isEmpty }
    var hasBufferedInput: Bool { buffered }

    mutating func close() {
        // close_notify, and whatever the socket takes at once of what is left.
        session.close()
        sendOutput()
        _ = try? descriptor.close()
    }

    /// Sends what the session has for the peer, as far as the socket takes it.
    private mutating func sendOutput() {
        outgoing += session.takeOutput()
        while !outgoing.isEmpty {
            do {
                let count = try descriptor.send(outgoing[...])
                guard count > 0 else {
                    failed = true
                    return
                }
                outgoing.removeFirst(count)
            } catch .wouldBlock {
                return
            } catch {
                failed = true
                return
            }
        }
    }
}
