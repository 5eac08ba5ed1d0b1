import Foundation
import TagFixCore
import TagFixDevices
import Testing

private func scratch(_ name: String) throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-log-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder.appendingPathComponent(name).path
}

/// Records as verify writes them: `time` first, then `verdict`.
private let records = (0..<5).map {
    #"{"time":"2026-05-14T08:00:0\#($0).000Z","verdict":"confirmed","n":\#($0),"message":"± \#($0) m — ✓"}"#
}

private func bytes(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }

/// Files a --log could be pointed at by mistake, none of them a session log.
private let notLogs: [String: [UInt8]] = [
    // A SQLite registry: a header, binary pages, a newline 4095 bytes before the end.
    "sqlite": Array("SQLite format 3\u{0}".utf8) + [UInt8](repeating: 0, count: 84) + Array("CREATE TABLE tag(id TEXT)\n".utf8)
        + (0..<4095).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) | 0x01 }.map { $0 == 0x0A ? 0x0B : $0 },
    "csv registry": Array("id,uid,lat,lon,radius_m,name\nT01,04A224B2C56480,53.545,9.966,25,\"Main gate\"\n".utf8),
    "csv without a last newline": Array("id,lat,lon,radius_m\nT01,53.545,9.966,25".utf8),
    "json registry": Array(#"[{"id":"T01","lat":53.545,"lon":9.966,"radius_m":25}]"#.utf8) + [0x0A],
    "json object, not a verdict": Array(#"{"n":1,"verdict":"confirmed"}"#.utf8) + [0x0A] + Array(records[0].utf8) + [0x0A],
    "text": Array("hello\nworld\n".utf8),
    "one long line without an end": [UInt8](repeating: UInt8(ascii: "x"), count: 70_000),
]

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

    @Test("a file that is not a session log is refused, and left byte for byte as it was", arguments: notLogs.keys.sorted())
    func refused(_ kind: String) throws {
        let path = try scratch("not-a-log")
        let original = try #require(notLogs[kind])
        try Data(original).write(to: URL(fileURLWithPath: path))
        #expect(
            performing: { try SessionLog(path: path) },
            throws: { error in
                let refusal = error as? SessionLogError
                return refusal?.refusal != nil && refusal?.description.contains("not a TagFix session log") == true
            })
        #expect(bytes(path) == original)
    }

    @Test("a symlink to a file that is not a log is refused; a symlink to a log is appended to and stays a link")
    func symlinks() throws {
        let registry = try scratch("registry.csv")
        let original = try #require(notLogs["csv registry"])
        try Data(original).write(to: URL(fileURLWithPath: registry))
        let wrong = registry + ".jsonl"
        try FileManager.default.createSymbolicLink(atPath: wrong, withDestinationPath: "registry.csv")
        #expect(throws: SessionLogError.self) { try SessionLog(path: wrong) }
        #expect(bytes(registry) == original)

        let log = (registry as NSString).deletingLastPathComponent + "/today.jsonl"
        try Data((records[0] + "\n").utf8).write(to: URL(fileURLWithPath: log))
        let link = log + ".link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "today.jsonl")
        let appended = try SessionLog(path: link)
        try appended.append(records[1])
        appended.close()
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "today.jsonl")
        #expect(try SessionLog.read(path: log).records.count == 2)
    }

    @Test("a new file, an empty one, and a lone first record torn while written are logs")
    func logsToAppendTo() throws {
        let new = try scratch("new.jsonl")
        try SessionLog(path: new).append(records[0])
        #expect(try SessionLog.read(path: new).records.count == 1)

        let empty = try scratch("empty.jsonl")
        try Data().write(to: URL(fileURLWithPath: empty))
        try SessionLog(path: empty).append(records[0])
        #expect(try SessionLog.read(path: empty).records.count == 1)

        let torn = try scratch("torn.jsonl")
        try Data(records[0].utf8.prefix(20)).write(to: URL(fileURLWithPath: torn))
        let log = try SessionLog(path: torn)
        #expect(log.repaired?.contains("20 bytes") == true)
        try log.append(records[1])
        #expect(try SessionLog.read(path: torn).records.map { $0.value["n"]?.double } == [1])
    }

    @Test("a log whose last line runs on longer than any record is not cut: it is refused as it is")
    func overlongTail() throws {
        let path = try scratch("long-tail.jsonl")
        let original = Array((records[0] + "\n").utf8) + [UInt8](repeating: UInt8(ascii: "y"), count: 70_000)
        try Data(original).write(to: URL(fileURLWithPath: path))
        #expect(throws: SessionLogError.self) { try SessionLog(path: path) }
        #expect(bytes(path) == original)
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
