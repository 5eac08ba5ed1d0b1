import Foundation
import TagFixCore
import TagFixDevices
import TagFixTesting
import Testing

/// A scenario with many taps, each confirmed by its URL's location, so a run lasts long enough to
/// be killed in the middle.
private func longScenario(taps: Int) throws -> String {
    try temporaryFile("long.json", LongScenario.json(taps: taps))
}

@Suite("verify --log survives kill -9", .timeLimit(.minutes(2)))
struct SessionLogEndToEndTests {
    static let binary = TestBinaries.tagfix

    @Test(
        "every verdict shown before SIGKILL is in the log, and the log reads back",
        .enabled(if: FileManager.default.isExecutableFile(atPath: binary), "needs the built tagfix"),
        arguments: [1, 40, 400])
    func killNine(after shown: Int) async throws {
        let scenario = try longScenario(taps: 3000)
        let log = (scenario as NSString).deletingLastPathComponent + "/session.jsonl"
        // Standard output is a pipe this test reads itself, only as far as it needs.
        let pipe = Pipe()
        let process = try RunningProgram(
            Self.binary, ["verify", "--scenario", scenario, "--json", "--log", log],
            standardOutput: .descriptor(pipe.fileHandleForWriting.fileDescriptor), standardError: .discard)
        try pipe.fileHandleForWriting.close()

        let reader = pipe.fileHandleForReading
        let seen = await offThePool("read verdicts") { () -> [String] in
            var seen: [String] = []
            var buffer = Data()
            while seen.count < shown {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                buffer += chunk
                while let newline = buffer.firstIndex(of: 0x0A) {
                    seen.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer = Data(buffer[(newline + 1)...])
                }
            }
            return seen
        }
        // Killed while its output is still open, unread (the pipe is the test's, not the program's).
        await process.kill()
        withExtendedLifetime(pipe) {}
        #expect(process.signalled || process.status == 0)

        let contents = try SessionLog.read(path: log)
        let logged = contents.records.map { $0.value }
        #expect(logged.count >= seen.count, "a shown verdict is missing from the log")
        for (index, line) in seen.enumerated() where index < logged.count {
            #expect(try JSONValue.parse(line) == logged[index], "line \(index + 1) differs")
        }
        #expect(logged.allSatisfy { $0["verdict"]?.string == "confirmed" })
        if shown < 50 {
            // Unread output fills the pipe (64 KiB, under 100 verdicts), so the run was cut short.
            #expect(logged.count < 3000, "the run finished before it was killed: the test proved nothing")
        }
    }
}
