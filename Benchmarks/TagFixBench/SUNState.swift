// `TagFixBench sun-state [TAPS]`: SUN read counter commits per second on one PostgreSQL `--state`
// (a private cluster, fsync on, loopback), from one server and from two (two processes, as two
// `tagfix serve` behind a proxy are): each tap is what the verifier asks of the store, the last
// accepted counter read, then the accept (one upsert, committed with synchronous_commit on before
// it returns). Two servers tap their own tags, then the same tags with the same counters (every
// URL presented at both: each counter accepted once, the other a replay). Beside them, one
// server on a SQLite counter file (synchronous=FULL), as `verify --sun-counters` keeps them.
// Then taps committed in groups, as serve's phone taps are (`SUNCounterStore.acceptAll`): the
// group's counters in one call (on PostgreSQL one statement over arrays), with and without the
// read of each tag's last counter that serve's group still makes tap by tap.
import Foundation
import Glibc
import TagFixCore
import TagFixDevices
import TagFixPostgres
import TagFixStore
import TagFixTestDaemons

/// A worker: one server's counter store, in a process of its own.
final class StateWorker {
    let process: ChildProcess
    let input = Pipe()
    let output = Pipe()

    /// Starts `TagFixBench sun-state-worker …` and waits for its "ready" (connected, schema done).
    init?(_ arguments: [String]) {
        guard
            let process = try? BenchChildren.start(
                executable: CommandLine.arguments[0], arguments: ["sun-state-worker"] + arguments,
                standardInput: input.fileHandleForReading.fileDescriptor, standardOutput: output.fileHandleForWriting.fileDescriptor,
                standardError: FileHandle.standardError.fileDescriptor)
        else { return nil }
        self.process = process
        try? input.fileHandleForReading.close()
        try? output.fileHandleForWriting.close()
        guard line() == "ready" else { return nil }
    }

    func go() { input.fileHandleForWriting.write(Data("go\n".utf8)) }

    /// The worker's result line.
    func result() -> [String: Double]? {
        guard let text = line(), let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Double] else {
            return nil
        }
        while process.isRunning { usleep(10_000) }
        return object
    }

    private var buffer = Data()
    private func line() -> String? {
        while !buffer.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer += chunk
        }
        let index = buffer.firstIndex(of: UInt8(ascii: "\n"))!
        let text = String(decoding: buffer[..<index], as: UTF8.self)
        buffer.removeSubrange(...index)
        return text
    }
}

/// `sun-state-worker LOCATION PASSWORD_FILE FIRST_TAG TAGS TAPS [GROUP [read]]`: taps TAGS tags
/// round and round, TAPS taps in all, each counter one above the tag's last, after "go" on
/// standard input; says how many were accepted, the seconds, and each tap's time. With GROUP, the
/// taps are committed GROUP at a time (`acceptAll`), a tap's time its group's; with `read`, each
/// tag's last counter is read first, once a group (as serve's group does for a tag it has not
/// seen in the group).
func sunStateWorker(_ arguments: [String]) {
    guard (5...7).contains(arguments.count), let first = Int(arguments[2]), let tags = Int(arguments[3]), let taps = Int(arguments[4])
    else {
        fatalError("usage: TagFixBench sun-state-worker LOCATION PASSWORD_FILE FIRST_TAG TAGS TAPS [GROUP [read]]")
    }
    let group = arguments.count > 5 ? Int(arguments[5]) ?? 1 : nil
    let read = arguments.count > 6 && arguments[6] == "read"
    let store: any SUNCounterStore
    if PostgresAddress.isAddress(arguments[0]) {
        let password = try! String(contentsOfFile: arguments[1], encoding: .utf8).trimmingCharacters(in: .newlines)
        store = try! PostgresSUNCounters(address: PostgresAddress(arguments[0]), password: password)
    } else {
        store = try! SQLiteSUNCounters(path: arguments[0], create: true)
    }
    let uids = (first..<first + tags).map { (index: Int) -> TagUID in
        let high = UInt8(truncatingIfNeeded: index >> 8)
        let low = UInt8(truncatingIfNeeded: index)
        return try! TagUID(bytes: [0x04, 0x5A, 0x11, high, low, 0x3D, 0x80])
    }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    _ = readLine()
    var accepted = 0
    var times: [Double] = []
    times.reserveCapacity(taps)
    let clock = ContinuousClock()
    let start = clock.now
    if let group {
        for start in stride(from: 0, to: taps, by: group) {
            let items = (start..<min(taps, start + group)).map { tap in
                SUNCounterAcceptance(uid: uids[tap % tags], counter: UInt32(tap / tags + 1), tagID: "T\(tap % tags)")
            }
            let began = clock.now
            if read {
                for uid in Set(items.map(\.uid)) { _ = try! store.lastAccepted(uid: uid) }
            }
            accepted += try! store.acceptAll(items).filter { $0 }.count
            times += repeatElement(milliseconds(clock.now - began), count: items.count)
        }
    } else {
        for tap in 0..<taps {
            let uid = uids[tap % tags]
            let counter = UInt32(tap / tags + 1)
            let began = clock.now
            let last = try! store.lastAccepted(uid: uid)
            if last.map({ counter > $0 }) ?? true, try! store.accept(uid: uid, counter: counter, tagID: "T\(tap % tags)") { accepted += 1 }
            times.append(milliseconds(clock.now - began))
        }
    }
    let seconds = milliseconds(clock.now - start) / 1000
    times.sort()
    let p50 = times[times.count / 2]
    let p99 = times[min(times.count - 1, times.count * 99 / 100)]
    let result = #"{"taps":\#(taps),"accepted":\#(accepted),"seconds":\#(seconds),"tap_ms_median":\#(p50),"tap_ms_p99":\#(p99)}"#
    FileHandle.standardOutput.write(Data((result + "\n").utf8))
}

private func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

/// Runs `workers` at once (each `[first tag, tags]`) on `location`; the row.
private func stateRun(
    name: String, location: String, passwordFile: String, workers: [(Int, Int)], taps: Int, storage: String, group: Int? = nil,
    read: Bool = false
) throws -> String {
    let grouping = group.map { [String($0)] + (read ? ["read"] : []) } ?? []
    let started = try workers.map { first, tags in
        guard let worker = StateWorker([location, passwordFile, String(first), String(tags), String(taps)] + grouping) else {
            throw BenchFailure("sun-state: a worker did not start")
        }
        return worker
    }
    for worker in started { worker.go() }
    let results = try started.map { worker in
        guard let result = worker.result() else { throw BenchFailure("sun-state: a worker said nothing") }
        return result
    }
    let seconds = results.map { $0["seconds"] ?? 0 }.max() ?? 0
    let total = results.reduce(0) { $0 + ($1["taps"] ?? 0) }
    let accepted = results.reduce(0) { $0 + ($1["accepted"] ?? 0) }
    let median = results.map { $0["tap_ms_median"] ?? 0 }.max() ?? 0
    let p99 = results.map { $0["tap_ms_p99"] ?? 0 }.max() ?? 0
    return
        #"{"bench":"sun-state","case":"\#(name)","storage":"\#(storage)","servers":\#(workers.count),"group":\#(group ?? 1),"reads":\#(group == nil || read),"taps":\#(Int(total)),"#
        + #""accepted":\#(Int(accepted)),"seconds":\#(seconds),"taps_per_second":\#(total / seconds),"#
        + #""commits_per_second":\#(accepted / seconds),"tap_ms_median":\#(median),"tap_ms_p99":\#(p99)}"#
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func sunStateBenchmark(taps: Int) async -> [String] {
    do {
        return try await PrivatePostgres.with { server in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-sun-state-\(getpid())").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            return try await offThePool { () throws -> [String] in
                [
                    try stateRun(
                        name: "one server", location: folder + "/counters.sqlite", passwordFile: "-", workers: [(0, 100)], taps: taps,
                        storage: "sqlite"),
                    try stateRun(
                        name: "one server", location: server.address, passwordFile: server.passwordFile, workers: [(0, 100)], taps: taps,
                        storage: "postgresql"),
                    try stateRun(
                        name: "one server, groups of 32", location: folder + "/counters.sqlite", passwordFile: "-",
                        workers: [(10_000, 1000)], taps: taps, storage: "sqlite", group: 32),
                    try stateRun(
                        name: "one server, groups of 32", location: server.address, passwordFile: server.passwordFile,
                        workers: [(10_000, 1000)], taps: taps, storage: "postgresql", group: 32),
                    try stateRun(
                        name: "one server, groups of 200", location: server.address, passwordFile: server.passwordFile,
                        workers: [(20_000, 1000)], taps: taps, storage: "postgresql", group: 200),
                    try stateRun(
                        name: "one server, groups of 200, each tag twice a group", location: server.address,
                        passwordFile: server.passwordFile, workers: [(30_000, 100)], taps: taps, storage: "postgresql", group: 200),
                    try stateRun(
                        name: "one server, groups of 32, each tag's counter read first (as serve does)", location: server.address,
                        passwordFile: server.passwordFile, workers: [(40_000, 1000)], taps: taps, storage: "postgresql", group: 32,
                        read: true),
                    try stateRun(
                        name: "two servers, each its own tags", location: server.address, passwordFile: server.passwordFile,
                        workers: [(1000, 100), (2000, 100)], taps: taps, storage: "postgresql"),
                    try stateRun(
                        name: "two servers, each its own tags, groups of 32", location: server.address,
                        passwordFile: server.passwordFile, workers: [(50_000, 1000), (52_000, 1000)], taps: taps, storage: "postgresql",
                        group: 32),
                    try stateRun(
                        name: "two servers, every URL at both", location: server.address, passwordFile: server.passwordFile,
                        workers: [(3000, 100), (3000, 100)], taps: taps, storage: "postgresql"),
                ]
            }
        }
    } catch {
        FileHandle.standardError.write(Data("sun-state: \(error)\n".utf8))
        return []
    }
}
