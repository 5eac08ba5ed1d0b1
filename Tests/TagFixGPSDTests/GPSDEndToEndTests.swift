import Foundation
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import Testing

private let hasGPSD = PrivateGPSD.installedPath != nil

/// The next fix from a source, skipping status events.
func nextFix(_ iterator: inout AsyncStream<FixEvent>.Iterator) async -> Fix? {
    while let event = await iterator.next() {
        if case .fix(let fix) = event { return fix }
    }
    return nil
}

@Suite("Live fixes through a real gpsd, from the NMEA emulator", .timeLimit(.minutes(2)))
struct GPSDEndToEndTests {
    @Test("a fixed point with noise: 3D fixes near it, with gpsd's error estimates", .enabled(if: hasGPSD, "gpsd is not installed"))
    func fixedPoint() async throws {
        let point = Coordinate(validLatitude: 53.545, longitude: 9.966)
        let receiver = try NMEAEmulator(source: .at(point, noise: 1.0, seed: 7), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            let source = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock())
            var events = source.events().makeAsyncIterator()
            var fixes: [Fix] = []
            while fixes.count < 4, let fix = await nextFix(&events) {
                if fix.hasPosition { fixes.append(fix) }
            }
            #expect(fixes.count == 4)
            // The first epoch's TPV comes before its SKY; it is held for that SKY, so even the first
            // fix knows its satellites (a verdict on it logs them).
            for fix in fixes {
                let distance = Geodesic.distance(from: point, to: try #require(fix.coordinate))
                #expect(distance < 10, "σ = 1 m noise, got \(distance) m")
                #expect(fix.mode == .threeD)
                // The emulator's open sky: an SBAS (DGPS) fix with 12 satellites at HDOP 0.6, which
                // gpsd 3.22 turns into eph = 0.6 × 4.75 m (it takes no estimate from GST).
                #expect(fix.status == .dgps)
                #expect((fix.horizontalAccuracy ?? 99) < 5, "an open-sky fix, not ±17 m")
                #expect(fix.satellitesUsed == 12)
            }
            #expect(zip(fixes, fixes.dropFirst()).allSatisfy { $0.time < $1.time }, "one fix per epoch, in order")
        }
    }

    @Test("the receiver loses its fix: no-fix reports, then fixes again", .enabled(if: hasGPSD, "gpsd is not installed"))
    func fixLoss() async throws {
        let point = Coordinate(validLatitude: -33.86, longitude: 151.21)
        let receiver = try NMEAEmulator(source: .at(point, noise: 1.0, seed: 3), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            var events = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock()).events().makeAsyncIterator()
            guard let first = await nextFix(&events) else {
                Issue.record("no fix")
                return
            }
            #expect(first.hasPosition)
            receiver.setFixLost(true)
            var sawNoFix = false
            while let fix = await nextFix(&events) {
                if fix.mode == .noFix {
                    sawNoFix = true
                    break
                }
            }
            #expect(sawNoFix)
            receiver.setFixLost(false)
            var back = false
            while let fix = await nextFix(&events) {
                if fix.hasPosition {
                    back = true
                    break
                }
            }
            #expect(back)
        }
    }

    @Test("gpsd goes away: GPS unavailable, then fixes resume when it is back", .enabled(if: hasGPSD, "gpsd is not installed"))
    func gpsdRestarts() async throws {
        let point = Coordinate(validLatitude: 48.85, longitude: 2.29)
        let receiver = try NMEAEmulator(source: .at(point, noise: 1.0, seed: 5), rate: 5)
        defer { receiver.stop() }
        let gpsd = try await PrivateGPSD.start(device: receiver.path)
        let port = gpsd.port
        receiver.start()
        var events = GPSDFixSource(endpoint: GPSDEndpoint(port: port), clock: MonotonicClock()).events().makeAsyncIterator()
        #expect(await nextFix(&events) != nil)
        await gpsd.stop()
        var unavailable = false
        while let event = await events.next() {
            if case .unavailable = event {
                unavailable = true
                break
            }
        }
        #expect(unavailable)
        try await PrivateGPSD.with(device: receiver.path, port: port) { gpsd in
            var resumed = false
            while let event = await events.next() {
                if case .resumed = event { resumed = true }
                if case .fix = event, resumed { break }
            }
            #expect(resumed)
        }
    }

    @Test(
        "the receiver's clock jumps two days: a new stream, said once, its fixes kept on the axis; accuracy degrades: fixes say so",
        .enabled(if: hasGPSD, "gpsd is not installed"))
    func jumpAndDegrade() async throws {
        let receiver = try NMEAEmulator(source: .at(Coordinate(validLatitude: 35.68, longitude: 139.76), noise: 1, seed: 4), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            let clock = MonotonicClock()
            var events = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: clock).events().makeAsyncIterator()
            let good = try #require(await nextFix(&events))
            receiver.setAccuracy(sigma: 40)
            var degraded: Fix?
            while let fix = await nextFix(&events) {
                if let accuracy = fix.horizontalAccuracy, accuracy > 2 * (good.horizontalAccuracy ?? 0) {
                    degraded = fix
                    break
                }
            }
            #expect(degraded != nil, "gpsd's error estimate grows with the receiver's")
            let before = try #require(degraded)
            receiver.jumpTime(by: .seconds(2 * 86_400))
            var restarts = 0
            var jumped: [Fix] = []
            while jumped.count < 5, let event = await events.next() {
                switch event {
                case .restarted(let from, let to):
                    restarts += 1
                    #expect(from.duration(to: to) > .seconds(86_400))
                case .fix(let fix):
                    if fix.reportedTime.duration(to: before.reportedTime) < .zero - .seconds(86_400) { jumped.append(fix) }
                case .rejected(let why):
                    Issue.record("nothing is dropped for its date: \(why)")
                default: break
                }
            }
            #expect(restarts == 1, "the jump is said once")
            #expect(jumped.count == 5, "the jumped receiver's fixes are delivered")
            for fix in jumped {
                // On the axis the jumped fixes follow the earlier ones by the time that passed here (well
                // under an hour), not by the two days the receiver's time leapt, and never lie ahead of now.
                #expect(fix.time > before.time)
                #expect(before.time.duration(to: fix.time) < .seconds(3600))
                #expect(fix.time <= clock.now)
            }
        }
    }

    @Test("a stalled gpsd (SIGSTOP): the watchdog reports silence, then data resumes", .enabled(if: hasGPSD, "gpsd is not installed"))
    func stalled() async throws {
        let receiver = try NMEAEmulator(source: .at(Coordinate(validLatitude: 10, longitude: 10), noise: 1, seed: 9), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            var options = GPSDFixSource<MonotonicClock>.Options()
            options.silenceThreshold = .seconds(1)
            var events = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock(), options: options).events()
                .makeAsyncIterator()
            #expect(await nextFix(&events) != nil)
            gpsd.setStopped(true)
            var silent = false
            while let event = await events.next() {
                if case .silent(let duration) = event {
                    silent = true
                    #expect(duration >= .seconds(1))
                    break
                }
            }
            #expect(silent)
            gpsd.setStopped(false)
            var resumed = false
            while let event = await events.next() {
                if case .resumed = event {
                    resumed = true
                    break
                }
            }
            #expect(resumed)
        }
    }

    @Test(
        "gpsd:// endpoints",
        arguments: [
            ("gpsd://", "localhost", 2947, nil as String?), ("gpsd://gps.local", "gps.local", 2947, nil),
            ("gpsd://127.0.0.1:3000", "127.0.0.1", 3000, nil),
            ("gpsd://localhost:2947/dev/ttyACM0", "localhost", 2947, "/dev/ttyACM0"), ("10.1.2.3:4000", "10.1.2.3", 4000, nil),
        ])
    func endpoints(_ text: String, _ host: String, _ port: Int, _ device: String?) throws {
        let endpoint = try GPSDEndpoint(text)
        #expect(endpoint.host == host)
        #expect(endpoint.port == port)
        #expect(endpoint.device == device)
    }

    @Test("bad endpoints are refused", arguments: ["http://x", "gpsd://host:0", "gpsd://host:99999", "gpsd://host:abc"])
    func badEndpoints(_ text: String) {
        #expect(throws: GPSDEndpointError.self) { try GPSDEndpoint(text) }
    }
}
