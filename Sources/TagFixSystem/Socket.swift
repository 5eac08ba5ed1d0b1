internal import CSystem
public import Glibc

// MARK: - Addresses

/// A socket address of any family (`sockaddr_storage` and its length): a Unix socket's path, an
/// IPv4 or IPv6 address and port.
public struct SocketAddress: Sendable {
    var storage = sockaddr_storage()
    /// The bytes of `storage` that are the address.
    public private(set) var length: socklen_t

    /// Copies an address the C library gave (`getaddrinfo`'s `ai_addr`).
    public init(_ address: UnsafePointer<sockaddr>, length: socklen_t) {
        self.length = min(length, socklen_t(MemoryLayout<sockaddr_storage>.size))
        withUnsafeMutableBytes(of: &storage) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(self.length)))
        }
    }

    private init() { length = socklen_t(MemoryLayout<sockaddr_storage>.size) }

    /// A Unix socket's address (a leading `@` names an abstract socket), or `nil` for a path
    /// that is empty or longer than `sun_path` holds (107 bytes).
    public static func unix(_ path: String) -> SocketAddress? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let length = MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length: socklen_t(length)) }
        }
    }

    /// `host` (dotted IPv4, `inet_pton(3)`) and `port`; `nil` for a host that is not one.
    public static func ipv4(_ host: String, port: Int) -> SocketAddress? {
        var address = in_addr()
        guard inet_pton(AF_INET, host, &address) == 1 else { return nil }
        return ipv4(address, port: port)
    }

    /// `text` as an IPv4 or IPv6 address in its canonical form (`inet_pton(3)` then
    /// `inet_ntop(3)`: `2001:DB8::0:1` is `2001:db8::1`), or `nil` for anything that is not one
    /// (a name, a port, brackets, a zone, spaces).
    public static func numericHost(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        for family in [AF_INET, AF_INET6] {
            var address = in6_addr()
            guard inet_pton(family, text, &address) == 1 else { continue }
            var out = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(family, &address, &out, socklen_t(out.count)) != nil else { return nil }
            return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return nil
    }

    /// 127.0.0.1:`port` (0: the kernel picks a free port when it is bound).
    public static func loopback(port: Int) -> SocketAddress {
        ipv4(in_addr(s_addr: UInt32(0x7F00_0001).bigEndian), port: port)
    }

    private static func ipv4(_ host: in_addr, port: Int) -> SocketAddress {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr = host
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length: socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// The address family (`AF_UNIX`, `AF_INET`, `AF_INET6`).
    public var family: Int32 { Int32(storage.ss_family) }

    /// The port of an IPv4 or IPv6 address (`nil` for another family).
    public var port: Int? {
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET:
                Int(UInt16(bigEndian: raw.load(fromByteOffset: MemoryLayout<sockaddr_in>.offset(of: \.sin_port)!, as: UInt16.self)))
            case AF_INET6:
                Int(UInt16(bigEndian: raw.load(fromByteOffset: MemoryLayout<sockaddr_in6>.offset(of: \.sin6_port)!, as: UInt16.self)))
            default: nil
            }
        }
    }

    /// `HOST:PORT` with the host as digits (`getnameinfo` with `NI_NUMERICHOST`), or `nil`.
    public var numericHostAndPort: String? {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let status = withSockaddr {
            getnameinfo($0, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV)
        }
        guard status == 0 else { return nil }
        func text(_ chars: [CChar]) -> String { String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return text(host) + ":" + text(service)
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>) -> R) -> R {
        withUnsafePointer(to: storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
    }

    /// Fills an address with what a call such as `getsockname` writes.
    static func filled(_ call: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) throws(Errno) -> SocketAddress {
        var address = SocketAddress()
        var length = address.length
        try nothingOrErrno {
            withUnsafeMutablePointer(to: &address.storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call($0, &length) } }
        }
        address.length = length
        return address
    }
}

// MARK: - Socket calls

extension FileDescriptor {
    /// A new socket (`socket(2)`), close-on-exec, and non-blocking when asked.
    /// - Parameters: domain: `AF_UNIX`, `AF_INET`, `AF_INET6`; type: `SOCK_STREAM`, `SOCK_DGRAM`.
    public static func socket(domain: Int32, type: Int32, protocol: Int32 = 0, nonBlocking: Bool = false) throws(Errno) -> FileDescriptor {
        let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        return FileDescriptor(rawValue: try valueOrErrno { Glibc.socket(domain, type | flags, `protocol`) })
    }

    /// `SOCK_STREAM` as `socket(domain:type:)` takes it.
    public static var stream: Int32 { Int32(SOCK_STREAM.rawValue) }
    /// `SOCK_DGRAM` as `socket(domain:type:)` takes it.
    public static var datagram: Int32 { Int32(SOCK_DGRAM.rawValue) }

    /// Binds the socket to `address` (`bind(2)`).
    public func bind(to address: SocketAddress) throws(Errno) {
        try nothingOrErrno { address.withSockaddr { Glibc.bind(rawValue, $0, address.length) } }
    }

    /// Starts listening (`listen(2)`).
    public func listen(backlog: Int32) throws(Errno) {
        try nothingOrErrno { Glibc.listen(rawValue, backlog) }
    }

    /// Takes the next connection (`accept4(2)`), close-on-exec, and non-blocking when asked; a
    /// non-blocking listener with none waiting throws `.wouldBlock`.
    public func accept(nonBlocking: Bool = false) throws(Errno) -> FileDescriptor {
        let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        return FileDescriptor(rawValue: try valueOrErrno { csystem_accept4(rawValue, flags) })
    }

    /// Connects the socket to `address` (`connect(2)`).
    public func connect(to address: SocketAddress) throws(Errno) {
        try nothingOrErrno { address.withSockaddr { Glibc.connect(rawValue, $0, address.length) } }
    }

    /// Sets an integer socket option (`setsockopt(2)`): `SOL_SOCKET`/`SO_REUSEADDR`,
    /// `IPPROTO_TCP`/`TCP_NODELAY`.
    public func setOption(level: Int32, name: Int32, to value: Int32) throws(Errno) {
        var value = value
        try nothingOrErrno { setsockopt(rawValue, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// Makes `close()` reset the connection (`SO_LINGER` with no time: an RST, not a FIN), as a
    /// peer gone for good does (a crash, a dropped network), where a FIN may be a half-close.
    public func resetOnClose() throws(Errno) {
        var value = linger(l_onoff: 1, l_linger: 0)
        try nothingOrErrno { setsockopt(rawValue, SOL_SOCKET, SO_LINGER, &value, socklen_t(MemoryLayout<linger>.size)) }
    }

    /// The address the socket is bound to (`getsockname(2)`).
    public func localAddress() throws(Errno) -> SocketAddress {
        try SocketAddress.filled { getsockname(rawValue, $0, $1) }
    }

    /// The address of the socket's peer (`getpeername(2)`).
    public func peerAddress() throws(Errno) -> SocketAddress {
        try SocketAddress.filled { getpeername(rawValue, $0, $1) }
    }

    /// Sends what the socket takes of `buffer` (`send(2)`; `MSG_NOSIGNAL` always: a closed peer
    /// is `.brokenPipe`, not SIGPIPE). `MSG_DONTWAIT` in `flags` never waits.
    public func send(_ buffer: UnsafeRawBufferPointer, flags: Int32 = 0) throws(Errno) -> Int {
        try valueOrErrno { Glibc.send(rawValue, buffer.baseAddress, buffer.count, flags | Int32(MSG_NOSIGNAL)) }
    }

    /// Sends what the socket takes of `bytes` (`send(2)`, `MSG_NOSIGNAL`).
    public func send(_ bytes: ArraySlice<UInt8>, flags: Int32 = 0) throws(Errno) -> Int {
        try bytes.withUnsafeBytes { buffer in Result { () throws(Errno) in try send(buffer, flags: flags) } }.get()
    }

    /// Receives into `bytes` from its start, up to its count (`recv(2)`); 0 when the peer has
    /// closed.
    public func receive(into bytes: inout [UInt8], flags: Int32 = 0) throws(Errno) -> Int {
        try bytes.withUnsafeMutableBytes { buffer in Result { () throws(Errno) in try receive(into: buffer, flags: flags) } }.get()
    }

    /// Sends one datagram to `address` (`sendto(2)`, `MSG_NOSIGNAL`).
    public func send(_ buffer: UnsafeRawBufferPointer, to address: SocketAddress, flags: Int32 = 0) throws(Errno) -> Int {
        try valueOrErrno {
            address.withSockaddr { sendto(rawValue, buffer.baseAddress, buffer.count, flags | Int32(MSG_NOSIGNAL), $0, address.length) }
        }
    }

    /// Receives what is there, up to the buffer's size (`recv(2)`); 0 when the peer has closed.
    public func receive(into buffer: UnsafeMutableRawBufferPointer, flags: Int32 = 0) throws(Errno) -> Int {
        try valueOrErrno { recv(rawValue, buffer.baseAddress, buffer.count, flags) }
    }

    /// A connected pair of Unix stream sockets (`socketpair(2)`), close-on-exec at both ends: a
    /// pipe both ways whose writer gets `.brokenPipe`, not SIGPIPE, from `send` once the other end
    /// is closed.
    public static func socketPair() throws(Errno) -> (FileDescriptor, FileDescriptor) {
        var fds: [Int32] = [-1, -1]
        _ = try valueOrErrno { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) }
        return (FileDescriptor(rawValue: fds[0]), FileDescriptor(rawValue: fds[1]))
    }

    /// Shuts down reading, writing or both (`shutdown(2)`: `SHUT_RD`, `SHUT_WR`, `SHUT_RDWR`).
    public func shutdown(_ how: Int32) throws(Errno) {
        try nothingOrErrno { Glibc.shutdown(rawValue, how) }
    }
}

// MARK: - Loopback TCP

/// TCP on 127.0.0.1: what the private daemons, the emulators and the tests listen on.
public enum Loopback {
    /// A listening socket on 127.0.0.1:`port` (0: a free one), close-on-exec, `SO_REUSEADDR`.
    /// - Returns: the socket and the port it is bound to.
    public static func listen(port: Int = 0, backlog: Int32 = 128, nonBlocking: Bool = false) throws(Errno)
        -> (descriptor: FileDescriptor, port: Int)
    {
        let fd = try FileDescriptor.socket(domain: AF_INET, type: FileDescriptor.stream, nonBlocking: nonBlocking)
        do throws(Errno) {
            try fd.setOption(level: SOL_SOCKET, name: SO_REUSEADDR, to: 1)
            try fd.bind(to: .loopback(port: port))
            try fd.listen(backlog: backlog)
            return (fd, try fd.localAddress().port ?? 0)
        } catch {
            _ = try? fd.close()
            throw error
        }
    }

    /// A blocking connection to 127.0.0.1:`port` (`.connectionRefused` when nothing listens),
    /// from the loopback address `source` when given (127.0.0.2…: all of 127/8 is this machine's,
    /// so a test's clients can have addresses of their own).
    public static func connect(port: Int, from source: String? = nil) throws(Errno) -> FileDescriptor {
        let fd = try FileDescriptor.socket(domain: AF_INET, type: FileDescriptor.stream)
        do throws(Errno) {
            if let source {
                guard let local = SocketAddress.ipv4(source, port: 0) else { throw Errno.invalidArgument }
                try fd.bind(to: local)
            }
            try fd.connect(to: .loopback(port: port))
            return fd
        } catch {
            _ = try? fd.close()
            throw error
        }
    }

    /// A port on 127.0.0.1 that nothing listens on now: the kernel's pick for a socket bound to
    /// port 0, closed again (another process may take it before it is used).
    public static func freePort() throws(Errno) -> Int {
        let fd = try FileDescriptor.socket(domain: AF_INET, type: FileDescriptor.stream)
        return try fd.closeAfter { () throws(Errno) -> Int in
            try fd.bind(to: .loopback(port: 0))
            return try fd.localAddress().port ?? 0
        }
    }
}
