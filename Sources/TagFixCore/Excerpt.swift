extension StringProtocol {
    /// At most `limit` Unicode scalars of a text an input gave, for a message that quotes it (an
    /// error a server may send back to whoever sent the text): a number of 4,000 digits or a
    /// header of 16 kB is not echoed whole, and control characters (a newline that would begin
    /// a line of its own in a log or a reply) are left out. `…` marks a text cut short.
    public func excerpt(_ limit: Int = 40) -> String {
        var kept = String.UnicodeScalarView()
        var taken = 0
        for scalar in unicodeScalars {
            guard taken < limit else { return String(kept) + "…" }
            taken += 1
            if scalar.value >= 0x20 && scalar.value != 0x7F && !(0x80...0x9F).contains(scalar.value) { kept.append(scalar) }
        }
        return String(kept)
    }
}
