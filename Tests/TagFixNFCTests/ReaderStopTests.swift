import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixTesting
import Testing

@testable import TagFixNFC

/// A libnfc reader that stops lets go of everything it had. libnfc 1.8's pn532_uart abort
/// (`nfc_abort_command`, which a stop made) closes the read end of the device's abort pipe and
/// makes a new pipe; only a wait for an answer that sees the old read end closed closes the old
/// write end. A stop while the reader waited between polls, where it nearly always is, left that
/// write end open for the life of the process: one descriptor more for each reader stopped, and
/// libnfc's `select()` aborts the process once a descriptor passes 1023.
///
/// Each test runs in a process of its own (an exit test), where the pipes that appear while its
/// reader opens are that reader's: in the test process, other tests' readers open at the same
/// moment, and a pipe one of them leaves open (libnfc cannot abort a command's wait for its
/// acknowledgement on a line that hangs) was counted as this reader's.
@Suite struct ReaderStopTests {
    @Test("a libnfc reader stopped between polls leaves no descriptor behind: three stops, no pipe end left that nobody reads")
    func stopBetweenPolls() async {
        await #expect(processExitsWith: .success) { try await Self.stopsBetweenPolls() }
    }

    /// The stop that libnfc's abort cannot take back: while the reader waits for a command's
    /// acknowledgement (libnfc waits for it without its abort pipe), where a PN532 that is slow to
    /// answer keeps it.
    @Test("a libnfc reader stopped while it waits for a command's acknowledgement leaves no descriptor behind, and stops")
    func stopInAcknowledgement() async {
        await #expect(processExitsWith: .success) { try await Self.stopsInAcknowledgement() }
    }

    /// stopBetweenPolls, in its own process.
    static func stopsBetweenPolls() async throws {
        let emulator = try PN532Emulator(tags: [], options: PN532Emulator.Options(logCommands: true))
        defer { emulator.stop() }
        var options = LibNFCReader<MonotonicClock>.Options()
        // A long wait between polls, so that each stop comes in one: after a poll's answer.
        options.pollInterval = .seconds(5)
        var readersPipes = Set<String>()
        for _ in 0..<3 {
            let before = Set(PipeEnds.held().map(\.inode))
            emulator.clearLog()
            let (running, ready) = Self.start(Self.reader(emulator, options))
            #expect(await ready.value, "the reader did not open")
            // Its first poll's three selections (InListPassiveTarget: ISO 14443A, FeliCa at 212
            // and at 424 kbps) answered: it now waits for the next poll. (A stop during a
            // selection waits for its end: stopInAcknowledgement.)
            #expect(
                await RunningProgram.poll { emulator.traffic.log.count { $0.command == 0x4A } >= 3 }, "the reader did not poll")
            // The reader's abort pipe: both ends here, made by libnfc's pipe() (not close-on-exec,
            // where TagFixSystem's pipes are), between the two looks.
            readersPipes.formUnion(PipeEnds.inProcess(since: before))
            running.cancel()
        }
        await Self.expectLetGo(readersPipes, emulator, options)
    }

    /// stopInAcknowledgement, in its own process.
    static func stopsInAcknowledgement() async throws {
        let emulator = try PN532Emulator(tags: [], options: PN532Emulator.Options(logCommands: true))
        defer { emulator.stop() }
        var options = LibNFCReader<MonotonicClock>.Options()
        options.pollInterval = .milliseconds(20)
        let before = Set(PipeEnds.held().map(\.inode))
        let (running, ready) = Self.start(Self.reader(emulator, options))
        #expect(await ready.value, "the reader did not open")
        #expect(await RunningProgram.poll { emulator.traffic.log.count { $0.command == 0x4A } >= 3 }, "the reader did not poll")
        let readersPipes = PipeEnds.inProcess(since: before)
        // The next selection's acknowledgement and answer come 150 ms late (libnfc gives a
        // selection 300 ms): the stop comes while the reader waits for them.
        let received = emulator.traffic.commands
        emulator.answerLate(command: 0x4A, by: .milliseconds(150))
        #expect(await RunningProgram.poll { emulator.traffic.commands > received }, "the reader did not poll again")
        running.cancel()
        await Self.expectLetGo(readersPipes, emulator, options)
    }

    /// A reader of `emulator`'s port.
    static func reader(_ emulator: PN532Emulator, _ options: LibNFCReader<MonotonicClock>.Options) -> LibNFCReader<MonotonicClock> {
        LibNFCReader(connstring: "pn532_uart:\(emulator.path)", clock: MonotonicClock(), options: options)
    }

    /// Once the stopped readers have closed the device (one more reader of the port opens only
    /// then), none of their `pipes` may be left with a write end that nobody reads.
    static func expectLetGo(_ pipes: Set<String>, _ emulator: PN532Emulator, _ options: LibNFCReader<MonotonicClock>.Options) async {
        let (last, ready) = start(reader(emulator, options))
        defer { last.cancel() }
        #expect(await ready.value, "the port was not let go")
        #expect(!pipes.isEmpty, "the readers' pipes were not seen")
        let left = PipeEnds.unread(pipes)
        #expect(left.isEmpty, "pipe ends left open by the stopped readers, with nobody reading them: \(left.sorted())")
    }

    /// Consumes `reader`'s events on a task (cancelled: the reader stops); `ready` says whether
    /// it opened.
    static func start(_ reader: LibNFCReader<MonotonicClock>) -> (running: Task<Void, Never>, ready: Task<Bool, Never>) {
        let (opened, signal) = AsyncStream<Bool>.makeStream()
        let running = Task {
            for await event in reader.events() {
                if case .ready = event { signal.yield(true) }
            }
            signal.finish()
        }
        let ready = Task {
            for await value in opened { return value }
            return false
        }
        return (running, ready)
    }
}

/// The pipe ends processes hold, from /proc/PID/fd and /proc/PID/fdinfo.
enum PipeEnds {
    struct End: Hashable {
        /// The pipe, as /proc names it ("pipe:[1234]").
        var inode: String
        var writes: Bool
        var closesOnExec: Bool
    }

    /// The pipes not among `before` whose both ends this process holds, neither close-on-exec.
    static func inProcess(since before: Set<String>) -> Set<String> {
        let ends = held().filter { !$0.closesOnExec && !before.contains($0.inode) }
        let writing = Set(ends.filter(\.writes).map(\.inode))
        return writing.intersection(ends.filter { !$0.writes }.map(\.inode))
    }

    static func held(by process: String = "self") -> [End] {
        let folder = "/proc/\(process)/fd"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
        return names.compactMap { name in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\(name)"), target.hasPrefix("pipe:"),
                let info = try? String(contentsOfFile: "/proc/\(process)/fdinfo/\(name)", encoding: .utf8),
                let line = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") }),
                let flags = Int(line.dropFirst("flags:".count).trimmingCharacters(in: .whitespaces), radix: 8)
            else { return nil }
            // O_ACCMODE: O_WRONLY is 1; O_CLOEXEC is 0o2000000.
            return End(inode: target, writes: flags & 0o3 == 0o1, closesOnExec: flags & 0o2_000_000 != 0)
        }
    }

    /// Of `pipes`, those this process holds a write end of and no process on the machine holds a
    /// read end of: written to nobody, ever again.
    static func unread(_ pipes: Set<String>) -> Set<String> {
        let written = Set(held().filter(\.writes).map(\.inode)).intersection(pipes)
        let processes = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).filter { $0.allSatisfy(\.isNumber) }
        var read = Set<String>()
        for process in processes {
            for end in held(by: process) where !end.writes && written.contains(end.inode) { read.insert(end.inode) }
        }
        return written.subtracting(read)
    }
}
