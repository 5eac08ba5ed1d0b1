import Foundation
import Synchronization
import TagFixCore
import TagFixDevices

/// What a verify session's verdicts go through: a `VerdictFanOut` of the session log (when
/// --log gives one: on the disk before anything is shown), the tally, the terminal, and any
/// further sinks (`sinks`), in that order. The commands and the demo send every verifier event
/// here (`print`); a new sink is one more `VerdictSink` in `sinks`, at the one place they are
/// put together (`VerifyCommand.withPrinter`).
final class VerdictPrinter: Sendable {
    typealias Style = TerminalSink.Style

    let terminal: TerminalSink
    let tally = TallySink()
    let fanOut: VerdictFanOut

    init(io: any TerminalOutput, style: Style, log: SessionLog? = nil, sinks: [any VerdictSink] = []) {
        let terminal = TerminalSink(io: io, style: style)
        self.terminal = terminal
        fanOut = VerdictFanOut(
            (log.map { [SessionLogSink($0)] } ?? []) + [tally, terminal] + sinks,
            onFailure: { failure in
                switch failure {
                case .stopped(let error):
                    io.status("")
                    io.err("error: \(error); stopping, so that no verdict is shown that is not in the log")
                case .dropped(let error):
                    terminal.note("! \(error.sink) gets no more verdicts: \(error)")
                }
            })
    }

    /// Whether the reader has said it is ready.
    var readerReady: Bool { terminal.readerReady }
    /// Why the session log stopped taking verdicts; from then on none is shown.
    var logFailure: VerdictSinkError? { fanOut.stopped }
    var summary: String { tally.counts.summary }

    /// Hands `event` to the sinks; `now` is the session clock's time on a live run.
    func print(_ event: VerifierEvent, now: Timestamp? = nil) { fanOut.send(event, now: now) }

    /// Hands on verdicts decided together, with their records made (phone taps committed as a
    /// group): the log keeps them with one fsync, `whenKept` is told whether it did, then the
    /// other sinks take them in order.
    func print(recorded: [RecordedVerdict], now: Timestamp? = nil, whenKept: (Bool) -> Void) {
        fanOut.send(recorded: recorded, now: now, whenKept: whenKept)
    }

    /// Redraws the status line (a terminal only).
    func redraw(now: Timestamp) { terminal.redraw(now: now) }

    /// A note on standard error that does not collide with the status line.
    func note(_ line: String) { terminal.note(line) }

    /// Clears the status line before the closing summary.
    func finish() { fanOut.finish() }
}

/// The terminal as a sink: verdict lines (or JSON Lines), device events, the status line.
///
/// On a terminal: coloured verdict lines (unless NO_COLOR is set), a bell per verdict (unless
/// --quiet) and a status line at the bottom (reader, GPS mode, satellites, accuracy, fix age).
/// Through a pipe or into a file: plain lines only.
final class TerminalSink: VerdictSink {
    struct Style: Sendable {
        var json = false
        var bell = true
        var colour = true
        /// `serve` with phones alone: the status line says so instead of waiting for a reader.
        var noReader = false
    }

    let io: any TerminalOutput
    let style: Style
    private let state = Mutex(State())

    private struct State {
        var board = StatusBoard()
        var readerReady = false
    }

    init(io: any TerminalOutput, style: Style) {
        self.io = io
        self.style = style
        if style.noReader { state.withLock { $0.board.reader = .phonesOnly } }
    }

    /// Whether the reader has said it is ready.
    var readerReady: Bool { state.withLock { $0.readerReady } }

    private var live: Bool { io.isTerminal && !style.json }

    func receive(_ verdict: Verdict, now: Timestamp?) {
        receive(recorded: RecordedVerdict(verdict), now: now)
    }

    /// With the record the fan-out encoded once for every sink: its line is the JSON output,
    /// and its message the human line's (neither made again here).
    var usesRecords: Bool { true }

    func receive(recorded: RecordedVerdict, now: Timestamp?) {
        guard live else { return io.out(written(recorded)) }
        io.status("")
        io.out(written(recorded))
        redraw(now: now ?? recorded.verdict.scan.time)
    }

    /// Verdicts decided together (a group of phone taps): through a pipe or into a file, their
    /// lines in one write; on a terminal, one at a time (each clears and redraws the status line).
    func receive(recorded: [RecordedVerdict], now: Timestamp?) {
        guard live else { return io.out(lines: recorded.map(written)) }
        for verdict in recorded { receive(recorded: verdict, now: now) }
    }

    /// A verdict's line as it is written: its JSON record, or the line a person reads (coloured,
    /// with a bell, on a terminal).
    private func written(_ recorded: RecordedVerdict) -> String {
        if style.json { return recorded.line }
        let message = recorded.record.message
        return live ? decorate(recorded.verdict, message: message) : VerdictFormat.line(recorded.verdict, message: message)
    }

    func observe(_ event: VerifierEvent, now: Timestamp?) {
        switch event {
        case .verdict: return
        case .reader(let readerEvent):
            state.withLock {
                $0.board.receive(readerEvent)
                if case .ready = readerEvent { $0.readerReady = true }
            }
            line(for: event, now: now)
        case .gps(let fixEvent):
            state.withLock { $0.board.receive(fixEvent) }
            line(for: event, now: now)
        case .clockOffset(let reference):
            // On standard error in every format (JSON Lines included): it is about the run, not a verdict.
            note("! \(ClockFormat.offset(reference))")
        }
    }

    private func line(for event: VerifierEvent, now: Timestamp?) {
        guard !style.json else { return }
        if let line = DeviceEventFormat.line(event) {
            io.status("")
            io.out(line)
        }
        if let now { redraw(now: now) }
    }

    /// Redraws the status line (a terminal only).
    func redraw(now: Timestamp) {
        guard live else { return }
        io.status(state.withLock { $0.board.render(now: now) })
    }

    /// A note on standard error that does not collide with the status line.
    func note(_ line: String) {
        if live { io.status("") }
        io.err(line)
    }

    /// Clears the status line before the closing summary.
    func finish() { if live { io.status("") } }

    private func decorate(_ verdict: Verdict, message: String) -> String {
        let text = VerdictFormat.line(verdict, message: message)
        let bell = style.bell ? "\u{7}" : ""
        guard style.colour else { return text + bell }
        let colour: String
        switch verdict.kind {
        case .confirmed: colour = "32"  // green
        case .outside: colour = "31;1"  // bold red
        case .inconclusive: colour = "33"  // yellow
        case .notRegistered: colour = "35"  // magenta
        case .disallowed: colour = "34"  // blue
        case .untrusted: colour = "97;41"  // white on red: a copied or replaced tag
        }
        return "\u{1B}[\(colour)m\(text)\u{1B}[0m" + bell
    }
}

/// What the status line shows: the reader's state and the latest fix. Pure.
struct StatusBoard: Sendable {
    enum Reader: Sendable, Hashable {
        /// `serve` with phones alone: no reader, and no GPS of its own.
        case phonesOnly
        case starting
        case searching(String)
        case tag(String)
        case down(String)
    }

    var reader = Reader.starting
    var fix: Fix?
    var gpsProblem: String?

    mutating func receive(_ event: ReaderEvent) {
        switch event {
        case .ready(let description): reader = .searching(description)
        case .tagPresent(let scan): reader = .tag(scan.uid.hex)
        case .tagRemoved: if case .tag = reader { reader = .searching("") }
        case .failed: break
        case .disconnected(let error): reader = .down(error.message)
        }
    }

    mutating func receive(_ event: FixEvent) {
        switch event {
        case .fix(let fix), .refined(let fix):
            self.fix = fix
            gpsProblem = nil
        case .unavailable(let why): gpsProblem = "unavailable (\(why))"
        case .silent(let duration): gpsProblem = "silent for \(Coordinate.format(duration.seconds, 0)) s"
        case .resumed, .connected: gpsProblem = nil
        case .rejected, .restarted: break
        }
    }

    func render(now: Timestamp) -> String {
        var parts: [String] = []
        switch reader {
        case .phonesOnly: return "no reader: phones tap through serve, each with its own position"
        case .starting: parts.append("reader: opening…")
        case .searching: parts.append("reader: connected, searching")
        case .tag(let uid): parts.append("reader: reading \(uid)")
        case .down(let why): parts.append("reader: disconnected (\(why))")
        }
        if let gpsProblem {
            parts.append("GPS \(gpsProblem)")
        } else if let fix {
            switch fix.mode {
            case .noFix: parts.append("GPS no fix")
            case .twoD: parts.append("GPS 2D")
            case .threeD: parts.append("GPS 3D")
            }
            if let satellites = fix.satellitesUsed { parts.append("\(satellites) sats") }
            if fix.mode != .noFix { parts.append(fix.horizontalAccuracy.map { "±\(Coordinate.format($0, 1)) m" } ?? "± ? m") }
            let age = max(0, fix.time.duration(to: now).seconds)
            parts.append("fix \(Coordinate.format(age, 1)) s old")
        } else {
            parts.append("GPS waiting for the first fix")
        }
        return parts.joined(separator: " · ")
    }
}
