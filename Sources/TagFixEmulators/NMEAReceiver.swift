import Foundation
import TagFixCore

/// The GNSS receiver an `NMEAEmulator` puts on its line, without the line: what it writes at each
/// epoch, from its source (a fixed point, a route, a log, a binary recording) and the faults the
/// emulator holds. Pure but for the times it is handed: the wall clock's (the sentences' UTC, a
/// route's progress) and the receiver's own monotonic one (its error model's).
struct NMEAReceiver: Sendable {
    /// The faults and settings in force at an epoch (the emulator's, read once for it).
    struct Conditions: Sendable {
        var fixLost = false
        var repeatsLog = false
        /// A degraded accuracy (σ metres per axis); `nil`: the receiver's normal one.
        var sigma: Double?
        /// Whether garbage goes out before the epoch (one of the lines asked for).
        var garbage = false
        var timeOffset: Duration = .zero
        var position: Coordinate?
        var displacement = (north: 0.0, east: 0.0)
    }

    /// What one epoch puts on the line, in order: a binary packet, then text.
    struct Output: Sendable {
        var packet: [UInt8]?
        var text = ""
        /// The UTC its sentences carry (a positioned epoch).
        var stamped: Timestamp?
    }

    private var errors = GNSSErrorModel(sigma: 1.5, sky: .independent, seed: 1)
    private var origin: Coordinate?
    private var sigmaDefault = 1.5
    private var log: [[String]] = []
    private var logIndex = 0
    private var packets: [[UInt8]] = []
    private var packetIndex = 0
    private var route: (path: Route, speed: Double)?
    /// When the walk along a route began (the first epoch's wall time).
    private var walkStart: Date?

    init(source: NMEAEmulator.Source) {
        switch source {
        case .at(let position, let noise, let seed, let sky):
            origin = position
            sigmaDefault = max(noise, 0.3)
            errors = GNSSErrorModel(sigma: sigmaDefault, sky: sky, seed: seed)
        case .log(let lines):
            log = NMEAEmulator.epochs(lines)
        case .route(let path, let speed, let noise, let seed, let sky):
            route = (path, speed)
            origin = path.points[0]
            sigmaDefault = max(noise, 0.3)
            errors = GNSSErrorModel(sigma: sigmaDefault, sky: sky, seed: seed)
        case .bytes(let bytes):
            packets = NMEAEmulator.packets(bytes)
        }
    }

    /// The next epoch at wall time `now`, `elapsed` into the receiver's run.
    mutating func epoch(_ conditions: Conditions, now: Date, elapsed: Duration) -> Output {
        var output = Output()
        if conditions.garbage {
            output.text += "$GPGGA,12*00\r\n$GPRMC,garbage,,,,*7F\r\n\u{1}\u{2}noise\r\n"
        }
        if let (path, speed) = route {
            let started = walkStart ?? now
            walkStart = started
            origin = path.position(at: now.timeIntervalSince(started) * speed)
        }
        if let moved = conditions.position { origin = moved }
        if let origin {
            let time = Timestamp(secondsSinceEpoch: now.timeIntervalSince1970)!.advanced(by: conditions.timeOffset)
            output.stamped = time
            let sigma = conditions.sigma ?? sigmaDefault
            errors.setSigma(sigma)
            let error = errors.sample(at: elapsed)
            var epoch = NMEAEmulator.epoch(
                at: time, origin: origin, error: error, displacement: conditions.displacement, sky: errors.sky,
                degraded: conditions.sigma != nil)
            if conditions.fixLost { epoch.position = nil }
            output.text += NMEA.sentences(epoch).joined()
        } else if logIndex < log.count {
            output.text += log[logIndex].map { $0 + "\r\n" }.joined()
            logIndex += 1
            if logIndex == log.count, conditions.repeatsLog { logIndex = 0 }
        } else if packetIndex < packets.count {
            output.packet = packets[packetIndex]
            packetIndex += 1
        }
        return output
    }
}
