import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixGPSD
import TagFixNDEF
import TagFixReaders
import Testing

/// The opt-in hardware suite, for labs with real readers and receivers (hardware.md#hardware-in-the-loop-tests):
///
///     TAGFIX_HIL_READER=pn53x_usb TAGFIX_HIL_TAGS=~/reference-tags TAGFIX_HIL_GPS=gpsd://localhost:2947 \
///         swift test --filter HIL
///
/// TAGFIX_HIL_TAGS is a folder of dumps of the lab's reference tags (Flipper .nfc, Proxmark3
/// JSON, nfc-mfultralight binaries, TagFix JSON). Tap each tag once, in any order: each must read
/// exactly the NDEF its dump holds. The suite prints a table of read times and bytes moved per tag
/// (and writes it to TAGFIX_HIL_REPORT when set). CI runs it against the PN532 emulator.
enum HIL {
    static let environment = ProcessInfo.processInfo.environment
    static var reader: String? { environment["TAGFIX_HIL_READER"].flatMap { $0.isEmpty ? nil : $0 } }
    static var tags: String? { environment["TAGFIX_HIL_TAGS"].flatMap { $0.isEmpty ? nil : $0 } }
    static var gps: String? { environment["TAGFIX_HIL_GPS"].flatMap { $0.isEmpty ? nil : $0 } }
    static var timeout: Duration { .seconds(Double(environment["TAGFIX_HIL_TIMEOUT"] ?? "") ?? 300) }

    static func report(_ text: String) {
        print(text)
        if let path = environment["TAGFIX_HIL_REPORT"] {
            let handle =
                FileHandle(forWritingAtPath: path)
                ?? { () -> FileHandle? in
                    _ = FileManager.default.createFile(atPath: path, contents: nil)
                    return FileHandle(forWritingAtPath: path)
                }()
            handle?.seekToEndOfFile()
            handle?.write(Data((text + "\n").utf8))
            try? handle?.close()
        }
    }
}

/// The reference tags not read yet.
final class Left: Sendable {
    let set: Mutex<Set<String>>
    init(_ tags: Set<String>) { set = Mutex(tags) }
}

// Serialized: the one physical reader and GPS receiver the environment names serve every test here;
// two tests at once would claim the same device.
@Suite("HIL: hardware in the loop (opt-in: TAGFIX_HIL_READER, TAGFIX_HIL_TAGS, TAGFIX_HIL_GPS)", .serialized)
struct HILTests {
    @Test(
        "HIL reader: every reference tag reads exactly its dump's NDEF",
        .enabled(if: HIL.reader != nil && HIL.tags != nil, "set TAGFIX_HIL_READER and TAGFIX_HIL_TAGS"))
    func referenceTags() async throws {
        let folder = try #require(HIL.tags)
        // Reference tags by UID; cloned tags (and edited dumps) may share one, so a UID may name
        // several, told apart by their NDEF.
        var expected: [TagUID: [(name: String, ndef: [UInt8]?)]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder).sorted() {
            guard let data = FileManager.default.contents(atPath: (folder as NSString).appendingPathComponent(name)),
                let image = try? TagDump.load(Array(data)), let uid = image.uid
            else { continue }
            expected[uid, default: []].append((name, image.readNDEF().messageBytes))
        }
        try #require(!expected.isEmpty, "no tag dumps in \(folder)")
        let total = expected.values.map(\.count).reduce(0, +)
        let connstring = try #require(HIL.reader)
        HIL.report(
            "## HIL: \(total) reference tags on \(connstring)\n\n| tag | file | NDEF bytes | read time | bytes moved |\n| --- | --- | --- | --- | --- |"
        )
        let clock = MonotonicClock()
        // TAGFIX_HIL_READER is a reader address, checked and opened as --reader is.
        let reader = try ReaderFactory.standard.reader(try ReaderFactory.standard.address(connstring), clock: clock)
        let want = expected
        let left = Left(Set(want.flatMap { uid, tags in tags.map { "\(uid.hex) \($0.name)" } }))
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(for: HIL.timeout) }
            group.addTask {
                for await event in reader.events() {
                    let remaining = left.set.withLock { $0 }
                    switch event {
                    case .ready(let description): print("HIL: \(description): tap each reference tag once (\(remaining.count) to go)")
                    case .tagPresent(let scan):
                        guard let candidates = want[scan.uid] else {
                            print("HIL: \(scan.uid.hex) is not a reference tag; skipped")
                            continue
                        }
                        guard let reference = candidates.first(where: { $0.ndef == scan.ndefMessage }) else {
                            Issue.record(
                                "\(scan.uid.hex): the NDEF read matches none of its dumps (\(candidates.map(\.name).joined(separator: ", ")))"
                            )
                            continue
                        }
                        if left.set.withLock({ $0.remove("\(scan.uid.hex) \(reference.name)") }) != nil {
                            let time = scan.readDuration.map { Coordinate.format($0.seconds * 1000, 1) + " ms" } ?? "?"
                            HIL.report(
                                "| \(scan.uid.hex) | \(reference.name) | \(reference.ndef?.count ?? 0) | \(time) | \(scan.bytesMoved ?? 0) |"
                            )
                        }
                        if left.set.withLock({ $0.isEmpty }) { return }
                    case .failed(let error): print("HIL: \(error)")
                    case .disconnected(let error): print("HIL: reader disconnected: \(error)")
                    case .tagRemoved: break
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
        let remaining = left.set.withLock { $0 }
        #expect(remaining.isEmpty, "not read within \(HIL.timeout): \(remaining.sorted())")
    }

    @Test("HIL GPS: gpsd delivers a plausible 3D fix", .enabled(if: HIL.gps != nil, "set TAGFIX_HIL_GPS"))
    func gpsFix() async throws {
        let endpoint = try GPSDEndpoint(try #require(HIL.gps))
        let clock = MonotonicClock()
        let start = clock.now
        let source = GPSDFixSource(endpoint: endpoint, clock: clock)
        var fix: Fix?
        await withTaskGroup(of: Fix?.self) { group in
            group.addTask {
                for await event in source.events() {
                    if case .fix(let candidate) = event, candidate.mode == .threeD, candidate.hasPosition { return candidate }
                }
                return nil
            }
            group.addTask {
                try? await clock.sleep(for: HIL.timeout)
                return nil
            }
            fix = await group.next() ?? nil
            group.cancelAll()
        }
        let found = try #require(fix, "no 3D fix within \(HIL.timeout)")
        #expect(found.horizontalAccuracy.map { $0 > 0 && $0 < 100 } == true, "accuracy \(String(describing: found.horizontalAccuracy))")
        #expect(abs(found.time.duration(to: clock.now).seconds) < 5, "the receiver's time is off by \(found.time.duration(to: clock.now))")
        HIL.report(
            "\n## HIL: GPS \(endpoint)\n\nfirst 3D fix after \(Coordinate.format(start.duration(to: clock.now).seconds, 1)) s, ±\(Coordinate.format(found.horizontalAccuracy ?? 0, 1)) m, \(found.satellitesUsed.map(String.init) ?? "?") satellites, from \(found.device ?? "?")"
        )
    }
}
