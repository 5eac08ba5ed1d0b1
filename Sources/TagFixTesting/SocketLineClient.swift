import Foundation
import Synchronization
import TagFixDevices
import TagFixSystem

/// A client of `tagfix serve`'s event socket (or of its HTTP server) whose lines are read on its own thread, never on
/// the cooperative pool.
public final class SocketLineClient: Sendable {
    public let fd: Int32
    private let descriptor: FileDescriptor
    private let state = Mutex((lines: [String](), closed: false))

    /// Connects to a Unix socket (`path`) or to 127.0.0.1:`port` (from the loopback address
    /// `source` when given); with `reading: false` nothing is ever read.
    public init(path: String? = nil, port: Int? = nil, from source: String? = nil, reading: Bool = true) throws {
        do throws(Errno) {
            if let path {
                guard let address = SocketAddress.unix(path) else { throw Errno.invalidArgument }
                descriptor = try FileDescriptor.socket(domain: AF_UNIX, type: FileDescriptor.stream)
                do throws(Errno) {
                    try descriptor.connect(to: address)
                } catch {
                    try? descriptor.close()
                    throw error
                }
            } else {
                descriptor = try Loopback.connect(port: port ?? 0, from: source)
            }
        } catch {
            throw ClientError.connect(error.description)
        }
        fd = descriptor.rawValue
        guard reading else { return }
        DeviceThread.detach(name: "socket line client") { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var partial: [UInt8] = []
            while true {
                guard let count = try? descriptor.receive(into: &buffer), count > 0 else { break }
                partial += buffer[0..<count]
                var lines: [String] = []
                var start = 0
                while let newline = partial[start...].firstIndex(of: 10) {
                    lines.append(String(decoding: partial[start..<newline], as: UTF8.self))
                    start = newline + 1
                }
                partial.removeFirst(start)
                state.withLock { $0.lines += lines }
            }
            state.withLock { $0.closed = true }
        }
    }

    public enum ClientError: Error { case connect(String) }

    public func send(_ text: String) { send(Array(text.utf8)) }

    /// Sends `bytes` whole, or as far as the server takes them before it goes.
    public func send(_ bytes: [UInt8]) {
        var rest = bytes[...]
        while !rest.isEmpty {
            guard let sent = try? descriptor.send(rest, flags: Int32(MSG_NOSIGNAL)), sent > 0 else { return }
            rest = rest.dropFirst(sent)
        }
    }

    public var lines: [String] { state.withLock { $0.lines } }
    public var closed: Bool { state.withLock { $0.closed } }
    public func lines(ofClass name: String) -> [String] { lines.filter { $0.hasPrefix(#"{"class":"\#(name)""#) } }

    public func close() { try? descriptor.shutdown(Int32(SHUT_RDWR)) }

    deinit { try? descriptor.close() }
}
