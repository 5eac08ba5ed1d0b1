import Foundation
import Synchronization
import TagFixDevices
import TagFixTesting
import Testing

/// TagFixTesting's spawn path for tests, on programs every Debian has.
@Suite("TestProgram and RunningProgram: the tests' one way to start a program")
struct TestProgramTests {
    @Test("run: the exit status, both outputs apart, the input's bytes, the environment laid over this process's")
    func runToTheEnd() async throws {
        let result = try await TestProgram.run(
            "/bin/sh", ["-c", #"cat; echo "$TAGFIX_PROBE" >&2; exit 3"#], environment: ["TAGFIX_PROBE": "laid over"],
            input: .bytes(Array("in\n".utf8)))
        #expect(result.termination == .exited(3))
        #expect(result.status == 3 && !result.signalled)
        #expect(result.out == ["in"])
        #expect(result.err == "laid over\n")
        // More than a pipe holds, both ways: neither side stalls the other.
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        let echoed = try await TestProgram.run("/bin/cat", input: .bytes(big))
        #expect(echoed.standardOutput == big)
        #expect(try await TestProgram.run("/bin/cat", input: .pipe).output.isEmpty, "an input nobody writes to ends at once")
    }

    @Test("standard error into standard output, a name removed from the environment, /dev/null and a descriptor")
    func destinations() async throws {
        setenv("TAGFIX_PROBE_REMOVED", "here", 1)
        defer { unsetenv("TAGFIX_PROBE_REMOVED") }
        let merged = try await TestProgram.run(
            "/bin/sh", ["-c", #"echo "out ${TAGFIX_PROBE_REMOVED:-gone}"; echo err >&2"#], removing: ["TAGFIX_PROBE_REMOVED"],
            standardError: .standardOutput)
        #expect(merged.output == "out gone\nerr\n")
        let discarded = try await TestProgram.run("/bin/echo", ["nothing"], standardOutput: .discard)
        #expect(discarded.output.isEmpty && discarded.status == 0)
        let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
        let failed = try await TestProgram.run("/bin/echo", ["x"], standardOutput: .descriptor(full.fileDescriptor))
        try full.close()
        #expect(failed.status != 0, "echo wrote to /dev/full")
        await #expect(throws: ChildProcessError.self) { try await TestProgram.run("/nonexistent/program") }
    }

    @Test("a running program dropped without stop: its piped input is closed, so a program reading it to the end ends")
    func droppedClosesInput() async throws {
        var program: RunningProgram? = try RunningProgram("/bin/cat", input: .pipe)
        let child = try #require(program?.child)
        try program?.write(Array("kept\n".utf8))
        #expect(await RunningProgram.poll(upTo: .seconds(10)) { program?.stdout == "kept\n" })
        program = nil
        // Without the close, cat waits on its input for ever (and this process keeps the pipe).
        let ended = await RunningProgram.poll(upTo: .seconds(30)) { !child.isRunning }
        if !ended { await child.stop(grace: .zero, signal: SIGKILL) }
        #expect(ended && child.termination == .exited(0), "\(String(describing: child.termination))")
    }

    @Test("a running program started from the cooperative pool ends on SIGTERM (no signal blocked in the child)")
    func runningStopsOnSIGTERM() async throws {
        let program = try RunningProgram("/bin/sh", ["-c", "echo ready; exec sleep 60"])
        #expect(await program.waitFor("ready"))
        program.signal(SIGTERM)
        #expect(await program.exit(upTo: .seconds(10)) == .signalled(SIGTERM))
        #expect(program.signalled)
        #expect(await RunningProgram.poll(upTo: .seconds(10)) { program.outputClosed })
    }

    @Test("withRunning stops the program however its body ends; input written as it runs")
    func scoped() async throws {
        struct Thrown: Error {}
        let held = Mutex<RunningProgram?>(nil)
        await #expect(throws: Thrown.self) {
            try await TestProgram.withRunning("/bin/sleep", ["60"]) { program in
                held.withLock { $0 = program }
                throw Thrown()
            }
        }
        let stopped = try #require(held.withLock { $0 })
        #expect(stopped.termination == .signalled(SIGTERM))
        let lines = try await TestProgram.withRunning("/bin/cat", input: .pipe) { program in
            try program.write(Array("one\n".utf8))
            #expect(await program.waitFor("one\n"))
            program.closeInput()
            #expect(await program.exit(upTo: .seconds(10)) == .exited(0))
            return program.stdoutLines
        }
        #expect(lines == ["one"])
    }

    @Test("TestBinaries: the package root holds Package.swift, and tagfix is in the build folder")
    func binaries() {
        #expect(FileManager.default.fileExists(atPath: TestBinaries.packageRoot + "/Package.swift"))
        #expect(TestBinaries.tagfix == TestBinaries.buildDirectory + "/tagfix")
    }
}
