import Foundation
import Synchronization
import TagFixDevices

/// A client of `tagfix serve`'s event socket (or of its HTTP server) whose lines are read on its own thread, never on
/// the cooperative pool.
public final class SocketLineClient: Sendable {
    public let fd: Int32
    private let state = Mutex((lines: [String](), closed: false))

    /// Connects to a Unix socket (`path`) or to 127.0.0.1:`port`; with `reading: false` nothing
    /// is ever read.
    public init(path: String? = nil, port: Int? = nil, reading: Bool = true) throws {
        if let path {
            fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
            }
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard result == 0 else { throw ClientError.connect(String(cString: strerror(errno))) }
        } else {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port ?? 0).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard result == 0 else { throw ClientError.connect(String(cString: strerror(errno))) }
        }
        guard reading else { return }
        DeviceThread.detach(name: "socket line client") { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var partial: [UInt8] = []
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { break }
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

    public func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return }
            offset += sent
        }
    }

    public var lines: [String] { state.withLock { $0.lines } }
    public var closed: Bool { state.withLock { $0.closed } }
    public func lines(ofClass name: String) -> [String] { lines.filter { $0.hasPrefix(#"{"class":"\#(name)""#) } }

    public func close() { shutdown(fd, Int32(SHUT_RDWR)) }

    deinit { Glibc.close(fd) }
}
