import Foundation
import Testing

/// The house rules (docs/architecture.md), checked on the source tree, read through the package
/// directory this file sits in.
@Suite("the house: a thin CLI, no unchecked concurrency")
struct HouseRulesTests {
    /// This file names what it looks for.
    static let itself = "Tests/TagFixCLITests/HouseRulesTests.swift"

    /// The Swift files below a folder of the package, with their lines.
    static func swiftFiles(_ folder: String) throws -> [(path: String, lines: [Substring])] {
        let root = packageRoot + "/" + folder
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var files: [(String, [Substring])] = []
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            let text = try String(contentsOfFile: root + "/" + relative, encoding: .utf8)
            files.append((folder + "/" + relative, text.split(separator: "\n", omittingEmptySubsequences: false)))
        }
        return files.sorted { $0.0 < $1.0 }
    }

    /// The lines that are code: not blank, not a `//` comment line, not inside `/* … */`.
    static func codeLines(_ lines: [Substring]) -> [(number: Int, text: Substring)] {
        var code: [(Int, Substring)] = []
        var inBlock = false
        for (index, line) in lines.enumerated() {
            let text = line.drop { $0 == " " || $0 == "\t" }
            if inBlock {
                if text.contains("*/") { inBlock = false }
                continue
            }
            if text.isEmpty || text.hasPrefix("//") { continue }
            if text.hasPrefix("/*") {
                inBlock = !text.contains("*/")
                continue
            }
            code.append((index + 1, line))
        }
        return code
    }

    @Test("TagFixCLI holds at most 15 % of the product's Swift lines (Sources/; blank lines and comments not counted)")
    func thinCLI() throws {
        var cli = 0
        var all = 0
        for file in try Self.swiftFiles("Sources") {
            let count = Self.codeLines(file.lines).count
            all += count
            if file.path.hasPrefix("Sources/TagFixCLI/") { cli += count }
        }
        #expect(all > 10_000, "the product's sources were not found below \(packageRoot)/Sources")
        let share = Double(cli) / Double(max(all, 1))
        #expect(
            share <= Self.ceiling,
            "TagFixCLI has \(cli) of the product's \(all) lines (\(String(format: "%.1f", share * 100)) %): move logic into the library targets"
        )
    }

    /// Issue 19's limit. The doctor, the demo, the emulators' runs, the scenario format, the
    /// renderings of domain values, the reader factory, the session-log encoder, the verdict sinks,
    /// the races and key-file handling moved out of the CLI (24.7 % → under 15 %).
    static let ceiling = 0.15

    @Test("no nonisolated(unsafe) in Sources/ or Tests/ (Fuzz/ alone may: libFuzzer's C entry point)")
    func noNonisolatedUnsafe() throws {
        let needle = "nonisolated" + "(unsafe)"
        for file in try Self.swiftFiles("Sources") + Self.swiftFiles("Tests") where file.path != Self.itself {
            for line in Self.codeLines(file.lines) where line.text.contains(needle) {
                Issue.record("\(file.path):\(line.number): \(needle); use a Mutex, an actor or a Sendable value")
            }
        }
    }

    @Test("each @unchecked Sendable holds a C handle and gives its reason in one line above it")
    func uncheckedSendable() throws {
        let needle = "@unchecked " + "Sendable"
        var seen = 0
        for file in try Self.swiftFiles("Sources") + Self.swiftFiles("Tests") where file.path != Self.itself {
            for line in Self.codeLines(file.lines) where line.text.contains(needle) {
                seen += 1
                let above = file.lines[line.number - 2].trimmingCharacters(in: .whitespaces)
                let reason = "/// " + needle + ": "
                #expect(
                    above.hasPrefix(reason) && above.count > reason.count + 10,
                    "\(file.path):\(line.number): say why on the line above, as \"\(reason)<the C handle and why it is safe>\"")
                // The declaration's stored properties, up to its closing brace.
                let indent = line.text.prefix { $0 == " " }
                let body = file.lines[line.number...].prefix { !$0.hasPrefix(indent + "}") }
                let handle = body.contains { property in
                    let text = property.trimmingCharacters(in: .whitespaces)
                    return (text.contains("let ") || text.contains("var "))
                        && (text.contains(": OpaquePointer") || text.contains(": Unsafe"))
                }
                #expect(
                    handle, "\(file.path):\(line.number): no C handle (OpaquePointer, Unsafe…Pointer) in it: make it Sendable (a Mutex)")
            }
        }
        #expect(seen > 0, "no \(needle) found at all: is the package at \(packageRoot)?")
    }

    @Test("every libpq call is in one file (TagFixPostgres/Postgres.swift), as every SQLite call is in SQLite.swift")
    func libpqInOneFile() throws {
        var seen = 0
        for file in try Self.swiftFiles("Sources") + Self.swiftFiles("Tests") + Self.swiftFiles("Benchmarks") where file.path != Self.itself
        {
            for line in Self.codeLines(file.lines) where line.text.range(of: #"\bPQ[a-z]+\("#, options: .regularExpression) != nil {
                seen += 1
                #expect(
                    file.path == "Sources/TagFixPostgres/Postgres.swift",
                    "\(file.path):\(line.number): a libpq call outside Postgres.swift: go through PostgresConnection")
            }
        }
        #expect(seen > 10, "no libpq call found at all: is the package at \(packageRoot)?")
    }

    @Test("every libssl call is in one file (TagFixTLS/TLS.swift): TLS is one layer the server's transport calls")
    func libsslInOneFile() throws {
        var seen = 0
        for file in try Self.swiftFiles("Sources") + Self.swiftFiles("Tests") + Self.swiftFiles("Benchmarks") where file.path != Self.itself
        {
            for line in Self.codeLines(file.lines)
            where line.text.range(of: #"\b(SSL_[A-Za-z_0-9]+|TLS_(server|client)_method|cssl_[a-z_0-9]+)\("#, options: .regularExpression)
                != nil
            {
                seen += 1
                #expect(
                    file.path == "Sources/TagFixTLS/TLS.swift",
                    "\(file.path):\(line.number): a libssl call outside TLS.swift: go through TLSServerContext / TLSSession")
            }
        }
        #expect(seen > 10, "no libssl call found at all: is the package at \(packageRoot)?")
    }

    // MARK: - Every POSIX call through the system layer

    /// The raw calls TagFixSystem wraps: a pipe made by hand (`pipe`, `pipe2`, the C shims'
    /// `cprocess_pipe` and `cpty_pipe_cloexec`), an eventfd, and an EINTR retry written out.
    /// `FileDescriptor.pipe()` and `EventFD()` are the layer's own.
    static func rawSystemCalls(in line: Substring) -> [String] {
        var found: [String] = []
        for call in ["pipe(", "pipe2(", "eventfd(", "pipe_cloexec("] {
            var rest = line[...]
            while let range = rest.range(of: call) {
                let before = line[..<range.lowerBound]
                let previous = before.last
                let partOfName = previous.map { $0.isLetter || $0.isNumber } ?? false
                if !partOfName && !before.hasSuffix("FileDescriptor.") { found.append(call) }
                rest = rest[range.upperBound...]
            }
        }
        if line.contains("EINTR") { found.append("EINTR") }
        return found
    }

    /// The files outside TagFixSystem that still make these calls, and how many lines of them
    /// each has: what is left to move onto the layer (issue 30). A file leaves the list when it
    /// is moved; none joins it.
    static let rawSystemCallsLeft: [String: Int] = [
        "Benchmarks/TagFixBench/ServeFanOut.swift": 2
    ]

    @Test("pipes, eventfds and EINTR retries only in TagFixSystem (FileDescriptor.pipe, EventFD, valueOrErrno), but for the files listed")
    func systemCallsThroughTheLayer() throws {
        var counts: [String: Int] = [:]
        var scanned = 0
        for file in try Self.swiftFiles("Sources") + Self.swiftFiles("Tests") + Self.swiftFiles("Benchmarks")
        where file.path != Self.itself && !file.path.hasPrefix("Sources/TagFixSystem/") && !file.path.hasPrefix("Tests/TagFixSystemTests/")
        {
            scanned += 1
            for line in Self.codeLines(file.lines) {
                let calls = Self.rawSystemCalls(in: line.text)
                guard !calls.isEmpty else { continue }
                counts[file.path, default: 0] += 1
                if Self.rawSystemCallsLeft[file.path] == nil {
                    Issue.record(
                        "\(file.path):\(line.number): \(calls.joined(separator: ", ")) by hand: use TagFixSystem (FileDescriptor.pipe(), EventFD, valueOrErrno)"
                    )
                }
            }
        }
        #expect(scanned > 100, "the package's sources were not found below \(packageRoot)")
        for (path, expected) in Self.rawSystemCallsLeft {
            let actual = counts[path, default: 0]
            #expect(
                actual == expected,
                "\(path) has \(actual) lines of raw pipes, eventfds or EINTR retries, the list says \(expected): \(actual < expected ? "take the ones moved onto TagFixSystem off rawSystemCallsLeft" : "use TagFixSystem for the new ones")"
            )
        }
    }

    /// POSIX calls the system layer wraps, by their C names (the ones no Swift method here shares:
    /// `read`, `write`, `open`, `close`, `send`, `connect` and `access` are also methods' names,
    /// and are left to review). A call is the name after anything but a letter, digit, `_` or `.`.
    static let posixCalls = [
        "chmod", "fchmod", "umask", "isatty", "tcgetattr", "tcsetattr", "strerror", "kill", "socket", "bind", "getsockname",
        "setsockopt", "recv", "fcntl", "unlink", "mkfifo", "fsync", "ftruncate", "lseek", "dup2", "stat", "lstat",
        "waitpid", "inet_addr", "inet_pton", "Glibc\\.[a-z_]+",
    ]

    static func posixCalls(in line: Substring, _ pattern: NSRegularExpression) -> [String] {
        let text = String(line)
        guard !text.contains("func ") else { return [] }
        return pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    /// Tests and benchmarks that still make these calls themselves, and on how many lines: what is
    /// left to move onto TagFixSystem. A file leaves the list when it is moved; none joins it.
    static let posixCallsLeft: [String: Int] = [
        "Benchmarks/TagFixBench/PhoneTap.swift": 6, "Benchmarks/TagFixBench/ServeFanOut.swift": 6,
        "Tests/TagFixServeTests/EventServerTests.swift": 10, "Tests/TagFixCLITests/ServePhoneTests.swift": 8,
        "Tests/TagFixCLITests/SignalTests.swift": 7, "Tests/TagFixCLITests/ServePhoneBrowserTests.swift": 6,
        "Tests/TagFixDevicesTests/OutputFileTests.swift": 5,
        "Tests/TagFixCLITests/SunCommandTests.swift": 5, "Tests/TagFixCLITests/SUNEndToEndTests.swift": 4,
        "Tests/TagFixCLITests/FileSafetyTests.swift": 4, "Tests/TagFixEmulatorsTests/PN532LineTests.swift": 2,
        "Tests/TagFixDevicesTests/StopSignalsTests.swift": 2, "Tests/TagFixCLITests/ServeEndToEndTests.swift": 2,
        "Tests/TagFixCLITests/SUNVerifyTests.swift": 2, "Tests/TagFixCLITests/DoctorTests.swift": 2,
        "Tests/TagFixDevicesTests/ChildProcessTests.swift": 1, "Tests/TagFixCLITests/WrongClockTests.swift": 1,
        "Tests/TagFixCLITests/RegistryOnPostgresTests.swift": 1, "Tests/TagFixCLITests/GPSDLeftoversTests.swift": 1,
        "Tests/TagFixCLITests/FieldEndToEndTests.swift": 1,
    ]

    @Test(
        "every POSIX call through the system layer: chmod, kill, socket, stat, strerror and the like only in TagFixSystem; in Sources/ nowhere else, in Tests/ and Benchmarks/ only in the files listed"
    )
    func posixThroughTheLayer() throws {
        let pattern = try NSRegularExpression(pattern: #"(?<![A-Za-z0-9_.])("# + Self.posixCalls.joined(separator: "|") + #")\("#)
        var counts: [String: Int] = [:]
        var files = 0
        for file in try Self.everySwiftFile()
        where file.path != Self.itself && !file.path.hasPrefix("Sources/TagFixSystem/") && !file.path.hasPrefix("Tests/TagFixSystemTests/")
        {
            files += 1
            for line in Self.codeLines(file.lines) {
                let calls = Self.posixCalls(in: line.text, pattern)
                guard !calls.isEmpty else { continue }
                counts[file.path, default: 0] += 1
                if file.path.hasPrefix("Sources/") || Self.posixCallsLeft[file.path] == nil {
                    Issue.record(
                        "\(file.path):\(line.number): \(calls.joined(separator: ", ")) by hand: call it through TagFixSystem (FileDescriptor, FileSystem, Stat, Processes, Errno, Loopback)"
                    )
                }
            }
        }
        #expect(files > 100, "the package's Swift files were not found below \(packageRoot)")
        for (path, expected) in Self.posixCallsLeft {
            #expect(
                counts[path, default: 0] == expected,
                "\(path) makes POSIX calls by hand on \(counts[path, default: 0]) lines, the list says \(expected): \(counts[path, default: 0] < expected ? "lower the count" : "use TagFixSystem for the new ones")"
            )
        }
    }

    /// The Swift files of the product, the tests and the benchmarks.
    static func everySwiftFile() throws -> [(path: String, lines: [Substring])] {
        try Self.swiftFiles("Sources") + Self.swiftFiles("Tests") + Self.swiftFiles("Benchmarks")
    }

    @Test(
        "one spawn path: no Foundation Process in Sources/, Tests/ or Benchmarks/ (ChildProcess, and TagFixTesting's TestProgram over it)")
    func oneSpawnPath() throws {
        // Foundation's Process hands the child the spawning thread's signal mask: spawned from a
        // cooperative or dispatch thread, the child kept SIGTERM blocked, and one `swift test`
        // hung for ever waiting for it. ChildProcess starts every child with a clean mask.
        // `Process()`, `Process.run(…)`, `Foundation.Process`: the type's own name, not one that
        // ends in it (ChildProcess, a test's TagfixProcess).
        let pattern = try NSRegularExpression(
            pattern: #"(?<![A-Za-z0-9_])(Process\s*\(\s*\)|Process\.(run|launchedProcess)\(|Foundation\.Process\b)"#)
        var files = 0
        for file in try Self.everySwiftFile() where file.path != Self.itself {
            files += 1
            for line in Self.codeLines(file.lines) {
                let text = String(line.text)
                if let found = pattern.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
                    let range = Range(found.range, in: text)
                {
                    Issue.record(
                        "\(file.path):\(line.number): Foundation's \(text[range]); start programs with ChildProcess (TagFixDevices), in tests with TestProgram or RunningProgram (TagFixTesting)"
                    )
                }
            }
        }
        #expect(files > 100, "the package's Swift files were not found below \(packageRoot)")
    }

    @Test(
        "the built tagfix is found in one place: a build folder (.build/debug, .build/release) is named only in TagFixTesting's TestBinaries"
    )
    func oneBinaryLocator() throws {
        let locator = "Sources/TagFixTesting/TestBinaries.swift"
        let needles = [".build/" + "debug", ".build/" + "release"]
        var named = false
        for file in try Self.everySwiftFile() where file.path != Self.itself {
            for line in Self.codeLines(file.lines) {
                for needle in needles where line.text.contains(needle) {
                    if file.path == locator {
                        named = true
                    } else if !line.text.contains("run: " + needle) {  // a command a message tells a person to run
                        Issue.record("\(file.path):\(line.number): \(needle); use TestBinaries.tagfix (TagFixTesting)")
                    }
                }
            }
        }
        #expect(named, "\(locator) no longer names the build folder: is the package at \(packageRoot)?")
    }

    @Test("no deinit in Sources/ stops or kills a process: a daemon or a child is stopped by its scope (`with…{ }`) or an awaited stop()")
    func noStoppingDeinit() throws {
        let stops = ["stop(", "kill(", "terminate(", "waitUntilExit(", ".signal("]
        var seen = 0
        for file in try Self.swiftFiles("Sources") {
            let code = Self.codeLines(file.lines)
            for (index, line) in code.enumerated() where line.text.trimmingCharacters(in: .whitespaces).hasPrefix("deinit") {
                seen += 1
                // The body: up to the line that closes it, at the deinit's indentation (or the line itself).
                let indent = line.text.prefix { $0 == " " }
                var body = [line]
                if !line.text.hasSuffix("}") {
                    body += code[(index + 1)...].prefix { !$0.text.hasPrefix(indent + "}") }
                }
                guard let call = stops.first(where: { stop in body.contains { $0.text.contains(stop) } }) else { continue }
                Issue.record(
                    "\(file.path):\(line.number): deinit calls \(call)…): stop in a scope (`with…{ }`) or an awaited stop(), not in deinit")
            }
        }
        #expect(seen > 0, "no deinit found at all: is the package at \(packageRoot)?")
    }

    @Test("the private daemons (TagFixDaemons) block no thread: no Thread.sleep, usleep, semaphore or waitUntilExit; they await")
    func daemonsAwait() throws {
        let blocking = ["Thread.sleep", "usleep(", "DispatchSemaphore", ".wait()", "waitUntilExit("]
        let files = try Self.swiftFiles("Sources/TagFixDaemons")
        #expect(!files.isEmpty, "Sources/TagFixDaemons was not found below \(packageRoot)")
        for file in files {
            for line in Self.codeLines(file.lines) {
                for call in blocking where line.text.contains(call) {
                    Issue.record("\(file.path):\(line.number): \(call) blocks a thread: sleep on the clock, await the exit")
                }
            }
        }
    }

    /// A blocking wait: a sleep, a semaphore, a wait for a child's exit. An awaited `wait()`
    /// (`await stop.wait()`, `async let first = stop.wait()`) blocks nothing.
    static func blockingWaits(in line: Substring) -> [String] {
        let calls = [
            "Thread.sleep", "usleep(", "nanosleep(", "DispatchSemaphore", "DispatchGroup", ".wait(timeout",
            "waitUntilExit(", "waitid(", "waitpid(", ".wait()",
        ]
        let awaited = line.contains("await ") || line.contains("async let ")
        return calls.filter { line.contains($0) && !($0 == ".wait()" && awaited) }
    }

    /// Where a blocking wait may be: the device-thread type (`DeviceThread.pause`, `.Wakeup`,
    /// `.blockAtExit`), the system layer's reaping `waitpid(WNOHANG)` (which never waits), and the
    /// tests of the layer below (TagFixSystemTests, which cannot see DeviceThread).
    static func mayBlock(_ path: String, _ call: String) -> Bool {
        path == "Sources/TagFixDevices/DeviceThread.swift" || path.hasPrefix("Tests/TagFixSystemTests/")
            || (path == "Sources/TagFixSystem/Processes.swift" && call == "waitpid(")
    }

    @Test(
        "blocking waits (sleeps, semaphores, waits for an exit) only inside the device-thread type: nowhere else in Sources/ or Tests/"
    )
    func blockingWaitsOnlyInDeviceThread() throws {
        var files = 0
        var inDeviceThread = 0
        for file in try Self.swiftFiles("Sources") + Self.swiftFiles("Tests") where file.path != Self.itself {
            files += 1
            for line in Self.codeLines(file.lines) {
                for call in Self.blockingWaits(in: line.text) {
                    if Self.mayBlock(file.path, call) {
                        inDeviceThread += 1
                    } else {
                        Issue.record(
                            "\(file.path):\(line.number): \(call) blocks its thread: await (a clock's sleep, an exit, a OneShot), or on a thread that may block use DeviceThread (pause, Wakeup)"
                        )
                    }
                }
            }
        }
        #expect(files > 100, "the package's sources were not found below \(packageRoot)")
        #expect(inDeviceThread >= 3, "DeviceThread.swift no longer holds the blocking waits: is the package at \(packageRoot)?")
    }

    /// Files that still make a thread by hand, and how many lines of them do (moved, the count
    /// falls; the test fails until the list says so).
    static let threadsMadeByHandLeft: [String: Int] = [:]

    @Test(
        "one thread type: a thread is made only by SystemThread (TagFixSystem), under DeviceThread (start, detach, offThePool) and IOLoop; no Foundation Thread, no pthread_create elsewhere"
    )
    func oneThreadType() throws {
        let pattern = try NSRegularExpression(
            pattern: #"(?<![A-Za-z0-9_])(Thread\s*(\{|\(block)|Thread\.detachNewThread|pthread_create\s*\()"#)
        var counts: [String: Int] = [:]
        var files = 0
        for file in try Self.everySwiftFile()
        where file.path != Self.itself && file.path != "Sources/TagFixSystem/SystemThread.swift"
            && !file.path.hasPrefix("Tests/TagFixSystemTests/")
        {
            files += 1
            for line in Self.codeLines(file.lines) {
                let text = String(line.text)
                guard pattern.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil else { continue }
                counts[file.path, default: 0] += 1
                if Self.threadsMadeByHandLeft[file.path] == nil {
                    Issue.record(
                        "\(file.path):\(line.number): a thread made by hand: use DeviceThread (start for a device, detach for a worker, offThePool for one blocking call)"
                    )
                }
            }
        }
        #expect(files > 100, "the package's Swift files were not found below \(packageRoot)")
        for (path, expected) in Self.threadsMadeByHandLeft {
            #expect(
                counts[path, default: 0] == expected,
                "\(path) makes threads by hand on \(counts[path, default: 0]) lines, the list says \(expected)")
        }
    }

    // MARK: - One I/O loop

    /// Files outside IOLoop that still wait in poll(2) themselves, and on how many lines: what is
    /// left to move onto IOLoop or a device thread (issue 30). A file leaves the list when it is
    /// moved; none joins it.
    static let pollLoopsLeft: [String: Int] = [:]

    @Test("one I/O loop: poll(2), ppoll, select and epoll_wait in Sources/ only inside IOLoop (TagFixSystem), but for the files listed")
    func oneIOLoop() throws {
        // A C call passes its descriptors (`&fds`) or none (`nil`); a Swift method of the same
        // name (`ServeProtocol.poll(…)`, a reader's `poll(device, …)`) does not.
        let pattern = try NSRegularExpression(
            pattern: #"(?<![A-Za-z0-9_.])((p?poll|select)\s*\(\s*(&|nil\b)|epoll_wait\s*\()"#)
        var counts: [String: Int] = [:]
        var files = 0
        for file in try Self.swiftFiles("Sources") where file.path != "Sources/TagFixSystem/IOLoop.swift" {
            files += 1
            for line in Self.codeLines(file.lines) {
                let text = String(line.text)
                guard pattern.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil else { continue }
                counts[file.path, default: 0] += 1
                if Self.pollLoopsLeft[file.path] == nil {
                    Issue.record(
                        "\(file.path):\(line.number): a poll loop of its own: register the descriptor with an IOLoop (TagFixSystem)")
                }
            }
        }
        #expect(files > 100, "the product's sources were not found below \(packageRoot)")
        for (path, expected) in Self.pollLoopsLeft {
            #expect(
                counts[path, default: 0] == expected,
                "\(path) waits in poll(2) on \(counts[path, default: 0]) lines, the list says \(expected): take the ones moved onto IOLoop off pollLoopsLeft"
            )
        }
    }

    @Test(
        "the emulators are IOLoop clients: no thread, poll, wake-up, sleep or semaphore of their own in Sources/TagFixEmulators, and no stop that blocks"
    )
    func emulatorsOnTheLoop() throws {
        let own = [
            "DeviceThread", "offThePool", "SystemThread", "Thread.sleep", "usleep(", "nanosleep(", "DispatchSemaphore", "DispatchQueue",
            ".wait()", "poll(", "EventFD", "pipe(", "waitUntilReached",
        ]
        let files = try Self.swiftFiles("Sources/TagFixEmulators")
        #expect(files.count > 10, "Sources/TagFixEmulators was not found below \(packageRoot)")
        for file in files {
            for line in Self.codeLines(file.lines) {
                // An awaited wait (`await stop.wait()`: the signals' AsyncStream) blocks nothing.
                for needle in own where line.text.contains(needle) && !(needle == ".wait()" && line.text.contains("await ")) {
                    Issue.record(
                        "\(file.path):\(line.number): \(needle) in an emulator: register its descriptors and timers with its IOLoop (ServedLine), and stop it from the loop"
                    )
                }
            }
        }
    }

    @Test("PrivateMosquitto, the tests' broker, is not in the product (Sources/): it lives in the test-only TagFixTestDaemons")
    func noTestBrokerInProduct() throws {
        let needle = "Private" + "Mosquitto"
        for file in try Self.swiftFiles("Sources") {
            for line in Self.codeLines(file.lines) where line.text.contains(needle) {
                Issue.record("\(file.path):\(line.number): \(needle) is test-only: use it from Tests/TagFixTestDaemons")
            }
        }
        let home = try Self.swiftFiles("Tests/TagFixTestDaemons")
        #expect(home.contains { file in Self.codeLines(file.lines).contains { $0.text.contains("class " + needle) } })
    }
}
