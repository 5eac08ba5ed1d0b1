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
@Suite struct DeviceThreadWorkerTests {
    @Test("jobs handed from four threads all run, once each, each thread's in the order handed, while the worker ends and starts again")
    func noneLost() {
        // An idle of a microsecond: the worker ends between nearly every job, so a job handed as
        // its wait runs out (the race `work` settles) comes up again and again.
        let worker = DeviceThread.Worker(name: "tagfix-test", idle: .microseconds(1))
        let ran = Mutex<[[Int]]>(Array(repeating: [], count: 4))
        let all = DeviceThread.Wakeup()
        let perThread = 500
        let started = DeviceThread.Wakeup()
        for sender in 0..<4 {
            DeviceThread.detach(name: "tagfix-test-\(sender)") {
                for index in 0..<perThread {
                    worker.run {
                        let count = ran.withLock { ran in
                            ran[sender].append(index)
                            return ran.reduce(0) { $0 + $1.count }
                        }
                        if count == 4 * perThread { all.signal() }
                    }
                    if index % 10 == 0 { sched_yield() }
                }
                started.signal()
            }
        }
        for _ in 0..<4 { started.block() }
        all.block()
        #expect(ran.withLock { $0 } == Array(repeating: Array(0..<perThread), count: 4))
    }

    @Test("jobs handed while the worker is there run on its one thread")
    func oneThread() {
        let worker = DeviceThread.Worker(name: "tagfix-test", idle: .seconds(60))
        let threads = Mutex<[UInt]>([])
        let done = DeviceThread.Wakeup()
        for index in 0..<100 {
            worker.run {
                threads.withLock { $0.append(UInt(pthread_self())) }
                if index == 99 { done.signal() }
            }
        }
        done.block()
        let seen = threads.withLock { $0 }
        #expect(seen.count == 100)
        #expect(Set(seen).count == 1)
    }
}
