/// The verifier's decision, as a pure function of a scan, its region and the fixes around it.
public struct Verifier: Sendable {
    public var policy: VerificationPolicy
    public var registry: any TagRegistry
    /// The keys and counters SUN registry tags are checked with; `nil`: such a tag's scans are
    /// `inconclusive(sun_unchecked)`.
    public var sun: SUNCheck?
    /// The site keys a location in a tag's URL must be signed with (`verify --trust-key`); `nil`
    /// believes URL locations unsigned. Registry placements need no signature.
    public var locationTrust: (any LocationSignatureChecker)?

    public init(
        policy: VerificationPolicy = VerificationPolicy(), registry: any TagRegistry, sun: SUNCheck? = nil,
        locationTrust: (any LocationSignatureChecker)? = nil
    ) {
        self.policy = policy
        self.registry = registry
        self.sun = sun
        self.locationTrust = locationTrust
    }

    /// What a scan is checked against, found without any fix.
    public enum Expectation: Sendable, Hashable {
        /// Decided without a fix: not registered, disallowed, or a broken URL location.
        case decided(Verdict)
        /// The region to check the scan against; `sun`: what the tag's SUN proof showed, for the
        /// verdict (its counter is accepted when the verdict is given).
        case region(CircularRegion, RegionSource, tagID: String?, name: String?, sun: SUNEvidence?)

        /// The registry's region for a placement, its fields moved, not copied.
        init(_ placement: consuming Placement, sun: SUNEvidence? = nil) {
            self = .region(placement.region, .registry, tagID: placement.id, name: placement.name, sun: sun)
        }
    }

    /// Finds the expected region: policy first, then (1) the registry by tag id or UID, then (2) the
    /// location in the URL.
    public func expectation(for scan: TagScan) -> Expectation { expectation(for: scan, readingURLBytes: true) }

    /// `readingURLBytes: false` skips the shortcut for registry tags' URLs (tests hold the two
    /// paths to the same answers).
    @inline(__always)
    func expectation(for scan: TagScan, readingURLBytes: Bool) -> Expectation {
        // A registry tag's URL (plain http(s), no query, so no location and nothing to decode)
        // and no tag turned off: the id is looked up from the URL's bytes. Anything else, an id
        // the registry does not hold, and a registry error take the full path below, which gives
        // the same answer (and asks the registry again, to report its error).
        if readingURLBytes, policy.disallowedTags.isEmpty, policy.locationConfirmation, !policy.requireGenuine, scan.source == .nfc,
            let url = scan.url
        {
            let bytes = url.utf8.span
            if let id = bytes.withUnsafeBufferPointer(URLLocation.plainTagID),
                let placement = try? registry.placement(forTagIDUTF8: bytes.extracting(id), uid: scan.uid)
            {
                if placement.checks.isEmpty {
                    if let enrolled = placement.uid, enrolled != scan.uid {
                        return .decided(
                            Verdict(
                                kind: .untrusted(.uidMismatch(read: scan.uid, enrolled: enrolled, tagID: placement.id)), scan: scan,
                                tagID: placement.id, interpolated: false))
                    }
                    return Expectation(consume placement)
                }
                // A genuine-enrolled or SUN tag: the full path checks it.
            }
        }
        let (location, locationError) = urlLocation(of: scan)
        let tagID = location?.tagID
        func verdict(_ kind: Verdict.Kind, id: String? = tagID) -> Expectation {
            .decided(Verdict(kind: kind, scan: scan, tagID: id, interpolated: false))
        }
        guard policy.locationConfirmation else { return verdict(.disallowed(.confirmationDisabled)) }
        guard scan.source == .nfc else { return verdict(.disallowed(.notPhysicalTag)) }
        if let tagID, !policy.disallowedTags.isEmpty, policy.disallowedTags.contains(tagID) {
            return verdict(.disallowed(.tagDisallowed(tagID)))
        }
        if !policy.disallowedTags.isEmpty, policy.disallowedTags.contains(uid: scan.uid) {
            return verdict(.disallowed(.tagDisallowed(scan.uid.hex)))
        }
        if policy.requireGenuine, let reason = untrustedOrigin(scan, tag: tagID ?? scan.uid.hex) {
            return verdict(.untrusted(reason))
        }

        let placement: Placement?
        do {
            placement = try registry.placement(forTagID: tagID, uid: scan.uid)
        } catch {
            return verdict(.inconclusive(.registryUnavailable(error)))
        }
        if let placement {
            if !policy.disallowedTags.isEmpty, policy.disallowedTags.contains(placement.id) {
                return verdict(.disallowed(.tagDisallowed(placement.id)), id: placement.id)
            }
            // A SUN tag's proof first: a replayed URL on another chip is a replay, whatever its UID.
            var evidence: SUNEvidence?
            if placement.checks.contains(.sun) {
                switch checkSUN(scan, placement: placement) {
                case .proven(let proof): evidence = proof
                case .failed(let kind): return verdict(kind, id: placement.id)
                }
            }
            // The URL names a registry tag the registry binds to another UID: a copied URL, or a
            // replaced tag.
            if let enrolled = placement.uid, enrolled != scan.uid {
                return verdict(.untrusted(.uidMismatch(read: scan.uid, enrolled: enrolled, tagID: placement.id)), id: placement.id)
            }
            // Enrolled genuine: a chip that no longer proves it is not the enrolled chip.
            if placement.checks.contains(.genuine), let reason = untrustedOrigin(scan, tag: placement.id, allowUnsigned: false) {
                return verdict(.untrusted(reason), id: placement.id)
            }
            return Expectation(consume placement, sun: evidence)
        }
        if let locationError { return verdict(.inconclusive(.invalidTagLocation(locationError))) }
        // A tag whose NDEF could not be read is unknown, not unregistered.
        if scan.ndefReadFailed, scan.url == nil {
            return verdict(.inconclusive(.readFailed(scan.ndefProblem ?? "its NDEF message could not be read")))
        }
        if let location, let region = location.region {
            if let locationTrust, let reason = untrustedLocation(location, region: region, scan: scan, trust: locationTrust) {
                return verdict(.untrusted(reason))
            }
            return .region(region, .url, tagID: tagID, name: nil, sun: nil)
        }
        return verdict(.notRegistered)
    }

    /// With trusted site keys: why the URL's location is not signed by one of them, or `nil` when
    /// it is. The signature covers `SignedLocation.canonical` of the region as decoded, the tag id
    /// and, for a `u.` signature, this scan's UID.
    func untrustedLocation(_ location: URLLocation, region: CircularRegion, scan: TagScan, trust: any LocationSignatureChecker)
        -> UntrustedReason?
    {
        let tag = location.tagID ?? scan.uid.hex
        guard let text = location.signature else { return .locationUnsigned(tag: tag) }
        guard let signature = SignedLocation.Signature(parameter: text),
            let message = SignedLocation.canonical(region: region, tagID: location.tagID, uid: signature.bindsUID ? scan.uid : nil),
            trust.verifies(signature: signature.bytes, message: message)
        else { return .locationSignatureInvalid(tag: tag) }
        return nil
    }

    /// Under `requireGenuine`: why the scan's originality check does not pass, or `nil` when it does.
    func untrustedOrigin(_ scan: TagScan, tag: String, allowUnsigned: Bool? = nil) -> UntrustedReason? {
        guard let originality = scan.originality else { return .signatureMissing(status: nil, tag: tag) }
        switch originality.status {
        case .genuine: return nil
        case .invalid: return .signatureInvalid(key: originality.key, tag: tag)
        case .unsupported where allowUnsigned ?? policy.allowUnsignedTags: return nil
        case .absent, .unsupported: return .signatureMissing(status: originality.status, tag: tag)
        }
    }

    /// Decides a scan against its region, given the fix at or before the scan time and the one
    /// after it (each optional). Uses the fix closest in time; interpolates when both are fresh.
    ///
    /// The scan, the region, the id and the name are taken, not borrowed, so they move into the
    /// verdict: a caller that passes what `expectation(for:)` gave, and a scan it is done with, pays
    /// no reference count for them (a borrowed scan costs a retain and a release).
    public func decide(
        scan: consuming TagScan, region: consuming CircularRegion, source: RegionSource, tagID: consuming String?,
        name: consuming String?, before: Fix?, after: Fix?
    ) -> Verdict {
        // Everything is worked out first and the verdict built once at the end: each change to a
        // built verdict would be a uniqueness check and a write through its box.
        var outcome = self.outcome(at: scan.time, center: region.center, radius: region.radius, before: before, after: after)
        // The chosen fix is taken out of the outcome, not copied from it: a copy was one more
        // retain and release.
        let accuracy = outcome.fix?.horizontalAccuracy
        return Verdict(
            kind: outcome.kind, scan: scan, tagID: tagID, region: region, regionSource: source, regionName: name, fix: outcome.fix.take(),
            fixAge: outcome.fixAge, interpolated: outcome.interpolated, distance: outcome.distance,
            accuracy: accuracy)
    }

    /// What `decide` puts in the verdict besides the scan and the region.
    private struct Outcome {
        var kind: Verdict.Kind
        var fix: Fix? = nil
        var fixAge: Duration? = nil
        var interpolated = false
        var distance: Double? = nil
    }

    @inline(__always)
    private func outcome(at t: Timestamp, center: Coordinate, radius: Double, before: Fix?, after: Fix?) -> Outcome {
        // Ages as attoseconds in an Int128, compared inline (`Duration`'s comparisons are calls
        // into the standard library); taken in 128 bits, no pair of timestamps can wrap it.
        let maximumFixAge = policy.maximumFixAge
        let limit = maximumFixAge.attoseconds
        func age(_ fix: Fix) -> Int128 {
            let d = Int128(t.nanosecondsSinceEpoch) - Int128(fix.time.nanosecondsSinceEpoch)
            return (d < 0 ? -d : d) * 1_000_000_000
        }
        func fresh(_ fix: Fix) -> Bool { age(fix) <= limit }

        let chosen: Fix
        let chosenAttoseconds: Int128
        var interpolated = false
        if let before, let after, before.hasPosition, after.hasPosition, fresh(before), fresh(after),
            let blended = Self.interpolate(before, after, at: t)
        {
            chosen = blended
            chosenAttoseconds = min(age(before), age(after))
            interpolated = true
        } else if let nearest = before.map({ b in after.map { age($0) < age(b) ? $0 : b } ?? b }) ?? after {
            chosen = nearest
            chosenAttoseconds = age(nearest)
        } else {
            return Outcome(kind: .inconclusive(.noFix))
        }

        let chosenAge = Duration(attoseconds: chosenAttoseconds)
        guard chosenAttoseconds <= limit else {
            return Outcome(
                kind: .inconclusive(.staleFix(age: chosenAge, limit: maximumFixAge)), fix: chosen, fixAge: chosenAge,
                interpolated: interpolated)
        }
        guard chosen.hasPosition, let position = chosen.coordinate else {
            return Outcome(kind: .inconclusive(.noFix), fix: chosen, fixAge: chosenAge, interpolated: interpolated)
        }
        // Regions are at most 500 m: most lines are short, and the tangent-plane solution is
        // exact to 0.1 mm there; longer or polar lines take the full geodesic. The verdict's
        // bearing is worked out from its region and fix when it is read.
        let distance = Geodesic.fastDistance(from: center, to: position)
        let kind: Verdict.Kind
        if !policy.allowSimulatedFixes && chosen.status == .simulated {
            kind = .untrusted(.gpsSimulated)
        } else if let accuracy = chosen.horizontalAccuracy {
            if accuracy > policy.maximumAccuracy {
                kind = .inconclusive(.poorAccuracy(accuracy: accuracy, limit: policy.maximumAccuracy))
            } else if distance + accuracy <= radius {
                kind = .confirmed
            } else if distance - accuracy > radius {
                kind = .outside
            } else {
                kind = .inconclusive(.straddlesBoundary)
            }
        } else {
            kind = .inconclusive(.unknownAccuracy)
        }
        return Outcome(kind: kind, fix: chosen, fixAge: chosenAge, interpolated: interpolated, distance: distance)
    }

    /// Linear interpolation in time between two positioned fixes (longitude across the
    /// antimeridian handled). The accuracy is the worse of the two; the status is simulated if
    /// either is.
    static func interpolate(_ a: Fix, _ b: Fix, at time: Timestamp) -> Fix? {
        guard let p = a.coordinate, let q = b.coordinate else { return nil }
        let span = a.time.duration(to: b.time).seconds
        let fraction = span > 0 ? min(1, max(0, a.time.duration(to: time).seconds / span)) : 0
        let latitude = p.latitude + (q.latitude - p.latitude) * fraction
        let longitude = Geodesic.normalizedDegrees(
            p.longitude + Geodesic.normalizedDegrees(q.longitude - p.longitude) * fraction)
        guard let coordinate = try? Coordinate(latitude: latitude, longitude: longitude == -180 ? 180 : longitude)
        else { return nil }
        let accuracy: Double? =
            if let x = a.horizontalAccuracy, let y = b.horizontalAccuracy { max(x, y) } else { nil }
        var fix = Fix(
            time: time, mode: min(a.mode, b.mode), coordinate: coordinate, horizontalAccuracy: accuracy,
            status: a.status == .simulated || b.status == .simulated ? .simulated : a.status,
            satellitesUsed: [a.satellitesUsed, b.satellitesUsed].compactMap { $0 }.min(),
            altitudeHAE: nil, speed: nil, device: a.device)
        if let receiverTime = a.receiverTime, b.receiverTime != nil {
            // The receiver's time at the scan: the first fix's, carried as far as the axis moved.
            fix.receiverTime = receiverTime.advanced(by: a.time.duration(to: time))
        }
        return fix
    }
}

extension Verifier {
    /// The location a scan's URL gives under the policy's radii, or why it gives none usable:
    /// what the reader path and the phone path both start from.
    func urlLocation(of scan: TagScan) -> (URLLocation?, URLLocationError?) {
        guard let url = scan.url else { return (nil, nil) }
        do {
            return (try URLLocation(url: url, defaultRadius: policy.defaultURLRadius, maximumRadius: policy.maximumRadius), nil)
        } catch {
            return (nil, error)
        }
    }
}
