/// How one read of a tag went, as the reader saw it: how many attempts it took, how many of its
/// exchanges failed on the air, and how long it took (on the injected clock), retries included.
/// A reader that cannot tell (a scenario's tap, a dump) gives none.
public struct ReadEffort: Sendable, Hashable {
    /// Attempts made: 1 when the first one read the tag; each retry selects the tag again.
    public var attempts: Int
    /// Exchanges that failed on the air (libnfc's NFC_ERFTRANS or NFC_ETIMEOUT from a tag: a
    /// timeout, a CRC, parity or framing error), the refused probes a read expects not counted.
    public var rfErrors: Int
    /// From the tag found to its contents in hand, or to the last failure.
    public var duration: Duration
    /// Whether the read gave the tag's contents.
    public var completed: Bool

    public init(attempts: Int, rfErrors: Int, duration: Duration, completed: Bool = true) {
        self.attempts = max(1, attempts)
        self.rfErrors = max(0, rfErrors)
        self.duration = duration
        self.completed = completed
    }

    /// Retries: attempts after the first.
    public var retries: Int { attempts - 1 }
}

/// A tag's read health: several reads of it taken together (enrolment's test reads, or the taps a
/// session log holds). A tag on metal, behind glass or detuned reads slowly, needs retries or
/// fails now and then: a placement problem as real as a wrong position. Pure.
public struct ReadHealth: Sendable, Hashable {
    /// Reads made.
    public var reads: Int
    /// Reads that gave the tag's contents (within their retries).
    public var completed: Int
    /// Attempts over all reads, retries included.
    public var attempts: Int
    public var rfErrors: Int
    /// The fewest RF errors one read had. A tag's protocol may cost a read the same RF error
    /// every time (a PN532 reports a MIFARE Ultralight's NAK to the FAST_READ probe as one), so
    /// what tells a weak tag is the errors beyond that: `excessRFErrors`.
    public var fewestRFErrors: Int
    /// The median and the slowest read's time, of the completed reads.
    public var medianReadTime: Duration?
    public var slowestReadTime: Duration?

    public init(
        reads: Int, completed: Int, attempts: Int, rfErrors: Int, fewestRFErrors: Int = 0, medianReadTime: Duration? = nil,
        slowestReadTime: Duration? = nil
    ) {
        self.reads = max(0, reads)
        self.completed = min(max(0, completed), self.reads)
        self.attempts = max(attempts, self.reads)
        self.rfErrors = max(0, rfErrors)
        self.fewestRFErrors = self.reads == 0 ? 0 : min(max(0, fewestRFErrors), self.rfErrors / self.reads)
        self.medianReadTime = medianReadTime
        self.slowestReadTime = slowestReadTime
    }

    /// The health of these reads.
    public init(_ efforts: some Sequence<ReadEffort>) {
        var reads = 0
        var completed = 0
        var attempts = 0
        var rfErrors = 0
        var fewest = Int.max
        var times: [Duration] = []
        for effort in efforts {
            reads += 1
            fewest = min(fewest, effort.rfErrors)
            attempts += effort.attempts
            rfErrors += effort.rfErrors
            if effort.completed {
                completed += 1
                times.append(effort.duration)
            }
        }
        times.sort()
        self.init(
            reads: reads, completed: completed, attempts: attempts, rfErrors: rfErrors, fewestRFErrors: reads == 0 ? 0 : fewest,
            medianReadTime: times.isEmpty ? nil : times[times.count / 2], slowestReadTime: times.last)
    }

    /// Retries over all reads.
    public var retries: Int { attempts - reads }

    /// The share of reads that gave the tag's contents, 0 to 1 (1 with no reads).
    public var successRate: Double { reads == 0 ? 1 : Double(completed) / Double(reads) }

    /// Retries per read.
    public var retryRate: Double { reads == 0 ? 0 : Double(retries) / Double(reads) }

    /// RF errors beyond the fewest one read had, over all reads: errors the tag's protocol does
    /// not explain.
    public var excessRFErrors: Int { rfErrors - reads * fewestRFErrors }

    /// Excess RF errors per read.
    public var excessRFErrorRate: Double { reads == 0 ? 0 : Double(excessRFErrors) / Double(reads) }

    /// When a tag reads badly. See docs/verifier.md#read-health for why these numbers.
    public struct Limits: Sendable, Hashable {
        /// The fewest reads that succeed, as a share: a read that fails with the reader held
        /// still against the tag is a tap that fails in the field.
        public var minimumSuccessRate: Double
        /// The most retries per read: one glitch in ten reads is a hand that moved; more is a
        /// tag the field barely powers.
        public var maximumRetryRate: Double
        /// The most RF errors per read beyond the fewest one read had (`excessRFErrors`): a
        /// procedure swallows an error in a probe it may retry another way, so a weak tag shows
        /// here before it needs a retry.
        public var maximumExcessRFErrorRate: Double
        /// The slowest median read time: a tap that takes longer than this is one the holder
        /// pulls away from before it is read.
        public var maximumMedianReadTime: Duration

        public init(
            minimumSuccessRate: Double = 1, maximumRetryRate: Double = 0.1, maximumExcessRFErrorRate: Double = 0.1,
            maximumMedianReadTime: Duration = .milliseconds(500)
        ) {
            self.minimumSuccessRate = minimumSuccessRate
            self.maximumRetryRate = maximumRetryRate
            self.maximumExcessRFErrorRate = maximumExcessRFErrorRate
            self.maximumMedianReadTime = maximumMedianReadTime
        }

        /// Enrolment's limits: every test read must succeed.
        public static let enrolment = Limits()
        /// A session log's taps: a tap that failed is not logged, so only retries and time count;
        /// a tag is flagged when more than one tap in ten needed a retry.
        public static let taps = Limits(minimumSuccessRate: 0)
    }

    /// Why a tag reads badly, in words a technician acts on.
    public enum Problem: Sendable, Hashable, CustomStringConvertible {
        case failedReads(failed: Int, of: Int)
        case retries(Int, reads: Int)
        case rfErrors(excess: Int, reads: Int)
        case slow(median: Duration)

        public var description: String {
            switch self {
            case .failedReads(let failed, let reads): "\(failed) of \(reads) reads failed"
            case .retries(let retries, let reads): "\(retries) retr\(retries == 1 ? "y" : "ies") in \(reads) reads"
            case .rfErrors(let excess, let reads):
                "\(excess) RF error\(excess == 1 ? "" : "s") in \(reads) reads beyond what its best read had"
            case .slow(let median): "a read takes \(Coordinate.format(median.seconds * 1000, 1)) ms (median)"
            }
        }
    }

    /// What is wrong with these reads under `limits`; empty for a tag that reads well.
    public func problems(_ limits: Limits = .enrolment) -> [Problem] {
        var problems: [Problem] = []
        if successRate < limits.minimumSuccessRate { problems.append(.failedReads(failed: reads - completed, of: reads)) }
        if retryRate > limits.maximumRetryRate { problems.append(.retries(retries, reads: reads)) }
        if excessRFErrorRate > limits.maximumExcessRFErrorRate { problems.append(.rfErrors(excess: excessRFErrors, reads: reads)) }
        if let median = medianReadTime, median > limits.maximumMedianReadTime { problems.append(.slow(median: median)) }
        return problems
    }

    /// Whether the tag reads badly under `limits`.
    public func isWeak(_ limits: Limits = .enrolment) -> Bool { !problems(limits).isEmpty }

    /// What to do about a tag that reads badly.
    public static let fix =
        "move the tag off the metal (a spacer of 10 mm or more) or use an on-metal tag (ferrite-backed), keep it out from behind glass, and enrol it again; --accept-weak-read records it as it is"

    /// One line: "10 of 10 reads, 0 retries, 0 RF errors, 12 ms a read".
    public var summary: String {
        var text =
            "\(completed) of \(reads) read\(reads == 1 ? "" : "s"), \(retries) retr\(retries == 1 ? "y" : "ies"), \(rfErrors) RF error\(rfErrors == 1 ? "" : "s")"
        if let median = medianReadTime { text += ", \(Coordinate.format(median.seconds * 1000, 1)) ms a read" }
        return text
    }
}

/// A tag's read health as its enrolment measured it, as the registry keeps it.
public struct EnrolledReadHealth: Sendable, Hashable {
    public var health: ReadHealth
    /// Whether it read badly and was enrolled anyway (`--accept-weak-read`).
    public var weak: Bool
    /// When it was measured, on the enrolling run's clock.
    public var at: Timestamp

    public init(health: ReadHealth, weak: Bool, at: Timestamp) {
        self.health = health
        self.weak = weak
        self.at = at
    }
}
