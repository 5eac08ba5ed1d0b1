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

/// Fixes at `rate` Hz around `centre` from the correlated sky (GNSSErrorModel), each stating the
/// receiver's 95 % radius (2.448 × its stated σ), as gpsd gives it.
private func fixes(
    around centre: Coordinate = spot, count: Int = 30, sigma: Double = 1.5, sky: GNSSErrorModel.Sky = .open, rate: Double = 1,
    seed: UInt64, status: Fix.Status = .dgps
) -> [Fix] {
    var model = GNSSErrorModel(sigma: sigma, sky: sky, seed: seed)
    return (0..<count).map { i in
        let at = Duration.seconds(Double(i) / rate)
        let error = model.sample(at: at)
        return Fix(
            time: start.advanced(by: at), mode: .threeD, coordinate: offset(centre, east: error.east, north: error.north),
            horizontalAccuracy: error.statedRadius95, status: status, satellitesUsed: 12)
    }
}

@Suite("Enrolment's stopping rule (PositionAverager)")
struct PositionAverageTests {
    @Test("consistent fixes stop the enrolment after the first few: 5 fixes, 4 s at 1 Hz; 2 s at 5 Hz")
    func stopsEarly() throws {
        var first = (slow: 0, fast: 0)
        for seed in 1...20 as ClosedRange<UInt64> {
            let slow = try PositionAverager().average(fixes(seed: seed)).get()
            #expect(slow.elapsed <= .seconds(6), "seed \(seed): \(slow)")
            if slow.kept == 5 && slow.elapsed == .seconds(4) { first.slow += 1 }
            let fast = try PositionAverager().average(fixes(count: 150, rate: 5, seed: seed)).get()
            #expect(fast.elapsed <= .seconds(3), "seed \(seed): \(fast)")
            if fast.kept == 11 && fast.elapsed == .seconds(2) { first.fast += 1 }
        }
        // Mostly at the very first chance; jitter now and then costs a fix more.
        #expect(first.slow >= 17 && first.fast >= 17, "\(first)")
    }

    @Test("the stated accuracy is not shrunk by the number of fixes: it is at least the receiver's own, widened")
    func noSquareRootOfN() throws {
        let result = try PositionAverager().average(fixes(count: 150, rate: 5, seed: 3)).get()
        let stated = GNSSErrorModel.radius95PerSigma * (1.5 * 1.5 + 0.2 * 0.2).squareRoot()
        #expect(abs(result.stated - stated) < 0.01, "\(result.stated)")
        #expect(result.accuracy >= 1.2 * stated)
        #expect(result.accuracy < 1.3 * stated, "agreeing fixes add little scatter: \(result.accuracy)")
    }

    @Test(
        "the stated 95 % accuracy covers the true error in at least 95 % of enrolments (correlated errors, τ 30–600 s, 400 seeds)",
        arguments: [false, true])
    func honestAccuracy(settling: Bool) throws {
        var covered = 0
        var accepted = 0
        for seed in 1...400 as ClosedRange<UInt64> {
            let tau = 30 * pow(20, Double(seed % 20) / 19)
            let sky = GNSSErrorModel.Sky(correlationTime: tau, settling: settling ? .init(offset: 6, timeConstant: 3) : nil)
            let sigma = 1 + Double(seed % 7) / 3
            guard case .success(let result) = PositionAverager().average(fixes(sigma: sigma, sky: sky, seed: seed)) else { continue }
            accepted += 1
            if distance(spot, result.coordinate) <= result.accuracy { covered += 1 }
        }
        #expect(accepted >= 390, "accepted \(accepted) of 400")
        #expect(Double(covered) >= 0.95 * Double(accepted), "covered \(covered) of \(accepted)")
    }

    @Test("a receiver still settling after lock: the rule waits, and the position is better than stopping at once")
    func settlingWaits() throws {
        var waited: [Double] = []
        var errors: (rule: [Double], atOnce: [Double]) = ([], [])
        for seed in 1...40 as ClosedRange<UInt64> {
            let sky = GNSSErrorModel.Sky(settling: .init(offset: 8, timeConstant: 3))
            let input = fixes(sky: sky, seed: seed)
            let result = try PositionAverager().average(input).get()
            waited.append(result.elapsed.seconds)
            #expect(result.rejected > 0, "seed \(seed): the settling fixes are left out")
            // Against the first five fixes (what stopping at once would record): their mean is
            // about 4.4 m off along the settling.
            var early = PositionAverager()
            early.agreement = 100
            let atOnce = try early.average(input).get()
            #expect(atOnce.elapsed == .seconds(4))
            errors.rule.append(distance(spot, result.coordinate))
            errors.atOnce.append(distance(spot, atOnce.coordinate))
        }
        #expect(waited.min()! > 4, "\(waited)")
        #expect(waited.max()! < 20, "\(waited)")
        let median = { (values: [Double]) in values.sorted()[values.count / 2] }
        #expect(median(errors.rule) < 0.7 * median(errors.atOnce), "\(errors)")
    }

    @Test("a stray fix is left out and the enrolment goes on", arguments: [1, 2, 3] as [UInt64])
    func outlier(seed: UInt64) throws {
        var input = fixes(seed: seed)
        let far = offset(spot, east: 40, north: 0)
        input[3] = Fix(time: input[3].time, mode: .threeD, coordinate: far, horizontalAccuracy: 5, status: .dgps, satellitesUsed: 5)
        let result = try PositionAverager().average(input).get()
        #expect(result.rejected == 1, "\(result)")
        #expect(result.kept == 5)
        #expect(result.jumps == 0)
        #expect(distance(spot, result.coordinate) < 4)
    }

    @Test(
        "a position that keeps jumping (a reflected signal switching on and off) is refused as multipath",
        arguments: [1, 2, 3, 4] as [UInt64])
    func multipathRefused(seed: UInt64) {
        let sky = GNSSErrorModel.Sky(multipath: .init(magnitude: 12, meanOn: 0.6, meanOff: 0.6, startsOn: true))
        let decision = PositionAverager().average(fixes(count: 150, sky: sky, rate: 5, seed: seed))
        guard case .failure(.multipath(let jumps, let jump, let stated)) = decision else {
            Issue.record("seed \(seed): \(decision)")
            return
        }
        #expect(jumps >= 2)
        #expect(jump > stated, "the jump is larger than the receiver's ±\(stated) m explains")
        #expect(PositionAverager.Refusal.multipath(jumps: jumps, jump: jump, stated: stated).description.contains("multipath"))
    }

    @Test("one jump: the rule waits for the fixes to agree again, and the stated accuracy covers the jump")
    func oneJump() throws {
        // Five agreeing fixes would stop at 4 s: here the position jumps 8 m at 3 s and stays.
        let input = fixes(count: 40, sigma: 1, seed: 8).enumerated().map { index, fix in
            guard index >= 3, let c = fix.coordinate else { return fix }
            return Fix(
                time: fix.time, mode: .threeD, coordinate: offset(c, east: 8, north: 0), horizontalAccuracy: fix.horizontalAccuracy,
                status: .dgps, satellitesUsed: 10)
        }
        let result = try PositionAverager().average(input).get()
        #expect(result.jumps == 1)
        #expect(result.elapsed >= .seconds(13), "\(result.elapsed)")
        #expect(result.accuracy >= 8, "either place may be the biased one: \(result.accuracy)")
        #expect(distance(spot, result.coordinate) <= result.accuracy)
    }

    @Test("too few usable fixes, fixes that keep moving and a poor position are refused with the reason")
    func refusals() {
        let averager = PositionAverager()
        var sparse = fixes(count: 3, seed: 1)
        sparse.append(Fix(time: start, mode: .noFix, coordinate: nil, horizontalAccuracy: nil))
        sparse += fixes(count: 5, seed: 2, status: .simulated)
        #expect(averager.average(sparse) == .failure(.tooFewFixes(usable: 3, needed: 5, unusable: 6)))

        // A receiver carried along at 1 m/s: the fixes never agree.
        let walking = fixes(count: 30, sigma: 0.5, seed: 3).enumerated().map { index, fix in
            Fix(
                time: fix.time, mode: .threeD, coordinate: offset(fix.coordinate!, east: Double(index), north: 0),
                horizontalAccuracy: fix.horizontalAccuracy, status: .dgps, satellitesUsed: 12)
        }
        guard case .failure(.unsettled(let spread, _, let span)) = averager.average(walking) else {
            Issue.record("a walking receiver must not be enrolled: \(averager.average(walking))")
            return
        }
        #expect(spread > 20)
        #expect(span >= .seconds(25))

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
        #expect(distance(dateline, result.coordinate) < 6)
    }

    @Test("fed one fix at a time, the session decides at the same fix as the whole series")
    func session() throws {
        let input = fixes(sky: .init(settling: .init(offset: 6, timeConstant: 3)), seed: 4)
        var session = PositionAverager.Session(PositionAverager())
        var decidedAt: Int?
        for (index, fix) in input.enumerated() where decidedAt == nil {
            if session.add(fix) != nil { decidedAt = index }
        }
        let whole = try PositionAverager().average(input).get()
        #expect(decidedAt.map { input[$0].time } == input[0].time.advanced(by: whole.elapsed))
    }
}

@Suite("A sky like the real one (GNSSErrorModel)")
struct GNSSErrorModelTests {
    /// The slow error's samples at 1 Hz, east axis, over `seconds`.
    private func series(sigma: Double, tau: Double, seconds: Int, seed: UInt64) -> [Double] {
        var model = GNSSErrorModel(sigma: sigma, sky: .init(correlationTime: tau, jitter: 0), seed: seed)
        return (0..<seconds).map { model.sample(at: .seconds($0)).east }
    }

    private func autocorrelation(_ x: [Double], lag: Int) -> Double {
        let mean = x.reduce(0, +) / Double(x.count)
        let variance = x.map { ($0 - mean) * ($0 - mean) }.reduce(0, +)
        let covariance = (0..<(x.count - lag)).map { (x[$0] - mean) * (x[$0 + lag] - mean) }.reduce(0, +)
        return covariance / variance
    }

    @Test("the slow error is a Gauss–Markov process: σ as set, autocorrelation e^-1 at lag τ", arguments: [30, 180] as [Int])
    func gaussMarkov(tau: Int) {
        var correlations: [Double] = []
        var variances: [Double] = []
        for seed in 1...4 as ClosedRange<UInt64> {
            let x = series(sigma: 2, tau: Double(tau), seconds: 400 * tau, seed: seed)
            correlations.append(autocorrelation(x, lag: tau))
            variances.append(x.map { $0 * $0 }.reduce(0, +) / Double(x.count))
        }
        let rho = correlations.reduce(0, +) / 4
        let sigma = (variances.reduce(0, +) / 4).squareRoot()
        #expect(abs(rho - exp(-1)) < 0.04, "ρ(τ) = \(rho)")
        #expect(abs(sigma - 2) < 0.1, "σ = \(sigma)")
        // Memory: a second apart the error has hardly moved.
        let x = series(sigma: 2, tau: Double(tau), seconds: 50 * tau, seed: 9)
        #expect(autocorrelation(x, lag: 1) > 0.95)
    }

    @Test("independent errors (the old emulator noise) have no memory")
    func independent() {
        var model = GNSSErrorModel(sigma: 2, sky: .independent, seed: 1)
        let x = (0..<20_000).map { model.sample(at: .seconds($0)).east }
        #expect(abs(autocorrelation(x, lag: 1)) < 0.03)
    }

    @Test("jitter is white on top of the slow error")
    func jitter() {
        var model = GNSSErrorModel(sigma: 2, sky: .init(correlationTime: 100_000, jitter: 0.5), seed: 2)
        let samples = (0..<20_000).map { model.sample(at: .seconds($0)) }
        let jitter = samples.map { $0.east - $0.slow.east }
        let sigma = (jitter.map { $0 * $0 }.reduce(0, +) / Double(jitter.count)).squareRoot()
        #expect(abs(sigma - 0.5) < 0.02, "\(sigma)")
        #expect(abs(autocorrelation(jitter, lag: 1)) < 0.03)
    }

    @Test("multipath episodes: on for their share of the time, a bias that jumps, a stated σ that hardly knows")
    func multipath() {
        let sky = GNSSErrorModel.Sky(jitter: 0.2, multipath: .init(magnitude: 6, meanOn: 8, meanOff: 24))
        var model = GNSSErrorModel(sigma: 1.5, sky: sky, seed: 3)
        let samples = (0..<40_000).map { model.sample(at: .seconds($0)) }
        let on = samples.filter(\.multipath)
        let share = Double(on.count) / Double(samples.count)
        #expect(abs(share - 0.25) < 0.03, "\(share)")
        let biases = on.map { hypot($0.bias.east, $0.bias.north) }
        #expect(biases.min()! >= 0.6 * 6 - 1e-9 && biases.max()! <= 1.4 * 6 + 1e-9)
        // The receiver states 1.2 × its nominal σ in an episode: far less than a 3.6–8.4 m bias.
        let nominal = (1.5 * 1.5 + 0.2 * 0.2).squareRoot()
        #expect(on.allSatisfy { abs($0.statedSigma - 1.2 * nominal) < 1e-9 })
        #expect(samples.filter { !$0.multipath }.allSatisfy { abs($0.statedSigma - nominal) < 1e-9 })
        // After an episode the bias decays (τ 1 s): ten seconds later it is gone.
        if let end = samples.indices.first(where: { $0 > 0 && samples[$0 - 1].multipath && !samples[$0].multipath }),
            end + 10 < samples.count, !samples[(end)...(end + 10)].contains(where: \.multipath)
        {
            #expect(hypot(samples[end + 10].bias.east, samples[end + 10].bias.north) < 0.01)
        }
    }

    @Test("settling: the first fix is off by the offset, converging with its time constant; the stated σ knows it")
    func settling() {
        var model = GNSSErrorModel(sigma: 0.001, sky: .init(jitter: 0, settling: .init(offset: 8, timeConstant: 4)), seed: 4)
        let first = model.sample(at: .zero)
        let later = model.sample(at: .seconds(4))
        #expect(abs(hypot(first.east, first.north) - 8) < 0.01)
        #expect(abs(hypot(later.east, later.north) - 8 * exp(-1)) < 0.01)
        #expect(first.statedSigma > later.statedSigma)
    }

    @Test("seeded: the same seed and times give the same errors")
    func seeded() {
        let sky = GNSSErrorModel.Sky(multipath: .init(), settling: .init())
        var a = GNSSErrorModel(sigma: 1.5, sky: sky, seed: 11)
        var b = GNSSErrorModel(sigma: 1.5, sky: sky, seed: 11)
        for second in 0..<200 {
            let (x, y) = (a.sample(at: .milliseconds(200 * second)), b.sample(at: .milliseconds(200 * second)))
            #expect(x.east == y.east && x.north == y.north && x.statedSigma == y.statedSigma)
        }
    }
}
