import Foundation

/// Distances and azimuths on the WGS-84 ellipsoid (the inverse geodesic problem).
///
/// Short and ordinary lines use Vincenty's iteration on the auxiliary sphere, which converges in
/// a few steps. Nearly antipodal lines, where that iteration oscillates, are solved by bisection
/// on the starting azimuth after reducing the problem to a canonical orientation (the approach of
/// C. F. F. Karney, "Algorithms for geodesics", J. Geodesy 87, 2013, §4), reusing Vincenty's
/// series for the ellipsoidal corrections. Both agree with GeographicLib to well under a
/// millimetre on the GeodTest lines (see `GeodesicTests`).
public enum Geodesic {
    /// WGS-84 semi-major axis, metres.
    public static let equatorialRadius = 6_378_137.0
    /// WGS-84 flattening.
    public static let flattening = 1 / 298.257_223_563
    static let polarRadius = equatorialRadius * (1 - flattening)
    static let secondEccentricitySquared =
        (equatorialRadius * equatorialRadius - polarRadius * polarRadius) / (polarRadius * polarRadius)

    /// The solution of the inverse problem.
    public struct Line: Sendable, Hashable {
        /// Geodesic distance in metres.
        public var distance: Double
        /// Azimuth at the first point, degrees clockwise from north in [0, 360).
        public var initialAzimuth: Double
    }

    /// Geodesic distance between two points in metres. Altitude is ignored.
    public static func distance(from a: Coordinate, to b: Coordinate) -> Double {
        inverse(from: a, to: b).distance
    }

    /// Distance and initial azimuth from `a` to `b`.
    public static func inverse(from a: Coordinate, to b: Coordinate) -> Line {
        if a == b { return Line(distance: 0, initialAzimuth: 0) }
        if let line = vincenty(a, b) { return line }
        return bisection(a, b)
    }

    // MARK: - Short lines (the verifier's case)

    /// Distance and initial azimuth for points under `shortLineLimit` apart, on the ellipsoid's
    /// tangent plane at the mid-latitude: north = M(φm)·Δφ, east = N(φm)·cos φm·Δλ (meridional and
    /// prime-vertical radii of curvature), the azimuth turned back by the meridians' convergence
    /// (Δλ·sin φm / 2) to the first point. A few multiplications and one square root, against
    /// Vincenty's iteration: the verifier's regions are at most 500 m. Within 0.1 mm and 1e-5° of
    /// the geodesic (tested against GeodTest's short lines and Vincenty); `nil` when the points are
    /// farther apart, or beyond 80° of latitude.
    public static func shortInverse(from a: Coordinate, to b: Coordinate) -> Line? {
        guard let plane = tangentPlane(a, b) else { return nil }
        if plane.distance == 0 { return Line(distance: 0, initialAzimuth: 0) }
        let degree = Double.pi / 180
        var azimuth = (atan2(plane.east, plane.north) - plane.dLambda * plane.sinPhi / 2) / degree
        if azimuth < 0 { azimuth += 360 }
        if azimuth >= 360 { azimuth -= 360 }
        return Line(distance: plane.distance, initialAzimuth: azimuth)
    }

    /// `shortInverse`'s distance alone, without the azimuth's `atan2`: the verifier decides on the
    /// distance and works the azimuth out
    /// only when a verdict's bearing is read. The same arithmetic, so the same bits.
    public static func shortDistance(from a: Coordinate, to b: Coordinate) -> Double? { tangentPlane(a, b)?.distance }

    /// The tangent-plane components `shortInverse` and `shortDistance` share.
    @inline(__always)
    private static func tangentPlane(_ a: Coordinate, _ b: Coordinate) -> (
        north: Double, east: Double, distance: Double, dLambda: Double, sinPhi: Double
    )? {
        let degree = Double.pi / 180
        let phiM = (a.latitude + b.latitude) / 2 * degree
        guard abs(phiM) < 80 * degree else { return nil }
        var dLon = b.longitude - a.longitude
        if dLon > 180 { dLon -= 360 } else if dLon < -180 { dLon += 360 }
        let dPhi = (b.latitude - a.latitude) * degree
        let dLambda = dLon * degree
        // One libm call (~80 instructions each): the cosine comes from the sine by a square root
        // (one instruction), exact to a few units in the last place below 80°, where the cosine is
        // at least 0.17; the bound and the east component both use it. Cheap bound: 1° is over
        // 110 km everywhere off the poles.
        let sinPhi = sin(phiM)
        let cosPhi = (1 - sinPhi * sinPhi).squareRoot()
        guard abs(dPhi) < 0.001, abs(dLambda) * cosPhi < 0.001 else { return nil }
        let e2 = flattening * (2 - flattening)
        let w2 = 1 - e2 * sinPhi * sinPhi
        let w = w2.squareRoot()
        let n = equatorialRadius / w
        let m = n * (1 - e2) / w2
        let north = m * dPhi
        let east = n * cosPhi * dLambda
        let distance = (north * north + east * east).squareRoot()
        guard distance < shortLineLimit else { return nil }
        return (north, east, distance, dLambda, sinPhi)
    }

    /// The verifier's solution: `shortInverse` where it applies (under `shortLineLimit`, below 80°
    /// of latitude), else the full one. A verdict's distance (`fastDistance`) and its bearing come
    /// from here, so both always take the same branch.
    public static func fastInverse(from a: Coordinate, to b: Coordinate) -> Line {
        shortInverse(from: a, to: b) ?? inverse(from: a, to: b)
    }

    /// `fastInverse(from:to:).distance`, without the short solution's `atan2`.
    public static func fastDistance(from a: Coordinate, to b: Coordinate) -> Double {
        shortDistance(from: a, to: b) ?? inverse(from: a, to: b).distance
    }

    /// Lines shorter than this take `shortInverse`.
    public static let shortLineLimit = 600.0

    // MARK: - Vincenty (fast path)

    private static func vincenty(_ p1: Coordinate, _ p2: Coordinate) -> Line? {
        let f = flattening
        let lonDifference = normalizedDegrees(p2.longitude - p1.longitude) * .pi / 180
        let u1 = atan((1 - f) * tan(p1.latitude * .pi / 180))
        let u2 = atan((1 - f) * tan(p2.latitude * .pi / 180))
        let (sinU1, cosU1, sinU2, cosU2) = (sin(u1), cos(u1), sin(u2), cos(u2))

        var lambda = lonDifference
        for _ in 0..<30 {
            let (sinLambda, cosLambda) = (sin(lambda), cos(lambda))
            let a = cosU2 * sinLambda
            let b = cosU1 * sinU2 - sinU1 * cosU2 * cosLambda
            let sinSigma = (a * a + b * b).squareRoot()
            if sinSigma == 0 { return Line(distance: 0, initialAzimuth: 0) }
            let cosSigma = sinU1 * sinU2 + cosU1 * cosU2 * cosLambda
            let sigma = atan2(sinSigma, cosSigma)
            let sinAlpha = cosU1 * cosU2 * sinLambda / sinSigma
            let cosSqAlpha = 1 - sinAlpha * sinAlpha
            let cos2SigmaM = cosSqAlpha != 0 ? cosSigma - 2 * sinU1 * sinU2 / cosSqAlpha : 0
            let c = f / 16 * cosSqAlpha * (4 + f * (4 - 3 * cosSqAlpha))
            let previous = lambda
            lambda =
                lonDifference + (1 - c) * f * sinAlpha
                * (sigma + c * sinSigma * (cos2SigmaM + c * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
            if abs(lambda) > .pi { return nil }  // diverging: nearly antipodal
            if abs(lambda - previous) < 1e-13 {
                let distance = arcLength(
                    sigma: sigma, sinSigma: sinSigma, cosSigma: cosSigma, cos2SigmaM: cos2SigmaM,
                    cosSqAlpha: cosSqAlpha)
                let azimuth = atan2(cosU2 * sin(lambda), cosU1 * sinU2 - sinU1 * cosU2 * cos(lambda))
                return Line(distance: distance, initialAzimuth: degrees0to360(azimuth))
            }
        }
        return nil
    }

    /// Vincenty's series for the distance along the ellipsoid from the arc on the sphere.
    private static func arcLength(
        sigma: Double, sinSigma: Double, cosSigma: Double, cos2SigmaM: Double, cosSqAlpha: Double
    ) -> Double {
        let uSq = cosSqAlpha * secondEccentricitySquared
        let a = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
        let b = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))
        let deltaSigma =
            b * sinSigma
            * (cos2SigmaM + b / 4
                * (cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM) - b / 6 * cos2SigmaM
                    * (-3 + 4 * sinSigma * sinSigma) * (-3 + 4 * cos2SigmaM * cos2SigmaM)))
        return polarRadius * a * (sigma - deltaSigma)
    }

    // MARK: - Bisection on the azimuth (robust path)

    private static func bisection(_ p1: Coordinate, _ p2: Coordinate) -> Line {
        // Canonical orientation: lon12 ≥ 0, |lat1| ≥ |lat2|, lat1 ≤ 0. Then the longitude reached
        // grows monotonically with the starting azimuth over [0, π].
        var lat1 = p1.latitude, lat2 = p2.latitude
        var lon12 = normalizedDegrees(p2.longitude - p1.longitude)
        let mirrored = lon12 < 0
        if mirrored { lon12 = -lon12 }
        let swapped = abs(lat1) < abs(lat2)
        if swapped { swap(&lat1, &lat2) }
        let flipped = lat1 > 0
        if flipped {
            lat1 = -lat1
            lat2 = -lat2
        }
        let f = flattening
        let target = lon12 * .pi / 180
        let beta1 = atan((1 - f) * tan(lat1 * .pi / 180))
        let beta2 = atan((1 - f) * tan(lat2 * .pi / 180))
        let (sinBeta1, cosBeta1, sinBeta2, cosBeta2) = (sin(beta1), cos(beta1), sin(beta2), cos(beta2))

        struct Trial {
            var lambda: Double, sigma: Double, cosSqAlpha0: Double, cos2SigmaM: Double
            var sinAlpha0: Double, cosAlpha2CosBeta2: Double
        }
        func trial(_ alpha1: Double) -> Trial {
            let sinAlpha0 = sin(alpha1) * cosBeta1
            let cosSqAlpha0 = 1 - sinAlpha0 * sinAlpha0
            let x1 = cos(alpha1) * cosBeta1
            let x2 = max(0, x1 * x1 + (cosBeta2 * cosBeta2 - cosBeta1 * cosBeta1)).squareRoot()
            let sigma1 = atan2(sinBeta1, x1), sigma2 = atan2(sinBeta2, x2)
            let omega1 = atan2(sinAlpha0 * sinBeta1, x1), omega2 = atan2(sinAlpha0 * sinBeta2, x2)
            let sigma = angleBetween(sigma1, sigma2)
            let omega = angleBetween(omega1, omega2)
            let cos2SigmaM = cos(sigma1 + sigma2)
            let c = f / 16 * cosSqAlpha0 * (4 + f * (4 - 3 * cosSqAlpha0))
            let lambda =
                omega - (1 - c) * f * sinAlpha0
                * (sigma + c * sin(sigma) * (cos2SigmaM + c * cos(sigma) * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
            return Trial(
                lambda: lambda, sigma: sigma, cosSqAlpha0: cosSqAlpha0, cos2SigmaM: cos2SigmaM,
                sinAlpha0: sinAlpha0, cosAlpha2CosBeta2: x2)
        }
        var low = 0.0, high = Double.pi
        for _ in 0..<64 {
            let middle = (low + high) / 2
            if trial(middle).lambda < target { low = middle } else { high = middle }
        }
        let alpha1 = (low + high) / 2
        let t = trial(alpha1)
        let distance = arcLength(
            sigma: t.sigma, sinSigma: sin(t.sigma), cosSigma: cos(t.sigma), cos2SigmaM: t.cos2SigmaM,
            cosSqAlpha: t.cosSqAlpha0)

        // Undo the orientation, last step first. Swapping the points also mirrored the problem
        // (we kept lon12 ≥ 0), so the caller's first point sees the reversed, mirrored arrival azimuth.
        var azimuth: Double
        if swapped {
            var arrival = atan2(t.sinAlpha0, t.cosAlpha2CosBeta2)
            if flipped { arrival = .pi - arrival }
            azimuth = .pi - arrival
        } else {
            azimuth = alpha1
            if flipped { azimuth = .pi - azimuth }
        }
        if mirrored { azimuth = -azimuth }
        return Line(distance: distance, initialAzimuth: degrees0to360(azimuth))
    }

    /// The angle from `a` to `b` folded into [0, π].
    private static func angleBetween(_ a: Double, _ b: Double) -> Double {
        atan2(max(0, cos(a) * sin(b) - sin(a) * cos(b)), cos(a) * cos(b) + sin(a) * sin(b))
    }

    /// Degrees into (−180, 180].
    static func normalizedDegrees(_ value: Double) -> Double {
        var x = value.truncatingRemainder(dividingBy: 360)
        if x > 180 { x -= 360 } else if x <= -180 { x += 360 }
        return x
    }

    private static func degrees0to360(_ radians: Double) -> Double {
        var degrees = (radians * 180 / .pi).truncatingRemainder(dividingBy: 360)
        if degrees < 0 { degrees += 360 }
        return degrees == 360 ? 0 : degrees
    }
}

extension Geodesic {
    /// A compass word for an azimuth: "N", "NE", … — for messages a person reads.
    public static func compassPoint(forAzimuth azimuth: Double) -> String {
        let points = ["N", "NE", "E", "SE", "S", "SW", "W", "NW"]
        guard azimuth.isFinite else { return "?" }
        var index = Int((azimuth / 45).rounded()) % 8
        if index < 0 { index += 8 }
        return points[index]
    }
}
