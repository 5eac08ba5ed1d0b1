import Foundation
import Synchronization
import TagFixDevices
import TagFixSystem

/// The programs a test process starts die with it, however it ends: a crash, `kill -9`, a
/// `swift test` stopped by CI's timeout. A program that outlives its test keeps what it holds
/// (a `tagfix serve --demo` serves for ever, and its private gpsd with it: that gpsd's watchdog
/// waits on serve, which is alive) and loads the next run.
///
/// One `sh` per test process, started with the first program, reads a line `PID START` for each
/// program started (START: the kernel's start time of that pid, from /proc/PID/stat, so that a pid
/// the kernel has given to another program since is left alone). It reads them from a socket
/// whose other end only this process holds (close-on-exec: no child inherits it; a socket, so a
/// reaper gone is `.brokenPipe` here, never SIGPIPE); at its end — this process gone — it sends
/// each program still running SIGTERM, then SIGKILL a second later.
/// A program that ended is simply not found then.
final class ChildReaper: Sendable {
    static let shared = ChildReaper()

    private let writer: Mutex<FileDescriptor?>
    /// The reaper's `sh`; `nil` when it could not be had (programs then end as before).
    let process: ChildProcess?

    /// A reaper of its own (tests of it); programs use `shared`.
    init() {
        guard let (readEnd, writeEnd) = try? FileDescriptor.socketPair() else {
            writer = Mutex(nil)
            process = nil
            return
        }
        defer { try? readEnd.close() }
        // Fields after the command's ")" (which may hold spaces): the start time is the 20th.
        let script = """
            started() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
            pids=""
            while read -r pid start; do pids="$pids $pid:$start"; done
            for entry in $pids; do
                pid=${entry%%:*}; start=${entry#*:}
                [ "$(started "$pid")" = "$start" ] && kill -TERM "$pid" 2>/dev/null
            done
            sleep 1
            for entry in $pids; do
                pid=${entry%%:*}; start=${entry#*:}
                [ "$(started "$pid")" = "$start" ] && kill -KILL "$pid" 2>/dev/null
            done
            exit 0
            """
        do {
            process = try ChildProcess(
                executable: "/bin/sh", arguments: ["-c", script, "tagfix-test-reaper"], standardInput: readEnd.rawValue)
            writer = Mutex(writeEnd)
        } catch {
            try? writeEnd.close()
            writer = Mutex(nil)
            process = nil
        }
    }

    /// Has `pid` (a child this process just started) stopped when this process ends.
    func adopt(_ pid: Int32) {
        guard let start = Self.startTime(of: pid) else { return }
        adopt(pid, started: start)
    }

    /// `adopt`, with the start time the pid must still have.
    func adopt(_ pid: Int32, started start: String) {
        writer.withLock { fd in
            guard let descriptor = fd else { return }
            let line = Array("\(pid) \(start)\n".utf8)[...]
            // A line is a few bytes: the socket takes it whole, or the reaper is gone.
            if (try? descriptor.send(line)) != line.count {
                try? descriptor.close()
                fd = nil
            }
        }
    }

    /// The kernel's start time of `pid` (field 22 of /proc/PID/stat), `nil` when it has gone.
    static func startTime(of pid: Int32) -> String? {
        guard let fields = Processes.status(of: pid)?.fields, fields.count > 19 else { return nil }
        return fields[19]
    }

    /// What this process's end does: the reaper's socket closed.
    func ownerGone() {
        writer.withLock { fd in
            try? fd?.close()
            fd = nil
        }
    }
}
