// Fan-out: how long a VERDICT takes from the verifier's hand-off (the sink's `receive`) to a
// client of tagfix serve's event socket, with 1 and 100 clients; beside it, in the same run, how
// long gpsd takes from an NMEA epoch written on the pty to a TPV at 1 and 100 of its own watching
// clients. Every client reads on its own thread and stamps each line as it arrives.
import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixScenarios
import TagFixServe

/// A raw socket client that stamps each line on arrival.
final class StampingClient: Sendable {
    let fd: Int32
    let arrivals = Mutex<[(String, ContinuousClock.Instant)]>([])

    init(fd: Int32, hello: String) {
        self.fd = fd
        _ = hello.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var partial: [UInt8] = []
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { return }
                let now = ContinuousClock.now
                partial += buffer[0..<count]
                var lines: [(String, ContinuousClock.Instant)] = []
                var start = 0
                while let newline = partial[start...].firstIndex(of: 10) {
                    lines.append((String(decoding: partial[start..<newline], as: UTF8.self), now))
                    start = newline + 1
                }
                partial.removeFirst(start)
                arrivals.withLock { $0 += lines }
            }
        }
    }

    static func unix(_ path: String, hello: String) -> StampingClient {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return StampingClient(fd: fd, hello: hello)
    }

    static func tcp(port: Int, hello: String) -> StampingClient {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return StampingClient(fd: fd, hello: hello)
    }

    deinit { close(fd) }
}

func fanOutBenchmark(verdicts: Int) async {
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
    for clients in [1, 100] {
        guard
            let hub = try? ServeHub(
                ServeConfiguration(socketPath: path, release: "bench"), readers: ["bench"], gps: nil, placements: [], log: { _ in })
        else {
            print(#"{"bench":"serve-fan-out","error":"cannot listen on \#(path)"}"#)
            return
        }
        hub.start()
        let watchers = (0..<clients).map { _ in StampingClient.unix(path, hello: #"?WATCH={"enable":true};"# + "\n") }
        while !watchers.allSatisfy({ $0.arrivals.withLock { $0.contains { $0.0.hasPrefix(#"{"class":"WATCH""#) } } }) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        var sent: [ContinuousClock.Instant] = []
        for index in 0..<verdicts {
            sent.append(.now)
            hub.receive(replayed[index % replayed.count], now: nil)
            try? await Task.sleep(for: .milliseconds(20))  // 50 taps a second: far more than people tap
        }
        try? await Task.sleep(for: .milliseconds(200))
        var latencies: [Double] = []
        for watcher in watchers {
            for (line, arrived) in watcher.arrivals.withLock({ $0 }) where line.hasPrefix(#"{"class":"VERDICT","id":"#) {
                guard let id = Int(line.dropFirst(24).prefix { $0.isNumber }), id >= 1, id <= sent.count else { continue }
                latencies.append((arrived - sent[id - 1]).seconds)
            }
        }
        if ProcessInfo.processInfo.environment["TAGFIX_BENCH_DEBUG"] != nil {
            print(latencies.prefix(30).map { String(format: "%.2f", $0 * 1000) }.joined(separator: " "))
        }
        await hub.stop(reason: "bench over")
        print(
            #"{"bench":"serve-fan-out","server":"tagfix serve","clients":\#(clients),"messages":\#(latencies.count),"p50_ms":\#(percentile(latencies, 0.5) * 1000),"p99_ms":\#(percentile(latencies, 0.99) * 1000),"max_ms":\#(percentile(latencies, 1) * 1000)}"#
        )
    }
    guard PrivateGPSD.installedPath != nil else {
        print(#"{"bench":"serve-fan-out","server":"gpsd","error":"needs gpsd"}"#)
        return
    }
    for clients in [1, 100] {
        guard
            let receiver = try? NMEAEmulator(
                source: .at(Coordinate(validLatitude: 53.545, longitude: 9.966), noise: 0.5, seed: 3), rate: 10),
            let gpsd = try? await PrivateGPSD.start(device: receiver.path)
        else { return }
        let watchers = (0..<clients).map { _ in StampingClient.tcp(port: gpsd.port, hello: #"?WATCH={"enable":true,"json":true};"# + "\n") }
        try? await Task.sleep(for: .seconds(2))
        receiver.start()
        try? await Task.sleep(for: .seconds(Double(verdicts) / 50))
        let writes = receiver.writeLog
        var delays: [Double] = []
        for watcher in watchers {
            let tpvs = watcher.arrivals.withLock { $0 }.compactMap { line, arrived -> (Timestamp, ContinuousClock.Instant)? in
                guard line.contains(#""class":"TPV""#), let value = try? JSONValue.parse(line), value["mode"]?.double ?? 0 >= 2,
                    let text = value["time"]?.string, let time = Timestamp(iso8601: text)
                else { return nil }
                return (time, arrived)
            }
            delays += latencies(tpvs, writes)
        }
        gpsd.stop()
        receiver.stop()
        print(
            #"{"bench":"serve-fan-out","server":"gpsd","clients":\#(clients),"messages":\#(delays.count),"p50_ms":\#(percentile(delays, 0.5) * 1000),"p99_ms":\#(percentile(delays, 0.99) * 1000),"max_ms":\#(percentile(delays, 1) * 1000)}"#
        )
    }
}
