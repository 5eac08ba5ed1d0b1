import CPTY
import Glibc
import Synchronization
import TagFixSystem

/// A pseudo-terminal pair: the emulator reads and writes the controller side; clients (libnfc,
/// gpsd) open `path`, the terminal side, as if it were a serial port.
///
/// The controller side is non-blocking: an emulator registers it with its `IOLoop` and reads
/// and writes when the loop says it is ready (`LineShell`).
public final class PseudoTerminal: Sendable {
    // The descriptors are fixed after init and closed once, in `close()`.
    public let controller: Int32
    /// The terminal side's path, e.g. `/dev/pts/7`.
    public let path: String
    /// The emulator's own handle on the terminal side: kept open and raw so the line stays up
    /// (no EIO loop, no echo) when a client closes its handle.
    private let terminal: FileDescriptor
    private let closed = Mutex(false)

    /// The controller side, as the system layer has it.
    var descriptor: FileDescriptor { FileDescriptor(rawValue: controller) }

    /// Opens a pty pair and sets the terminal side raw (no echo, no line discipline).
    public init() throws(EmulatorError) {
        var name = [CChar](repeating: 0, count: 128)
        let fd = cpty_open(&name, name.count)
        guard fd >= 0 else { throw .pty("posix_openpt: \(Errno(rawValue: -fd))") }
        let controller = FileDescriptor(rawValue: fd)
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let terminal: FileDescriptor
        do throws(Errno) {
            try controller.setNonBlocking()
            terminal = try FileDescriptor.open(path, .readWrite, options: [.noControllingTerminal, .closeOnExec])
        } catch {
            _ = try? controller.close()
            throw .pty("open \(path): \(error)")
        }
        try? terminal.makeRawTerminal()
        self.controller = fd
        self.path = path
        self.terminal = terminal
    }

    /// What the client has written and the emulator has not read yet (`[]`: nothing now), or
    /// `nil` when the pty is closed. Never waits.
    public func read() -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 1024)
        do {
            let count = try descriptor.read(into: &buffer)
            return Array(buffer.prefix(count))
        } catch .wouldBlock, .ioError {
            // EIO: no client holds the terminal side now (the emulator's own handle keeps it up).
            return []
        } catch {
            return nil
        }
    }

    /// Writes what the line takes of `bytes` now; returns how many it took (fewer than all: the
    /// client is not reading and the terminal's buffer is full), or `nil` when the pty is closed.
    public func write(_ bytes: ArraySlice<UInt8>) -> Int? {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            do {
                offset += try descriptor.write(bytes[offset...])
            } catch .wouldBlock {
                break
            } catch {
                return nil
            }
        }
        return offset - bytes.startIndex
    }

    /// Discards what the client wrote and the emulator has not read yet.
    public func flushInput() { tcflush(controller, TCIFLUSH) }

    public func close() {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        _ = try? terminal.close()
        _ = try? descriptor.close()
    }

    deinit { close() }
}
