import Foundation
import TagFixSystem

/// Debug lines on standard error, on when `TAGFIX_LOG_LEVEL=debug`: what devices did (bytes moved
/// per scan, reconnects). Off by default; never on standard output.
public enum DebugLog {
    public static let enabled: Bool = ProcessInfo.processInfo.environment["TAGFIX_LOG_LEVEL"]?.lowercased() == "debug"

    public static func debug(_ message: @autoclosure () -> String) {
        guard enabled else { return }
        // write(2), not FileHandle.write, which traps when stderr is full or closed.
        _ = try? FileDescriptor.standardError.writeAll(Array("debug: \(message())\n".utf8))
    }
}
