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

@Suite("A verdict's terminal line")
struct VerdictLineTests {
    static let now = Timestamp(iso8601: "2026-06-01T23:59:59.9Z")!
    static let centre = Coordinate(validLatitude: 53.545, longitude: 9.966)

    /// A text padded with spaces to `width` characters, as the line did it before it was bytes.
    static func pad(_ text: String, _ width: Int) -> String {
        let count = text.utf8.allSatisfy { (0x20..<0x7F).contains($0) } ? text.utf8.count : text.count
        return count >= width ? text : text + String(repeating: " ", count: width - count)
    }

    /// The line as it was written before it was made of bytes: the same text, padded by characters.
    static func reference(_ verdict: Verdict, message: String?) -> String {
        let iso = verdict.scan.time.formatted(fractionDigits: 0)
        let clock = String(decoding: iso.utf8.dropFirst(11).prefix(8), as: UTF8.self)
        var tag = verdict.tagID ?? (verdict.scan.source == .phone && verdict.sun == nil ? "–" : verdict.scan.uid.hex)
        if let name = verdict.regionName { tag += " (\(name))" }
        return
            "\(clock)  \(verdict.kind.symbol) \(pad(verdict.kind.words, 14)) \(pad(tag, 24)) \(message ?? verdict.message)"
    }

    @Test(
        "the same text as the reference, for all six kinds, any region name and tag",
        arguments: ["", "Pump 4", "日本語の名前", "🏳️‍🌈 e\u{301}", "a very long region name that overflows the column", "\u{7F}\t"])
    func sameText(_ name: String) throws {
        let region = try CircularRegion(center: Self.centre, radius: 25, identifier: "E1")
        let verifier = Verifier(registry: try InMemoryRegistry([RegistryEntry(id: "E1", uid: nil, region: region, name: name)]))
        func at(_ metres: Double, accuracy: Double = 8) -> PhonePosition {
            .fix(
                Coordinate(validLatitude: Self.centre.latitude + metres / 111_320, longitude: Self.centre.longitude), accuracy: accuracy,
                time: Self.now)
        }
        let taps: [(String, PhonePosition, Bool)] = [
            ("https://t.example/t/E1", at(3), false), ("https://t.example/t/E1", at(200), false),
            ("https://t.example/t/E1", at(3, accuracy: 800), false), ("https://t.example/t/E1", .denied, false),
            ("https://t.example/t/E1", at(3), true), ("https://t.example/t/\(name.isEmpty ? "Z" : "Z\(name)")", at(3), false),
        ]
        var verdicts = taps.map { verifier.phoneVerdict(url: $0.0, time: Self.now, position: $0.1, requireSUN: $0.2) }
        let scan = TagScan(
            readerID: "pn532", uid: try TagUID(bytes: [4, 0xA2, 0x24, 0xB2, 0xC5, 0x64, 0x80]), tagType: .ntag213,
            url: "https://t.example/\(name)", time: Self.now)
        if case .decided(let verdict) = verifier.expectation(for: scan) { verdicts.append(verdict) }
        #expect(Set(verdicts.map(\.kind.name)).count == 6, "all six kinds")
        for verdict in verdicts {
            for message in [nil, "said once", name] {
                #expect(Array(VerdictFormat.line(verdict, message: message).utf8) == Array(Self.reference(verdict, message: message).utf8))
            }
        }
        #expect(VerdictFormat.line(verdicts[0]).hasPrefix("23:59:59  "))
    }

    /// A phone reads no UID: a tap whose URL names no tag showed the placeholder's zeros, a UID
    /// no tag has (the log had `uid: null`).
    @Test("a phone tap that names no tag shows no made-up UID")
    func phoneWithoutID() throws {
        let region = try CircularRegion(center: Self.centre, radius: 25, identifier: "E1")
        let verifier = Verifier(registry: try InMemoryRegistry([RegistryEntry(id: "E1", uid: nil, region: region, name: nil)]))
        let verdict = verifier.phoneVerdict(url: "https://t.example/?t=E1", time: Self.now, position: .denied, requireSUN: false)
        #expect(verdict.tagID == nil)
        let line = VerdictFormat.line(verdict)
        #expect(!line.contains("00000000000000"), "\(line)")
        #expect(line.contains(" – "), "\(line)")
    }
}
