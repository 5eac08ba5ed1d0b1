import Foundation

/// The package's built programs, for tests that run them as a user does: the one place that knows
/// where the build folder is.
public enum TestBinaries {
    /// The package's root folder (this file is Sources/TagFixTesting/TestBinaries.swift).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The build folder of the configuration under test. SwiftPM names it in no environment
    /// variable; it builds the test runner into the same folder as the products, so the folder of
    /// the running executable is it when `tagfix` is there (`swift test -c release` finds
    /// .build/…/release's, a custom `--scratch-path` its own). Otherwise `.build/debug`, where a
    /// plain `swift build` puts it.
    public static let buildDirectory: String = {
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let folder = (executable as NSString).deletingLastPathComponent
            if FileManager.default.isExecutableFile(atPath: folder + "/tagfix") { return folder }
        }
        return packageRoot + "/.build/debug"
    }()

    /// The built `tagfix`.
    public static let tagfix = buildDirectory + "/tagfix"

    /// Whether `tagfix` has been built (tests that run it are skipped when not).
    public static var isTagfixBuilt: Bool { FileManager.default.isExecutableFile(atPath: tagfix) }

    /// The slow disk (Tests/SlowFsync): fsync and fdatasync made to wait, off RAM file systems.
    public static let slowFsync = buildDirectory + "/libTagFixSlowFsync.so"

    /// The environment that puts a program on a disk whose fsync takes `milliseconds`: `slowFsync`
    /// preloaded, for the program alone (`TestProgram`'s or a private daemon's environment).
    public static func slowDisk(milliseconds: Int = 10) -> [String: String] {
        ["LD_PRELOAD": slowFsync, "SLOW_FSYNC_MS": String(milliseconds)]
    }
}
