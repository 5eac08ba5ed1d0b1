import TagFixCore
import Testing

@Suite("Registry files written and read back (export → import)")
struct RegistryFileWriteTests {
    static func entries() throws -> [RegistryEntry] {
        let region = { (lat: Double, lon: Double, r: Double, id: String) throws -> CircularRegion in
            try CircularRegion(center: Coordinate(latitude: lat, longitude: lon), radius: r, identifier: id)
        }
        return [
            RegistryEntry(
                id: "T01", uid: try TagUID(hex: "04A224B2C56480"), region: try region(53.545_012_345_678, 9.966_000_1, 12.5, "T01"),
                name: "Gate, \"north\"",
                enrolment: Enrolment(at: Timestamp(nanosecondsSinceEpoch: 1_778_745_600_123_456_789), by: "ana", accuracy: 2.25, fixes: 28),
                notes: "line one\nline two"),
            RegistryEntry(id: "tiny", uid: nil, region: try region(0.000_01, -0.000_000_3, 0.5, "tiny"), name: nil),
            RegistryEntry(
                id: " spaced ", uid: nil, region: try region(-89.999_999, 179.999_999, 500, " spaced "), name: "#not a comment",
                enrolment: Enrolment(at: Timestamp(nanosecondsSinceEpoch: 0))),
        ]
    }

    @Test("every field survives, to the last bit of each number", arguments: [RegistryFile.Format.csv, .json])
    func roundTrip(_ format: RegistryFile.Format) throws {
        let original = try Self.entries()
        let text = RegistryFile.write(original, format: format)
        #expect(RegistryFile.Format.detect(text) == format)
        let back = try RegistryFile.parse(text)
        #expect(back.entries == original, "\(text)")
    }

    /// Numbers and the digits they must be written with: the shortest that read back bit for bit,
    /// without an exponent.
    static let awkwardNumbers: [(Double, String)] = [
        (17.1, "17.1"), (0.1 + 0.2, "0.30000000000000004"), (1.2345678901234568e-05, "0.000012345678901234568"),
        (3.0000000000000004e-07, "0.00000030000000000000004"), (2.5e-10, "0.00000000025"), (1e16, "10000000000000000"),
    ]

    @Test("numbers are written in their shortest round-trip digits, without an exponent", arguments: awkwardNumbers)
    func shortestDigits(_ accuracy: Double, _ digits: String) throws {
        let entry = RegistryEntry(
            id: "A", uid: nil, region: try CircularRegion(center: Coordinate(latitude: 1, longitude: -0.12), radius: 5, identifier: "A"),
            name: nil, enrolment: Enrolment(at: Timestamp(nanosecondsSinceEpoch: 0), accuracy: accuracy))
        let csv = RegistryFile.write([entry], format: .csv)
        #expect(csv.hasSuffix(",\(digits),,\n"), "\(csv)")
        let json = RegistryFile.write([entry], format: .json)
        #expect(json.contains(#""accuracy_m": \#(digits)}"#), "\(json)")
        for text in [csv, json] { #expect(try RegistryFile.parse(text).entries.first?.enrolment?.accuracy == accuracy, "\(text)") }
    }

    @Test("an empty registry writes a file that reads back empty", arguments: [RegistryFile.Format.csv, .json])
    func empty(_ format: RegistryFile.Format) throws {
        #expect(try RegistryFile.parse(RegistryFile.write([], format: format)).count == 0)
    }

    /// A file past the row count where parsing reserves room for the rest (4,096), read row by
    /// row: every entry as written, and a bad row's error still names its line.
    @Test("a large CSV file reads back entry for entry, and a bad row far in names its line")
    func largeCSV() throws {
        let entries = try (0..<10_000).map { index in
            let region = try CircularRegion(
                center: Coordinate(latitude: 53.5 + Double(index) * 1e-6, longitude: 9.9), radius: 25, identifier: "T\(index)")
            return RegistryEntry(id: "T\(index)", uid: nil, region: region, name: index % 3 == 0 ? "Name \(index)" : nil)
        }
        let text = RegistryFile.write(entries, format: .csv)
        #expect(try RegistryFile.parse(text).entries == entries)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines[9_000] = "T-bad,53.5"
        #expect(
            performing: { try RegistryFile.parse(lines.joined(separator: "\n")) },
            throws: { ($0 as? DataFileError)?.line == 9_001 })
    }

    @Test(
        "enrolment columns are checked",
        arguments: [
            ("id,lat,lon,radius_m,enrolled_at\nA,1,2,3,yesterday\n", "ISO 8601"),
            ("id,lat,lon,radius_m,enrolled_by\nA,1,2,3,ana\n", "need enrolled_at"),
            ("id,lat,lon,radius_m,enrolled_at,fixes\nA,1,2,3,2026-01-01T00:00:00Z,2.5\n", "whole number"),
            ("id,lat,lon,radius_m,enrolled_at,accuracy_m\nA,1,2,3,2026-01-01T00:00:00Z,-1\n", "zero or more"),
        ])
    func badEnrolment(_ text: String, _ fragment: String) {
        #expect(
            performing: { try RegistryFile.parse(text) },
            throws: { error in
                (error as? DataFileError)?.message.contains(fragment) == true && (error as? DataFileError)?.line == 2
            })
    }
}

@Suite("CSV exports are formula-safe (OWASP CSV injection)")
struct FormulaSafeCSVTests {
    /// Values a spreadsheet would run as a formula, with the apostrophes that must survive too.
    static let dangerous = [
        "=HYPERLINK(\"http://x\",\"y\")", "+1", "-2+3", "@SUM(A1)", "\tindented", "\rreturn", "\r\nline", "'=already", "''+two", "=",
    ]
    static let harmless = ["Gate", "'quoted'", "a=b", "", "it's", "'", "  -spaced", "#hash", "-"]

    @Test("a cell starting with = + - @ tab or CR gets one apostrophe more; reading takes it off again", arguments: dangerous)
    func escaped(_ value: String) {
        let safe = CSV.formulaSafe(value)
        #expect(safe == "'" + value)
        #expect(CSV.formulaUnescaped(safe) == value)
    }

    @Test("other cells are written as they are", arguments: harmless.filter { $0 != "-" })
    func untouched(_ value: String) {
        #expect(CSV.formulaSafe(value) == value)
        #expect(CSV.formulaUnescaped(value) == value)
    }

    @Test("registry export → import gives back every text value; the numbers stay numbers (-0.12 is a longitude)")
    func registryRoundTrip() throws {
        let values = Self.dangerous + Self.harmless.filter { !$0.isEmpty }
        let entries = try values.enumerated().map { index, value in
            RegistryEntry(
                id: "\(value)#\(index)", uid: nil,
                region: try CircularRegion(
                    center: Coordinate(latitude: -33.5 - Double(index) / 100, longitude: -0.12), radius: 5, identifier: "\(value)#\(index)"),
                name: value, enrolment: Enrolment(at: Timestamp(nanosecondsSinceEpoch: 0), by: value, accuracy: 1.5, fixes: 3),
                notes: value)
        }
        let text = RegistryFile.write(entries, format: .csv)
        let rows = try CSV.parse(text)
        let header = rows[0].fields
        for (row, entry) in zip(rows.dropFirst(), entries) {
            let cells = Dictionary(uniqueKeysWithValues: zip(header, row.fields))
            for column in ["id", "name", "enrolled_by", "notes"] {
                let cell = try #require(cells[column])
                #expect(
                    !(cell.unicodeScalars.first.map { CSV.formulaStarts.contains($0) } ?? false), "\(column) cell \(cell) starts a formula")
            }
            #expect(cells["lon"] == "-0.12")
            #expect(cells["lat"] == "\(entry.region.center.latitude)")
        }
        #expect(try RegistryFile.parse(text).entries == entries, "\(text)")
    }
}
