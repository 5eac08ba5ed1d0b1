import Foundation
import Synchronization
import TagFixCore
import TagFixDevices

/// Shows verifier events as they come, keeps the tally and, with a session log, writes each
/// verdict to the disk before it is shown.
///
/// On a terminal: coloured verdict lines (unless NO_COLOR is set), a bell per verdict (unless
/// --quiet) and a status line at the bottom (reader, GPS mode, satellites, accuracy, fix age).
/// Through a pipe or into a file: plain lines only.
final class VerdictPrinter: Sendable {
    struct Style: Sendable {
        var json = false
        var bell = true
        var colour = true
    }

    let io: any TerminalOutput
    let style: Style
    let log: SessionLog?
    private let state = Mutex(State())

    private struct State {
        var tally = VerdictTally()
        var board = StatusBoard()
        var readerReady = false
        var logFailure: SessionLogError?
    }

    init(io: any TerminalOutput, style: Style, log: SessionLog? = nil) {
        self.io = io
        self.style = style
        self.log = log
    }

    /// Whether the reader has said it is ready.
    var readerReady: Bool { state.withLock { $0.readerReady } }
    /// Why the session log stopped taking verdicts; from then on none is shown.
    var logFailure: SessionLogError? { state.withLock { $0.logFailure } }
    var summary: String { state.withLock { $0.tally.summary } }

    private var live: Bool { io.isTerminal && !style.json }

    func print(_ event: VerifierEvent, now: Timestamp? = nil) {
        switch event {
        case .verdict(let verdict):
            guard logFailure == nil else { return }
            let record = log != nil || style.json ? SessionRecord(verdict).encoded() : ""
            if let log {
                do {
                    try log.append(record)
                } catch {
                    state.withLock { $0.logFailure = error }
                    io.status("")
                    io.err("error: \(error); stopping, so that no verdict is shown that is not in the log")
                    return
                }
            }
            state.withLock { $0.tally.add(verdict) }
            if style.json {
                io.out(record)
                return
            }
            io.status("")
            io.out(live ? decorate(verdict) : VerdictFormat.line(verdict))
            redraw(now: now ?? verdict.scan.time)
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

    private func decorate(_ verdict: Verdict) -> String {
        let text = VerdictFormat.line(verdict)
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
        case .fix(let fix):
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
