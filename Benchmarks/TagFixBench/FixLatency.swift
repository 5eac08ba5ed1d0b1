// Fix latency: an NMEA epoch written to the pty → the fix delivered, through one private gpsd, to
// TagFix (GPSDFixSource) and to gpspipe -w at the same time, for the same epochs. Each arrival is
// matched to the moment the NMEA emulator wrote that epoch (by the time its sentences carry).
import Foundation
import Synchronization
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixGPSD

final class Arrivals: Sendable {
    let times = Mutex<[(Timestamp, ContinuousClock.Instant)]>([])
    func add(_ time: Timestamp) { times.withLock { $0.append((time, ContinuousClock.now)) } }
}

func latencies(_ arrivals: [(Timestamp, ContinuousClock.Instant)], _ writes: [(time: Timestamp, written: ContinuousClock.Instant)])
    -> [Double]
{
    arrivals.compactMap { time, arrived in
        guard let write = writes.min(by: { abs($0.time.duration(to: time).seconds) < abs($1.time.duration(to: time).seconds) }),
            abs(write.time.duration(to: time).seconds) < 0.011
        else { return nil }
        return (arrived - write.written).seconds
    }
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
}

/// Prints one JSON object; `false` when it measured nothing (no epoch both clients delivered, or
/// no gpsd), so the caller exits non-zero instead of printing NaN as a result.
func fixLatencyBenchmark(seconds: Int) async -> Bool {
    guard PrivateGPSD.installedPath != nil, FileManager.default.isExecutableFile(atPath: "/usr/bin/gpspipe") else {
        print(#"{"bench":"fix-latency","error":"needs gpsd and gpspipe (apt-get install gpsd gpsd-clients)"}"#)
        return false
    }
    let receiver = try! NMEAEmulator(source: .at(Coordinate(validLatitude: 53.545, longitude: 9.966), noise: 0.5, seed: 3), rate: 5)
    defer { receiver.stop() }
    let gpsd = try! await PrivateGPSD.start(device: receiver.path)
    let measured = await fixLatency(seconds: seconds, receiver: receiver, gpsd: gpsd)
    await gpsd.stop()
    return measured
}

/// The benchmark on a running receiver and private gpsd.
private func fixLatency(seconds: Int, receiver: NMEAEmulator, gpsd: PrivateGPSD) async -> Bool {
    let ours = Arrivals(), theirs = Arrivals()
    // gpspipe -w, reading TPVs.
    let pipe = Pipe()
    let gpspipe = try! BenchChildren.start(
        executable: "/usr/bin/gpspipe", arguments: ["-w", "127.0.0.1:\(gpsd.port)"],
        standardOutput: pipe.fileHandleForWriting.fileDescriptor)
    try? pipe.fileHandleForWriting.close()
    DeviceThread.detach(name: "gpspipe reader") {
        var buffer = Data()
        while true {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { return }
            buffer += chunk
            while let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer = Data(buffer[(newline + 1)...])
                guard line.contains("\"class\":\"TPV\""), let value = try? JSONValue.parse(line), value["mode"]?.double ?? 0 >= 2,
                    let text = value["time"]?.string, let time = Timestamp(iso8601: text)
                else { continue }
                theirs.add(time)
            }
        }
    }
    let source = GPSDFixSource(endpoint: GPSDEndpoint(host: "127.0.0.1", port: gpsd.port), clock: MonotonicClock())
    let consumer = Task {
        for await event in source.events() {
            // Matched by the receiver's time, as gpspipe's TPV is: a fix's `time` is its time on
            // the session's axis (the monotonic clock, `ReceiverTimeline`), not what the
            // sentences said, so matching by it found no epoch at all.
            if case .fix(let fix) = event, fix.hasPosition { ours.add(fix.reportedTime) }
        }
    }
    try? await Task.sleep(for: .seconds(2))  // both clients connected and watching
    receiver.start()
    try? await Task.sleep(for: .seconds(Double(seconds)))
    consumer.cancel()
    await gpspipe.stop()
    let writes = receiver.writeLog
    // Both clients over the same epochs only.
    let common = Set(ours.times.withLock { $0.map(\.0) }).intersection(theirs.times.withLock { $0.map(\.0) })
    let a = latencies(ours.times.withLock { $0 }.filter { common.contains($0.0) }, writes)
    let b = latencies(theirs.times.withLock { $0 }.filter { common.contains($0.0) }, writes)
    let fields: [String: Double] = [
        "epochs": Double(a.count), "tagfix_ms_median": percentile(a, 0.5) * 1000, "tagfix_ms_p90": percentile(a, 0.9) * 1000,
        "tagfix_ms_min": (a.min() ?? .nan) * 1000, "gpspipe_ms_median": percentile(b, 0.5) * 1000,
        "gpspipe_ms_p90": percentile(b, 0.9) * 1000, "gpspipe_ms_min": (b.min() ?? .nan) * 1000,
    ]
    guard !a.isEmpty, !b.isEmpty else {
        let (mine, gpspipes) = (ours.times.withLock { $0.count }, theirs.times.withLock { $0.count })
        print(
            #"{"bench":"fix-latency","error":"no epoch matched: TagFix delivered \#(mine) fixes, gpspipe \#(gpspipes), \#(common.count) in common, \#(writes.count) written"}"#
        )
        return false
    }
    print(#"{"bench":"fix-latency","# + fields.keys.sorted().map { "\"\($0)\":\(fields[$0]!)" }.joined(separator: ",") + "}")
    return true
}
