import CPTY
import Glibc
import Synchronization
import TagFixDevices
import TagFixSystem

/// The watchdog of a private daemon (gpsd, pcscd, the tests' mosquitto): the daemon does not
/// outlive its owner, however the owner ends. See `PrivateDaemon`.
///
/// `sh` waiting on a pipe for `done`: anything else, end of file included, means the owner
/// is gone, and it sends the daemon SIGTERM, then SIGKILL. It checks the pid's name first, so a pid
/// the kernel has given to another program since the daemon exited is left alone; a pid that is
/// there under another name is looked at again for up to a second, since the watchdog starts as
/// soon as the daemon is spawned and an owner that dies at once may find it still in its exec
/// (`setpriv` becoming `postgres`). Once the daemon has gone it removes the shared-memory segment
/// the daemon leaves behind and the daemon's folder, if it has them.
final class ProcessWatchdog: Sendable {
    /// The pipe's write end; closed once, by `dismiss()`.
    private let writer: Mutex<FileDescriptor?>
    private let process: ChildProcess

    /// `nil` when the pipe or the shell cannot be had: the daemon then runs as before, stopped
    /// only by `stop()`.
    init?(guarding pid: Int32, named name: String, sharedMemoryKey: Int32? = nil, folder: String? = nil) {
        // Close-on-exec on both ends (FileDescriptor.pipe): no program spawned later, by this
        // process or by another thread, inherits the write end and keeps the pipe open after the
        // owner dies. The read end reaches the shell as its standard input, which the spawn
        // duplicates.
        guard let (readEnd, writeEnd) = try? FileDescriptor.pipe() else { return nil }
        writer = Mutex(writeEnd)
        // A pid that is there under another name after a second (not the daemon any more, or not
        // yet) is left alone, and so is the folder. (A Ctrl-C to the whole foreground group ends
        // the watchdog with its owner: `scripts/test` keeps the brokers' folders in a RAM folder
        // of its run, which it removes.)
        let script = """
            read -r word
            [ "$word" = done ] && exit 0
            alive() { [ "$(cat /proc/$1/comm 2>/dev/null)" = "$2" ]; }
            gone() { [ -n "$3" ] && ipcrm -M "$3" 2>/dev/null; [ -n "$4" ] && rm -rf -- "$4"; exit 0; }
            other() { [ -n "$3" ] && ipcrm -M "$3" 2>/dev/null; exit 0; }
            for _ in 1 2 3 4 5 6 7 8 9 10; do alive "$1" "$2" && break; [ -d "/proc/$1" ] || gone "$@"; sleep 0.1; done
            alive "$1" "$2" || other "$@"
            kill -TERM "$1"
            for _ in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; alive "$1" "$2" || gone "$@"; done
            kill -KILL "$1"
            for _ in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; alive "$1" "$2" || gone "$@"; done
            """
        // The shell gets the read end as its standard input; this process's copy is closed at
        // once (the spawn duplicated it).
        defer { try? readEnd.close() }
        do {
            process = try ChildProcess(
                executable: "/bin/sh",
                arguments: [
                    "-c", script, "tagfix-\(name.prefix(15))-watchdog", String(pid), String(name.prefix(15)),
                    sharedMemoryKey.map { "0x" + String(UInt32(bitPattern: $0), radix: 16) } ?? "", folder ?? "",
                ],
                standardInput: readEnd.rawValue)
        } catch {
            try? writeEnd.close()
            return nil
        }
    }

    /// Tells the watchdog the owner stopped the daemon itself, and awaits its exit.
    func dismiss() async {
        if let fd = writer.withLock({ $0.take() }) {
            _ = try? fd.writeAll(Array("done\n".utf8))
            try? fd.close()
        }
        await process.exited()
    }
}
