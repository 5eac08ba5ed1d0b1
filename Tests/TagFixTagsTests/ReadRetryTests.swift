import TagFixCore
import TagFixEmulators
import TagFixNDEF
import TagFixTags
import Testing

/// A transport whose exchanges fail on the air at the given indexes (counted over the whole run).
private struct FlakyTransport: TagTransport {
    var base: DirectTransport
    var failing: Set<Int>
    var sent = 0

    mutating func transceive(_ command: [UInt8]) throws(TagError) -> [UInt8] {
        sent += 1
        if failing.contains(sent) { throw TagError(.tagLost, detail: "NFC_ERFTRANS") }
        return try base.transceive(command)
    }
}

@Suite("Read retries")
struct ReadRetryTests {
    static let url = "https://tags.example.org/t/R1?lat=53.545&lon=9.966&r=25" + String(repeating: "x", count: 60)

    func run(failing: Set<Int>, reselect: Bool = true) -> (Result<NDEFRead, NDEFReadError>, Int, Int) {
        let tag = try! EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [.uri(Self.url)]).encoded())
        var transport = FlakyTransport(base: DirectTransport(tag), failing: failing)
        var reselects = 0
        let (outcome, attempts) = ReadRetry.run(
            reselect: {
                reselects += 1
                return reselect
            }
        ) {
            do throws(NDEFReadError) {
                return .success(try Type2NDEFReader.read(&transport, readSignature: false) { () throws(TagError) in })
            } catch {
                return .failure(error)
            }
        }
        return (outcome, attempts, reselects)
    }

    @Test("a read whose exchange fails on the air is read on the next attempt, the tag selected again first")
    func retried() throws {
        // Exchange 2 is the read of the message's pages after the first FAST_READ.
        let (outcome, attempts, reselects) = run(failing: [2])
        let read = try outcome.get()
        #expect(try NDEFMessage(bytes: try #require(read.message)).firstURL == Self.url)
        #expect(attempts == 2 && reselects == 1)
    }

    @Test("a clean read takes one attempt")
    func clean() throws {
        let (outcome, attempts, reselects) = run(failing: [])
        _ = try outcome.get()
        #expect(attempts == 1 && reselects == 0)
    }

    @Test("at most three attempts, then the read fails")
    func gives_up() {
        let (outcome, attempts, _) = run(failing: [2, 4, 6, 8, 10])
        #expect((try? outcome.get()) == nil)
        #expect(attempts == ReadRetry.attempts)
    }

    @Test("a tag that no longer answers its selection is not tried again")
    func gone() {
        let (outcome, attempts, reselects) = run(failing: [2], reselect: false)
        #expect((try? outcome.get()) == nil)
        #expect(attempts == 1 && reselects == 1)
    }

    @Test("a broken NDEF structure or a failed reader is not retried")
    func notRetryable() {
        #expect(!ReadRetry.isRetryable(.malformed("bad TLV")))
        #expect(!ReadRetry.isRetryable(.incompleteRead(after: 1, TagError(.readerFailed))))
        #expect(ReadRetry.isRetryable(.incompleteRead(after: 1, TagError(.timeout))))
    }
}
