import Glibc
import Synchronization
import TagFixDevices
import Testing

/// `DeviceThread.map`: a large group's work on two threads, its results in order.
@Suite struct DeviceThreadMapTests {
    @Test(
        "the results in the items' order, below the threshold, at it and above it, odd and even counts; above it, two threads",
        arguments: [0, 1, 63, 64, 65, 201])
    func inOrder(count: Int) {
        let items = Array(0..<count)
        let threads = Mutex<Set<UInt>>([])
        let values = DeviceThread.map(items, splitFrom: 64) { item -> String in
            threads.withLock { _ = $0.insert(UInt(pthread_self())) }
            return "item \(item)"
        }
        #expect(values == items.map { "item \($0)" })
        #expect(threads.withLock { $0.count } == (count >= 64 ? 2 : min(count, 1)))
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
