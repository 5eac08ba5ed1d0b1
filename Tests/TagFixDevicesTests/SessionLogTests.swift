import Foundation
import TagFixCore
import TagFixDevices
import Testing

private func scratch(_ name: String) throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-log-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder.appendingPathComponent(name).path
}

private let records = (0..<5).map { #"{"n":\#($0),"verdict":"confirmed","message":"± \#($0) m — ✓"}"# }

@Suite("The session log (JSON Lines, fsync per verdict)")
struct SessionLogTests {
    @Test("records appended are read back in order, across reopenings")
    func appendAndRead() throws {
        let path = try scratch("session.jsonl")
        let log = try SessionLog(path: path)
        for record in records.prefix(3) { try log.append(record) }
        log.close()
        let again = try SessionLog(path: path)
        #expect(again.repaired == nil)
        for record in records.dropFirst(3) { try again.append(record) }
        again.close()
        let contents = try SessionLog.read(path: path)
        #expect(contents.records.map { $0.value["n"]?.double } == [0, 1, 2, 3, 4])
        #expect(contents.records.map(\.line) == [1, 2, 3, 4, 5])
        #expect(contents.tornLastLine == nil)
    }

    /// Every way a write can be cut short: the log ends at each byte inside its last record.
    static let cuts = Array(1..<records[4].utf8.count)

    @Test("a last line torn at any byte is skipped on reading, and cut off when the log is reopened", arguments: cuts)
    func tornLastLine(_ cut: Int) throws {
        let path = try scratch("torn.jsonl")
        let whole = records.joined(separator: "\n") + "\n"
        let bytes = Array(whole.utf8)
        let torn = Array(bytes.prefix(bytes.count - 1 - (records[4].utf8.count - cut)))
        try Data(torn).write(to: URL(fileURLWithPath: path))
        let read = try SessionLog.read(path: path)
        #expect(read.records.count == 4)
        #expect(read.tornLastLine == 5)

        let log = try SessionLog(path: path)
        #expect(log.repaired?.contains("torn last line") == true)
        try log.append(#"{"n":9}"#)
        log.close()
        let repaired = try SessionLog.read(path: path)
        #expect(repaired.records.map { $0.value["n"]?.double } == [0, 1, 2, 3, 9])
        #expect(repaired.tornLastLine == nil)
    }

    @Test("a damaged line in the middle is an error naming its line, not silently dropped")
    func damagedMiddle() throws {
        let text = records[0] + "\n{\"n\": 1, broken\n" + records[2] + "\n"
        #expect(performing: { try SessionLog.parse(Array(text.utf8)) }, throws: { ($0 as? DataFileError)?.line == 2 })
        #expect(performing: { try SessionLog.parse(Array("[1,2]\n".utf8)) }, throws: { ($0 as? DataFileError)?.line == 1 })
    }

    @Test("a log that cannot be written says why and what to do")
    func unwritable() throws {
        #expect(
            performing: { try SessionLog(path: "/nonexistent-folder/session.jsonl") },
            throws: { error in
                (error as? SessionLogError)?.description.contains("create the folder first") == true
            })
    }
}
