import Foundation
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixTesting
import Testing

/// gpsd's regression logs: NMEA, and one SiRF binary (bu303-nofix), replayed as recorded.
private let nmeaLogs = TestData.files(in: "nmea/gpsd", suffix: ".log")

@Suite("gpsd's regression logs through a real gpsd", .timeLimit(.minutes(2)))
struct GPSDRegressionLogTests {
    @Test(
        "every fix our client delivers matches gpsd's own .chk TPV for that time",
        .enabled(if: PrivateGPSD.installedPath != nil && !nmeaLogs.isEmpty, "needs gpsd and TAGFIX_TESTDATA"), arguments: nmeaLogs)
    func replay(_ path: String) async throws {
        let expected = try TestData.gpsdCheckTPVs(forLog: path)
        let data = try #require(FileManager.default.contents(atPath: path))
        let receiver = try NMEAEmulator(source: NMEAEmulator.recording(Array(data)), rate: 20)
        defer { receiver.stop() }
        let gpsd = try await PrivateGPSD.start(device: receiver.path)
        defer { gpsd.stop() }
        // No option for the recordings' dates (2002-2034): the default source takes any date.
        var events = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock()).events().makeAsyncIterator()
        while let event = await events.next() {
            if case .connected = event { break }
        }
        receiver.start()
        let last = expected.keys.max()
        var delivered: [Fix] = []
        if last != nil {
            while let event = await events.next() {
                if case .fix(let fix) = event {
                    delivered.append(fix)
                    if fix.reportedTime == last { break }
                }
            }
        }
        #expect(delivered.count == expected.count, "\(delivered.map(\.reportedTime)) vs \(expected.keys.sorted())")
        for fix in delivered {
            let tpv = try #require(expected[fix.reportedTime], "no .chk TPV at \(fix.reportedTime); .chk has \(expected.keys.sorted())")
            #expect(fix.mode.rawValue == Int(tpv["mode"]?.double ?? -1) || (fix.mode == .noFix && (tpv["mode"]?.double ?? 0) < 2))
            func close(_ a: Double?, _ b: Double?, _ what: String) {
                switch (a, b) {
                case (nil, nil): break
                case (let a?, let b?): #expect(abs(a - b) <= 1e-6, "\(what) \(a) vs \(b) at \(fix.time)")
                default: Issue.record("\(what): \(String(describing: a)) vs \(String(describing: b)) at \(fix.time)")
                }
            }
            close(fix.coordinate?.latitude, tpv["lat"]?.double, "lat")
            close(fix.coordinate?.longitude, tpv["lon"]?.double, "lon")
            close(fix.altitudeHAE, tpv["altHAE"]?.double, "altHAE")
            close(fix.errorEstimates?.eph, tpv["eph"]?.double, "eph")
            close(fix.errorEstimates?.epx, tpv["epx"]?.double, "epx")
            close(fix.errorEstimates?.epy, tpv["epy"]?.double, "epy")
            close(fix.speed, tpv["speed"]?.double, "speed")
            close(fix.track, tpv["track"]?.double, "track")
            close(fix.climb, tpv["climb"]?.double, "climb")
            close(fix.altitudeMSL, tpv["altMSL"]?.double, "altMSL")
            let status = Int(tpv["status"]?.double ?? 1)
            #expect(fix.status.rawValue == (status == 0 ? 1 : status))
        }
    }
}

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
        let gpsd = try await PrivateGPSD.start(device: receiver.path)
        defer { gpsd.stop() }
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
