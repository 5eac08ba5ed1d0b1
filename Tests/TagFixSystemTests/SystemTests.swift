import Foundation
import Glibc
import Synchronization
import TagFixSystem
import Testing

@Suite("the system layer: Errno, descriptors, pipes, eventfd, sockets")
struct SystemTests {
    @Test("Errno's names are errno's numbers, and its description is strerror's")
    func errnoNames() {
        let names: [(Errno, Int32)] = [
            (.interrupted, EINTR), (.resourceTemporarilyUnavailable, EAGAIN), (.wouldBlock, EWOULDBLOCK),
            (.noSuchFileOrDirectory, ENOENT), (.badFileDescriptor, EBADF), (.brokenPipe, EPIPE), (.permissionDenied, EACCES),
            (.notPermitted, EPERM), (.fileExists, EEXIST), (.noSpace, ENOSPC), (.readOnlyFileSystem, EROFS), (.invalidArgument, EINVAL),
            (.connectionRefused, ECONNREFUSED), (.addressInUse, EADDRINUSE), (.noChildProcess, ECHILD), (.noSuchProcess, ESRCH),
            (.isDirectory, EISDIR), (.tooManySymbolicLinkLevels, ELOOP), (.diskQuotaExceeded, EDQUOT),
        ]
        for (name, number) in names {
            #expect(name.rawValue == number)
            #expect(name.description == String(cString: strerror(number)))
        }
        #expect(Errno.noSuchFileOrDirectory.description == "No such file or directory")
        #expect(Errno.brokenPipe.description == "Broken pipe")
        #expect(Errno.resourceTemporarilyUnavailable == .wouldBlock)
    }

    @Test("Errno.current reads and sets errno")
    func errnoCurrent() {
        Errno.current = .noSpace
        #expect(errno == ENOSPC)
        errno = EROFS
        #expect(Errno.current == .readOnlyFileSystem)
    }

    @Test("valueOrErrno retries a call that fails with EINTR, and only that")
    func retryHelper() throws {
        var calls = 0
        let value = try valueOrErrno { () -> Int in
            calls += 1
            if calls < 3 {
                Errno.current = .interrupted
                return -1
            }
            return 42
        }
        #expect(value == 42)
        #expect(calls == 3)

        calls = 0
        #expect(throws: Errno.interrupted) {
            try valueOrErrno(retryOnInterrupt: false) { () -> Int32 in
                calls += 1
                Errno.current = .interrupted
                return -1
            }
        }
        #expect(calls == 1)

        calls = 0
        #expect(throws: Errno.noSpace) {
            try nothingOrErrno { () -> Int32 in
                calls += 1
                Errno.current = .noSpace
                return -1
            }
        }
        #expect(calls == 1)
    }

    @Test(
        "a process's /proc status: this one runs, with its parent and its start time; a pid nothing has is nil; a /proc file is read whole"
    )
    func processStatus() throws {
        let status = try #require(Processes.status(of: getpid()))
        #expect(status.isRunning && ["R", "S", "D"].contains(status.state), "\(status.state)")
        #expect(status.parent == getppid())
        #expect(status.fields.count > 19 && UInt64(status.fields[19]) != nil, "the start time, field 22")
        #expect(!status.name.isEmpty && !status.name.contains(")"))
        #expect(Processes.isRunning(getpid()))
        #expect(Processes.status(of: Int32.max) == nil && !Processes.isRunning(Int32.max))
        let maps = try #require(FileSystem.readToEnd("/proc/self/maps"))
        #expect(maps.split(separator: "\n").count > 10, "a /proc file whose size reads as 0, read to its end")
        #expect(FileSystem.readToEnd("/nonexistent/file") == nil)
    }

    @Test("a pipe carries bytes both ways round, close-on-exec at both ends")
    func pipeRoundTrip() throws {
        let (reader, writer) = try FileDescriptor.pipe()
        defer {
            _ = try? reader.close()
            _ = try? writer.close()
        }
        #expect(fcntl(reader.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(writer.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        let message = Array("hello, pipe\n".utf8)
        #expect(try writer.writeAll(message) == message.count)
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = try reader.read(into: &buffer)
        #expect(Array(buffer.prefix(count)) == message)

        try reader.setNonBlocking()
        #expect(throws: Errno.wouldBlock) {
            try reader.read(into: &buffer)
        }
    }

    @Test("a duplicate reads the same pipe; closeAfter closes whatever the body does")
    func duplicateAndCloseAfter() throws {
        let (reader, writer) = try FileDescriptor.pipe()
        let copy = try reader.duplicate()
        #expect(copy != reader)
        #expect(fcntl(copy.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        try writer.closeAfter { () throws(Errno) in _ = try writer.writeAll([1, 2, 3]) }
        try reader.close()
        var buffer = [UInt8](repeating: 0, count: 8)
        let (first, second) = try copy.closeAfter { () throws(Errno) in
            (try copy.read(into: &buffer), try copy.read(into: &buffer))
        }
        #expect(first == 3)
        #expect(Array(buffer.prefix(first)) == [1, 2, 3])
        // The end of the pipe: closeAfter closed its only write end.
        #expect(second == 0)
    }

    @Test("writing to a pipe nobody reads is .brokenPipe (SIGPIPE ignored, as the CLI does)")
    func brokenPipe() throws {
        signal(SIGPIPE, SIG_IGN)
        let (reader, writer) = try FileDescriptor.pipe()
        try reader.close()
        defer { _ = try? writer.close() }
        #expect(throws: Errno.brokenPipe) { try writer.writeAll(Array("lost".utf8)) }
    }

    @Test("a descriptor that is not open is .badFileDescriptor")
    func badDescriptor() throws {
        // Numbers no descriptor can have: a closed one might be reused by a test running beside.
        for fd in [FileDescriptor(rawValue: -1), FileDescriptor(rawValue: .max)] {
            #expect(throws: Errno.badFileDescriptor) { try fd.close() }
            #expect(throws: Errno.badFileDescriptor) { try fd.stat() }
            #expect(throws: Errno.badFileDescriptor) { try fd.writeAll([1]) }
            var buffer = [UInt8](repeating: 0, count: 8)
            #expect(throws: Errno.badFileDescriptor) { try fd.read(into: &buffer) }
        }
    }

    @Test("open, write, sync, stat, resize and read back a file; a missing one is .noSuchFileOrDirectory")
    func files() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-system-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/file"
        let fd = try FileDescriptor.open(
            path, .readWrite, options: [.create, .exclusiveCreate, .closeOnExec], permissions: .ownerReadWrite)
        try fd.closeAfter { () throws(Errno) in
            try fd.writeAll(Array("0123456789".utf8))
            try fd.sync()
            let status = try fd.stat()
            #expect(status.type == .regular)
            #expect(status.size == 10)
            #expect(status.permissions == .ownerReadWrite)
            try fd.resize(to: 4)
            var buffer = [UInt8](repeating: 0, count: 16)
            let count = try buffer.withUnsafeMutableBytes { bytes in
                Result { () throws(Errno) in try fd.read(fromAbsoluteOffset: 1, into: bytes) }
            }.get()
            #expect(Array(buffer.prefix(count)) == Array("123".utf8))
        }
        #expect(throws: Errno.fileExists) { try FileDescriptor.open(path, .writeOnly, options: [.create, .exclusiveCreate]) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try FileDescriptor.open(folder + "/missing", .readOnly) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try Stat(folder + "/missing") }
        #expect(try Stat(folder).type == .directory)
        symlink(path, folder + "/link")
        #expect(try Stat(folder + "/link", followTargetSymlink: false).type == .symbolicLink)
        #expect(try Stat(folder + "/link").type == .regular)
        #expect(try Stat("/dev/null").type == .characterSpecial)
    }

    @Test("rename, read a link, set permissions and remove by path; a missing path is .noSuchFileOrDirectory")
    func pathCalls() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-system-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let fd = try FileDescriptor.open(folder + "/a", .writeOnly, options: [.create, .closeOnExec], permissions: .ownerReadWrite)
        try fd.close()
        try FileSystem.rename(folder + "/a", to: folder + "/b")
        #expect(throws: Errno.noSuchFileOrDirectory) { try Stat(folder + "/a") }
        try FileSystem.setPermissions(FilePermissions(rawValue: 0o640), of: folder + "/b")
        #expect(try Stat(folder + "/b").permissions.description == "640")
        symlink("b", folder + "/link")
        #expect(try FileSystem.symbolicLinkTarget(folder + "/link") == "b")
        #expect(throws: Errno.invalidArgument) { try FileSystem.symbolicLinkTarget(folder + "/b") }
        try FileSystem.removeFile(folder + "/b")
        #expect(throws: Errno.noSuchFileOrDirectory) { try FileSystem.removeFile(folder + "/b") }
        #expect(throws: Errno.noSuchFileOrDirectory) { try FileSystem.rename(folder + "/b", to: folder + "/c") }
    }

    @Test("an eventfd wakes a poller once however often it is signalled, and drains to nothing")
    func eventFD() throws {
        let event = try EventFD()
        defer { _ = try? event.close() }
        #expect(fcntl(event.descriptor.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        var entry = pollfd(fd: event.descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 0) == 0)
        event.signal()
        event.signal()
        event.signal()
        #expect(poll(&entry, 1, 0) == 1)
        #expect(event.drain() == 3)
        #expect(poll(&entry, 1, 0) == 0)
        #expect(event.drain() == 0)
    }

    @Test("a loopback listener accepts a connection, and bytes go both ways")
    func loopbackRoundTrip() throws {
        let (listener, port) = try Loopback.listen()
        defer { _ = try? listener.close() }
        #expect(port > 0)
        let client = try Loopback.connect(port: port)
        defer { _ = try? client.close() }
        let server = try listener.accept()
        // Closed below on purpose; the defer only closes it if the test stops before. Closed
        // twice, its number, reused meanwhile by a test running beside, was closed under that
        // test (an I/O loop's epoll descriptor: "epoll_wait … Bad file descriptor").
        var serverOpen = true
        defer { if serverOpen { _ = try? server.close() } }
        #expect(fcntl(server.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(try server.peerAddress().numericHostAndPort?.hasPrefix("127.0.0.1:") == true)
        #expect(try client.peerAddress().port == port)

        let question = Array("?POLL;\n".utf8)
        _ = try client.send(question[...])
        var buffer = [UInt8](repeating: 0, count: 64)
        var count = try server.receive(into: &buffer)
        #expect(Array(buffer.prefix(count)) == question)
        try server.writeAll(Array("answer\n".utf8))
        count = try client.read(into: &buffer)
        #expect(String(decoding: buffer.prefix(count), as: UTF8.self) == "answer\n")

        // The peer gone: reads see the end; a send with MSG_NOSIGNAL says so without a signal.
        serverOpen = false
        try server.close()
        count = try client.receive(into: &buffer)
        #expect(count == 0)
        var failed: Errno?
        for _ in 0..<100 where failed == nil {
            do {
                _ = try client.send(question[...])
            } catch {
                failed = error
            }
        }
        #expect(failed == .brokenPipe || failed == .connectionReset)
    }

    @Test("a free port is one nothing listens on; a non-blocking listener with none waiting is .wouldBlock")
    func freePort() throws {
        let port = try Loopback.freePort()
        #expect(port > 0)
        #expect(throws: Errno.connectionRefused) { try Loopback.connect(port: port) }
        let (listener, _) = try Loopback.listen(nonBlocking: true)
        defer { _ = try? listener.close() }
        #expect(throws: Errno.wouldBlock) { try listener.accept() }
    }

    @Test("a Unix socket address: a path, an abstract name, and one too long")
    func unixAddress() {
        #expect(SocketAddress.unix("/run/tagfix.sock")?.family == AF_UNIX)
        #expect(SocketAddress.unix("@tagfix")?.length == socklen_t(MemoryLayout<sa_family_t>.size + 7))
        #expect(SocketAddress.unix(String(repeating: "x", count: 108)) == nil)
        #expect(SocketAddress.unix("") == nil)
        #expect(SocketAddress.loopback(port: 8080).port == 8080)
    }
}

/// Signals caught by `interruptedRead`'s handler.
private let interruptions = Atomic<Int>(0)

@Suite("EINTR: a read a signal interrupts is retried, not failed")
struct InterruptTests {
    @Test("a blocking read on a thread that takes SIGURG (handler without SA_RESTART) still returns the bytes")
    func interruptedRead() async throws {
        // SIGURG: ignored by default and used by nothing else in the test process.
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in interruptions.add(1, ordering: .relaxed) }
        action.sa_flags = 0  // no SA_RESTART: the kernel fails the read with EINTR
        sigemptyset(&action.sa_mask)
        var earlier = sigaction()
        sigaction(SIGURG, &action, &earlier)
        defer { sigaction(SIGURG, &earlier, nil) }

        let (reader, writer) = try FileDescriptor.pipe()
        defer {
            _ = try? reader.close()
            _ = try? writer.close()
        }
        // The reading thread while its read is under way: `returned` once the read has returned,
        // whatever happened, after which nothing signals it (the thread then ends).
        let reading = Mutex<(thread: pthread_t?, returned: Bool)>((nil, false))
        let (signalling, signallerEnds) = AsyncStream<Never>.makeStream()
        // The reader and the signaller are threads of their own, and the test awaits the
        // reader's result: no deadline on the cooperative pool, which other tests may keep busy
        // (a loop of short sleeps there once ran only twice in ten seconds).
        let result: Result<[UInt8], Errno> = await withCheckedContinuation { continuation in
            let worker = Thread {
                var unblock = sigset_t()
                sigemptyset(&unblock)
                sigaddset(&unblock, SIGURG)
                pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
                reading.withLock { $0.thread = pthread_self() }
                var buffer = [UInt8](repeating: 0, count: 64)
                let result = Result { () throws(Errno) -> [UInt8] in
                    let count = try reader.read(into: &buffer)
                    return Array(buffer.prefix(count))
                }
                reading.withLock { $0 = (nil, true) }
                continuation.resume(returning: result)
            }
            // Signals the reader while it waits, until its handler has run a few times or its read
            // has returned (a read that failed before: the signaller stopped only at the third
            // signal, and went on signalling a thread that had ended); then writes what the read
            // returns. Each signal is sent under the lock the reader takes to say its read
            // returned, so never to a thread that has ended.
            let signaller = Thread {
                defer { signallerEnds.finish() }
                while reading.withLock({ state -> Bool in
                    guard !state.returned, interruptions.load(ordering: .relaxed) < 3 else { return false }
                    if let target = state.thread { pthread_kill(target, SIGURG) }
                    return true
                }) {
                    usleep(5_000)
                }
                _ = try? writer.writeAll(Array("after the signals".utf8))
            }
            worker.start()
            signaller.start()
        }
        // The pipe is closed (the defer above) only once the signaller, which writes to it, has
        // stopped.
        for await _ in signalling {}
        #expect(interruptions.load(ordering: .relaxed) >= 3)
        #expect(try result.get() == Array("after the signals".utf8), "\(result)")
    }
}
