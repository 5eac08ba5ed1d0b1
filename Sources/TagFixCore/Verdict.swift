/// The rules a verification run applies. Defaults suit a field tech with a consumer GPS puck.
public struct VerificationPolicy: Sendable, Hashable {
    /// Location confirmation on for this run. Off: every scan is `disallowed`.
    public var locationConfirmation = true
    /// Tag identifiers (or UIDs in hex) for which confirmation is turned off, matched byte for
    /// byte as the registries match ids (`ExactID`).
    public var disallowedTags: TagIDSet = []
    /// The oldest fix, relative to the scan, that may decide a verdict.
    public var maximumFixAge: Duration = .seconds(2)
    /// The worst horizontal accuracy (95 % radius, metres) that may decide a verdict.
    public var maximumAccuracy = 50.0
    /// Whether fixes gpsd marks as simulated (status 8) may decide a verdict.
    public var allowSimulatedFixes = false
    /// Every tag must carry a genuine NXP originality signature (`--require-genuine`): a scan
    /// without one is `untrusted(signature_invalid | signature_missing)`.
    public var requireGenuine = false
    /// With `requireGenuine`, chips that have no signature at all (NTAG203, MIFARE Classic,
    /// Type 4) pass (`--allow-unsigned-tags`); an NTAG21x that gives none still does not.
    public var allowUnsignedTags = false
    /// The fastest a tag reader is believed to move, metres per second: two consecutive fixes
    /// farther apart than this speed covers in the time between them, plus both accuracies, are a
    /// GPS that jumped (`untrusted(gps_jump)`, `--max-speed`). `nil` turns the check off.
    public var maximumSpeed: Double? = 70
    /// How long after a GPS jump a scan is still `untrusted(gps_jump)`: a receiver that jumped
    /// once is not believed again at once (a spoofer that teleports into the circle, then waits).
    public var gpsJumpWindow: Duration = .seconds(30)
    /// How long to wait for a fix when a scan finds none fresh enough.
    public var fixTimeout: Duration = .seconds(5)
    /// How long to wait for the fix after the scan, when a fresh one before it is already
    /// there, so the two can be interpolated. Zero decides on the earlier fix at once.
    public var interpolationWait: Duration = .milliseconds(1500)
    /// The cap for region radii (App Clips: 500 m).
    public var maximumRadius = CircularRegion.defaultMaximumRadius
    /// The radius used when a tag's URL gives a position but no radius; `nil` makes that an error.
    public var defaultURLRadius: Double?

    public init() {}
}

/// Where the expected region came from.
public enum RegionSource: String, Sendable, Hashable {
    case registry
    case url
}

/// Why a verdict is inconclusive. Each says what to do next.
public enum InconclusiveReason: Sendable, Hashable, CustomStringConvertible {
    /// No fix at all, or the receiver reports no fix.
    case noFix
    /// The closest fix is older (or newer) than the policy allows.
    case staleFix(age: Duration, limit: Duration)
    /// The fix's accuracy is worse than the policy allows.
    case poorAccuracy(accuracy: Double, limit: Double)
    /// The receiver gave no error estimate.
    case unknownAccuracy
    /// No longer given: a simulated fix the policy forbids is `untrusted(gps_simulated)` (docs/trust.md).
    /// Kept so code that names it (and logs that carry `simulated_fix`) still read.
    case simulatedFix
    /// The uncertainty circle lies across the region's edge.
    case straddlesBoundary
    /// The tag's URL carries a location that cannot be used.
    case invalidTagLocation(URLLocationError)
    /// The registry could not be read.
    case registryUnavailable(RegistryError)
    /// No usable fix while the fix source (gpsd) cannot be reached: says so instead of blaming the sky.
    case gpsUnavailable(String)
    /// The tag was found but its NDEF message could not be read (a broken or unsupported
    /// capability container, a refused read): nothing on it was used.
    case readFailed(String)
    /// The registry says the tag is a SUN tag checked with key set `keyName`, and this run has
    /// no such keys: nothing about the tag was proved.
    indirect case sunUnchecked(tag: String, keyName: String)

    /// A stable machine-readable code for JSON output.
    public var code: String {
        switch self {
        case .noFix: "no_fix"
        case .staleFix: "stale_fix"
        case .poorAccuracy: "poor_accuracy"
        case .unknownAccuracy: "unknown_accuracy"
        case .simulatedFix: "simulated_fix"
        case .straddlesBoundary: "straddles_boundary"
        case .invalidTagLocation: "invalid_tag_location"
        case .registryUnavailable: "registry_unavailable"
        case .gpsUnavailable: "gps_unavailable"
        case .readFailed: "read_failed"
        case .sunUnchecked: "sun_unchecked"
        }
    }

    public var description: String {
        switch self {
        case .noFix:
            "no GPS fix: move to open sky and wait for a fix, then tap again"
        case .staleFix(let age, let limit):
            "the nearest fix is \(format(age.seconds)) s from the scan (limit \(format(limit.seconds)) s): wait for a fresh fix, then tap again"
        case .poorAccuracy(let accuracy, let limit):
            "GPS accuracy ±\(format(accuracy)) m is worse than ±\(format(limit)) m: wait for a better fix, then tap again"
        case .unknownAccuracy:
            "the receiver reports no accuracy estimate: wait for a fix with satellites in view, then tap again"
        case .simulatedFix:
            "the fix is simulated (gpsd status 8): use a real receiver, or allow simulated fixes"
        case .straddlesBoundary:
            "the accuracy circle crosses the region's edge: wait for a better fix, then tap again"
        case .invalidTagLocation(let error):
            "\(error): rewrite the tag's URL"
        case .registryUnavailable(let error):
            "\(error): check the registry file"
        case .gpsUnavailable(let why):
            "GPS unavailable: \(why); tap again once gpsd answers"
        case .readFailed(let problem):
            "the tag could not be read (\(problem)): hold it still on the reader and tap again; if it fails again, rewrite the tag or check it with tagfix scan"
        case .sunUnchecked(let tag, let keyName):
            "\(tag) is an NTAG 424 DNA SUN tag and this run has no key set \"\(keyName)\": give verify --sun-keys FILE with a [\(keyName)] section"
        }
    }
}

/// Why a scan cannot be trusted, whatever the distance (docs/trust.md). Each says what to do.
public enum UntrustedReason: Sendable, Hashable, CustomStringConvertible {
    /// The registry binds the tag id to another UID: a copied URL on another tag, or a replaced tag.
    case uidMismatch(read: TagUID, enrolled: TagUID, tagID: String)
    /// The chip's NXP originality signature does not verify: not an original NXP chip.
    case signatureInvalid(key: String?, tag: String)
    /// The policy requires a genuine chip and this one gave no signature.
    case signatureMissing(status: Originality.Status?, tag: String)
    /// The SUN message in the URL does not verify (altered, forged, or the wrong key). Indirect,
    /// like `gpsJump`: `SUNError`'s strings in line made every verdict kind larger and each copy
    /// of one a call to the enum's copy witness (callgrind: +61 instructions a verdict).
    indirect case sunInvalid(tag: String, problem: SUNError)
    /// The SUN read counter is not above the last one accepted for this UID: a copied URL.
    indirect case sunReplayed(tag: String, counter: UInt32, last: UInt32)
    /// Site keys are trusted (`--trust-key`) and the URL's location carries no signature.
    case locationUnsigned(tag: String)
    /// The URL's location signature verifies with no trusted site key.
    case locationSignatureInvalid(tag: String)
    /// The GPS position jumped farther than the speed limit allows (`GPSJump`). Indirect: the
    /// jump's fields in line made every verdict kind larger, and each copy of one a call to the
    /// enum's copy witness (measured with callgrind: +57 instructions a verdict on the hot path).
    indirect case gpsJump(GPSJump)
    /// The fix is simulated (gpsd status 8) and simulated fixes are not allowed.
    case gpsSimulated
    /// A phone tap on a tag without a SUN proof while SUN is required for phone taps
    /// (`serve --require-sun`): its URL is static, so anyone who has seen it can open it anywhere.
    case sunRequired(tag: String)

    /// A stable machine-readable code for JSON output.
    public var code: String {
        switch self {
        case .uidMismatch: "uid_mismatch"
        case .signatureInvalid: "signature_invalid"
        case .signatureMissing: "signature_missing"
        case .sunInvalid: "sun_invalid"
        case .sunReplayed: "sun_replayed"
        case .locationUnsigned: "location_unsigned"
        case .locationSignatureInvalid: "location_signature_invalid"
        case .gpsJump: "gps_jump"
        case .gpsSimulated: "gps_simulated"
        case .sunRequired: "sun_required"
        }
    }

    public var description: String {
        switch self {
        case .uidMismatch(let read, let enrolled, let tagID):
            "this tag's UID \(read.hex) is not the enrolled \(enrolled.hex): a copy or a replaced tag; check the tag at \(tagID)"
        case .signatureInvalid(let key, let tag):
            "the tag's NXP originality signature does not verify\(key.map { " with the \($0) key" } ?? ""): not an original NXP chip, so a copy; check the tag at \(tag) and replace it"
        case .signatureMissing(let status, let tag):
            switch status {
            case .unsupported:
                "this chip has no NXP originality signature and genuine tags are required: replace the tag at \(tag) with an NTAG21x, or allow unsigned tags (--allow-unsigned-tags)"
            case nil:
                "the reader gave no originality check for this tag and genuine tags are required: read it with a libnfc reader, or check the tag at \(tag)"
            default:
                "the tag gave no NXP originality signature and genuine tags are required: a copy or a blank chip; check the tag at \(tag)"
            }
        case .sunInvalid(let tag, let problem):
            "the tag's SUN proof does not verify (\(problem.description)): an altered or forged URL, or a tag with other keys; check the tag at \(tag)"
        case .sunReplayed(let tag, let counter, let last):
            "the tag's read counter \(counter) is not above the last accepted \(last): a copied URL replayed; check the tag at \(tag)"
        case .locationUnsigned(let tag):
            "the location in tag \(tag)'s URL is not signed and site keys are trusted (--trust-key): anyone can write such a URL; sign it (tagfix sign-url) and rewrite the tag, or enrol the tag in the registry"
        case .locationSignatureInvalid(let tag):
            "the location signature in tag \(tag)'s URL does not verify with any trusted site key: the URL was edited, copied from another tag, or signed with another key; check the tag at \(tag) and rewrite it with a signed URL"
        case .gpsJump(let jump):
            "\(jump): a spoofed or faulty receiver; check the GPS (tagfix fix), and tap again once its position has been steady for \(format(jump.window.seconds)) s"
        case .gpsSimulated:
            "the fix is simulated (gpsd status 8): a simulator or a replay feeds gpsd, not a receiver; use a real receiver (--allow-simulated only on a test rig)"
        case .sunRequired(let tag):
            "tag \(tag)'s URL carries no SUN proof and phone taps must prove the tag with SUN (--require-sun): anyone who has seen a static URL can open it elsewhere; replace the tag at \(tag) with an NTAG 424 DNA enrolled with SUN"
        }
    }
}

/// Two consecutive fixes farther apart than anyone carries a reader in the time between them:
/// `distance > maximumSpeed × seconds + accuracy₁ + accuracy₂` (metres; an accuracy the receiver
/// did not give counts as 0). The slowest speed consistent with both fixes' accuracy circles is
/// `(distance − accuracy₁ − accuracy₂) / seconds`; above the limit, the position jumped while the
/// reported accuracy stayed too small to explain it.
public struct GPSJump: Sendable, Hashable, CustomStringConvertible {
    /// The later fix's time.
    public var time: Timestamp
    public var distance: Double
    public var seconds: Double
    public var accuracies: [Double?]
    public var limit: Double
    /// How long a scan after the jump stays untrusted.
    public var window: Duration

    public init(time: Timestamp, distance: Double, seconds: Double, accuracies: [Double?], limit: Double, window: Duration) {
        self.time = time
        self.distance = distance
        self.seconds = seconds
        self.accuracies = accuracies
        self.limit = limit
        self.window = window
    }

    /// The jump from `previous` to `next`, or `nil` when the distance is within what the speed
    /// limit and the two accuracies explain. Both must have positions.
    public static func between(_ previous: Fix, _ next: Fix, limit: Double, window: Duration) -> GPSJump? {
        guard let p = previous.coordinate, let q = next.coordinate, previous.hasPosition, next.hasPosition else { return nil }
        let seconds = abs(previous.time.duration(to: next.time).seconds)
        let slack = (previous.horizontalAccuracy ?? 0) + (next.horizontalAccuracy ?? 0)
        let distance = Geodesic.fastDistance(from: p, to: q)
        guard distance > limit * seconds + slack else { return nil }
        return GPSJump(
            time: max(previous.time, next.time), distance: distance, seconds: seconds,
            accuracies: [previous.horizontalAccuracy, next.horizontalAccuracy], limit: limit, window: window)
    }

    /// The slowest speed both fixes allow, m/s (infinite for two fixes at the same time).
    public var impliedSpeed: Double {
        let apart = max(0, distance - accuracies.reduce(0) { $0 + ($1 ?? 0) })
        return seconds > 0 ? apart / seconds : .infinity
    }

    public var description: String {
        let accuracy = accuracies.map { $0.map { "±\(format($0)) m" } ?? "no accuracy" }.joined(separator: " and ")
        let speed = impliedSpeed.isFinite ? "at least \(format(impliedSpeed)) m/s" : "at once"
        return
            "the GPS position jumped \(format(distance)) m in \(format(seconds)) s (\(speed), limit \(format(limit)) m/s) while reporting \(accuracy)"
    }
}

/// Why confirmation was not attempted (App Clip `disallowed`).
public enum DisallowedReason: Sendable, Hashable, CustomStringConvertible {
    case confirmationDisabled
    case tagDisallowed(String)
    case notPhysicalTag
    /// A phone's browser gave no position: the person declined the prompt, or the phone has no
    /// location to give (the App Clip's "confirmation turned off by the person").
    case positionDenied

    public var code: String {
        switch self {
        case .confirmationDisabled: "confirmation_disabled"
        case .tagDisallowed: "tag_disallowed"
        case .notPhysicalTag: "not_physical_tag"
        case .positionDenied: "position_denied"
        }
    }

    public var description: String {
        switch self {
        case .confirmationDisabled: "location confirmation is turned off for this run"
        case .tagDisallowed(let id): "location confirmation is turned off for tag \(id)"
        case .notPhysicalTag: "the URL did not come from a physical tag"
        case .positionDenied:
            "the phone gave no position (location declined, or off on the phone): allow location for this site and tap again"
        }
    }
}

/// The outcome for one scan.
public struct Verdict: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// Distance plus accuracy lies within the radius.
        case confirmed
        /// Distance minus accuracy lies beyond the radius.
        case outside
        case inconclusive(InconclusiveReason)
        /// No registry entry and no location in the URL (App Clip `doesNotMatch`).
        case notRegistered
        case disallowed(DisallowedReason)
        /// The scan cannot be trusted (a copied or replaced tag), whatever the distance.
        case untrusted(UntrustedReason)

        /// `confirmed`, `outside`, `inconclusive`, `notRegistered`, `disallowed` or `untrusted`.
        public var name: String {
            switch self {
            case .confirmed: "confirmed"
            case .outside: "outside"
            case .inconclusive: "inconclusive"
            case .notRegistered: "notRegistered"
            case .disallowed: "disallowed"
            case .untrusted: "untrusted"
            }
        }

        /// The reason's code, if the kind has one.
        public var reasonCode: String? {
            switch self {
            case .inconclusive(let reason): reason.code
            case .disallowed(let reason): reason.code
            case .untrusted(let reason): reason.code
            default: nil
            }
        }
    }

    struct Fields: Sendable, Hashable {
        var kind: Kind
        var scan: TagScan
        var tagID: String? = nil
        var region: CircularRegion? = nil
        var regionSource: RegionSource? = nil
        var regionName: String? = nil
        var fix: Fix? = nil
        var fixAge: Duration? = nil
        var interpolated: Bool
        var distance: Double? = nil
        var accuracy: Double? = nil
        var timeStamp: TimeStamp? = nil
        var sun: SUNEvidence? = nil
    }

    /// Copy-on-write, like `TagScan` and `Fix`: a verdict is some 185 bytes of fields (the kind,
    /// the region, the ids; the scan and the fix are boxes of their own), handed from the verifier
    /// to streams, the log and the printer.
    private var storage: ImmutableBox<Fields>

    public var kind: Kind {
        get { storage.fields.kind }
        set { storage.update { $0.kind = newValue } }
    }
    public var scan: TagScan {
        get { storage.fields.scan }
        set { storage.update { $0.scan = newValue } }
    }
    /// The tag identifier from the URL, or the registry entry's.
    public var tagID: String? {
        get { storage.fields.tagID }
        set { storage.update { $0.tagID = newValue } }
    }
    public var region: CircularRegion? {
        get { storage.fields.region }
        set { storage.update { $0.region = newValue } }
    }
    public var regionSource: RegionSource? {
        get { storage.fields.regionSource }
        set { storage.update { $0.regionSource = newValue } }
    }
    /// The registry entry's name, if any.
    public var regionName: String? {
        get { storage.fields.regionName }
        set { storage.update { $0.regionName = newValue } }
    }
    /// The fix that decided (interpolated to the scan time when two were used).
    public var fix: Fix? {
        get { storage.fields.fix }
        set { storage.update { $0.fix = newValue } }
    }
    /// Time between the scan and the nearest fix used.
    public var fixAge: Duration? {
        get { storage.fields.fixAge }
        set { storage.update { $0.fixAge = newValue } }
    }
    /// Whether `fix` was interpolated between the fixes before and after the scan.
    public var interpolated: Bool {
        get { storage.fields.interpolated }
        set { storage.update { $0.interpolated = newValue } }
    }
    /// Geodesic distance from the region's centre to the fix, metres.
    public var distance: Double? {
        get { storage.fields.distance }
        set { storage.update { $0.distance = newValue } }
    }
    /// The fix's horizontal accuracy, metres (95 %).
    public var accuracy: Double? {
        get { storage.fields.accuracy }
        set { storage.update { $0.accuracy = newValue } }
    }
    /// Which clock gave the scan's UTC time, set by a live run (`LiveVerifier`); `nil` for a
    /// scenario, whose times are its own.
    public var timeStamp: TimeStamp? {
        get { storage.fields.timeStamp }
        set { storage.update { $0.timeStamp = newValue } }
    }
    /// What the tag's SUN proved (its UID and read counter), for a SUN registry tag whose proof
    /// verified; the counter is accepted before the verdict leaves the session.
    public var sun: SUNEvidence? {
        get { storage.fields.sun }
        set { storage.update { $0.sun = newValue } }
    }
    /// Azimuth from the region's centre to the fix, degrees: where the tag is, seen from where it
    /// should be. `nil` without a measured distance, or at distance zero. Worked out from the
    /// region and the fix when read, by the geodesic the distance came from: only a printed or
    /// logged verdict needs it, and its `atan2` is costly.
    public var bearing: Double? {
        let fields = storage.fields
        guard let distance = fields.distance, distance > 0, let center = fields.region?.center, let position = fields.fix?.coordinate
        else { return nil }
        return Geodesic.fastInverse(from: center, to: position).initialAzimuth
    }

    init(
        kind: Kind, scan: TagScan, tagID: String? = nil, region: CircularRegion? = nil, regionSource: RegionSource? = nil,
        regionName: String? = nil, fix: Fix? = nil, fixAge: Duration? = nil, interpolated: Bool, distance: Double? = nil,
        accuracy: Double? = nil
    ) {
        storage = ImmutableBox(
            Fields(
                kind: kind, scan: scan, tagID: tagID, region: region, regionSource: regionSource, regionName: regionName, fix: fix,
                fixAge: fixAge, interpolated: interpolated, distance: distance, accuracy: accuracy))
    }

}

private func format(_ value: Double) -> String { Coordinate.format(value, 1) }
