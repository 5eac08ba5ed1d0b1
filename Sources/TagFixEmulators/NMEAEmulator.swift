import Foundation
import Synchronization
public import TagFixCore
import TagFixSystem

/// A GNSS receiver on a pseudo-terminal: NMEA 0183 at a rate, for gpsd to read.
///
/// It is served on an `IOLoop` of its own (`ServedLine`), its epochs on the loop's timers; the
/// receiver itself is `NMEAReceiver`. It writes only after `start()`: gpsd probes a new tty for about a second and throws away what
/// arrives meanwhile, so a caller starts gpsd and its client first. Faults are injected from any
/// thread: drop the fix, degrade accuracy, stop talking, send garbage, jump time, jump or
/// teleport the position.
public final class NMEAEmulator: Sendable {
    /// Where positions come from.
    public enum Source: Sendable {
        /// A fixed point, its position error σ metres per axis (`noise`), shaped by `sky`: by
        /// default errors with memory (GNSSErrorModel: a slow error with τ 180 s and jitter),
        /// `.independent` for seeded independent noise at every epoch.
        case at(Coordinate, noise: Double, seed: UInt64, sky: GNSSErrorModel.Sky = .open)
        /// A route walked at `speed` metres per second, with noise.
        case route(Route, speed: Double, noise: Double, seed: UInt64, sky: GNSSErrorModel.Sky = .open)
        /// A binary recording (SiRF, as in gpsd's regression logs), written one packet per tick:
        /// packets start with A0 A2.
        case bytes([UInt8])
        /// Sentences from a recorded log, replayed in order (lines that are not NMEA are skipped),
        /// grouped into epochs by their timestamps.
        case log([String])
    }

    private struct State: Sendable {
        var started = false
        var fixLost = false
        var silent = false
        /// A `.log` source starts over when it ends (as gpsfake does without -1).
        var repeatsLog = false
        var sigma: Double?
        var garbage = 0
        var timeOffset: Duration = .zero
        var epochs = 0
        /// Where the receiver stands now, when moved there by `move(to:)`.
        var position: Coordinate?
        /// Metres north and east added to every position (`displace`): a receiver that jumped.
        var displacement = (north: 0.0, east: 0.0)
        /// When each epoch (by its NMEA time) was written, for latency benchmarks; the last 10 000.
        var writes: [(time: Timestamp, written: ContinuousClock.Instant)] = []
    }

    public let path: String
    private let line: ServedLine
    private let rate: Double
    private let state = Mutex(State())
    /// The receiver and its schedule: touched only on the loop's thread.
    private let receiver: Mutex<Receiver>

    private struct Receiver: Sendable {
        var model: NMEAReceiver
        /// When the receiver started (its error model's time: monotonic, so a jumped NMEA clock
        /// moves no error), and when its next epoch is due.
        let started = ContinuousClock.now
        var next = ContinuousClock.now
    }

    /// - Parameter rate: epochs per second.
    public init(source: Source, rate: Double = 1) throws(EmulatorError) {
        line = try ServedLine(named: "nmea")
        path = line.pty.path
        self.rate = max(0.1, min(rate, 20))
        receiver = Mutex(Receiver(model: NMEAReceiver(source: source)))
        // Drain what gpsd writes (probes) so the line never fills.
        line.start { [line] in _ = line.pty.read() }
        line.loop.execute { [self] in tick() }
    }

    /// Begins writing.
    public func start() { state.withLock { $0.started = true } }
    /// The receiver loses its fix (GGA quality 0, RMC V) or regains it.
    public func setFixLost(_ lost: Bool) { state.withLock { $0.fixLost = lost } }
    /// With a `.log` source: start the log over when it ends (each pass is a new stream of the
    /// same times to a client), or play it once and fall silent (the default).
    public func setRepeatsLog(_ repeats: Bool) { state.withLock { $0.repeatsLog = repeats } }
    /// The receiver reports this position error (σ metres per axis); `nil` for its normal one.
    public func setAccuracy(sigma: Double?) { state.withLock { $0.sigma = sigma } }
    /// The receiver stops talking, or starts again.
    public func setSilent(_ silent: Bool) { state.withLock { $0.silent = silent } }
    /// The next `lines` lines are garbage (bad checksums, cut sentences, noise).
    public func sendGarbage(lines: Int = 3) { state.withLock { $0.garbage += lines } }
    /// The receiver is carried to `position` (a fixed point or a route is left for it).
    public func move(to position: Coordinate) { state.withLock { $0.position = position } }
    /// The receiver's position jumps `metres` towards `bearing` (degrees from north) and stays
    /// there, its accuracy unchanged: a GPS that lies.
    public func displace(metres: Double, bearing: Double) {
        let radians = bearing * .pi / 180
        state.withLock {
            $0.displacement.north += metres * cos(radians)
            $0.displacement.east += metres * sin(radians)
        }
    }
    /// The receiver's clock jumps.
    public func jumpTime(by offset: Duration) { state.withLock { $0.timeOffset += offset } }
    /// When each recent epoch went out on the line, by the time its sentences carry.
    public var writeLog: [(time: Timestamp, written: ContinuousClock.Instant)] { state.withLock { $0.writes } }
    /// Epochs written so far.
    public var epochsWritten: Int { state.withLock { $0.epochs } }

    /// Stops writing and closes the line: clients see the device go away. Returns at once;
    /// `stopped()` awaits the end.
    public func stop() { line.stop() }

    /// `stop()`, then returns once the line is closed and the emulator's loop has ended.
    public func stopped() async { await line.stopped() }

    // MARK: - The line, on the loop's thread

    /// Writes the epoch due now and schedules the next, `1 / rate` after this one was due (or
    /// now, when it is late). Not started or silent, it looks again every 20 ms, and the epochs
    /// start afresh from when it talks again.
    private func tick() {
        let snapshot = state.withLock { state -> State in
            let snapshot = state
            if state.started, !state.silent, state.garbage > 0 { state.garbage -= 1 }
            return snapshot
        }
        let now = ContinuousClock.now
        guard snapshot.started, !snapshot.silent else {
            receiver.withLock { $0.next = now }
            line.loop.schedule(after: .milliseconds(20)) { [self] in tick() }
            return
        }
        let conditions = NMEAReceiver.Conditions(
            fixLost: snapshot.fixLost, repeatsLog: snapshot.repeatsLog, sigma: snapshot.sigma, garbage: snapshot.garbage > 0,
            timeOffset: snapshot.timeOffset, position: snapshot.position, displacement: snapshot.displacement)
        let output = receiver.withLock { $0.model.epoch(conditions, now: Date(), elapsed: now - $0.started) }
        if let packet = output.packet {
            line.write(packet)
            state.withLock { $0.epochs += 1 }
        }
        if !output.text.isEmpty {
            let written = ContinuousClock.now  // the epoch goes to the line now
            line.write(Array(output.text.utf8))
            state.withLock {
                $0.epochs += 1
                if let stamped = output.stamped {
                    $0.writes.append((stamped, written))
                    if $0.writes.count > 10_000 { $0.writes.removeFirst($0.writes.count - 10_000) }
                }
            }
        }
        let next = receiver.withLock { receiver -> ContinuousClock.Instant in
            receiver.next = receiver.next.advanced(by: .seconds(1 / rate))
            if receiver.next <= .now { receiver.next = .now }
            return receiver.next
        }
        line.loop.schedule(at: next) { [self] in tick() }
    }

    /// The epoch a receiver at `origin` writes for an error sample: its position, and the figures
    /// it states (GST σ, HDOP, satellites, fix quality) for it. Pure.
    ///
    /// gpsd 3.22 ignores GST for its error estimates and takes eph = HDOP × 4.75 m for a DGPS fix
    /// (GGA quality 2), HDOP × 19 m for a plain one. An open-sky fix from the correlated model is a
    /// receiver with SBAS: DGPS, 12 satellites (10 in a multipath episode), and its HDOP (two
    /// decimals) such that gpsd's eph is the 95 % radius of the σ the receiver states,
    /// 2.448 σ. With independent noise, the old figures: HDOP 0.6–0.7 and DGPS (±3 m from gpsd).
    /// A degraded sky (setAccuracy) loses the corrections.
    public static func epoch(
        at time: Timestamp, origin: Coordinate, error: GNSSErrorModel.Sample, displacement: (north: Double, east: Double),
        sky: GNSSErrorModel.Sky, degraded: Bool
    ) -> NMEA.Epoch {
        let north = error.north + displacement.north
        let east = error.east + displacement.east
        let latitude = origin.latitude + north / 111_320
        let longitude = origin.longitude + east / (111_320 * max(0.01, cos(origin.latitude * .pi / 180)))
        var epoch = NMEA.Epoch(time: time, position: try? Coordinate(latitude: latitude, longitude: longitude))
        let sigma = error.statedSigma
        epoch.sigmaLatitude = sigma
        epoch.sigmaLongitude = sigma
        if degraded || sky.isIndependent {
            epoch.hdop = max(0.6, sigma / 2.2)
            epoch.satellites = degraded ? max(4, 12 - Int(sigma / 4)) : 12
            epoch.quality = degraded ? 1 : 2
        } else {
            epoch.hdop = max(0.01, GNSSErrorModel.radius95PerSigma * sigma / 4.75)
            epoch.hdopDigits = 2
            epoch.satellites = error.multipath ? 10 : 12
            epoch.quality = 2
        }
        return epoch
    }

    /// Splits a binary recording at each SiRF start sequence (A0 A2).
    public static func packets(_ bytes: [UInt8]) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if index + 1 < bytes.count, bytes[index] == 0xA0, bytes[index + 1] == 0xA2, !current.isEmpty {
                packets.append(current)
                current = []
            }
            current.append(bytes[index])
            index += 1
        }
        if !current.isEmpty { packets.append(current) }
        return packets
    }

    /// A gpsd regression log. NMEA logs replay their sentences. Binary logs replay as recorded,
    /// their `#` comment header included: gpsd reads comment packets, and a `# Date:` line gives
    /// it the date context it needs to place SiRF week numbers.
    public static func recording(_ data: [UInt8]) -> Source {
        var start = 0
        while start < data.count, data[start] == UInt8(ascii: "#") {
            while start < data.count, data[start] != 0x0A { start += 1 }
            start += 1
        }
        let body = Array(data[min(start, data.count)...])
        if body.first == UInt8(ascii: "$") || body.first == UInt8(ascii: "!"), let text = String(validating: body, as: UTF8.self) {
            return .log(text.split(whereSeparator: \.isNewline).map(String.init))
        }
        return .bytes(data)
    }

    /// Groups a log's NMEA sentences into epochs: a new epoch starts when the time field of a
    /// GGA or RMC changes.
    public static func epochs(_ lines: [String]) -> [[String]] {
        var epochs: [[String]] = []
        var current: [String] = []
        var currentTime: Substring?
        for raw in lines {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard line.hasPrefix("$") || line.hasPrefix("!") else { continue }
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            let kind = fields.first.map { $0.suffix(3) } ?? ""
            if (kind == "GGA" || kind == "RMC"), fields.count > 1 {
                let time = fields[1]
                if let currentTime, time != currentTime, !current.isEmpty {
                    epochs.append(current)
                    current = []
                }
                currentTime = time
            }
            current.append(line)
        }
        if !current.isEmpty { epochs.append(current) }
        return epochs
    }
}
