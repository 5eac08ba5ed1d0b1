public import TagFixCore

/// The report's tags that read badly: from the taps a session log holds (each record's `read`,
/// where the reader knew) and from the read health the registry kept from their enrolment.
extension SiteReport {
    /// A tag that reads badly, and what says so.
    public struct WeakReader: Sendable, Hashable {
        public var key: String
        public var name: String?
        /// The log's taps of it that carry their read, taken together; `nil` when none do.
        public var taps: ReadHealth?
        /// What is wrong with those taps (`ReadHealth.Limits.taps`); empty when nothing is.
        public var tapProblems: [ReadHealth.Problem]
        /// Its enrolment's read health, when the registry kept one.
        public var enrolment: EnrolledReadHealth?
    }

    /// Tags that read badly in this log's taps, or were enrolled weak (`--accept-weak-read`), in
    /// the report's tag order. A tap's RF errors are weighed against the fewest one read of the
    /// tag had, its enrolment's reads included, so the one error a protocol costs every read (an
    /// Ultralight's refused probe) is not held against it, and a single tap can show a tag that
    /// has turned weak since it was enrolled.
    public var weakReaders: [WeakReader] {
        tags.compactMap { tag in
            let enrolment = enrolledReadHealth[tag.key]
            let efforts = tag.scans.compactMap(\.read)
            var taps = efforts.isEmpty ? nil : ReadHealth(efforts)
            if let enrolment, let fewest = taps?.fewestRFErrors { taps?.fewestRFErrors = min(fewest, enrolment.health.fewestRFErrors) }
            let problems = taps?.problems(.taps) ?? []
            guard !problems.isEmpty || enrolment?.weak == true else { return nil }
            return WeakReader(key: tag.key, name: tag.name, taps: taps, tapProblems: problems, enrolment: enrolment)
        }
    }

    /// The HTML report's "Tags that read badly" section.
    func weakReadersSection() -> String {
        var page = "<h2>Tags that read badly</h2>\n"
        let weak = weakReaders
        guard !weak.isEmpty else { return page + "<p>None.</p>\n" }
        page += "<table id=\"reads-badly\"><tr><th>tag</th><th>name</th><th>taps</th><th>at enrolment</th><th>fix</th></tr>\n"
        for tag in weak {
            let taps =
                tag.taps.map { health in
                    (tag.tapProblems.isEmpty ? "" : tag.tapProblems.map(\.description).joined(separator: ", ") + "; ") + health.summary
                } ?? ""
            let enrolled = tag.enrolment.map { ($0.weak ? "weak, accepted: " : "") + $0.health.summary } ?? ""
            page += "<tr><td>\(Self.x(tag.key))</td><td>\(Self.x(tag.name ?? ""))</td><td>\(Self.x(taps))</td>"
            page += "<td>\(Self.x(enrolled))</td><td>\(Self.x(ReadHealth.fix))</td></tr>\n"
        }
        return page + "</table>\n"
    }
}
