import CGPS
import Foundation
import Synchronization
public import TagFixCore
public import TagFixDevices
import TagFixSystem

/// Where gpsd is: `gpsd://HOST:PORT[/DEVICE]`, by default `localhost:2947` (what gpsd clients
/// assume), optionally one device only.
public struct GPSDEndpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var device: String?

    public init(host: String = "localhost", port: Int = 2947, device: String? = nil) {
        self.host = host
        self.port = port
        self.device = device
    }

    /// Parses `gpsd://HOST:PORT[/DEVICE]`, `gpsd://HOST`, `HOST:PORT` or `gpsd://` (defaults).
    public init(_ text: String) throws(GPSDEndpointError) {
        var rest = Substring(text)
        if rest.hasPrefix("gpsd://") { rest = rest.dropFirst(7) } else if rest.contains("://") { throw .notGPSD(text) }
        var device: String?
        if let slash = rest.firstIndex(of: "/") {
            device = String(rest[slash...])
            rest = rest[..<slash]
        }
        var host = "localhost", port = 2947
        if !rest.isEmpty {
            let parsed: HostPort
            do {
                parsed = try HostPort(parsing: rest)
            } catch {
                if case .port(let value) = error { throw .badPort(value) }
                throw .malformed(text)
            }
            if !parsed.host.isEmpty { host = parsed.host }
            if let value = parsed.port {
                guard (1...65535).contains(value) else { throw .badPort(String(value)) }
                port = value
            }
        }
        self.init(host: host, port: port, device: device.flatMap { $0 == "/" ? nil : $0 })
    }

    public var description: String { "gpsd://\(HostPort.described(host, port))\(device ?? "")" }

    /// What to tell a person when nothing answers here: what is true, and what to do.
    public func notAnswering(_ reason: String) -> String {
        "gpsd at \(host):\(port) does not answer (\(reason)): start gpsd (sudo systemctl start gpsd) or check --gps; see hardware.md#gpsd"
    }

    /// The reason (e.g. `Connection refused`) inside a `notAnswering` message, for a caller that
    /// words its own advice; other messages come back whole.
    public static func reason(inNotAnswering message: String) -> String {
        guard let open = message.range(of: " does not answer ("),
            let close = message.range(of: "): ", range: open.upperBound..<message.endIndex)
        else { return message }
        return String(message[open.upperBound..<close.lowerBound])
    }
}

public enum GPSDEndpointError: Error, Sendable, Hashable, CustomStringConvertible {
    case notGPSD(String)
    case malformed(String)
    case badPort(String)

    public var description: String {
        switch self {
        case .notGPSD(let text): "\"\(text)\" is not a gpsd:// URL (gpsd://HOST:PORT[/DEVICE])"
        case .malformed(let text): "\"\(text)\" is not HOST:PORT (an IPv6 host in brackets: [::1]:2947)"
        case .badPort(let text): "port \"\(text)\" is not a number in 1…65535"
        }
    }
}

/// Live fixes from gpsd through libgps.
///
/// It connects and WATCHes, turns each TPV into a `Fix` (with the latest SKY's satellites used),
/// drops what cannot be a fix (no time, a NaN or out-of-range position) with a `.rejected`
/// event, delivers each epoch at once as `.fix` and the more complete reports gpsd sends for it
/// later as `.refined` (`GPSDStream` says how epochs are merged), reports "GPS unavailable" and
/// reconnects with backoff when gpsd goes away, and reports a silent gpsd after
/// `silenceThreshold`.
///
/// Nothing is dropped for its date: each fix is stamped on arrival with `clock` (monotonic) and
/// its receiver time is mapped onto that axis by a `ReceiverTimeline`, so a receiver whose date
/// disagrees with the system clock (a Pi without RTC, a recording from another year) gives fixes
/// like any other. A fix's `time` is its axis time and `receiverTime` what gpsd reported. A
/// receiver time that goes backwards or leaps ahead starts a new stream, said once with
/// `.restarted`.
public final class GPSDFixSource<C: Clock>: FixSource, Sendable where C.Instant == Timestamp, C.Duration == Duration {
    public struct Options: Sendable {
        public var reconnectDelay: Duration = .milliseconds(200)
        public var maximumBackoff: Duration = .seconds(2)
        /// Report `.silent` when gpsd has sent nothing for this long.
        public var silenceThreshold: Duration = .seconds(3)
        public init() {}
    }

    public let endpoint: GPSDEndpoint
    public var sourceID: String { endpoint.description }
    private let clock: C
    private let options: Options
    private let thread = DeviceThread()

    public init(endpoint: GPSDEndpoint = GPSDEndpoint(), clock: C, options: Options = Options()) {
        self.endpoint = endpoint
        self.clock = clock
        self.options = options
    }

    public func events() -> AsyncStream<FixEvent> {
        thread.start(name: "gpsd \(endpoint)") { [self] events in self.run(events) }
    }

    private var isStopped: Bool { thread.isStopped }
    private func pause(_ duration: Duration) { thread.pause(duration) }

    // MARK: - The gpsd thread

    private func run(_ events: AsyncStream<FixEvent>.Continuation) {
        var backoff = options.reconnectDelay
        var down = false
        var state = GPSDStream()
        while !isStopped {
            var error: Int32 = 0
            guard let data = cgps_open(endpoint.host, String(endpoint.port), &error) else {
                if !down {
                    events.yield(.unavailable(endpoint.notAnswering(Self.describe(error))))
                    down = true
                }
                pause(backoff)
                backoff = min(backoff * 2, options.maximumBackoff)
                continue
            }
            defer { cgps_close(data) }
            _ = endpoint.device.map { cgps_watch(data, $0) } ?? cgps_watch(data, nil)
            if down { events.yield(.resumed) }
            down = false
            backoff = options.reconnectDelay
            var lastMessage = clock.now
            var silent = false
            var announced = false
            while !isStopped {
                // The wait ends in time for a fix held for its SKY (GPSDStream.nextDeadline).
                let wait = state.nextDeadline.map { min(max(clock.now.duration(to: $0), .zero), .milliseconds(200)) } ?? .milliseconds(200)
                guard cgps_waiting(data, Int32(wait.nanoseconds / 1000)) else {
                    for event in state.advance(to: clock.now) { events.yield(event) }
                    let quiet = lastMessage.duration(to: clock.now)
                    if !silent, quiet >= options.silenceThreshold {
                        silent = true
                        events.yield(.silent(quiet))
                    }
                    continue
                }
                var report = cgps_report()
                let result = cgps_read(data, &report)
                if result < 0 {
                    events.yield(.unavailable("gpsd at \(endpoint.host):\(endpoint.port) went away; reconnecting"))
                    down = true
                    break
                }
                guard result > 0 else { continue }
                lastMessage = clock.now
                if silent {
                    silent = false
                    events.yield(.resumed)
                }
                // The answers to ?WATCH (DEVICES, then WATCH, which libgps 3.22 leaves unmarked) follow
                // VERSION: the first of them means gpsd streams to us.
                if !announced, report.report_class != Int32(CGPS_VERSION.rawValue) {
                    announced = true
                    events.yield(.connected("gpsd at \(endpoint.host):\(endpoint.port)"))
                }
                let now = clock.now
                let produced = GPSDReport.reports(in: report).flatMap { state.receive($0, arrival: now) } + state.advance(to: now)
                DebugLog.debug("gpsd \(endpoint): class \(report.report_class) mode \(report.mode) → \(produced)")
                for event in produced { events.yield(event) }
            }
            if down { pause(backoff) }
        }
    }

    static func describe(_ error: Int32) -> String { describeGPSError(error) }
}

extension GPSDReport {
    /// The reports one libgps read holds, in gpsd's order (a TPV, then its SKY when both came).
    static func reports(in report: cgps_report) -> [GPSDReport] {
        var reports: [GPSDReport] = []
        if report.report_class == Int32(CGPS_TPV.rawValue) {
            let device = withUnsafeBytes(of: report.device) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            reports.append(
                .tpv(
                    TPV(
                        device: device.isEmpty ? nil : device,
                        time: report.has_time
                            ? Timestamp(nanosecondsSinceEpoch: report.time_seconds &* 1_000_000_000 &+ report.time_nanoseconds) : nil,
                        mode: Int(report.mode), status: Int(report.status), latitude: report.latitude, longitude: report.longitude,
                        altHAE: report.alt_hae, altMSL: report.alt_msl, eph: report.eph, epx: report.epx, epy: report.epy,
                        epv: report.epv, speed: report.speed, track: report.track, climb: report.climb)))
        }
        if report.has_sky {
            reports.append(
                .sky(
                    satellitesUsed: report.satellites_used >= 0 ? Int(report.satellites_used) : nil,
                    satellitesVisible: report.satellites_visible >= 0 ? Int(report.satellites_visible) : nil))
        }
        return reports
    }
}

// MARK: - Devices

/// A receiver gpsd reads.
public struct GPSDDevice: Sendable, Hashable {
    /// e.g. `/dev/ttyACM0`.
    public var path: String
    /// gpsd's driver for it, e.g. `u-blox` or `NMEA0183` (empty until gpsd has identified it).
    public var driver: String
}

extension GPSDEndpoint {
    /// The devices gpsd lists when asked to WATCH (its DEVICES reply), read on a thread of its
    /// own; `wait` bounds how long gpsd may take to answer.
    public func devices(wait: Duration = .seconds(2)) async -> Result<[GPSDDevice], GPSDQueryError> {
        let endpoint = self
        let stream: AsyncStream<Result<[GPSDDevice], GPSDQueryError>> = DeviceThread().start(name: "gpsd devices") { events in
            var error: Int32 = 0
            guard let data = cgps_open(endpoint.host, String(endpoint.port), &error) else {
                events.yield(.failure(.unreachable(endpoint.notAnswering(describeGPSError(error)))))
                return
            }
            defer { cgps_close(data) }
            _ = cgps_watch(data, nil)
            var remaining = Int(wait.seconds * 1_000_000)
            while remaining > 0 {
                let step = min(remaining, 100_000)
                remaining -= step
                guard cgps_waiting(data, Int32(step)) else { continue }
                var report = cgps_report()
                guard cgps_read(data, &report) >= 0 else { break }
                guard report.report_class == Int32(CGPS_DEVICE.rawValue) else { continue }
                var path = [CChar](repeating: 0, count: 512), driver = [CChar](repeating: 0, count: 64)
                let count = cgps_device(data, 0, &path, path.count, &driver, driver.count)
                var found: [GPSDDevice] = []
                for index in 0..<Int(count) {
                    _ = cgps_device(data, Int32(index), &path, path.count, &driver, driver.count)
                    found.append(GPSDDevice(path: Self.string(path), driver: Self.string(driver)))
                }
                events.yield(.success(found))
                return
            }
            events.yield(.failure(.noAnswer("\(endpoint) sent no DEVICES reply")))
        }
        for await result in stream { return result }
        return .failure(.noAnswer("\(self)"))
    }

    private static func string(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Why gpsd could not be asked.
public enum GPSDQueryError: Error, Sendable, Hashable, CustomStringConvertible {
    case unreachable(String)
    case noAnswer(String)

    public var description: String {
        switch self {
        case .unreachable(let what): what
        case .noAnswer(let what): "gpsd at \(what): check that it is gpsd listening there"
        }
    }
}

/// gps_open's error code for a person: an errno, or a negative libgps code (netlib's NL_*).
func describeGPSError(_ error: Int32) -> String {
    switch error {
    case 1...: Errno(rawValue: error).description
    case -1: "unknown service"
    case -2: "unknown host"
    case -4: "cannot open a socket"
    case -6: "cannot connect: nothing listens there"
    default: "libgps error \(error)"
    }
}
