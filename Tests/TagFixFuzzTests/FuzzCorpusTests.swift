import Foundation
import TagFixCore
import TagFixFuzzTargets
import TagFixTesting
import Testing

private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// Every file under Fuzz/corpus/TARGET and Fuzz/regressions/TARGET (inputs that once crashed or
/// gave a wrong answer), for each target.
private func inputs(_ folder: String) -> [(FuzzTarget, String)] {
    FuzzTarget.allCases.flatMap { target in
        let directory = "\(root)/Fuzz/\(folder)/\(target.rawValue)"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.sorted().map { (target, "\(directory)/\($0)") }
    }
}

/// Shared reference files each target takes as they are.
private func shared() -> [(FuzzTarget, String)] {
    let dumps =
        TestData.files(in: "nfc/flipper", suffix: ".nfc") + TestData.files(in: "nfc/tags", suffix: ".json")
        + TestData.files(in: "nfc/proxmark", suffix: ".json")
    return dumps.map { (.dump, $0) } + dumps.filter { $0.hasSuffix(".json") }.map { (.json, $0) }
        + TestData.files(in: "nmea/gpsd", suffix: ".chk").map { (.gpsdReport, $0) }
}

@Suite("Fuzz targets over their seeds, their regressions and random bytes")
struct FuzzCorpusTests {
    @Test("every target has a seed corpus or reference data to start from", arguments: FuzzTarget.allCases)
    func seeded(_ target: FuzzTarget) {
        let own = inputs("corpus").contains { $0.0 == target }
        let fromSharedData: Set<FuzzTarget> = [
            .ndefMessage, .type2Memory, .type4File, .mifareClassic, .dump, .json, .gpsdReport, .urlLocation,
        ]
        #expect(own || fromSharedData.contains(target), "\(target.rawValue) has no seeds")
    }

    @Test("seed inputs hold every invariant", arguments: inputs("corpus"))
    func corpus(_ target: FuzzTarget, _ path: String) throws {
        try target.run(Array(try #require(FileManager.default.contents(atPath: path))))
    }

    @Test("inputs that once broke a parser hold every invariant now", arguments: inputs("regressions"))
    func regressions(_ target: FuzzTarget, _ path: String) throws {
        try target.run(Array(try #require(FileManager.default.contents(atPath: path))))
    }

    @Test(
        "reference files hold every invariant", .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)),
        arguments: shared())
    func referenceFiles(_ target: FuzzTarget, _ path: String) throws {
        try target.run(Array(try #require(FileManager.default.contents(atPath: path))))
    }

    @Test("2 000 seeded random inputs per target, mutations of its seeds included, break nothing", arguments: FuzzTarget.allCases)
    func random(_ target: FuzzTarget) throws {
        var generator = SeededGenerator(seed: 0x7A6F_6E65 ^ UInt64(target.rawValue.utf8.count))
        let seeds = inputs("corpus").filter { $0.0 == target }.compactMap { FileManager.default.contents(atPath: $0.1).map(Array.init) }
        for round in 0..<2_000 {
            var bytes: [UInt8]
            if let seed = seeds.isEmpty ? nil : seeds[round % seeds.count], round % 2 == 0 {
                bytes = seed
                for _ in 0..<(1 + Int(generator.next() % 4)) where !bytes.isEmpty {
                    bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
                }
            } else {
                bytes = (0..<Int(generator.next() % 300)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            }
            try target.run(bytes)
        }
    }
}
