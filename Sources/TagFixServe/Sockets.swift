public import Foundation
import TagFixCore
import TagFixSystem

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
        let parsed: HostPort
        do {
            parsed = try HostPort(parsing: text)
        } catch {
            if case .port = error { throw ServeError(.usage, "\(text): the port must be a number from 0 to 65535") }
            throw ServeError(.usage, "\(text): write [IPv6]:PORT, e.g. [::1]:8080")
        }
        guard let port = parsed.port else { throw ServeError(.usage, "\(text): write HOST:PORT, e.g. 127.0.0.1:8080") }
        guard !parsed.host.isEmpty else { throw ServeError(.usage, "\(text): name the address, e.g. 127.0.0.1:\(port)") }
        host = parsed.host
        self.port = port
    }

    /// `HOST:PORT`, an IPv6 host in brackets.
    public var description: String { HostPort.described(host, port) }

    /// Whether only this machine can reach it: 127.0.0.0/8, ::1 or `localhost`.
    public var isLoopback: Bool { Self.isLoopback(host) }

    /// Whether `host` (a name, an address as digits, an IPv6 one perhaps in brackets) is this
    /// machine: `localhost`, 127.0.0.0/8, `::1` in any of its spellings, or 127.0.0.0/8 mapped
    /// into IPv6 (`::ffff:127.0.0.1`: an IPv4 client of a socket listening on `[::]`, as a proxy
    /// on this machine is when `--http [::]:PORT`). The one test of a peer or an address for
    /// loopback (the listen addresses, a phone tap's forwarding proxy).
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        if isLoopbackIPv4(Substring(host)) { return true }
        // Other spellings of IPv6 addresses, in their canonical form (a dotted quad is never one).
        guard host.utf8.contains(UInt8(ascii: ":")) else { return false }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard let canonical = SocketAddress.numericHost(bare) else { return false }
        if canonical == "::1" { return true }
        return canonical.hasPrefix("::ffff:") && isLoopbackIPv4(canonical.dropFirst(7))
    }

    /// A dotted quad in 127.0.0.0/8: four numbers of one to three digits, each at most 255 (no
    /// sign, no space). Read as bytes: every phone tap asks it of its peer, once or twice
    /// (splitting the address into `Substring`s was an eighth of the loop's work on a tap).
    static func isLoopbackIPv4(_ host: Substring) -> Bool {
        var dots = 0
        var digits = 0
        var value = 0
        var first = 0
        for byte in host.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, dots < 3 else { return false }
                if dots == 0 { first = value }
                dots += 1
                digits = 0
                value = 0
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 3 else { return false }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            guard value <= 255 else { return false }
            digits += 1
        }
        return dots == 3 && digits > 0 && first == 127
    }

    /// Whether a request's `Host` header names this machine: `localhost` or a name under it
    /// (RFC 6761: a browser keeps them on this machine), 127.0.0.0/8, `[::1]`, or one of `also`
    /// (the `--http` address as given), with or without a port. What a page of another site
    /// sends through DNS rebinding is its own name, never one of these.
    public static func isLocalHost(_ header: String, also: Set<String> = []) -> Bool {
        var host = Substring(header.lowercased())
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber)) else { return false }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.firstIndex(of: ":") {
            guard host[host.index(after: colon)...].allSatisfy(\.isNumber) else { return false }
            host = host[..<colon]
        }
        if host.hasSuffix(".") { host = host.dropLast() }
        let name = String(host)
        return isLoopback(name) || name.hasSuffix(".localhost") || also.contains(name)
    }
}

/// The socket calls the server makes, through TagFixSystem, each checked, each descriptor
/// close-on-exec and non-blocking.
enum Socket {
    /// Makes the folder the socket `path` is in (one level, mode 0755) when it is not there.
    static func makeFolder(of path: String) throws(ServeError) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let folder = String(path[..<slash])
        do {
            try FileSystem.makeDirectory(folder, permissions: FilePermissions(rawValue: 0o755))
        } catch  where error == .fileExists {
            return
        } catch {
            throw ServeError(
                .unavailable, "cannot make \(folder) for the socket: \(error) (give --socket PATH in a folder this user may write)")
        }
    }

    /// A listening Unix socket at `path`, mode `mode`, given to `group` (its name and id) when
    /// one is named. A stale socket file (nobody listening) is replaced; a live one, or a file
    /// that is not a socket, is refused.
    static func listenUnix(_ path: String, mode: mode_t, group: (name: String, id: gid_t)? = nil) throws(ServeError) -> FileDescriptor {
        guard let address = SocketAddress.unix(path) else {
            throw ServeError(.usage, "--socket \(path): a socket path must be 1 to 107 bytes")
        }
        if let info = try? Stat(path, followTargetSymlink: false) {
            guard info.type == .socket else {
                throw ServeError(.usage, "--socket \(path) exists and is not a socket: name another path or remove it")
            }
            if let live = connectUnix(path) {
                _ = try? live.close()
                throw ServeError(.unavailable, "--socket \(path) is in use: is another tagfix serve running?")
            }
            _ = try? FileSystem.removeFile(path)
        }
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.socket(domain: AF_UNIX, type: FileDescriptor.stream, nonBlocking: true)
        } catch {
            throw ServeError(.unavailable, "cannot make a socket: \(error)")
        }
        // Bound with the process's umask, then given its mode (and group) before it listens: until
        // then a connection is refused, so nobody gets in under a looser mode. (The umask is the
        // process's: set around the bind, two servers binding at once in one process restored
        // each other's, and every file made after that, by any thread, had the socket's mask.)
        do throws(Errno) {
            try fd.bind(to: address)
        } catch {
            _ = try? fd.close()
            throw ServeError(.unavailable, "cannot bind --socket \(path): \(error) (does its folder exist and may this user write it?)")
        }
        if !path.hasPrefix("@"),
            case .failure(let why) = Result(catching: { () throws(Errno) in
                try FileSystem.setPermissions(FilePermissions(rawValue: mode), of: path)
            })
        {
            _ = try? fd.close()
            _ = try? FileSystem.removeFile(path)
            throw ServeError(.unavailable, "cannot set the mode of --socket \(path): \(why)")
        }
        if let group, !path.hasPrefix("@"),
            case .failure(let why) = Result(catching: { () throws(Errno) in try FileSystem.setOwner(group: group.id, of: path) })
        {
            _ = try? fd.close()
            _ = try? FileSystem.removeFile(path)
            throw ServeError(
                .unavailable,
                "cannot give --socket \(path) to group \(group.name): \(why) (this user must be a member of the group, or root)")
        }
        do {
            try fd.listen(backlog: 128)
        } catch {
            _ = try? fd.close()
            throw ServeError(.unavailable, "cannot listen on --socket \(path): \(error)")
        }
        return fd
    }

    /// A blocking connection to a Unix socket, or `nil`.
    static func connectUnix(_ path: String) -> FileDescriptor? {
        guard let address = SocketAddress.unix(path), let fd = try? FileDescriptor.socket(domain: AF_UNIX, type: FileDescriptor.stream)
        else { return nil }
        do {
            try fd.connect(to: address)
            return fd
        } catch {
            _ = try? fd.close()
            return nil
        }
    }

    /// The listen queue of a TCP listener: the server's own limit of clients at once.
    static let listenBacklog: Int32 = 512

    /// A listening TCP socket on `address` (the first of its resolved addresses that binds).
    /// Returns the descriptor and the port bound (port 0 picks a free one).
    static func listenTCP(_ address: ListenAddress, option: String) throws(ServeError) -> (fd: FileDescriptor, port: Int) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = FileDescriptor.stream
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
            guard
                let fd = try? FileDescriptor.socket(
                    domain: info.pointee.ai_family, type: info.pointee.ai_socktype, protocol: info.pointee.ai_protocol, nonBlocking: true)
            else { continue }
            _ = try? fd.setOption(level: SOL_SOCKET, name: SO_REUSEADDR, to: 1)
            guard let socketAddress = info.pointee.ai_addr.map({ SocketAddress($0, length: info.pointee.ai_addrlen) }) else {
                _ = try? fd.close()
                continue
            }
            do throws(Errno) {
                try fd.bind(to: socketAddress)
                // As many as may be connected at once (EventServer.maximumClients): with 128, 200
                // phones connecting together overflowed the queue, and the dropped ones' SYNs were
                // sent again a second later (a tap's p99 of 1.1 s, TcpExtListenOverflows rising).
                try fd.listen(backlog: Self.listenBacklog)
            } catch {
                why = error.description
                _ = try? fd.close()
                continue
            }
            return (fd, boundPort(fd))
        }
        throw ServeError(.unavailable, "cannot listen on --\(option) \(address): \(why)")
    }

    static func boundPort(_ fd: FileDescriptor) -> Int {
        (try? fd.localAddress().port) ?? 0
    }

    /// The peer of an accepted TCP connection, for log lines.
    static func peerName(_ fd: FileDescriptor) -> String {
        peerAddress(fd) ?? "?"
    }

    /// The peer of an accepted TCP connection (`HOST:PORT`, the host as digits), if known.
    static func peerAddress(_ fd: FileDescriptor) -> String? {
        (try? fd.peerAddress())?.numericHostAndPort
    }

    /// A peer's `HOST:PORT` without its port: what a limit per client counts by. Cut at the last
    /// colon by bytes (a search by Character segments the text into graphemes: 4 % of the event
    /// loop's time under phone taps, where every tap asks).
    static func host(ofPeer address: String) -> String {
        guard let colon = address.utf8.lastIndex(of: UInt8(ascii: ":")) else { return address }
        return String(address[..<colon])
    }
}

/// `sd_notify` without libsystemd: one datagram to `$NOTIFY_SOCKET` (systemd's `Type=notify`).
public enum SystemdNotify {
    /// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=…`); returns whether it was sent (no
    /// `NOTIFY_SOCKET`: not started by systemd, nothing to do).
    @discardableResult
    public static func send(_ state: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let path = environment["NOTIFY_SOCKET"], let address = SocketAddress.unix(path),
            let fd = try? FileDescriptor.socket(domain: AF_UNIX, type: FileDescriptor.datagram)
        else { return false }
        defer { _ = try? fd.close() }
        let bytes = Array(state.utf8)
        let sent = bytes.withUnsafeBytes { buffer in try? fd.send(buffer, to: address) }
        return sent == bytes.count
    }
}
