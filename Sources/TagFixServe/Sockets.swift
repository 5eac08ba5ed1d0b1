public import Foundation

/// Why `tagfix serve` could not start serving.
public struct ServeError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// A wrong option (exit 64).
        case usage
        /// An address that cannot be bound, a socket path in use (exit 69).
        case unavailable
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// `HOST:PORT` for `--listen` and `--http`: an IPv4 address, `[IPv6]`, or a name (`localhost`).
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(_ text: String) throws(ServeError) {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw ServeError(.usage, "\(text): write [IPv6]:PORT, e.g. [::1]:8080")
            }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw ServeError(.usage, "\(text): write HOST:PORT, e.g. 127.0.0.1:8080")
            }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
        }
        guard let port = Int(portPart), (0...65_535).contains(port) else {
            throw ServeError(.usage, "\(text): the port must be a number from 0 to 65535")
        }
        guard !hostPart.isEmpty else { throw ServeError(.usage, "\(text): name the address, e.g. 127.0.0.1:\(port)") }
        host = String(hostPart)
        self.port = port
    }

    public var description: String { Self.described(host, port) }

    /// `HOST:PORT`, an IPv6 host in brackets.
    public static func described(_ host: String, _ port: Int) -> String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Whether only this machine can reach it: 127.0.0.0/8, ::1 or `localhost`.
    public var isLoopback: Bool {
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".")
        return parts.count == 4 && parts.first == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}

/// The socket calls the server makes, each checked, each descriptor close-on-exec and
/// non-blocking.
enum Socket {
    static func errorText() -> String { String(cString: strerror(errno)) }

    static func nonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    /// Fills a `sockaddr_un` for `path` (a leading `@` names an abstract socket).
    static func unixAddress(_ path: String) -> (sockaddr_un, socklen_t)? {
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
        return (address, socklen_t(length))
    }

    /// A listening Unix socket at `path`, mode `mode`, given to `group` (its name and id) when
    /// one is named. A stale socket file (nobody listening) is replaced; a live one, or a file
    /// that is not a socket, is refused.
    static func listenUnix(_ path: String, mode: mode_t, group: (name: String, id: gid_t)? = nil) throws(ServeError) -> Int32 {
        guard let (address, length) = unixAddress(path) else {
            throw ServeError(.usage, "--socket \(path): a socket path must be 1 to 107 bytes")
        }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw ServeError(.usage, "--socket \(path) exists and is not a socket: name another path or remove it")
            }
            if connectUnix(path) != nil {
                throw ServeError(.unavailable, "--socket \(path) is in use: is another tagfix serve running?")
            }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServeError(.unavailable, "cannot make a socket: \(errorText())") }
        nonBlocking(fd)
        let oldMask = umask(0o777 & ~mode)
        var bound = address
        let result = withUnsafePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        umask(oldMask)
        guard result == 0 else {
            let why = errorText()
            close(fd)
            throw ServeError(.unavailable, "cannot bind --socket \(path): \(why) (does its folder exist and may this user write it?)")
        }
        chmod(path, mode)
        if let group, !path.hasPrefix("@"), chown(path, uid_t.max, group.id) != 0 {
            let why = errorText()
            close(fd)
            unlink(path)
            throw ServeError(
                .unavailable,
                "cannot give --socket \(path) to group \(group.name): \(why) (this user must be a member of the group, or root)")
        }
        guard listen(fd, 128) == 0 else {
            let why = errorText()
            close(fd)
            throw ServeError(.unavailable, "cannot listen on --socket \(path): \(why)")
        }
        return fd
    }

    /// A blocking connection to a Unix socket, or `nil`.
    static func connectUnix(_ path: String) -> Int32? {
        guard let (found, length) = unixAddress(path) else { return nil }
        var address = found
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard result == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// A listening TCP socket on `address` (the first of its resolved addresses that binds).
    /// Returns the descriptor and the port bound (port 0 picks a free one).
    static func listenTCP(_ address: ListenAddress, option: String) throws(ServeError) -> (fd: Int32, port: Int) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(address.host, String(address.port), &hints, &list)
        guard status == 0, let first = list else {
            throw ServeError(.usage, "--\(option) \(address): cannot resolve \(address.host) (\(String(cString: gai_strerror(status))))")
        }
        defer { freeaddrinfo(list) }
        var why = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            guard fd >= 0 else { continue }
            var yes: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
            nonBlocking(fd)
            guard bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0, listen(fd, 128) == 0 else {
                why = errorText()
                close(fd)
                continue
            }
            return (fd, boundPort(fd))
        }
        throw ServeError(.unavailable, "cannot listen on --\(option) \(address): \(why)")
    }

    static func boundPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return 0 }
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { pointer in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    /// The peer of an accepted TCP connection, for log lines.
    static func peerName(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard ok == 0 else { return "?" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let status = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard status == 0 else { return "?" }
        return String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + ":"
            + String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// `sd_notify` without libsystemd: one datagram to `$NOTIFY_SOCKET` (systemd's `Type=notify`).
public enum SystemdNotify {
    /// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=…`); returns whether it was sent (no
    /// `NOTIFY_SOCKET`: not started by systemd, nothing to do).
    @discardableResult
    public static func send(_ state: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let path = environment["NOTIFY_SOCKET"], let (found, length) = Socket.unixAddress(path) else { return false }
        var address = found
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), target, length) }
            }
        }
        return sent == bytes.count
    }
}
