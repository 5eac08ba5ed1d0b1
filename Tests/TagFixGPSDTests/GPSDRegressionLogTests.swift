import Foundation
import Glibc
import Synchronization
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixTesting
import Testing

/// gpsd's regression logs: NMEA, and one SiRF binary (bu303-nofix), replayed as recorded.
private let nmeaLogs = TestData.files(in: "nmea/gpsd", suffix: ".log")

/// `gpspipe -w` on a private gpsd: every JSON report gpsd sends, read on a thread of its own.
private final class GPSPipe: Sendable {
    static let path = "/usr/bin/gpspipe"
    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: path) }

    private let program: RunningProgram
    /// How many of its lines `lines(until:)` has handed out.
    private let taken = Mutex(0)

    private init(_ program: RunningProgram) { self.program = program }

    /// Runs `gpspipe -w` on `port` for the length of `body`, which starts once gpsd has answered
    /// its WATCH; stopped however `body` ends.
    static func with<Value>(port: Int, _ body: (GPSPipe) async throws -> Value) async throws -> Value {
        try await TestProgram.withRunning(path, ["-w", "127.0.0.1:\(port)"]) { program in
            let started = GPSPipe(program)
            let answered = await started.lines(until: { $0.contains(#""class":"WATCH""#) })
            guard answered.last?.contains(#""class":"WATCH""#) == true else {
                Issue.record("gpspipe never showed gpsd's WATCH: \(program.transcript)")
                throw POSIXError(.ECONNREFUSED)
            }
            return try await body(started)
        }
    }

    /// The lines gpspipe writes after those handed out before, up to the first that `last`
    /// accepts (included), its end, or 10 s without a line.
    func lines(until last: @escaping @Sendable (String) -> Bool) async -> [String] {
        var lines: [String] = []
        var quietSince = ContinuousClock.now
        while true {
            // Whole lines only: the text after the last newline is still being written.
            // (gpsd ends its lines with CR LF, one Character to String: split at the LF bytes.)
            let written = Array(program.stdout.utf8).split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map {
                String(decoding: $0, as: UTF8.self)
            }
            let new = taken.withLock { taken in
                defer { taken = max(taken, written.count) }
                return Array(written.dropFirst(taken))
            }
            for (index, line) in new.enumerated() {
                lines.append(line)
                if last(line) {
                    // What came after it is the next call's.
                    taken.withLock { $0 -= new.count - index - 1 }
                    return lines
                }
            }
            if !new.isEmpty { quietSince = ContinuousClock.now }
            if program.outputClosed || ContinuousClock.now - quietSince > .seconds(10) { return lines }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}

@Suite("gpsd's regression logs through a real gpsd", .timeLimit(.minutes(2)))
struct GPSDRegressionLogTests {
    /// Two clean epochs at a place no log uses, after an NMEA log: when the first one's fix
    /// arrives, gpsd has sent every report of the log. (gpsd places their date by the log's, so
    /// they are told by their position; there are two because gpsd reports an epoch of a
    /// receiver whose cycle it has learnt, a u-blox's ending with GLL, when the next one starts.)
    static let sentinel = [0, 1].flatMap { second in
        NMEA.sentences(
            NMEA.Epoch(
                time: Timestamp(iso8601: "2031-01-01T12:00:00Z")!.advanced(by: .seconds(second)),
                position: Coordinate(validLatitude: -45, longitude: 170)))
    }.map { $0.trimmingCharacters(in: .newlines) }

    @Test(
        "every epoch comes once as a fix, then refined: the position gpsd gave for its time, the highest mode and the altitude gpsd gave for that position, as in gpsd's .chk and gpspipe -w on the same gpsd",
        .enabled(
            if: PrivateGPSD.installedPath != nil && GPSPipe.isInstalled && !nmeaLogs.isEmpty, "needs gpsd, gpspipe and TAGFIX_TESTDATA"),
        arguments: nmeaLogs)
    func replay(_ path: String) async throws {
        let check = GPSDEpochTruth.epochs(try TestData.gpsdCheckReports(forLog: path))
        let data = try #require(FileManager.default.contents(atPath: path))
        // A binary log (SiRF, no fix) ends with the .chk's last time; an NMEA log with the sentinel.
        var source = NMEAEmulator.recording(Array(data))
        let binary: Bool
        if case .log(let lines) = source {
            source = .log(lines + Self.sentinel)
            binary = false
        } else {
            binary = true
        }
        let lastTime = binary ? check.keys.max() : nil
        let receiver = try NMEAEmulator(source: source, rate: 20)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            try await GPSPipe.with(port: gpsd.port) { gpspipe in
                // No option for the recordings' dates (2002-2034): the default source takes any date.
                var events = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock()).events().makeAsyncIterator()
                while let event = await events.next() {
                    if case .connected = event { break }
                }
                // gpspipe's last line: the sentinel's TPV under a time of its own (under the log's last
                // time, it is the sentinel's position reaching gpsd before its time: not the end).
                let logTimes = Set(check.keys)
                let piping = Task {
                    await gpspipe.lines { line in
                        guard case .tpv(let tpv)? = try? GPSDReport.parse(line: line), let time = tpv.time else { return false }
                        if let lastTime { return time == lastTime }
                        return tpv.latitude == -45 && !logTimes.contains(time)
                    }
                }
                receiver.start()
                var firsts: [Timestamp: Fix] = [:], finals: [Timestamp: Fix] = [:]
                loop: while let event = await events.next() {
                    switch event {
                    case .fix(let fix):
                        let time = fix.reportedTime
                        if fix.coordinate?.latitude == -45 { break loop }
                        #expect(firsts[time] == nil, "\(time) came twice as a new epoch")
                        firsts[time] = fix
                        finals[time] = fix
                        if time == lastTime { break loop }
                    case .refined(let fix):
                        let first = try #require(firsts[fix.reportedTime], "a refinement of \(fix.reportedTime), never delivered")
                        #expect(fix.time == first.time, "a refinement keeps its epoch's time on the axis")
                        finals[fix.reportedTime] = fix
                    default: break
                    }
                }
                let piped = GPSDEpochTruth.epochs(
                    (await piping.value).filter { $0.hasPrefix("{") }.compactMap { try? GPSDReport.parse(line: $0) })
                #expect(Set(finals.keys) == Set(check.keys), "\(finals.keys.sorted()) vs \(check.keys.sorted())")
                for (time, fix) in finals.sorted(by: { $0.key < $1.key }) {
                    let chk = try #require(check[time], "no .chk TPV at \(time); .chk has \(check.keys.sorted())")
                    let pipe = try #require(piped[time], "gpspipe saw no TPV at \(time)")
                    guard let position = fix.coordinate else {
                        #expect(chk.positions.isEmpty && pipe.positions.isEmpty, "\(time): gpsd gave a position, we kept none")
                        continue
                    }
                    // gpsd's .chk (gpsfake): a position gpsd gave for this time, the highest mode and the
                    // altitude it gave for that position.
                    let epoch = try #require(chk.at(position), "\(time): \(position) is not one of the .chk's \(chk.positions)")
                    #expect(fix.mode.rawValue == epoch.mode, "\(time): \(fix.mode) where the .chk has mode \(epoch.mode)")
                    #expect(fix.altitudeHAE == epoch.latest(\.altHAE), "\(time)")
                    // gpspipe -w on the same gpsd: the first position of the time, and every field as gpsd
                    // last gave it for that position.
                    #expect(position == pipe.positions.first, "\(time): the first position gpsd gave for it, \(pipe.positions)")
                    #expect(fix.mode.rawValue == pipe.mode, "\(time)")
                    func same(_ ours: Double?, _ field: KeyPath<GPSDReport.TPV, Double?>, _ name: String) {
                        switch (ours, pipe.latest(field)) {
                        case (nil, nil): break
                        case (let a?, let b?): #expect(abs(a - b) <= 1e-6, "\(name) \(a) vs gpspipe's \(b) at \(time)")
                        case (let a, let b):
                            Issue.record("\(name): \(String(describing: a)) vs gpspipe's \(String(describing: b)) at \(time)")
                        }
                    }
                    same(fix.altitudeHAE, \.altHAE, "altHAE")
                    same(fix.altitudeMSL, \.altMSL, "altMSL")
                    same(fix.errorEstimates?.eph, \.eph, "eph")
                    same(fix.errorEstimates?.epx, \.epx, "epx")
                    same(fix.errorEstimates?.epy, \.epy, "epy")
                    same(fix.errorEstimates?.epv, \.epv, "epv")
                    same(fix.speed, \.speed, "speed")
                    same(fix.track, \.track, "track")
                    same(fix.climb, \.climb, "climb")
                }
            }
        }
    }

    /// pynmeagps's bad-checksum log: one valid RMC, so gpsd's only fix is a 2D one with no SKY
    /// after it. Held for a SKY that never came, it was never delivered.
    @Test(
        "a recording whose only fix gpsd reports (mode 2, no SKY after it) gives that fix",
        .enabled(if: PrivateGPSD.installedPath != nil && lone != nil, "needs gpsd and TAGFIX_TESTDATA"))
    func loneFix() async throws {
        let lines = try TextFile.read(try #require(lone)).split(whereSeparator: \.isNewline).map(String.init)
        let receiver = try NMEAEmulator(source: .log(lines), rate: 20)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            var events = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock()).events().makeAsyncIterator()
            while let event = await events.next() {
                if case .connected = event { break }
            }
            receiver.start()
            let fix = try #require(await nextFix(&events))
            #expect(fix.mode == .twoD)
            #expect(abs((fix.coordinate?.longitude ?? 0) + 102.2404103) < 1e-6)
        }
    }
}

/// The log whose only fix has no SKY after it.
private let lone = TestData.files(in: "nmea/other", suffix: "nmeabadck.log").first

/// pynmeagps's logs: a u-blox 7 start-up, and sentences with bad checksums / a non-numeric field.
private let otherLogs = TestData.files(in: "nmea/other", suffix: ".log")

@Suite("Garbage NMEA through a real gpsd", .timeLimit(.minutes(2)))
struct GarbageNMEATests {
    /// A clean epoch at a time no log uses: when its fix arrives, gpsd has handled all before it.
    static let sentinel = NMEA.sentences(
        NMEA.Epoch(time: Timestamp(iso8601: "2031-01-01T12:00:00Z")!, position: Coordinate(validLatitude: -45, longitude: 170)))

    static func fixesBeforeSentinel(_ lines: [String]) async throws -> [FixEvent] {
        let receiver = try NMEAEmulator(source: .log(lines + sentinel.map { $0.trimmingCharacters(in: .newlines) }), rate: 20)
        defer { receiver.stop() }
        return try await PrivateGPSD.with(device: receiver.path) { gpsd in
            var events = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock()).events().makeAsyncIterator()
            while let event = await events.next() {
                if case .connected = event { break }
            }
            receiver.start()
            var seen: [FixEvent] = []
            while let event = await events.next() {
                if case .fix(let fix) = event, fix.coordinate?.latitude == -45 { break }
                seen.append(event)
            }
            return seen
        }
    }

    @Test(
        "bad checksums and garbage: no crash, nothing implausible delivered",
        .enabled(if: PrivateGPSD.installedPath != nil && !otherLogs.isEmpty, "needs gpsd and TAGFIX_TESTDATA"), arguments: otherLogs)
    func garbage(_ path: String) async throws {
        let lines = try TextFile.read(path).split(whereSeparator: \.isNewline).map(String.init)
        let events = try await Self.fixesBeforeSentinel(lines)
        for case .fix(let fix) in events {
            if let position = fix.coordinate {
                #expect((-90...90).contains(position.latitude) && (-180...180).contains(position.longitude))
            }
            #expect(fix.horizontalAccuracy.map { $0.isFinite && $0 >= 0 } ?? true)
        }
        let fixes = events.compactMap { event -> Fix? in
            if case .fix(let fix) = event { return fix }
            return nil
        }
        if path.hasSuffix("pygpsdata-nmeabadck.log") {
            // Two of its three RMC fail their checksum; gpsd keeps only the valid one.
            #expect(fixes.count == 1)
            #expect(fixes.first.map { abs(($0.coordinate?.longitude ?? 0) + 102.2404103) < 1e-6 } == true)
            #expect(fixes.first?.horizontalAccuracy == nil, "no error estimate: the verifier says unknown_accuracy")
        } else {
            #expect(fixes.contains { $0.hasPosition }, "the u-blox 7 start-up ends in a fix")
        }
    }

    @Test(
        "sentences mangled by the emulator's garbage fault give no fix",
        .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
    func emulatorGarbage() async throws {
        let noise = [
            "$GPGGA,12*00", "$GPRMC,garbage,,,,*7F", "\u{1}\u{2}noise", "$GPGGA,103607.00,5327.03942,N,00214.42462,W,1,08,1.0,10,M,,,,*00",
        ]
        let events = try await Self.fixesBeforeSentinel(noise)
        #expect(!events.contains { if case .fix = $0 { return true } else { return false } }, "\(events)")
    }
}
