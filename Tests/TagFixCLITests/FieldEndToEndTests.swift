import Foundation
import TagFixCLI
import TagFixCore
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixNDEF
import Testing

@Suite("The field path: PN532 emulator + real libnfc, NMEA emulator + real gpsd, tagfix verify", .timeLimit(.minutes(2)))
struct FieldEndToEndTests {
    @Test(
        "a tag with its location in its URL, one placed 300 m away, one during a fix dropout",
        .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
    func verdicts() async throws {
        let here = Coordinate(validLatitude: 53.545, longitude: 9.966)
        let receiver = try NMEAEmulator(source: .at(here, noise: 0.5, seed: 11), rate: 5)
        defer { receiver.stop() }
        let gpsd = try PrivateGPSD(device: receiver.path)
        defer { gpsd.stop() }
        receiver.start()
        let gps = "gpsd://127.0.0.1:\(gpsd.port)"

        // Wait until gpsd delivers positioned fixes.
        var probe = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: WallClock()).events().makeAsyncIterator()
        while let event = await probe.next() {
            if case .fix(let fix) = event, fix.hasPosition { break }
        }

        func verdict(url: String) async throws -> JSONValue {
            let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded())
            let reader = try PN532Emulator(tags: [tag])
            defer { reader.stop() }
            let result = await run([
                "verify", "--reader", "pn532_uart:\(reader.path)", "--gps", gps, "--json", "--count", "1", "--timeout", "60",
                "--fix-timeout", "30",
            ])
            #expect(result.code == 0, "\(result.err)")
            return try JSONValue.parse(try #require(result.out.first))
        }

        let confirmed = try await verdict(url: "https://tags.example.org/t/H1?lat=53.545&lon=9.966&r=30")
        #expect(confirmed["verdict"]?.string == "confirmed", "\(confirmed)")
        #expect(confirmed["fix"]?["mode"]?.string == "3d")

        // 300 m north: 53.545 + 300 / 111 320 degrees.
        let moved = try await verdict(url: "https://tags.example.org/t/H2?lat=53.5476949&lon=9.966&r=30")
        #expect(moved["verdict"]?.string == "outside", "\(moved)")
        #expect(abs((moved["distance_m"]?.double ?? 0) - 300) < 10)

        receiver.setFixLost(true)
        while let event = await probe.next() {
            if case .fix(let fix) = event, fix.mode == .noFix { break }
        }
        let dropout = try await verdict(url: "https://tags.example.org/t/H3?lat=53.545&lon=9.966&r=30")
        #expect(dropout["verdict"]?.string == "inconclusive", "\(dropout)")
        #expect(dropout["reason"]?.string == "no_fix")
    }

    @Test("tagfix fix --json prints gpsd's fixes", .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
    func fixCommand() async throws {
        let receiver = try NMEAEmulator(source: .at(Coordinate(validLatitude: 1.5, longitude: 103.8), noise: 0.5, seed: 2), rate: 5)
        defer { receiver.stop() }
        let gpsd = try PrivateGPSD(device: receiver.path)
        defer { gpsd.stop() }
        receiver.start()
        let result = await run(["fix", "--gps", "gpsd://127.0.0.1:\(gpsd.port)", "--json", "--count", "3", "--timeout", "60"])
        #expect(result.code == 0, "\(result.err)")
        let fixes = try result.out.map { try JSONValue.parse($0) }
        #expect(fixes.count == 3)
        for fix in fixes {
            for key in ["time", "mode", "lat", "lon", "alt_hae", "eph", "epx", "epy", "status", "satellites_used"] {
                #expect(fix[key] != nil, "\(key) missing")
            }
        }
        #expect(fixes.compactMap { $0["lat"]?.double }.allSatisfy { abs($0 - 1.5) < 0.001 })
        let bad = await run(["fix", "--gps", "http://nowhere"])
        #expect(bad.code == 64)
    }
}
