import Glibc
import Synchronization
import TagFixSystem
import Testing

@testable import TagFixEmulators

/// The client's side of an emulator's pty, raw as libnfc sets it, read on an `IOLoop` of the
/// test's own (no thread of the pool waits on it).
private final class PTYClient: Sendable {
    let descriptor: FileDescriptor
    let loop: IOLoop<ContinuousClock>

    /// Ends a read's registration: its handler throws it once the bytes are in.
    private struct Done: Error {}

    init(path: String) throws {
        descriptor = try FileDescriptor.open(path, .readWrite, options: [.noControllingTerminal, .closeOnExec])
        var settings = termios()
        tcgetattr(descriptor.rawValue, &settings)
        cfmakeraw(&settings)
        tcsetattr(descriptor.rawValue, TCSANOW, &settings)
        loop = try IOLoop(name: "pty client")
    }

    /// At least `count` bytes from the emulator, and when the last of them arrived.
    func read(_ count: Int) async throws -> (bytes: [UInt8], at: ContinuousClock.Instant) {
        let received = Mutex<[UInt8]>([])
        return try await withCheckedThrowingContinuation { continuation in
            do {
                _ = try loop.register(descriptor, for: .readable) { [descriptor] _ in
                    var buffer = [UInt8](repeating: 0, count: 512)
                    let read = try descriptor.read(into: &buffer)
                    let all = received.withLock { received -> [UInt8]? in
                        received += buffer.prefix(read)
                        return received.count >= count ? received : nil
                    }
                    guard let all else { return }
                    continuation.resume(returning: (all, ContinuousClock.now))
                    throw Done()
                }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    func close() async {
        await loop.close()
        _ = try? descriptor.close()
    }
}

@Suite("PN532 emulator on its line (an IOLoop client)")
struct PN532LineTests {
    static let getFirmwareVersion = PN532Frame.encode(tfi: 0xD4, [0x02])

    /// What the chip answers GetFirmwareVersion, framed.
    static var firmwareVersion: [UInt8] {
        var chip = PN532Chip()
        guard case .response(let response) = chip.handle([0x02]) else { return [] }
        return PN532Frame.encode(tfi: 0xD5, response)
    }

    @Test("at a baud rate: the ACK and the response, byte for byte, no sooner than the wire takes them both ways")
    func baudRate() async throws {
        let baud = 9_600
        let emulator = try PN532Emulator(tags: [ntag213(url: "https://line.example")], options: .init(baud: baud, logCommands: true))
        let client = try PTYClient(path: emulator.path)
        let line = SerialLine<ContinuousClock.Instant>(baud: baud)
        let expected = PN532Frame.ack + Self.firmwareVersion
        let sent = ContinuousClock.now
        _ = try client.descriptor.writeAll(Self.getFirmwareVersion)
        let answer = try await client.read(expected.count)
        #expect(answer.bytes == expected)
        // Not a timing assertion: only that no byte came before the simulated line let it.
        #expect(answer.at - sent >= line.wireTime(of: Self.getFirmwareVersion.count) + line.wireTime(of: expected.count))
        // The exchange is logged on the emulator's loop once its last byte has been written, which
        // the client can have read first (beside two CPU hogs the log was still empty here).
        let end = ContinuousClock.now + .seconds(30)
        while emulator.traffic.log.isEmpty, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        let exchange = try #require(emulator.traffic.log.first)
        #expect(exchange.command == 0x02)
        #expect(exchange.bytesIn == Self.getFirmwareVersion.count && exchange.bytesOut == expected.count)
        #expect(exchange.answered - exchange.received >= line.wireTime(of: expected.count))
        #expect(emulator.traffic.bytesFromHost == Self.getFirmwareVersion.count && emulator.traffic.bytesToHost == expected.count)
        await client.close()
        await emulator.stopped()
    }

    @Test("a client that writes and never reads: the emulator keeps reading and answering, and its stop still ends")
    func clientNeverReads() async throws {
        let emulator = try PN532Emulator(tags: [ntag213(url: "https://full.example")])
        let client = try PTYClient(path: emulator.path)
        // Far more answers than the pty holds (19 bytes each): a writing emulator that waited
        // for room would stop reading, and this write would never end.
        let commands = 20_000
        let batch = [[UInt8]](repeating: Self.getFirmwareVersion, count: commands).flatMap { $0 }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            // A blocking write, on the client's loop thread rather than the pool.
            client.loop.execute {
                continuation.resume(with: Result { _ = try client.descriptor.writeAll(batch) })
            }
        }
        await emulator.stopped()
        // All but what the pty still held when the write ended was read and answered.
        #expect(emulator.traffic.commands > commands / 2)
        #expect(emulator.traffic.bytesToHost > 100_000)
        await client.close()
    }

    @Test("stop() returns at once, and stopped() after it awaits the line's end; both again do nothing more")
    func stopTwice() async throws {
        let emulator = try PN532Emulator(tags: [ntag213(url: "https://stop.example")])
        emulator.stop()
        emulator.stop()
        await emulator.stopped()
        await emulator.stopped()
        #expect(emulator.traffic.commands == 0)
    }
}
