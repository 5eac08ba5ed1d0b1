// Fan-out: how long a VERDICT takes from the verifier's hand-off (the sink's `receive`) to a
// client of tagfix serve's event socket, with 1 and 100 clients; beside it, in the same run, how
// long gpsd takes from an NMEA epoch written on the pty to a TPV at 1 and 100 of its own watching
// clients. Two harnesses, each applied to both servers alike: `threads`, every client reading on
// a thread of its own in this process (on the same cores as the server: with 100 clients that
// measures the scheduler's 100 wake-ups as much as the server), and `process`, every client read
// by one poll(2) loop in a child process. Each line is stamped (CLOCK_BOOTTIME) as its read returns.
//
// `TAGFIX_BENCH_PIN=1` runs the threads harness's client threads on the last CPU and the server's
// side (this process's other threads, and gpsd, which inherits its spawning thread's CPUs) on the
// others. Unpinned, a socket's wake-up is a synchronous one, which queues the woken reader on the
// sender's CPU, where it preempts the sender (`perf sched`, docs/benchmarks.md §9); pinned, the
// sender is never preempted but the 100 readers take turns on one CPU, and the p99 was no better.
import CBenchSched
import Foundation
import Synchronization
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixScenarios
import TagFixServe

/// Where the clients run.
enum FanOutHarness: String, CaseIterable {
    /// A thread per client, in the benchmark's process.
    case threads
    /// One poll(2) loop reading every client's socket, in a child process.
    case process
}

/// The threads harness's CPUs: the clients on the last, the server's side on the rest (`nil`
/// on a machine of one CPU, where nothing is pinned).
struct HarnessCPUs {
    let server: ClosedRange<Int32>
    let client: Int32

    /// Only with `TAGFIX_BENCH_PIN=1`: by default every thread may run on every CPU.
    static let split: HarnessCPUs? = {
        let count = Int32(ProcessInfo.processInfo.activeProcessorCount)
        guard ProcessInfo.processInfo.environment["TAGFIX_BENCH_PIN"] == "1" else { return nil }
        return count >= 2 ? HarnessCPUs(server: 0...(count - 2), client: count - 1) : nil
    }()

    /// Every thread of this process, now, to `cpus` (threads started later inherit their
    /// creator's): the server's side to its CPUs, or back to all of them.
    static func pinProcess(to cpus: ClosedRange<Int32>) {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        for tid in tasks.compactMap({ Int32($0) }) { _ = cbenchsched_pin(tid, cpus.lowerBound, cpus.upperBound) }
    }

    func pinServerSide() { Self.pinProcess(to: server) }
    func unpin() { Self.pinProcess(to: 0...client) }
}

/// A raw socket client on a thread of its own that stamps each line on arrival. While measuring,
/// a read only appends its bytes and notes where they end and when it returned (as the process
/// harness's loop does): the lines are cut out when they are asked for, so a woken reader is back
/// asleep at once and the next one gets the CPU.
final class StampingClient: Sendable {
    let fd: Int32
    /// Every byte read, each read's end in them and its stamp, and whether the server closed.
    private let log = Mutex<(bytes: [UInt8], reads: [(end: Int, stamp: Int64)], closed: Bool)>(([], [], false))

    /// - Parameter cpu: the CPU the client's thread runs on (`nil`: any).
    init(fd: Int32, hello: String, cpu: Int32? = nil) {
        self.fd = fd
        _ = hello.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        DeviceThread.detach(name: "fan-out client") { [self] in
            if let cpu { _ = cbenchsched_pin(0, cpu, cpu) }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { return log.withLock { $0.closed = true } }
                let now = bootNanos()
                buffer.withUnsafeBufferPointer { read in
                    log.withLock { log in
                        log.bytes.append(contentsOf: read[0..<count])
                        log.reads.append((log.bytes.count, now))
                    }
                }
            }
        }
    }

    /// Every line so far, stamped with when the read that brought its end returned; `closed`
    /// last when the server closed the connection.
    var arrivals: [(String, Int64)] {
        let (bytes, reads, closed) = log.withLock { ($0.bytes, $0.reads, $0.closed) }
        var lines: [(String, Int64)] = []
        var start = 0
        var read = 0
        while let newline = bytes[start...].firstIndex(of: 10) {
            while reads[read].end <= newline { read += 1 }
            lines.append((String(decoding: bytes[start..<newline], as: UTF8.self), reads[read].stamp))
            start = newline + 1
        }
        if closed { lines.append((Self.closed, 0)) }
        return lines
    }

    /// The line a client's arrivals end with when the server closed it.
    static let closed = "#closed"

    /// Whether the server answered its WATCH (`true`), closed it first (`false`), or neither yet.
    var watching: Bool? {
        arrivals.first { $0.0.hasPrefix(#"{"class":"WATCH""#) || $0.0 == Self.closed }.map { $0.0 != Self.closed }
    }

    static func connectUnix(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return fd
    }

    static func connectTCP(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return fd
    }

    deinit { close(fd) }
}

/// The clients of one measurement, in either harness.
final class FanOutClients {
    private var threads: [StampingClient] = []
    private var child: ClientProcess?
    /// How many the server took (answered their WATCH): gpsd 3.22 closes every connection past
    /// its 64th (its MAX_CLIENTS).
    private(set) var served = 0

    /// Connects `count` clients (Unix socket `path`, or TCP `port`), each sends `hello`; returns
    /// once each has had its WATCH answer (`nil`: the child process failed).
    init?(_ harness: FanOutHarness, path: String? = nil, port: Int? = nil, count: Int, hello: String) async {
        switch harness {
        case .threads:
            threads = (0..<count).map { _ in
                StampingClient(
                    fd: path.map(StampingClient.connectUnix) ?? StampingClient.connectTCP(port: port ?? 0), hello: hello,
                    cpu: HarnessCPUs.split?.client)
            }
            while threads.contains(where: { $0.watching == nil }) {
                try? await Task.sleep(for: .milliseconds(10))
            }
            served = threads.count { $0.watching == true }
        case .process:
            let target = path.map { ["unix", $0] } ?? ["tcp", String(port ?? 0)]
            guard let child = ClientProcess(target + [String(count), hello]) else { return nil }
            self.child = child
            served = child.served
        }
    }

    /// Every line the clients got, with when (`CLOCK_BOOTTIME` nanoseconds); ends the clients.
    func finish() -> [(String, Int64)] {
        if let child { return child.finish().map { ($0.1, $0.0) } }
        defer { threads = [] }
        return threads.flatMap { client in client.arrivals }
    }
}

/// One row on standard output as soon as it is measured (print's buffer would hold it when
/// the output is a pipe).
func emit(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

func fanOutBenchmark(verdicts: Int, harnesses: [FanOutHarness]) async {
    let path = "/tmp/tagfix-bench-\(getpid()).sock"
    var replayed: [Verdict] = []
    if let scenario = try? ScenarioLoader.load(path: "Examples/site/scenario.json"),
        let registry = try? RegistryFile.parse(try TextFile.read("Examples/site/registry.csv"))
    {
        ScenarioReplay.run(scenario, verifier: Verifier(policy: scenario.policy, registry: registry)) { event in
            if case .verdict(let verdict) = event { replayed.append(verdict) }
        }
    }
    guard !replayed.isEmpty else {
        print(#"{"bench":"serve-fan-out","error":"run from the repository's root (Examples/site)"}"#)
        return
    }
    func row(_ server: String, _ harness: FanOutHarness, _ clients: Int, _ served: Int, _ values: [Double]) -> String {
        #"{"bench":"serve-fan-out","server":"\#(server)","harness":"\#(harness.rawValue)","clients":\#(clients),"served":\#(served),"pinned":\#(harness == .threads && HarnessCPUs.split != nil),"messages":\#(values.count),"p50_ms":\#(percentile(values, 0.5) * 1000),"p99_ms":\#(percentile(values, 0.99) * 1000),"max_ms":\#(percentile(values, 1) * 1000)}"#
    }
    for harness in harnesses {
        // The threads harness: the server's side (the hub's thread, the thread that hands it the
        // verdicts, gpsd) off the clients' CPU, for both servers alike; all CPUs again after it.
        let cpus = harness == .threads ? HarnessCPUs.split : nil
        cpus?.pinServerSide()
        defer { cpus?.unpin() }
        for clients in [1, 100] {
            guard
                let hub = try? ServeHub(
                    ServeConfiguration(socketPath: path, release: "bench"), readers: ["bench"], gps: nil, placements: [], log: { _ in })
            else {
                print(#"{"bench":"serve-fan-out","error":"cannot listen on \#(path)"}"#)
                return
            }
            hub.start()
            guard let watchers = await FanOutClients(harness, path: path, count: clients, hello: #"?WATCH={"enable":true};"# + "\n") else {
                print(#"{"bench":"serve-fan-out","error":"the client process did not start"}"#)
                await hub.stop(reason: "bench over")
                return
            }
            var sent: [Int64] = []
            var handOff: [Double] = []  // how long `receive` holds the session's fan-out
            for index in 0..<verdicts {
                sent.append(bootNanos())
                hub.receive(replayed[index % replayed.count], now: nil)
                handOff.append(Double(bootNanos() - sent[index]) / 1e9)
                try? await Task.sleep(for: .milliseconds(20))  // 50 taps a second: far more than people tap
            }
            try? await Task.sleep(for: .milliseconds(200))
            var latencies: [Double] = []
            // Each verdict's first and last arrival: where a tail goes. A late first arrival is
            // the clients' wake-up (the reader not running when the line came: scheduling); a
            // wide spread is the sends one after another and the clients' reading of them.
            var first: [Int: Double] = [:], last: [Int: Double] = [:]
            for (line, arrived) in watchers.finish() where line.hasPrefix(#"{"class":"VERDICT","id":"#) {
                guard let id = Int(line.dropFirst(24).prefix { $0.isNumber }), id >= 1, id <= sent.count else { continue }
                let latency = Double(arrived - sent[id - 1]) / 1e9
                latencies.append(latency)
                first[id] = min(first[id] ?? latency, latency)
                last[id] = max(last[id] ?? latency, latency)
            }
            await hub.stop(reason: "bench over")
            let spread = first.keys.map { last[$0]! - first[$0]! }
            emit(
                String(row("tagfix serve", harness, clients, watchers.served, latencies).dropLast())
                    + #","receive_p50_us":\#(percentile(handOff, 0.5) * 1e6),"receive_p99_us":\#(percentile(handOff, 0.99) * 1e6)"#
                    + #","first_p50_ms":\#(percentile(Array(first.values), 0.5) * 1000),"first_p99_ms":\#(percentile(Array(first.values), 0.99) * 1000)"#
                    + #","spread_p50_ms":\#(percentile(spread, 0.5) * 1000),"spread_p99_ms":\#(percentile(spread, 0.99) * 1000)}"#)
        }
        guard PrivateGPSD.installedPath != nil else {
            print(#"{"bench":"serve-fan-out","server":"gpsd","error":"needs gpsd"}"#)
            continue
        }
        for clients in [1, 100] {
            guard
                let receiver = try? NMEAEmulator(
                    source: .at(Coordinate(validLatitude: 53.545, longitude: 9.966), noise: 0.5, seed: 3), rate: 10),
                let gpsd = try? await PrivateGPSD.start(device: receiver.path)
            else { return }
            guard
                let watchers = await FanOutClients(
                    harness, port: gpsd.port, count: clients, hello: #"?WATCH={"enable":true,"json":true};"# + "\n")
            else {
                print(#"{"bench":"serve-fan-out","error":"the client process did not start"}"#)
                await gpsd.stop()
                receiver.stop()
                return
            }
            try? await Task.sleep(for: .seconds(2))
            // The emulator stamps its writes on the ContinuousClock: the same instants in
            // CLOCK_BOOTTIME nanoseconds, from one pair of readings taken together.
            let (reference, referenceNanos) = (ContinuousClock.now, bootNanos())
            func nanos(_ instant: ContinuousClock.Instant) -> Int64 {
                let (seconds, attoseconds) = (instant - reference).components
                return referenceNanos + seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            }
            receiver.start()
            try? await Task.sleep(for: .seconds(Double(verdicts) / 50))
            let arrivals = watchers.finish()
            if ProcessInfo.processInfo.environment["TAGFIX_BENCH_DEBUG"] != nil {
                FileHandle.standardError.write(Data("\(arrivals.count) lines: \(arrivals.prefix(3))\n".utf8))
            }
            let writes = receiver.writeLog.map { (time: $0.time, written: nanos($0.written)) }
            var delays: [Double] = []
            for (line, arrived) in arrivals {
                guard line.contains(#""class":"TPV""#), let value = try? JSONValue.parse(line), value["mode"]?.double ?? 0 >= 2,
                    let text = value["time"]?.string, let time = Timestamp(iso8601: text),
                    let write = writes.min(by: { abs($0.time.duration(to: time).seconds) < abs($1.time.duration(to: time).seconds) }),
                    abs(write.time.duration(to: time).seconds) < 0.011
                else { continue }
                delays.append(Double(arrived - write.written) / 1e9)
            }
            await gpsd.stop()
            receiver.stop()
            emit(row("gpsd", harness, clients, watchers.served, delays))
        }
    }
}

// MARK: - Clients in a process of their own

/// `CLOCK_BOOTTIME` in nanoseconds: a clock both processes read the same.
func bootNanos() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_BOOTTIME, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}

/// `TagFixBench serve-fan-out-clients unix PATH|tcp PORT COUNT HELLO`: the other harness's
/// clients. COUNT connections, each sent HELLO, all read by one `poll(2)` loop on one thread
/// (as a process watching many sockets would), each line stamped (`CLOCK_BOOTTIME`) as its read
/// returns. Says `ready N` on standard output once every connection has had its WATCH answer (N
/// of them) or been closed by the server; when
/// standard input ends, prints `NANOSECONDS<TAB>LINE` for each VERDICT and TPV line, and exits.
func fanOutClients(_ arguments: [String]) {
    guard arguments.count == 4, let count = Int(arguments[2]) else {
        FileHandle.standardError.write(Data("usage: TagFixBench serve-fan-out-clients unix PATH|tcp PORT COUNT HELLO\n".utf8))
        exit(64)
    }
    let fds = (0..<count).map { _ in
        arguments[0] == "unix" ? StampingClient.connectUnix(arguments[1]) : StampingClient.connectTCP(port: Int(arguments[1]) ?? 0)
    }
    for fd in fds {
        _ = arguments[3].withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }
    // While measuring, a read only appends its bytes and notes where they end and when: the
    // lines are cut out afterwards, so the loop gets to the next socket at once.
    var received = [[UInt8]](repeating: [], count: count)
    var reads = [[(end: Int, stamp: Int64)]](repeating: [], count: count)
    var watching = [Bool](repeating: false, count: count)
    var closed = [Bool](repeating: false, count: count)
    var ready = false
    var buffer = [UInt8](repeating: 0, count: 65_536)
    var polled = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0)] + fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    let watch = Array(#"{"class":"WATCH""#.utf8)
    loop: while true {
        for index in polled.indices { polled[index].revents = 0 }
        guard poll(&polled, nfds_t(polled.count), -1) >= 0 || errno == EINTR else { break }
        if polled[0].revents != 0 { break loop }  // standard input ended: report
        for index in 1..<polled.count where polled[index].revents != 0 {
            let client = index - 1
            while true {
                let got = recv(polled[index].fd, &buffer, buffer.count, 0)
                if got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) {
                    closed[client] = true
                    polled[index].fd = -1  // poll(2) passes over it from now on
                }
                if got <= 0 { break }
                let now = bootNanos()
                received[client].append(contentsOf: buffer[0..<got])
                reads[client].append((received[client].count, now))
            }
            if !ready, !watching[client], !closed[client] {
                watching[client] = received[client].split(separator: 10).contains { $0.starts(with: watch) }
            }
        }
        if !ready, !zip(watching, closed).contains(where: { !$0 && !$1 }) {
            ready = true
            FileHandle.standardOutput.write(Data("ready \(watching.count { $0 })\n".utf8))
        }
    }
    let verdict = Array(#"{"class":"VERDICT""#.utf8), tpv = Array(#""class":"TPV""#.utf8)
    var out: [UInt8] = []
    for client in 0..<count {
        var start = 0
        var read = 0
        let bytes = received[client]
        while let newline = bytes[start...].firstIndex(of: 10) {
            while reads[client][read].end <= newline { read += 1 }  // the read that brought the line's end
            let line = bytes[start..<newline]
            if line.starts(with: verdict) || line.firstRange(of: tpv) != nil {
                out += Array("\(reads[client][read].stamp)\t".utf8) + line + [10]
            }
            start = newline + 1
        }
    }
    FileHandle.standardOutput.write(Data(out))
    for fd in fds { close(fd) }
}

/// The clients of `fanOutClients`, started as a child process.
final class ClientProcess {
    let process: ChildProcess
    let input = Pipe()
    let output = Pipe()
    /// How many connections had their WATCH answered.
    private(set) var served = 0

    init?(_ arguments: [String]) {
        // Started as the product starts programs (ChildProcess: a clean signal mask); its standard
        // error is the bench's.
        guard
            let process = try? BenchChildren.start(
                executable: CommandLine.arguments[0], arguments: ["serve-fan-out-clients"] + arguments,
                standardInput: input.fileHandleForReading.fileDescriptor, standardOutput: output.fileHandleForWriting.fileDescriptor,
                standardError: FileHandle.standardError.fileDescriptor)
        else { return nil }
        self.process = process
        // The child has its copies: the pipes end when it closes them.
        try? input.fileHandleForReading.close()
        try? output.fileHandleForWriting.close()
        // Waits for `ready`.
        var seen = Data()
        while !seen.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            seen += chunk
        }
        let line = String(decoding: seen.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        guard line.hasPrefix("ready "), let served = Int(line.dropFirst(6)) else { return nil }
        self.served = served
    }

    /// Ends the clients; their stamped lines.
    func finish() -> [(Int64, String)] {
        try? input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        while process.isRunning { usleep(10_000) }
        // Split as bytes: gpsd ends its lines with CR LF, one Character to a String.
        return data.split(separator: UInt8(ascii: "\n")).compactMap { row in
            guard let tab = row.firstIndex(of: UInt8(ascii: "\t")),
                let stamp = Int64(String(decoding: row[..<tab], as: UTF8.self))
            else { return nil }
            return (stamp, String(decoding: row[(tab + 1)...].filter { $0 != UInt8(ascii: "\r") }, as: UTF8.self))
        }
    }
}
