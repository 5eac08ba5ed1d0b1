import Foundation
import Glibc
import Synchronization
import TagFixSystem
import Testing

/// A clock that moves only when the test advances it: the loop reads it to decide which timers
/// are due, so a test drives timers without real time passing.
private final class TestClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    struct NoSleeping: Error {}

    private let current = Mutex(Instant(offset: .zero))

    var now: Instant { current.withLock { $0 } }
    var minimumResolution: Duration { .nanoseconds(1) }

    /// The loop never sleeps on its clock: it waits in epoll with a timeout worked out from it.
    func sleep(until deadline: Instant, tolerance: Duration?) async throws { throw NoSleeping() }

    func advance(by duration: Duration) { current.withLock { $0.offset += duration } }
}

/// Waits until the loop has run everything handed to it before (and, with it, every handler of
/// the epoll wait that woke it): what a test checks "nothing else happened" after.
private func barrier<C>(_ loop: IOLoop<C>) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        if !loop.execute({ continuation.resume() }) { continuation.resume() }
    }
}

/// The next `count` elements of a stream.
private func next<T>(_ count: Int, of iterator: inout AsyncStream<T>.Iterator) async -> [T] {
    var elements: [T] = []
    while elements.count < count, let element = await iterator.next() { elements.append(element) }
    return elements
}

/// Reads what a non-blocking pipe end holds now, as text.
private func drain(_ fd: FileDescriptor) -> String {
    var text = ""
    var bytes = [UInt8](repeating: 0, count: 4096)
    while let count = try? fd.read(into: &bytes), count > 0 { text += String(decoding: bytes[..<count], as: UTF8.self) }
    return text
}

private func write(_ text: String, to fd: FileDescriptor) throws {
    try fd.writeAll(Array(text.utf8))
}

/// What a handler saw: the thread it ran on, what was ready and what it read.
private struct Call: Sendable, Equatable {
    var onLoopThread: Bool
    var events: IOEvents
    var text: String
}

private final class Token: Sendable {}

@Suite("IOLoop: descriptors, timers and closures on one epoll thread", .timeLimit(.minutes(1)))
struct IOLoopTests {
    @Test("a pipe becoming readable calls its handler on the loop's thread, with what it is ready for")
    func readable() async throws {
        let loop = try IOLoop(name: "test readable")
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        try readEnd.setNonBlocking()
        let (calls, continuation) = AsyncStream<Call>.makeStream()
        let registration = try loop.register(readEnd, for: .readable) { events in
            continuation.yield(Call(onLoopThread: loop.inLoopThread, events: events, text: drain(readEnd)))
        }
        #expect(registration.descriptor == readEnd)
        #expect(!loop.inLoopThread)
        try write("hello", to: writeEnd)
        var iterator = calls.makeAsyncIterator()
        let first = await next(1, of: &iterator)
        #expect(first == [Call(onLoopThread: true, events: .readable, text: "hello")])

        // The writer gone: a hang-up (which a pipe reports without `.readable`), whatever the
        // interest.
        try writeEnd.close()
        let last = await next(1, of: &iterator)
        #expect(last == [Call(onLoopThread: true, events: .hangUp, text: "")])
        loop.deregister(registration)
        await loop.close()
        try readEnd.close()
    }

    @Test("write interest: called once the pipe has room, and interest can be changed")
    func writable() async throws {
        let loop = try IOLoop(name: "test writable")
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        try writeEnd.setNonBlocking()
        try readEnd.setNonBlocking()
        // Fill the pipe: no room to write.
        let block = [UInt8](repeating: 0x55, count: 4096)
        while (try? writeEnd.write(block[...])) != nil {}
        let (calls, continuation) = AsyncStream<IOEvents>.makeStream()
        let count = Mutex(0)
        let box = Mutex<IORegistration?>(nil)
        let registration = try loop.register(writeEnd, for: .writable) { events in
            count.withLock { $0 += 1 }
            continuation.yield(events)
            // Room: stop asking until there is something to write.
            if let registration = box.withLock({ $0 }) { try loop.modify(registration, interest: []) }
        }
        box.withLock { $0 = registration }
        await barrier(loop)
        #expect(count.withLock { $0 } == 0, "called while the pipe was full")

        _ = drain(readEnd)
        var iterator = calls.makeAsyncIterator()
        #expect(await next(1, of: &iterator) == [.writable])
        await barrier(loop)
        await barrier(loop)
        #expect(count.withLock { $0 } == 1, "called again after its interest was taken away")

        // Interest back: called again (the pipe has room).
        try loop.modify(registration, interest: .writable)
        #expect(await next(1, of: &iterator) == [.writable])
        loop.deregister(registration)
        await loop.close()
        try readEnd.close()
        try writeEnd.close()
    }

    @Test("deregistering stops the calls; the descriptor stays open; a second deregister does nothing")
    func deregister() async throws {
        let loop = try IOLoop(name: "test deregister")
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        try readEnd.setNonBlocking()
        let seen = Mutex<[String]>([])
        let (calls, continuation) = AsyncStream<String>.makeStream()
        let registration = try loop.register(readEnd, for: .readable) { _ in
            let text = drain(readEnd)
            seen.withLock { $0.append(text) }
            continuation.yield(text)
        }
        try write("a", to: writeEnd)
        var iterator = calls.makeAsyncIterator()
        #expect(await next(1, of: &iterator) == ["a"])

        loop.deregister(registration)
        await barrier(loop)
        try write("b", to: writeEnd)
        await barrier(loop)
        await barrier(loop)
        #expect(seen.withLock { $0 } == ["a"])
        #expect(drain(readEnd) == "b", "the descriptor was closed or read by the loop")
        loop.deregister(registration)
        #expect(throws: IOLoopError.notRegistered(readEnd)) { try loop.modify(registration, interest: .readable) }

        // Registered again: called again.
        _ = try loop.register(readEnd, for: .readable) { _ in continuation.yield(drain(readEnd)) }
        try write("c", to: writeEnd)
        #expect(await next(1, of: &iterator) == ["c"])
        await loop.close()
        try readEnd.close()
        try writeEnd.close()
    }

    @Test("many registrations: each pipe's handler is called for its own pipe")
    func many() async throws {
        let loop = try IOLoop(name: "test many")
        let pipes = try (0..<150).map { _ in try FileDescriptor.pipe() }
        let (calls, continuation) = AsyncStream<(Int, String)>.makeStream()
        var registrations: [IORegistration] = []
        for (index, pipe) in pipes.enumerated() {
            try pipe.readEnd.setNonBlocking()
            registrations.append(
                try loop.register(pipe.readEnd, for: .readable) { _ in continuation.yield((index, drain(pipe.readEnd))) })
        }
        #expect(Set(registrations).count == pipes.count)
        #expect(throws: IOLoopError.refused(pipes[0].readEnd, .fileExists)) {
            try loop.register(pipes[0].readEnd, for: .readable) { _ in }
        }
        for (index, pipe) in pipes.enumerated().reversed() { try write("pipe \(index)", to: pipe.writeEnd) }
        var iterator = calls.makeAsyncIterator()
        let seen = await next(pipes.count, of: &iterator)
        #expect(seen.count == pipes.count)
        for (index, text) in seen { #expect(text == "pipe \(index)") }
        #expect(Set(seen.map(\.0)) == Set(pipes.indices))
        for registration in registrations { loop.deregister(registration) }
        await loop.close()
        for pipe in pipes {
            try pipe.readEnd.close()
            try pipe.writeEnd.close()
        }
    }

    @Test("timers run in deadline order on the loop's thread when the test's clock passes them; a cancelled one never")
    func timers() async throws {
        let clock = TestClock()
        let loop = try IOLoop(name: "test timers", clock: clock)
        let start = clock.now
        let (fired, continuation) = AsyncStream<(String, Bool)>.makeStream()
        let log = Mutex<[String]>([])
        @discardableResult
        func timer(_ name: String, at seconds: Double) -> IOTimer {
            loop.schedule(at: start.advanced(by: .seconds(seconds))) {
                log.withLock { $0.append(name) }
                continuation.yield((name, loop.inLoopThread))
            }
        }
        timer("3 s", at: 3)
        timer("1 s", at: 1)
        timer("2 s", at: 2)
        timer("2 s, scheduled later", at: 2)
        let cancelled = timer("2.5 s, cancelled", at: 2.5)
        timer("10 s", at: 10)
        #expect(loop.cancel(cancelled))
        #expect(!loop.cancel(cancelled))

        await barrier(loop)
        #expect(log.withLock { $0 }.isEmpty, "a timer ran before the clock reached it")

        clock.advance(by: .seconds(5))
        loop.wake()
        var iterator = fired.makeAsyncIterator()
        let due = await next(4, of: &iterator)
        #expect(due.map(\.0) == ["1 s", "2 s", "2 s, scheduled later", "3 s"])
        #expect(due.allSatisfy { $0.1 }, "a timer ran off the loop's thread")
        await barrier(loop)
        #expect(log.withLock { $0 }.count == 4, "the 10 s timer or the cancelled one ran")

        // One already due runs on the loop's next turn, without a wake; `after` reads the clock.
        loop.schedule(at: start) { continuation.yield(("past", loop.inLoopThread)) }
        #expect(await next(1, of: &iterator).map(\.0) == ["past"])
        loop.schedule(after: .seconds(4)) { continuation.yield(("9 s", loop.inLoopThread)) }
        clock.advance(by: .seconds(5))
        loop.wake()
        #expect(await next(2, of: &iterator).map(\.0) == ["9 s", "10 s"])
        await loop.close()
    }

    @Test("on the continuous clock, a timer already due runs on the loop's thread")
    func realClock() async throws {
        let loop = try IOLoop(name: "test real clock")
        let (fired, continuation) = AsyncStream<Bool>.makeStream()
        loop.schedule(after: .zero) { continuation.yield(loop.inLoopThread) }
        var iterator = fired.makeAsyncIterator()
        #expect(await next(1, of: &iterator) == [true])
        await loop.close()
    }

    @Test("execute from many threads: every closure runs once, on the loop's thread, each thread's in its order")
    func executeFromManyThreads() async throws {
        let loop = try IOLoop(name: "test execute")
        let threads = 8
        let perThread = 500
        let runs = Mutex<[Int: [Int]]>([:])
        let offThread = Mutex(0)
        let (done, continuation) = AsyncStream<Int>.makeStream()
        for thread in 0..<threads {
            Thread {
                for index in 0..<perThread {
                    loop.execute {
                        if !loop.inLoopThread { offThread.withLock { $0 += 1 } }
                        runs.withLock { $0[thread, default: []].append(index) }
                    }
                }
                loop.execute { continuation.yield(thread) }
            }.start()
        }
        var iterator = done.makeAsyncIterator()
        #expect(Set(await next(threads, of: &iterator)) == Set(0..<threads))
        let seen = runs.withLock { $0 }
        #expect(seen.count == threads)
        for thread in 0..<threads { #expect(seen[thread] == Array(0..<perThread)) }
        #expect(offThread.withLock { $0 } == 0)
        await loop.close()
    }

    @Test("close with handlers and timers registered: it returns once the thread has ended, releasing them; nothing runs after")
    func closeWhileRegistered() async throws {
        let loop = try IOLoop(name: "test close")
        let pipes = try (0..<3).map { _ in try FileDescriptor.pipe() }
        weak var weakToken: Token?
        let calls = Mutex(0)
        do {
            let token = Token()
            weakToken = token
            for pipe in pipes {
                _ = try loop.register(pipe.readEnd, for: .readable) { _ in
                    withExtendedLifetime(token) { calls.withLock { $0 += 1 } }
                }
            }
            loop.schedule(after: .seconds(3600)) { withExtendedLifetime(token) {} }
        }
        let ran = Mutex<[String]>([])
        #expect(loop.execute { ran.withLock { $0.append("before close") } })

        // Two closers: both return once the thread has ended.
        async let first: Void = loop.close()
        async let second: Void = loop.close()
        _ = await (first, second)

        #expect(ran.withLock { $0 } == ["before close"])
        #expect(weakToken == nil, "the loop still holds its handlers or timers")
        #expect(!loop.execute { ran.withLock { $0.append("after close") } })
        #expect(throws: IOLoopError.closed) { try loop.register(pipes[0].readEnd, for: .readable) { _ in } }
        await loop.close()
        let closedThen = Mutex(false)
        loop.close { closedThen.withLock { $0 = true } }
        #expect(closedThen.withLock { $0 }, "close(then:) on an ended loop calls back at once")

        // The descriptors are the owner's, still open.
        for pipe in pipes {
            try write("x", to: pipe.writeEnd)
            var byte: [UInt8] = [0]
            #expect(try pipe.readEnd.read(into: &byte) == 1)
            try pipe.readEnd.close()
            try pipe.writeEnd.close()
        }
        #expect(calls.withLock { $0 } == 0)
        #expect(ran.withLock { $0 } == ["before close"])
    }

    @Test("a handler that throws is deregistered and its error handed on; its descriptor stays open")
    func handlerThrows() async throws {
        struct Refused: Error, Equatable {}
        let loop = try IOLoop(name: "test throws")
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        try readEnd.setNonBlocking()
        let calls = Mutex(0)
        let (errors, continuation) = AsyncStream<Bool>.makeStream()
        let registration = try loop.register(readEnd, for: .readable) { _ in
            calls.withLock { $0 += 1 }
            throw Refused()
        } onError: { error in
            continuation.yield(error is Refused && loop.inLoopThread)
        }
        try write("a", to: writeEnd)
        var iterator = errors.makeAsyncIterator()
        #expect(await next(1, of: &iterator) == [true])
        // Still readable (never read): level-triggered, but no longer watched.
        await barrier(loop)
        await barrier(loop)
        #expect(calls.withLock { $0 } == 1)
        #expect(throws: IOLoopError.notRegistered(readEnd)) { try loop.modify(registration, interest: .readable) }
        #expect(drain(readEnd) == "a")
        await loop.close()
        try readEnd.close()
        try writeEnd.close()
    }

    @Test("a handler that deregisters and closes its own descriptor; another closed while registered gives way to a new one")
    func handlerClosesItsDescriptor() async throws {
        let loop = try IOLoop(name: "test own close")
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        try readEnd.setNonBlocking()
        let box = Mutex<IORegistration?>(nil)
        let calls = Mutex(0)
        let (closed, continuation) = AsyncStream<String>.makeStream()
        let registration = try loop.register(readEnd, for: .readable) { _ in
            calls.withLock { $0 += 1 }
            let text = drain(readEnd)
            if let registration = box.withLock({ $0 }) { loop.deregister(registration) }
            _ = try? readEnd.close()
            continuation.yield(text)
        }
        box.withLock { $0 = registration }
        try write("bye", to: writeEnd)
        var iterator = closed.makeAsyncIterator()
        #expect(await next(1, of: &iterator) == ["bye"])
        // The write end's close would be a hang-up: the handler is not called for it.
        try writeEnd.close()
        await barrier(loop)
        await barrier(loop)
        #expect(calls.withLock { $0 } == 1)

        // Closed without deregistering: epoll drops it; a new descriptor may take its number and
        // registers, and the old registration's deregister leaves the new one alone.
        let old = try FileDescriptor.pipe()
        try old.readEnd.setNonBlocking()
        let stale = try loop.register(old.readEnd, for: .readable) { _ in }
        let number = old.readEnd.rawValue
        try old.readEnd.close()
        try old.writeEnd.close()
        let fresh = try FileDescriptor.pipe()
        try fresh.readEnd.setNonBlocking()
        _ = try loop.register(fresh.readEnd, for: .readable) { _ in continuation.yield("new " + drain(fresh.readEnd)) }
        if fresh.readEnd.rawValue == number { loop.deregister(stale) }
        try write("data", to: fresh.writeEnd)
        #expect(await next(1, of: &iterator) == ["new data"])
        await loop.close()
        try fresh.readEnd.close()
        try fresh.writeEnd.close()
    }
}
