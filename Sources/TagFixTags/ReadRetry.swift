/// A read that fails on the air is tried again, the tag selected again first: a tag on metal or
/// at the edge of the field loses an exchange now and then, and a second attempt usually reads it.
/// Every backend's reader uses this, so a tap's attempts mean the same on every reader.
public enum ReadRetry {
    /// The most attempts one read makes. A PN532 reads a short URL in about 20 ms, so three
    /// attempts fit in a tap with room to spare; more would hide a tag that reads badly instead of
    /// reading it (its retries are counted: `ReadEffort`, `ReadHealth`).
    public static let attempts = 3

    /// Whether an attempt that failed so is worth another: the tag went quiet or garbled on the
    /// air. A broken NDEF structure, a refusal, a failed reader or a cancelled read is not.
    public static func isRetryable(_ error: NDEFReadError) -> Bool {
        guard case .incompleteRead(_, let cause) = error else { return false }
        switch cause.kind {
        case .tagLost, .timeout, .protocolError: return true
        case .refused, .authenticationFailed, .readerFailed, .cancelled: return false
        }
    }

    /// Runs `read` until it succeeds, fails in a way not worth another attempt, or `attempts`
    /// are spent; before each retry `reselect` selects the tag again, and returns false when the
    /// tag no longer answers (it left the field: that failure stands).
    /// - Returns: the last attempt's outcome and the number of attempts made.
    public static func run(
        attempts: Int = ReadRetry.attempts, reselect: () -> Bool, _ read: () -> Result<NDEFRead, NDEFReadError>
    ) -> (outcome: Result<NDEFRead, NDEFReadError>, attempts: Int) {
        var made = 1
        var outcome = read()
        while case .failure(let error) = outcome, made < max(1, attempts), isRetryable(error) {
            guard reselect() else { break }
            made += 1
            outcome = read()
        }
        return (outcome, made)
    }
}
