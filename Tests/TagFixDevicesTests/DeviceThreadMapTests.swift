import Glibc
import Synchronization
import Testing

@testable import TagFixDevices

/// The threads the first `count` of `stream`'s elements name (each a `pthread_self()`).
private func threadIDs(of stream: AsyncStream<UInt>, count: Int) async -> Set<UInt> {
    var threads: Set<UInt> = []
    var seen = 0
    for await thread in stream {
        threads.insert(thread)
        seen += 1
        if seen == count { break }
    }
    return threads
}

/// `DeviceThread.map` and `startMap`: a large group's work shared by two threads, its results in
/// order. A map that waited for a worker that never begins would hang here (the time limit
/// reports it; a thread blocked on a semaphore is not ended by it: the CI job's timeout is).
@Suite(.timeLimit(.minutes(1))) struct DeviceThreadMapTests {
    @Test(
        "the results in the items' order, below the threshold, at it and above it, odd and even counts; below it, the caller's thread alone",
        arguments: [0, 1, 63, 64, 65, 201])
    func inOrder(count: Int) {
        let items = Array(0..<count)
        let threads = Mutex<Set<UInt>>([])
        let values = DeviceThread.map(items, splitFrom: 64) { item -> String in
            threads.withLock { _ = $0.insert(UInt(pthread_self())) }
            return "item \(item)"
        }
        #expect(values == items.map { "item \($0)" })
        // Below the threshold, the caller's thread alone. Above it, which threads took items
        // depends on when the worker is scheduled (the caller may take them all): `startsAtOnce`
        // and `workerBusy` show the sharing.
        if count < 64 { #expect(threads.withLock { $0 } == (count == 0 ? [] : [UInt(pthread_self())])) }
    }

    @Test("a started map runs on the worker while the caller does something else; finish gives its values in order")
    func startsAtOnce() async {
        let (ran, done) = AsyncStream<UInt>.makeStream()
        let mapping = DeviceThread.startMap(Array(0..<100)) { item -> Int in
            done.yield(UInt(pthread_self()))
            return item * 2
        }
        // The caller has not asked for the values: every item is the worker's.
        #expect(await threadIDs(of: ran, count: 100).count == 1)
        #expect(mapping.finish() == (0..<100).map { $0 * 2 })
    }

    @Test("a caller never waits for a worker that has not begun: with the worker held by another map, it does every item itself")
    func workerBusy() {
        let (entered, gate) = (DeviceThread.Wakeup(), DeviceThread.Wakeup())
        let holding = DeviceThread.startMap([0]) { item -> Int in
            entered.signal()
            gate.block()
            return item
        }
        entered.block()
        let caller = UInt(pthread_self())
        let threads = Mutex<Set<UInt>>([])
        let values = DeviceThread.startMap(Array(0..<50)) { item -> Int in
            threads.withLock { _ = $0.insert(UInt(pthread_self())) }
            return item + 1
        }.finish()
        #expect(values == Array(1...50))
        #expect(threads.withLock { $0 } == [caller])
        gate.signal()
        #expect(holding.finish() == [0])
    }

    @Test("a map inside a map's transform finishes (the inner one's worker may be the outer one's thread)")
    func nested() {
        let values = DeviceThread.map(Array(0..<100), splitFrom: 2) { outer in
            DeviceThread.map(Array(0..<64), splitFrom: 2) { inner in outer * 100 + inner }.reduce(0, +)
        }
        #expect(values == (0..<100).map { outer in (0..<64).map { outer * 100 + $0 }.reduce(0, +) })
    }
}

/// `DeviceThread.feed`: items handed over in batches as they come, mapped beside the caller.
@Suite(.timeLimit(.minutes(1))) struct DeviceThreadFeedTests {
    @Test(
        "the values in the items' order, however the items came: one at a time, in batches, all at once, none",
        arguments: [[], [1], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [3, 7, 2, 40, 1, 1, 9], [200], [7, 0, 7]])
    func inOrder(batches: [Int]) {
        let feed = DeviceThread.feed(splitFrom: 4) { (item: Int) -> String in "item \(item)" }
        var next = 0
        for size in batches {
            feed.add(next..<(next + size))
            next += size
        }
        #expect(feed.finish() == (0..<next).map { "item \($0)" })
    }

    @Test("below the threshold the caller's thread makes every value at finish(); from it, the worker begins before finish() is called")
    func worker() async {
        let caller = UInt(pthread_self())
        let threads = Mutex<Set<UInt>>([])
        let few = DeviceThread.feed(splitFrom: 8) { (item: Int) -> Int in
            threads.withLock { _ = $0.insert(UInt(pthread_self())) }
            return item
        }
        few.add(0..<7)
        #expect(few.finish() == Array(0..<7))
        #expect(threads.withLock { $0 } == [caller])

        let (made, madeContinuation) = AsyncStream<UInt>.makeStream()
        // The worker's feed as on a machine of several cores, whatever this one has.
        let many = DeviceThread.Feed(threshold: 8) { (item: Int) -> Int in
            madeContinuation.yield(UInt(pthread_self()))
            return item * 3
        }
        many.add(0..<5)
        many.add(5..<10)
        // finish() is not called yet: whatever is made is the worker's.
        let made10 = await threadIDs(of: made, count: 10)
        #expect(made10.count == 1)
        #expect(!made10.contains(caller))
        #expect(await offThePool { many.finish() } == (0..<10).map { $0 * 3 })
    }

    @Test("finish() waits for the value the worker is making, and makes the rest itself")
    func finishWaitsForWorker() {
        let (entered, gate) = (DeviceThread.Wakeup(), DeviceThread.Wakeup())
        let caller = UInt(pthread_self())
        let threads = Mutex<[Int: UInt]>([:])
        let feed = DeviceThread.Feed(threshold: 1) { (item: Int) -> Int in
            threads.withLock { $0[item] = UInt(pthread_self()) }
            if item == 0 {
                entered.signal()
                gate.block()
            }
            // The last item is the caller's: only then may the worker end item 0.
            if item == 19 { gate.signal() }
            return item + 100
        }
        feed.add([0])
        entered.block()
        feed.add(1..<20)
        // The worker holds item 0 until the caller has made 1 to 19; then the caller waits for 0.
        #expect(feed.finish() == Array(100..<120))
        let byThread = threads.withLock { $0 }
        #expect(byThread[0] != caller)
        #expect((1..<20).allSatisfy { byThread[$0] == caller })
    }
}

/// `DeviceThread.Worker`: jobs in order on one waiting thread, none lost as it ends and starts.
/// A lost job would leave a wait unanswered: the suite's limit ends the test instead of the run.
@Suite(.timeLimit(.minutes(1))) struct DeviceThreadWorkerTests {
    @Test("jobs handed from four threads all run, once each, each thread's in the order handed, while the worker ends and starts again")
    func noneLost() async {
        // An idle of a microsecond: the worker ends between nearly every job, so a job handed as
        // its wait runs out (the race `work` settles) comes up again and again.
        let worker = DeviceThread.Worker(name: "tagfix-test", idle: .microseconds(1))
        let perThread = 500
        let (ran, done) = AsyncStream<(sender: Int, index: Int)>.makeStream()
        for sender in 0..<4 {
            DeviceThread.detach(name: "tagfix-test-\(sender)") {
                for index in 0..<perThread {
                    worker.run { done.yield((sender, index)) }
                    if index % 10 == 0 { sched_yield() }
                }
            }
        }
        var seen = Array(repeating: [Int](), count: 4)
        var count = 0
        for await job in ran {
            seen[job.sender].append(job.index)
            count += 1
            if count == 4 * perThread { break }
        }
        #expect(seen == Array(repeating: Array(0..<perThread), count: 4))
    }

    @Test("jobs handed while the worker is there run on its one thread")
    func oneThread() async {
        let worker = DeviceThread.Worker(name: "tagfix-test", idle: .seconds(60))
        let (ran, done) = AsyncStream<UInt>.makeStream()
        for _ in 0..<100 { worker.run { done.yield(UInt(pthread_self())) } }
        var threads: [UInt] = []
        for await thread in ran {
            threads.append(thread)
            if threads.count == 100 { break }
        }
        #expect(Set(threads).count == 1)
    }
}
