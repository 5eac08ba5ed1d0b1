import Foundation
import Testing

@testable import TagFixCore

/// A large index table is advised for transparent huge pages before its first write
/// (`PlacementIndex.table(count:)`). Checked where the kernel says so: the mapping that holds the
/// table, in /proc/self/smaps, must be THP-eligible. Skipped where THP is off or unknown.
@Suite("In-memory registry: huge pages for a large index table")
struct HugePageTableTests {
    static let mode: String? = {
        guard let text = try? String(contentsOfFile: "/sys/kernel/mm/transparent_hugepage/enabled", encoding: .utf8) else { return nil }
        // "always [madvise] never": the bracketed word is the mode.
        guard let open = text.firstIndex(of: "["), let close = text.firstIndex(of: "]"), open < close else { return nil }
        return String(text[text.index(after: open)..<close])
    }()

    /// The `THPeligible` line of the mapping in /proc/self/smaps that holds `address`.
    static func eligibility(of address: UInt) throws -> Int? {
        // Read to the end: /proc files report no size, and `String(contentsOfFile:)` stops after
        // its first read (some 4 KiB of a file of many).
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/self/smaps"))
        defer { try? handle.close() }
        let smaps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        var inside = false
        for line in smaps.split(separator: "\n") {
            if let dash = line.firstIndex(of: "-"), let space = line.firstIndex(of: " "), dash < space,
                let low = UInt(line[..<dash], radix: 16), let high = UInt(line[line.index(after: dash)..<space], radix: 16)
            {
                inside = low <= address && address < high
            } else if inside, line.hasPrefix("THPeligible:") {
                return Int(line.dropFirst("THPeligible:".count).trimmingCharacters(in: .whitespaces))
            }
        }
        return nil
    }

    @Test(
        "a table of 4 MiB or more lies in a THP-eligible mapping",
        .enabled(if: mode == "madvise" || mode == "always", "transparent huge pages are off or unknown on this kernel"))
    func largeTableIsEligible() throws {
        // 50 000 entries: a 131 072-slot table of 8 MiB.
        var index = PlacementIndex()
        for k in 0..<50_000 {
            let region = try CircularRegion(center: Coordinate(validLatitude: 1, longitude: 2), radius: 10, identifier: "T\(k)")
            index.insert(RegistryEntry(id: "T\(k)", uid: nil, region: region, name: nil), at: k)
        }
        let (base, bytes) = index.withTableMemory { (UInt(bitPattern: $0.baseAddress), $0.count) }
        #expect(bytes >= PlacementIndex.hugePageThreshold)
        // The middle of the table: whole pages, inside the advised range.
        #expect(try Self.eligibility(of: base + UInt(bytes / 2)) == 1)
        #expect(index.count == 50_000)
    }

    /// A lookup into a large table reads one cache line: the slot's last 48 bytes (everything but
    /// the name) must lie in one line for every slot, which they do when the table's elements
    /// start 48 bytes into a line (the slot is 64 bytes, the name its first 16). That holds when
    /// glibc maps the table on its own (16 bytes into a page, then the array's 32-byte header),
    /// which it always does above its largest mmap threshold, 32 MiB on 64-bit; below it, once a
    /// process has freed large blocks, the threshold rises and a table may come from the heap at
    /// any 16-byte offset (seen in the suite beside other tests: a 4 MiB table 16 bytes into a
    /// line). So the test takes a table above 32 MiB, as a million tags' 128 MiB is.
    @Test("a large table's slots keep what a lookup reads in one cache line")
    func largeTableSlotsFitALine() throws {
        #expect(MemoryLayout<PlacementIndex.Slot>.stride == 64)
        #expect(MemoryLayout<PlacementIndex.Slot>.offset(of: \.region) == 16)
        var index = PlacementIndex()
        index.reserve(600_000)
        let (base, bytes) = index.withTableMemory { (UInt(bitPattern: $0.baseAddress), $0.count) }
        #expect(bytes > 32 << 20)
        #expect((base + 16) % 64 == 0, "the table's elements start \(base % 64) bytes into a cache line")
    }
}
