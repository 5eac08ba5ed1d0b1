import Foundation
import TagFixCore
import Testing

private let spot = Coordinate(validLatitude: 53.545, longitude: 9.966)
private let start = Timestamp(iso8601: "2026-05-14T08:00:00Z")!

/// A point `east` and `north` metres from `centre` (a local plane; fine over metres).
private func offset(_ centre: Coordinate, east: Double, north: Double) -> Coordinate {
    var longitude = centre.longitude + east / (111_320 * cos(centre.latitude * .pi / 180))
    if longitude > 180 { longitude -= 360 }
    return Coordinate(validLatitude: centre.latitude + north / 110_574, longitude: longitude)
}

private func distance(_ a: Coordinate, _ b: Coordinate) -> Double { Geodesic.distance(from: a, to: b) }

/// Fixes at 1 Hz around `centre` whose errors follow a first-order Gauss–Markov process (time
/// constant `tau` seconds), as GNSS errors do, with a stated 95 % accuracy of 2.45 σ.
private func fixes(
    around centre: Coordinate = spot, count: Int = 30, sigma: Double = 1.5, tau: Double = 10, seed: UInt64,
    status: Fix.Status = .gps
) -> [Fix] {
    var generator = SeededGenerator(seed: seed)
    let rho = exp(-1 / tau)
    var (east, north) = (generator.gaussian() * sigma, generator.gaussian() * sigma)
    return (0..<count).map { i in
        east = rho * east + (1 - rho * rho).squareRoot() * sigma * generator.gaussian()
        north = rho * north + (1 - rho * rho).squareRoot() * sigma * generator.gaussian()
        let coordinate = offset(centre, east: east, north: north)
        return Fix(
            time: start.advanced(by: .seconds(i)), mode: .threeD, coordinate: coordinate, horizontalAccuracy: 2.45 * sigma,
            status: status, satellitesUsed: 9)
    }
}

@Suite("Position averaging for enrolment")
struct PositionAverageTests {
    @Test("the reported accuracy covers the true error in at least 90 % of sessions (correlated errors, 200 seeds)")
    func honestAccuracy() throws {
        var covered = 0
        var errors: [Double] = []
        for seed in 1...200 as ClosedRange<UInt64> {
            let result = try PositionAverager().average(fixes(seed: seed)).get()
            let error = distance(spot, result.coordinate)
            errors.append(error)
            if error <= result.accuracy { covered += 1 }
        }
        #expect(covered >= 180, "covered \(covered) of 200")
        // And the average is better than a single fix (95 % radius 3.7 m).
        #expect(errors.sorted()[190] < 3.7)
    }

    @Test("outliers (a multipath jump) are dropped and do not pull the mean", arguments: [1, 2, 3] as [UInt64])
    func outliers(seed: UInt64) throws {
        var input = fixes(seed: seed)
        let far = offset(spot, east: 80, north: 0)
        for i in [4, 5, 6] {
            input[i] = Fix(time: input[i].time, mode: .threeD, coordinate: far, horizontalAccuracy: 5, satellitesUsed: 5)
        }
        let result = try PositionAverager().average(input).get()
        #expect(result.rejected == 3)
        #expect(result.kept == 27)
        #expect(distance(spot, result.coordinate) < 3)
    }

    @Test("too few usable fixes, disagreeing fixes and a poor average are refused with the reason")
    func refusals() {
        let averager = PositionAverager()
        var sparse = fixes(count: 3, seed: 1)
        sparse.append(Fix(time: start, mode: .noFix, coordinate: nil, horizontalAccuracy: nil))
        sparse += fixes(count: 5, seed: 2, status: .simulated)
        #expect(averager.average(sparse) == .failure(.tooFewFixes(usable: 3, needed: 5, unusable: 6)))

        let split = fixes(count: 10, sigma: 0.5, seed: 3) + fixes(around: offset(spot, east: 0, north: 100), count: 12, sigma: 0.5, seed: 4)
        guard case .failure(.inconsistent) = averager.average(split) else {
            Issue.record("two clusters 100 m apart must not be averaged")
            return
        }

        guard case .failure(.tooInaccurate(let result, let limit)) = averager.average(fixes(sigma: 12, seed: 5)) else {
            Issue.record("σ 12 m fixes must be refused at a 10 m limit")
            return
        }
        #expect(limit == 10)
        #expect(result.accuracy > 10)
        #expect(PositionAverager.Refusal.tooInaccurate(result, limit: limit).description.contains("--max-accuracy"))
    }

    @Test("a spot on the antimeridian averages to it, not to the other side of the Earth")
    func antimeridian() throws {
        let dateline = Coordinate(validLatitude: -16.5, longitude: 179.999_99)
        let result = try PositionAverager().average(fixes(around: dateline, seed: 9)).get()
        #expect(distance(dateline, result.coordinate) < 5)
    }

    @Test("more time at the spot gives a better accuracy, not more fixes at the same moment")
    func longerIsBetter() throws {
        let short = try PositionAverager().average(fixes(count: 10, seed: 7)).get()
        let long = try PositionAverager().average(fixes(count: 120, seed: 7)).get()
        #expect(long.accuracy < short.accuracy)
        #expect(long.span == .seconds(119))
    }
}
