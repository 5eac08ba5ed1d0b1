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
