import TagFixCore
import TagFixDevices
import TagFixServe
import Testing

/// A reader that says its events and ends.
private struct ListReader: TagReader {
    let readerID: String
    let list: [ReaderEvent]

    func events() -> AsyncStream<ReaderEvent> {
        AsyncStream { continuation in
            for event in list { continuation.yield(event) }
            continuation.finish()
        }
    }
}

@Suite("several readers, one verifier: MergedReader, and each reader's state in ServeHub")
struct MergedReaderTests {
    /// Reader `index`'s events: ready, `count` tags gone (its own UID), unplugged.
    static func events(_ index: Int, count: Int) throws -> [ReaderEvent] {
        let uid = try TagUID(bytes: [0x04, 0xA2, 0x24, 0xB2, 0xC5, 0x64, UInt8(index)])
        return [.ready(description: "r\(index) ready")]
            + (0..<count).map { .tagRemoved(uid, at: Timestamp(nanosecondsSinceEpoch: Int64($0))) }
            + [.disconnected(ReaderError(code: .notFound, message: "r\(index) unplugged"))]
    }

    @Test(
        "every event of every reader arrives, each reader's in its order, and the merged stream ends when all have", arguments: [1, 2, 5])
    func merged(readers: Int) async throws {
        let lists = try (0..<readers).map { try Self.events($0, count: 50 * ($0 + 1)) }
        let merged = MergedReader(lists.indices.map { ListReader(readerID: "r\($0)", list: lists[$0]) })
        #expect(merged.readerID == (0..<readers).map { "r\($0)" }.joined(separator: ","))
        var received: [ReaderEvent] = []
        for await event in merged.events() { received.append(event) }
        #expect(received.count == lists.map(\.count).reduce(0, +))
        for list in lists {
            let mine = received.filter { list.contains($0) }
            #expect(mine == list, "a reader's events keep their order")
        }
    }

    @Test("ServeHub.watching: with two readers each one's ready and unplugged reach its own state; with one, the reader is used as it is")
    func states() async throws {
        let addresses = ["pn532_uart:/dev/a", "pn532_uart:/dev/b"]
        let hub = try ServeHub(ServeConfiguration(release: "t"), readers: addresses, gps: nil, placements: [], log: { _ in })
        let a = ListReader(readerID: addresses[0], list: [.ready(description: "A ready")])
        let b = ListReader(
            readerID: addresses[1], list: [.ready(description: "B ready"), .disconnected(ReaderError(code: .notFound, message: "B gone"))])
        let merged = MergedReader([hub.watching(a, address: addresses[0]), hub.watching(b, address: addresses[1])])
        for await event in merged.events() { hub.observe(.reader(event), now: nil) }
        let states = hub.snapshot.readers
        #expect(states.map(\.path) == addresses)
        #expect(states.map(\.status) == [.attached, .removed])
        #expect(states.map(\.message) == ["A ready", "B gone"])

        let single = try ServeHub(ServeConfiguration(release: "t"), readers: [addresses[0]], gps: nil, placements: [], log: { _ in })
        #expect(single.watching(a, address: addresses[0]) is ListReader)
    }
}
