import Glibc
public import TagFixSystem

/// A loopback port nothing answers on while this lives: bound, never listening, so a connection
/// is refused at once and no other test's daemon can take it. A port only found free
/// (`Loopback.freePort()`) can be taken: beside a whole run, another test's mosquitto
/// acknowledged a "broker down" run's verdicts on one. For a port a daemon is about to be started
/// on, `freePort()` is still the tool.
public final class DeadPort: Sendable {
    /// The port on 127.0.0.1.
    public let port: Int
    private let socket: FileDescriptor

    /// Binds a socket to a port the kernel picks on 127.0.0.1, and never listens on it.
    public init() throws(Errno) {
        let socket = try FileDescriptor.socket(domain: AF_INET, type: FileDescriptor.stream)
        do throws(Errno) {
            try socket.bind(to: .loopback(port: 0))
            guard let port = try socket.localAddress().port else { throw Errno.invalidArgument }
            self.port = port
            self.socket = socket
        } catch {
            _ = try? socket.close()
            throw error
        }
    }

    // Closing a socket does not block: the only thing this deinit does.
    deinit { try? socket.close() }
}
