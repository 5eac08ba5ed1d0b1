import CPTY
import Glibc
import Synchronization

/// A pseudo-terminal pair: the emulator reads and writes the controller side; clients (libnfc,
/// gpsd) open `path`, the terminal side, as if it were a serial port.
public final class PseudoTerminal: Sendable {
    // The descriptors are fixed after init and closed once, in `close()`.
    public let controller: Int32
    /// The terminal side's path, e.g. `/dev/pts/7`.
    public let path: String
    /// The emulator's own handle on the terminal side: kept open and raw so the line stays up
    /// (no EIO loop, no echo) when a client closes its handle.
    private let terminal: Int32
    private let closed = Mutex(false)

    /// Opens a pty pair and sets the terminal side raw (no echo, no line discipline).
    public init() throws(EmulatorError) {
        var name = [CChar](repeating: 0, count: 128)
        let fd = cpty_open(&name, name.count)
        guard fd >= 0 else { throw .pty("posix_openpt: \(String(cString: strerror(-fd)))") }
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let terminal = open(path, O_RDWR | O_NOCTTY)
        guard terminal >= 0 else {
            Glibc.close(fd)
            throw .pty("open \(path): \(String(cString: strerror(errno)))")
        }
        var settings = termios()
        tcgetattr(terminal, &settings)
        cfmakeraw(&settings)
        tcsetattr(terminal, TCSANOW, &settings)
        self.controller = fd
        self.path = path
        self.terminal = terminal
    }

    /// Waits up to `timeout` milliseconds for bytes from the client; `[]` on timeout, `nil` when
    /// the pty is closed.
    public func read(timeout: Int32) -> [UInt8]? {
        var poller = pollfd(fd: controller, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, timeout)
        guard ready > 0 else { return ready == 0 || errno == EINTR ? [] : nil }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = Glibc.read(controller, &buffer, buffer.count)
        if count > 0 { return Array(buffer.prefix(count)) }
        if count < 0, errno == EINTR || errno == EAGAIN || errno == EIO { return [] }
        return count == 0 ? [] : nil
    }

    /// Writes all of `bytes` to the client.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(controller, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return false
            }
            offset += written
        }
        return true
    }

    /// Discards what the client wrote and the emulator has not read yet.
    public func flushInput() { tcflush(controller, TCIFLUSH) }

    public func close() {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        Glibc.close(terminal)
        Glibc.close(controller)
    }

    deinit { close() }
}
