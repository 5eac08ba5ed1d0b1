import TagFixCore

/// Why tag memory does not hold a readable NDEF message. Each case says where.
public enum TagMemoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The capability container's magic number is not the NFC Forum's (E1 for Type 2, E103 file
    /// for Type 4): the tag is not NDEF-formatted.
    case notFormatted(String)
    /// A mapping version this codec (and the spec it follows) does not read.
    case unsupportedVersion(major: Int, minor: Int)
    /// The memory image ends before a byte the structure needs.
    case truncated(needed: Int, available: Int)
    /// A TLV's value runs past the data area.
    case tlvOverrunsDataArea(tlvOffset: Int, length: Int, dataAreaEnd: Int)
    /// A capability container or attribute block that contradicts itself.
    case badCapabilityContainer(String)
    /// A Type 4 NDEF file whose NLEN does not fit the file or its declared size.
    case badNDEFFile(String)
    /// MIFARE Classic: a Mifare Application Directory that is missing or corrupt.
    case badMAD(String)
    /// A memory image with bytes the dump could not read, where NDEF data would be.
    case unreadableBytes(at: Int)

    public var description: String {
        switch self {
        case .notFormatted(let detail): "not NDEF formatted: \(detail)"
        case .unsupportedVersion(let major, let minor): "unsupported NDEF mapping version \(major).\(minor)"
        case .truncated(let needed, let available): "memory image ends at byte \(available), but byte \(needed - 1) is needed"
        case .tlvOverrunsDataArea(let offset, let length, let end):
            "the TLV at byte \(offset) claims \(length) bytes, past the end of the data area at byte \(end)"
        case .badCapabilityContainer(let detail): "bad capability container: \(detail)"
        case .badNDEFFile(let detail): "bad NDEF file: \(detail)"
        case .badMAD(let detail): "bad MIFARE application directory: \(detail)"
        case .unreadableBytes(let at): "the dump has no data for byte \(at) (unread or unknown), where NDEF data is"
        }
    }
}
