import Foundation

/// The position error of a GNSS receiver standing still, as the sky gives it: errors with memory.
/// Pure: a seeded generator and the times it is asked at.
///
/// - **The slow error**: a first-order Gauss–Markov process per axis (east, north), σ metres and
///   correlation time τ: e(t + Δ) = ρ e(t) + √(1 − ρ²) σ n, ρ = e^(−Δ/τ). Published
///   autocorrelations of hand-held and consumer receivers bend at one to several minutes, so the
///   default τ is 180 s: within one visit of a few seconds it hardly moves, and averaging longer
///   within the visit buys little.
/// - **Jitter**: white noise on top, per axis (decimetres for a still receiver).
/// - **Multipath episodes** (optional): a reflected signal that switches on and off; the position
///   jumps by a bias when it comes on and the bias decays when it goes off.
/// - **Settling** (optional): right after lock the position starts off by some metres and
///   converges exponentially.
///
/// The receiver's **stated** σ (what it writes in GST, and as HDOP) knows the nominal error — the
/// slow error and the jitter — and that it is still settling, but not the multipath bias: it
/// rises only a little during an episode (the residuals grow), far less than the bias.
/// τ = 0 gives independent errors at every epoch (the emulator's old noise).
public struct GNSSErrorModel: Sendable {
    /// Multipath episodes: a reflected signal switching on and off.
    public struct Multipath: Sendable, Hashable {
        /// The bias when an episode starts, metres; each episode draws 0.6–1.4 times it, in a
        /// random direction.
        public var magnitude: Double
        /// Mean length of an episode and of the clear time between episodes, seconds (exponential).
        public var meanOn: Double
        public var meanOff: Double
        /// How fast the bias goes away after an episode, seconds.
        public var decay: Double
        /// Whether the first epoch is already inside an episode.
        public var startsOn: Bool

        public init(magnitude: Double = 6, meanOn: Double = 8, meanOff: Double = 20, decay: Double = 1, startsOn: Bool = false) {
            self.magnitude = max(0, magnitude)
            self.meanOn = max(0.01, meanOn)
            self.meanOff = max(0.01, meanOff)
            self.decay = max(0.01, decay)
            self.startsOn = startsOn
        }
    }

    /// A receiver still converging after lock.
    public struct Settling: Sendable, Hashable {
        /// The extra error at the first epoch, metres, in a random direction.
        public var offset: Double
        /// How fast it goes away, seconds.
        public var timeConstant: Double

        public init(offset: Double = 5, timeConstant: Double = 4) {
            self.offset = max(0, offset)
            self.timeConstant = max(0.01, timeConstant)
        }
    }

    /// The error's shape besides its σ.
    public struct Sky: Sendable, Hashable {
        /// τ of the slow error, seconds; 0: independent errors at every epoch.
        public var correlationTime: Double
        /// White noise per axis, metres.
        public var jitter: Double
        public var multipath: Multipath?
        public var settling: Settling?

        public init(correlationTime: Double = 180, jitter: Double = 0.2, multipath: Multipath? = nil, settling: Settling? = nil) {
            self.correlationTime = max(0, correlationTime)
            self.jitter = max(0, jitter)
            self.multipath = multipath
            self.settling = settling
        }

        /// Open sky: the slow error (τ 180 s) and 0.2 m of jitter.
        public static let open = Sky()
        /// Independent Gaussian errors at every epoch, no jitter on top: the old emulator noise.
        public static let independent = Sky(correlationTime: 0, jitter: 0)

        public var isIndependent: Bool { correlationTime == 0 }
    }

    /// One epoch's error.
    public struct Sample: Sendable {
        /// The position error, metres east and north.
        public var east: Double
        public var north: Double
        /// The σ per axis the receiver states (GST), metres.
        public var statedSigma: Double
        /// Inside a multipath episode.
        public var multipath: Bool
        /// The parts of the error: the slow one and the multipath bias (metres east, north).
        public var slow: (east: Double, north: Double)
        public var bias: (east: Double, north: Double)
        /// The 95 % horizontal radius the receiver states: 2.448 σ (a circular normal error).
        public var statedRadius95: Double { GNSSErrorModel.radius95PerSigma * statedSigma }
    }

    /// The 95 % radius of a circular normal error, in σ per axis: √(−2 ln 0.05).
    public static let radius95PerSigma = (-2 * log(0.05)).squareRoot()

    public private(set) var sigma: Double
    public let sky: Sky
    private var generator: SeededGenerator
    private var slow = (east: 0.0, north: 0.0)
    private var bias = (east: 0.0, north: 0.0)
    private var episode = false
    private var settleDirection = (east: 0.0, north: 0.0)
    private var last: Duration?
    private var first: Duration?

    /// - Parameters:
    ///   - sigma: the slow error's σ per axis, metres (with τ 0: the whole error's).
    public init(sigma: Double, sky: Sky = .open, seed: UInt64) {
        self.sigma = max(0, sigma)
        self.sky = sky
        generator = SeededGenerator(seed: seed)
        episode = sky.multipath?.startsOn ?? false
    }

    /// The receiver's error becomes `sigma` per axis now (a degraded sky): the slow error is
    /// scaled with it, so the new σ shows at once.
    public mutating func setSigma(_ sigma: Double) {
        let new = max(0, sigma)
        guard new != self.sigma else { return }
        if self.sigma > 0 {
            slow.east *= new / self.sigma
            slow.north *= new / self.sigma
        }
        self.sigma = new
    }

    /// The error at `elapsed` (the receiver's time since it started; later than the last call).
    public mutating func sample(at elapsed: Duration) -> Sample {
        let dt = last.map { max(0, (elapsed - $0).seconds) }
        last = elapsed
        if first == nil { first = elapsed }
        // The slow error: from its stationary distribution at the first epoch (and always with τ 0).
        if let dt, sky.correlationTime > 0 {
            let rho = exp(-dt / sky.correlationTime)
            let spread = (1 - rho * rho).squareRoot() * sigma
            slow.north = rho * slow.north + spread * generator.gaussian()
            slow.east = rho * slow.east + spread * generator.gaussian()
        } else {
            slow.north = sigma * generator.gaussian()
            slow.east = sigma * generator.gaussian()
        }
        if let multipath = sky.multipath {
            let switched: Bool
            if let dt {
                switched = generator.unit() < 1 - exp(-dt / (episode ? multipath.meanOn : multipath.meanOff))
            } else {
                switched = episode  // an episode that is on from the start jumps at the first epoch
            }
            if switched, dt != nil { episode.toggle() }
            if switched && episode {
                let size = multipath.magnitude * (0.6 + 0.8 * generator.unit())
                let bearing = 2 * Double.pi * generator.unit()
                bias = (size * sin(bearing), size * cos(bearing))
            } else if !episode, let dt {
                let keep = exp(-dt / multipath.decay)
                bias = (bias.east * keep, bias.north * keep)
            }
        }
        var settle = 0.0
        if let settling = sky.settling {
            if first == elapsed, settleDirection == (0, 0) {
                let bearing = 2 * Double.pi * generator.unit()
                settleDirection = (sin(bearing), cos(bearing))
            }
            settle = settling.offset * exp(-((elapsed - (first ?? elapsed)).seconds) / settling.timeConstant)
        }
        var jitter = (east: 0.0, north: 0.0)
        if sky.jitter > 0 {
            jitter = (sky.jitter * generator.gaussian(), sky.jitter * generator.gaussian())
        }
        let nominal = (sigma * sigma + sky.jitter * sky.jitter).squareRoot()
        // Settling: the receiver knows it is still converging (its σ is larger), not by how much.
        var stated = (nominal * nominal + settle * settle / 4).squareRoot()
        // Multipath: the residuals grow a little; the bias itself is invisible to the receiver.
        if episode { stated *= 1.2 }
        return Sample(
            east: slow.east + bias.east + settle * settleDirection.east + jitter.east,
            north: slow.north + bias.north + settle * settleDirection.north + jitter.north, statedSigma: stated, multipath: episode,
            slow: slow, bias: bias)
    }
}
