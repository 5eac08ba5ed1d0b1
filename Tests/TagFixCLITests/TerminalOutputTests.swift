import Foundation
import Synchronization
import Testing

@testable import TagFixCLI
@testable import TagFixCore
@testable import TagFixDevices

/// A terminal, as the printer sees it: lines, and the status line's redraws.
final class FakeTerminal: TerminalOutput {
    private let state = Mutex<(out: [String], err: [String], status: [String])>(([], [], []))
    var isTerminal: Bool { true }
    func out(_ line: String) { state.withLock { $0.out.append(line) } }
    func err(_ line: String) { state.withLock { $0.err.append(line) } }
    func status(_ text: String) { state.withLock { $0.status.append(text) } }
    var lines: [String] { state.withLock { $0.out } }
    var statuses: [String] { state.withLock { $0.status } }
}

@Suite("What a person sees on a terminal")
struct TerminalOutputTests {
    static let start = Timestamp(iso8601: "2026-05-14T08:00:00Z")!

    static func verdict(_ kind: Verdict.Kind) throws -> Verdict {
        let scan = TagScan(readerID: "r", uid: try TagUID(hex: "04A224B2C56480"), tagType: .ntag213, url: nil, time: start)
        return Verdict(kind: kind, scan: scan, interpolated: false)
    }

    @Test("the status line shows the reader, GPS mode, satellites, accuracy and the fix's age")
    func statusLine() throws {
        var board = StatusBoard()
        #expect(board.render(now: Self.start) == "reader: opening… · GPS waiting for the first fix")
        board.receive(.ready(description: "PN532 at pn532_uart:/dev/ttyUSB0"))
        let fix = Fix(
            time: Self.start, mode: .threeD, coordinate: Coordinate(validLatitude: 53.5, longitude: 9.9), horizontalAccuracy: 3.46,
            satellitesUsed: 9)
        board.receive(.fix(fix))
        #expect(
            board.render(now: Self.start.advanced(by: .milliseconds(2400)))
                == "reader: connected, searching · GPS 3D · 9 sats · ±3.5 m · fix 2.4 s old")
        board.receive(.silent(.seconds(7)))
        #expect(board.render(now: Self.start).hasSuffix("GPS silent for 7 s"))
        board.receive(.resumed)
        board.receive(.disconnected(ReaderError(code: .notFound, message: "open failed")))
        #expect(board.render(now: Self.start).hasPrefix("reader: disconnected (open failed) · GPS 3D"))
    }

    @Test(
        "verdicts on a terminal are coloured and ring the bell unless quiet; the status line is cleared, then redrawn",
        arguments: [(true, true), (false, true), (true, false)])
    func terminalVerdicts(bell: Bool, colour: Bool) throws {
        let terminal = FakeTerminal()
        let printer = VerdictPrinter(io: terminal, style: .init(json: false, bell: bell, colour: colour))
        printer.print(.verdict(try Self.verdict(.outside)))
        let line = try #require(terminal.lines.first)
        #expect(line.contains("✗ outside"))
        #expect(line.hasSuffix("\u{7}") == bell)
        #expect(line.hasPrefix("\u{1B}[31;1m") == colour)
        #expect(terminal.statuses.first == "", "the status line is cleared before the verdict")
        #expect(terminal.statuses.last?.hasPrefix("reader:") == true, "and redrawn after it")
    }

    @Test("serve with phones alone: the status line says there is no reader, never that one is opening")
    func phonesOnlyStatusLine() throws {
        let terminal = FakeTerminal()
        let printer = VerdictPrinter(io: terminal, style: .init(json: false, bell: false, colour: false, noReader: true))
        printer.print(.verdict(try Self.verdict(.confirmed)), now: Self.start)
        #expect(terminal.statuses.last == "no reader: phones tap through serve, each with its own position", "\(terminal.statuses)")
        #expect(!terminal.statuses.contains { $0.contains("opening") || $0.contains("GPS") })
    }

    @Test("through a pipe: plain lines, no colour, no bell, no status line")
    func plain() throws {
        let output = CapturedOutput()
        let printer = VerdictPrinter(io: output, style: .init(json: false, bell: true, colour: true))
        printer.print(.verdict(try Self.verdict(.confirmed)))
        printer.print(.gps(.silent(.seconds(5))))
        #expect(output.stdout.count == 2)
        #expect(output.stdout.allSatisfy { !$0.contains("\u{1B}") && !$0.contains("\u{7}") })
    }

    /// Output through a pipe that keeps which lines were written together.
    final class GroupedOutput: TerminalOutput {
        private let writes = Mutex<[[String]]>([])
        func out(_ line: String) { writes.withLock { $0.append([line]) } }
        func err(_ line: String) {}
        func out(lines: [String]) { writes.withLock { $0.append(lines) } }
        var written: [[String]] { writes.withLock { $0 } }
    }

    static let group: [Verdict.Kind] = [
        .confirmed, .outside, .notRegistered, .disallowed(.positionDenied), .untrusted(.sunReplayed(tag: "t1", counter: 7, last: 9)),
    ]

    @Test("a group of verdicts through a pipe: the lines printing them one by one gives, in order, in one write", arguments: [false, true])
    func groupThroughPipe(json: Bool) throws {
        let verdicts = try Self.group.map(Self.verdict)
        let (one, together) = (GroupedOutput(), GroupedOutput())
        let single = VerdictPrinter(io: one, style: .init(json: json, bell: true, colour: true))
        for verdict in verdicts { single.print(.verdict(verdict)) }
        var kept: [Bool] = []
        VerdictPrinter(io: together, style: .init(json: json, bell: true, colour: true)).print(recorded: verdicts.map(RecordedVerdict.init))
        { kept.append($0) }
        #expect(kept == [true])
        #expect(one.written.count == verdicts.count)
        #expect(together.written == [one.written.flatMap { $0 }])
    }

    @Test("a group of verdicts on a terminal: a coloured line each, the status line cleared before and redrawn after each")
    func groupOnTerminal() throws {
        let terminal = FakeTerminal()
        let verdicts = try Self.group.map(Self.verdict)
        VerdictPrinter(io: terminal, style: .init(json: false, bell: false, colour: true)).print(
            recorded: verdicts.map(RecordedVerdict.init)
        ) { _ in }
        #expect(terminal.lines.count == verdicts.count)
        #expect(terminal.lines.allSatisfy { $0.hasPrefix("\u{1B}[") })
        #expect(terminal.statuses.count == 2 * verdicts.count)
        #expect(terminal.statuses.enumerated().allSatisfy { $0.offset % 2 == 0 ? $0.element.isEmpty : $0.element.hasPrefix("reader:") })
    }

    @Test("when the log cannot be written, the verdict is not shown")
    func logFailure() throws {
        let path = try temporaryFile("session.jsonl", "")
        let log = try SessionLog(path: path)
        log.close()  // every append now fails
        let output = CapturedOutput()
        let printer = VerdictPrinter(io: output, style: .init(), log: log)
        printer.print(.verdict(try Self.verdict(.confirmed)))
        #expect(output.stdout.isEmpty)
        #expect(printer.logFailure != nil)
        #expect(output.stderr.first?.contains("no verdict is shown that is not in the log") == true)
    }
}
