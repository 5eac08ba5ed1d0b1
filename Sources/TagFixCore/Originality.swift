/// What a tag's NXP originality signature says about the chip (issue 20, part 1): the result of
/// checking the ECDSA signature NXP writes into each NTAG21x / Ultralight EV1 at the factory
/// (`READ_SIG`) over the tag's UID. The check itself is in TagFixCrypto (`NXPOriginality`).
///
/// A genuine signature proves the UID was issued by NXP, not that this is that chip: a "magic"
/// clone that copies the UID and the signature passes (docs/trust.md).
public struct Originality: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable, CaseIterable {
        /// The signature verifies with `key`.
        case genuine
        /// The chip answered a signature that verifies with no NXP key for it.
        case invalid
        /// The chip should have a signature but gave none (no answer, or 32 zero bytes).
        case absent
        /// The chip has no originality signature (NTAG203, MIFARE Classic, Type 4…).
        case unsupported
    }

    public var status: Status
    /// The name of the key it verified with (`NXP NTAG21x`, `NXP Ultralight EV1`), or, when it
    /// did not verify, of the key the chip should have been signed with; `nil` when unknown.
    public var key: String?

    public init(status: Status, key: String? = nil) {
        self.status = status
        self.key = key
    }
}
