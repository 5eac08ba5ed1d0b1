import Foundation
import TagFixCore
import TagFixTesting
import Testing

@Suite("Short geodesic lines (the verifier's fast path)")
struct ShortGeodesicTests {
    @Test("within 0.1 mm and 1e-5° of Vincenty on 200 000 random lines under 600 m, from the equator to 80°, across the antimeridian")
    func againstVincenty() throws {
        var generator = SeededGenerator(seed: 99)
        var worstDistance = 0.0, worstAzimuth = 0.0, taken = 0, distanceDiffers = 0
        for _ in 0..<200_000 {
            let lat = (generator.unit() * 2 - 1) * 88
            let lon = generator.unit() * 360 - 180
            let a = Coordinate(validLatitude: lat, longitude: lon)
            let metres = generator.unit() * 700
            let bearing = generator.unit() * 2 * .pi
            var lon2 = lon + metres * sin(bearing) / (111_320 * cos(lat * .pi / 180))
            if lon2 > 180 { lon2 -= 360 } else if lon2 < -180 { lon2 += 360 }
            let b = Coordinate(validLatitude: max(-90, min(90, lat + metres * cos(bearing) / 110_574)), longitude: lon2)
            // The distance alone (the verifier's) is the same arithmetic, to the bit, and is
            // refused exactly where the full short solution is.
            if Geodesic.shortDistance(from: a, to: b) != Geodesic.shortInverse(from: a, to: b)?.distance { distanceDiffers += 1 }
            guard let fast = Geodesic.shortInverse(from: a, to: b) else { continue }
            taken += 1
            let exact = Geodesic.inverse(from: a, to: b)
            worstDistance = max(worstDistance, abs(fast.distance - exact.distance))
            if exact.distance > 0.01 {
                var d = abs(fast.initialAzimuth - exact.initialAzimuth)
                if d > 180 { d = 360 - d }
                worstAzimuth = max(worstAzimuth, d)
            }
        }
        #expect(taken > 120_000)
        #expect(distanceDiffers == 0)
        #expect(worstDistance < 1e-4, "worst distance error \(worstDistance) m")
        #expect(worstAzimuth < 1e-5, "worst azimuth error \(worstAzimuth)°")
    }

    @Test(
        "GeodTest's lines under 600 m: distance within 0.1 mm", .enabled(if: TestData.isAvailable, Comment(rawValue: TestData.skipReason)))
    func geodTest() throws {
        let text = try String(contentsOfFile: try #require(TestData.path("geodesic/GeodTest-subset-1000.dat")), encoding: .utf8)
        var checked = 0
        for line in text.split(whereSeparator: \.isNewline) {
            let v = line.split(separator: " ").compactMap { Double($0) }
            guard v.count >= 7, v[6] < 600 else { continue }
            let a = Coordinate(validLatitude: v[0], longitude: v[1]), b = Coordinate(validLatitude: v[3], longitude: v[4])
            guard let fast = Geodesic.shortInverse(from: a, to: b) else { continue }
            checked += 1
            #expect(abs(fast.distance - v[6]) < 1e-4, "\(line)")
        }
        #expect(checked > 0)
    }

    @Test("far or polar points are left to the full solution")
    func refusals() {
        #expect(
            Geodesic.shortInverse(from: Coordinate(validLatitude: 0, longitude: 0), to: Coordinate(validLatitude: 0, longitude: 0.02))
                == nil)
        #expect(
            Geodesic.shortInverse(from: Coordinate(validLatitude: 89.5, longitude: 0), to: Coordinate(validLatitude: 89.5001, longitude: 0))
                == nil)
        #expect(
            Geodesic.shortInverse(
                from: Coordinate(validLatitude: 10, longitude: 179.9999), to: Coordinate(validLatitude: 10, longitude: -179.9999))?.distance
                ?? 0 > 20)
    }
}
