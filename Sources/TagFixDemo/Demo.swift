import Foundation
import Synchronization
public import TagFixCore
import TagFixDaemons
public import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixNDEF
import TagFixNFC
import TagFixScenarios

/// The bundled example site, built into the binary so `tagfix verify --demo` runs anywhere. The
/// same registry is `Examples/site/registry.csv` (a test keeps the two equal).
public enum ExampleSite {
    public static let registryCSV = """
        # Harbour Works example site: where each tag should be (see docs/scenarios.md)
        id,uid,lat,lon,radius_m,name
        T01,04A224B2C56480,53.545,9.966,25,Main gate
        T02,04B31A6AD26C81,53.5453593,9.9672095,20,Pump house
        T03,045E12F2A15D80,53.5447305,9.9684189,20,Loading bay
        T04,04C0FFEE123480,53.5451797,9.9696284,30,Crane 2
        T05,0477A1B2C3D480,53.546078,9.9705355,25,Warehouse door
        T06,0419283746AB80,53.5467966,9.969326,15,Fire point
        T07,04D1E2F3A4B580,53.5469763,9.9678142,20,Site office
        T08,04AB12CD34EF80,53.546617,9.9666047,10,Boundary bench
        T09,04F00DBABE1180,53.546078,9.966,20,Canteen
        T10,0433445566AA80,53.545539,9.9650929,40,Car park

        """

    public static let urlBase = "https://tags.harbourworks.example/t/"

    /// The demo's policy: the site's (accuracy ±25 m, fixes at most 2 s old, T09 disallowed), with
    /// short waits so the walk takes seconds.
    public static var policy: VerificationPolicy {
        var policy = VerificationPolicy()
        policy.maximumAccuracy = 25
        policy.maximumFixAge = .seconds(2)
        policy.fixTimeout = .seconds(2)
        policy.interpolationWait = .milliseconds(400)
        policy.disallowedTags = ["T09"]
        // The walk carries the tech from stop to stop between two fixes: no GPS jump check.
        policy.maximumSpeed = nil
        return policy
    }

    /// What the GPS does at a stop.
    public enum Sky: Sendable, Hashable {
        case clear
        /// Accuracy this poor (σ metres per axis).
        case degraded(Double)
        case noFix
    }

    /// One tap of the demo walk: the tag, where the tech stands, the sky, and the verdict a
    /// working TagFix gives.
    public struct Stop: Sendable {
        public var tagID: String
        public var uid: String
        public var url: String?
        /// Metres east and north of the tag's registered centre (or of `at` for URL tags).
        public var east = 0.0
        public var north = 0.0
        public var at: Coordinate?
        public var sky = Sky.clear
        public var expected: String
    }

    public static let stops: [Stop] = [
        Stop(tagID: "T01", uid: "04A224B2C56480", url: urlBase + "T01", east: 2, north: 1, expected: "confirmed"),
        Stop(tagID: "T02", uid: "04B31A6AD26C81", url: urlBase + "T02", expected: "confirmed"),
        // The tag was found 70 m north-east of where it belongs: it was moved.
        Stop(tagID: "T03", uid: "045E12F2A15D80", url: urlBase + "T03", east: 50, north: 50, expected: "outside"),
        Stop(tagID: "T04", uid: "04C0FFEE123480", url: urlBase + "T04", sky: .degraded(40), expected: "inconclusive"),
        Stop(tagID: "T05", uid: "0477A1B2C3D480", url: urlBase + "T05", sky: .noFix, expected: "inconclusive"),
        Stop(tagID: "T09", uid: "04F00DBABE1180", url: urlBase + "T09", expected: "disallowed"),
        // T07's URL copied onto another tag (another UID) and put at T07's spot.
        Stop(tagID: "T07", uid: "04C09ECA11ED07", url: urlBase + "T07", expected: "untrusted"),
        // A tag nobody enrolled, whose URL carries no location.
        Stop(
            tagID: "X1", uid: "04E1E2E3E4E5E6", url: "https://tags.harbourworks.example/info",
            at: Coordinate(validLatitude: 53.5458, longitude: 9.9662), expected: "notRegistered"),
        // Not in the registry, but its URL says where it is.
        Stop(
            tagID: "V1", uid: "04A1A2A3A4A5A6", url: urlBase + "V1?lat=53.5462&lon=9.9671&r=30",
            east: -3, north: 2, at: Coordinate(validLatitude: 53.5462, longitude: 9.9671), expected: "confirmed"),
    ]

    public static func registry() -> InMemoryRegistry {
        // The embedded text is tested to parse; an empty registry would only fail the demo's checks.
        (try? RegistryFile.parse(registryCSV)) ?? InMemoryRegistry()
    }

    /// Where the tech stands at `stop`.
    public static func position(_ stop: Stop, registry: InMemoryRegistry) -> Coordinate {
        let centre = stop.at ?? registry.entry(forID: stop.tagID)?.region.center ?? Coordinate(validLatitude: 53.545, longitude: 9.966)
        return Coordinate(
            validLatitude: centre.latitude + stop.north / 111_320,
            longitude: centre.longitude + stop.east / (111_320 * cos(centre.latitude * .pi / 180)))
    }
}

/// `tagfix verify --demo`: the example site walked through the emulators — a PN532 on a pty read
/// by the real libnfc, and NMEA on a pty read by a private gpsd (or, without gpsd, a mock GPS) —
/// through the same live pipeline as real hardware. The CLI renders: each pipeline event goes to
/// `onEvent` with the clock's time, and each line about the emulators to `note`.
public struct DemoRun: Sendable {
    public var onEvent: @Sendable (VerifierEvent, Timestamp) -> Void
    public var note: @Sendable (String) -> Void
    /// SIGINT or SIGTERM ends the walk like its last stop: the pipeline finishes, the emulators
    /// and the private gpsd stop.
    public var stop: StopSignals?
    public var limit: Duration = .seconds(180)

    public init(
        stop: StopSignals?, limit: Duration = .seconds(180), note: @escaping @Sendable (String) -> Void,
        onEvent: @escaping @Sendable (VerifierEvent, Timestamp) -> Void
    ) {
        self.stop = stop
        self.limit = limit
        self.note = note
        self.onEvent = onEvent
    }

    /// The receiver the demo steers: the NMEA emulator, or a mock.
    private protocol Receiver: Sendable {
        func move(to position: Coordinate)
        func sky(_ sky: ExampleSite.Sky)
        func stop() async
    }

    private struct EmulatedReceiver: Receiver {
        let nmea: NMEAEmulator
        let gpsd: PrivateGPSD
        func move(to position: Coordinate) { nmea.move(to: position) }
        func sky(_ sky: ExampleSite.Sky) {
            switch sky {
            case .clear:
                nmea.setFixLost(false)
                nmea.setAccuracy(sigma: nil)
            case .degraded(let sigma):
                nmea.setFixLost(false)
                nmea.setAccuracy(sigma: sigma)
            case .noFix:
                nmea.setFixLost(true)
            }
        }
        func stop() async {
            await nmea.stopped()
            await gpsd.stop()
        }
    }

    /// Without gpsd: a mock receiver sending a fix every 200 ms on the wall clock.
    private final class MockReceiver: Receiver {
        let source: MockFixSource<MonotonicClock>
        private let state = Mutex<(position: Coordinate, sky: ExampleSite.Sky)>((Coordinate(validLatitude: 0, longitude: 0), .clear))
        private let task = Mutex<Task<Void, Never>?>(nil)

        init(clock: MonotonicClock) {
            source = MockFixSource(sourceID: "mock GPS", clock: clock)
            let feeder = Task { [self] in
                var generator = SeededGenerator(seed: 3)
                while !Task.isCancelled {
                    let (position, sky) = self.state.withLock { $0 }
                    let sigma: Double
                    switch sky {
                    case .clear: sigma = 1
                    case .degraded(let value): sigma = value
                    case .noFix: sigma = 0
                    }
                    let noisy = Coordinate(
                        validLatitude: position.latitude + generator.gaussian() * sigma / 111_320,
                        longitude: position.longitude + generator.gaussian() * sigma / (111_320 * cos(position.latitude * .pi / 180)))
                    self.source.send(
                        Fix(
                            time: clock.now, mode: sky == .noFix ? .noFix : .threeD, coordinate: sky == .noFix ? nil : noisy,
                            horizontalAccuracy: sky == .noFix ? nil : 2.45 * sigma + 1, satellitesUsed: sky == .noFix ? 0 : 9))
                    try? await clock.sleep(for: .milliseconds(200))
                }
            }
            task.withLock { $0 = feeder }
        }

        func move(to position: Coordinate) { state.withLock { $0.position = position } }
        func sky(_ sky: ExampleSite.Sky) { state.withLock { $0.sky = sky } }
        func stop() {
            task.withLock { $0?.cancel() }
            source.finish()
        }
    }

    public func run() async throws(DemoError) {
        let clock = MonotonicClock()
        let registry = ExampleSite.registry()
        let stops = ExampleSite.stops
        var tags: [EmulatedType2Tag] = []
        for stop in stops {
            let message = stop.url.map { NDEFMessage(records: [NDEFRecord.uri($0)]).encoded() } ?? []
            do {
                let uid = try TagUID(hex: stop.uid).bytes
                tags.append(try EmulatedType2Tag.ntag(213, message: message, uid: uid))
            } catch {
                throw .unavailable("demo tag \(stop.tagID): \(error)")
            }
        }
        let pn532: PN532Emulator
        do {
            pn532 = try PN532Emulator(tags: tags)
        } catch {
            throw .unavailable("cannot start the PN532 emulator: \(error)")
        }
        try await EmulatorLab.stopping({ await pn532.stopped() }) { () throws(DemoError) in
            for index in tags.indices { pn532.setPresent(false, tag: index) }

            let first = ExampleSite.position(stops[0], registry: registry)
            let receiver: any Receiver
            let gps: any FixSource
            // TAGFIX_DEMO_GPS=mock picks the mock GPS even where gpsd is installed.
            let mockGPS = ProcessInfo.processInfo.environment["TAGFIX_DEMO_GPS"] == "mock"
            if PrivateGPSD.installedPath != nil, !mockGPS {
                do {
                    let nmea = try NMEAEmulator(source: .at(first, noise: 0.8, seed: 7), rate: 5)
                    let gpsd = try await PrivateGPSD.start(device: nmea.path)
                    receiver = EmulatedReceiver(nmea: nmea, gpsd: gpsd)
                    gps = GPSDFixSource(endpoint: GPSDEndpoint(host: "127.0.0.1", port: gpsd.port), clock: clock)
                    nmea.start()
                    note(
                        "demo: PN532 emulator on \(pn532.path) (libnfc pn532_uart), NMEA emulator on \(nmea.path) read by gpsd at gpsd://127.0.0.1:\(gpsd.port)"
                    )
                } catch {
                    throw .unavailable("cannot start the GPS emulator: \(error)")
                }
            } else {
                let mock = MockReceiver(clock: clock)
                mock.move(to: first)
                receiver = mock
                gps = mock.source
                note("demo: PN532 emulator on \(pn532.path) (libnfc pn532_uart), mock GPS\(mockGPS ? "" : " (gpsd is not installed)")")
            }
            // Stopped (gpsd's exit awaited) before the demo returns; nothing below throws before that.

            let verifier = Verifier(policy: ExampleSite.policy, registry: registry)
            let reader = LibNFCReader(connstring: "pn532_uart:\(pn532.path)", clock: clock)
            let (events, feed) = AsyncStream<VerifierEvent>.makeStream()
            let (onEvent, limit, stop) = (self.onEvent, self.limit, self.stop)
            // The walk (or the time limit, or a signal) ends the demo; the pipeline is then cancelled.
            var racers: [@Sendable () async -> DemoError?] = [
                {
                    await LiveVerifier(verifier: verifier, clock: clock, systemClock: KernelClock()).run(reader: reader, gps: gps) {
                        event in
                        onEvent(event, clock.now)
                        feed.yield(event)
                    }
                    return nil
                },
                {
                    var stream = events.makeAsyncIterator()
                    return await Self.walk(stops, registry: registry, pn532: pn532, receiver: receiver, events: &stream)
                },
            ]
            if let stop {
                racers.append {
                    _ = await stop.wait()
                    return nil
                }
            }
            let outcome = await race(deadline: clock.now.advanced(by: limit), clock: clock, first: racers)
            feed.finish()
            let failure: DemoError?
            switch outcome {
            case .value(let ended): failure = ended
            case .cancelled: failure = nil
            case .timedOut: failure = .timedOut("the demo did not finish within \(Coordinate.format(limit.seconds, 0)) s")
            }
            await receiver.stop()
            if let failure { throw failure }
        }
    }

    /// Walks the stops: steer the GPS, wait until gpsd reports the new state, present the tag,
    /// wait for its verdict, take it away. Driven by the pipeline's events, never by sleeps.
    private static func walk(
        _ stops: [ExampleSite.Stop], registry: InMemoryRegistry, pn532: PN532Emulator, receiver: any Receiver,
        events: inout AsyncStream<VerifierEvent>.Iterator
    ) async -> DemoError? {
        func next(until accept: (VerifierEvent) -> Bool) async -> Bool {
            while let event = await events.next() {
                if accept(event) { return true }
            }
            return false
        }
        guard await next(until: { if case .reader(.ready) = $0 { true } else { false } }) else {
            return .unavailable("the reader never became ready")
        }
        for (index, stop) in stops.enumerated() {
            let target = ExampleSite.position(stop, registry: registry)
            receiver.move(to: target)
            receiver.sky(stop.sky)
            // Two fixes that show the new state, so the one before the scan is fresh too.
            var seen = 0
            let settled = await next { event in
                guard case .gps(.fix(let fix)) = event else { return false }
                let shows: Bool
                switch stop.sky {
                case .noFix: shows = fix.mode == .noFix
                case .degraded: shows = (fix.horizontalAccuracy ?? 0) > 25
                case .clear:
                    shows =
                        fix.coordinate.map { Geodesic.distance(from: $0, to: target) < 10 } == true && (fix.horizontalAccuracy ?? 99) <= 25
                }
                seen = shows ? seen + 1 : 0
                return seen >= 2
            }
            guard settled else { return nil }
            pn532.setPresent(true, tag: index)
            guard await next(until: { if case .verdict = $0 { true } else { false } }) else { return nil }
            pn532.setPresent(false, tag: index)
            guard await next(until: { if case .reader(.tagRemoved) = $0 { true } else { false } }) else { return nil }
        }
        return nil
    }
}

/// Why the demo could not run to its end.
public enum DemoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An emulator, gpsd or the reader could not be had.
    case unavailable(String)
    /// The walk did not finish within the time limit.
    case timedOut(String)

    public var description: String {
        switch self {
        case .unavailable(let message), .timedOut(let message): message
        }
    }
}
