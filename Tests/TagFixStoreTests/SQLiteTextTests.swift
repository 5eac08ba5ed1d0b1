import Foundation
import Testing

@testable import TagFixStore

/// A text parameter is bound from the string's own UTF-8 with its length (no C string copy):
/// every kind of text comes back byte for byte, the empty one (whose buffer may have no
/// address) and one with a NUL inside included.
@Suite struct SQLiteTextTests {
    @Test(
        arguments: [
            "", "T1", "04DE5F1EACC040", "Zürich Hbf ✓ 東京 🚉", String(repeating: "x", count: 1000), "nul\u{0}inside",
            "a\"quote' and \\ backslash",
        ])
    func textRoundTrips(_ text: String) throws {
        let path = NSTemporaryDirectory() + "text-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try SQLiteConnection(path: path, mode: .create)
        try db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        try db.query("INSERT INTO t (k, v) VALUES (?1, ?2)", [.integer(1), .text(text)])
        var read: [String?] = []
        var lengths: [Int64] = []
        try db.query("SELECT v, length(CAST(v AS BLOB)) FROM t WHERE v = ?1", [.text(text)]) { row in
            read.append(row.text(0))
            lengths.append(row.integer(1))
        }
        #expect(read == [text])
        #expect(lengths == [Int64(text.utf8.count)])
    }
}
