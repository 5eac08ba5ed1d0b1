public import TagFixCore

/// An NXP NTAG 424 DNA as TagFix tag JSON declares it (docs/tag-json.md, member `ntag424`): its
/// five AES keys and the NDEF file's settings, so the PN532 emulator can present a factory-fresh
/// tag or one already provisioned for SUN. The NDEF file itself is `ndef_file_hex`.
///
/// ```json
/// "ntag424": {
///   "keys_hex": ["00…00", "…", "…", "…", "…"],
///   "ndef_file_settings_hex": "4000E0C1F121200000430000430000",
///   "sdm_read_counter": 60
/// }
/// ```
/// Every member is optional: without them the tag is factory-fresh (all keys zero, SDM off).
public struct NTAG424Declaration: Sendable, Hashable {
    /// Keys 0–4, 16 bytes each.
    public var keys: [[UInt8]]
    /// The NDEF file's settings as ChangeFileSettings sends them (FileOption ‖ AccessRights ‖
    /// SDM options and offsets, datasheet §10.7.1); nil: the factory's (plain, free read and write).
    public var ndefFileSettings: [UInt8]?
    /// SDMReadCtr: the value the last read mirrored (the next read mirrors one more).
    public var sdmReadCounter: UInt32
    /// The CC file (the factory's unless `cc_file_hex` gives one).
    public var ccFile: [UInt8] { Self.factoryCCFile }

    public init(
        keys: [[UInt8]] = [[UInt8]](repeating: [UInt8](repeating: 0, count: 16), count: 5), ndefFileSettings: [UInt8]? = nil,
        sdmReadCounter: UInt32 = 0
    ) {
        self.keys = keys
        self.ndefFileSettings = ndefFileSettings
        self.sdmReadCounter = sdmReadCounter
    }

    /// The CC file as NXP ships it (NT4H2421Gx §8.2.3.1): mapping 2.0, MLe 256, MLc 255, the NDEF
    /// file E104 (256 bytes, read and write free) and the proprietary file E105 (128 bytes).
    public static let factoryCCFile: [UInt8] = [
        0x00, 0x17, 0x20, 0x01, 0x00, 0x00, 0xFF, 0x04, 0x06, 0xE1, 0x04, 0x01, 0x00, 0x00, 0x00,
        0x05, 0x06, 0xE1, 0x05, 0x00, 0x80, 0x82, 0x83,
    ]

    /// Reads the `ntag424` member. Unknown members are errors: a mistyped key name must not
    /// silently leave a factory key in place.
    public init(json value: JSONValue) throws(DataFileError) {
        guard let members = value.members else {
            throw DataFileError(line: value.line, message: "\"ntag424\" must be an object, found \(value.kindName)")
        }
        self.init()
        for (name, member) in members {
            switch name {
            case "keys_hex":
                guard let items = member.array, items.count == 5 else {
                    throw DataFileError(line: member.line, message: "\"keys_hex\" must list the 5 keys (key 0 first)")
                }
                var keys: [[UInt8]] = []
                for item in items {
                    guard let text = item.string, let key = Hex.decode(text), key.count == 16 else {
                        throw DataFileError(line: item.line, message: "each key is 32 hex digits (an AES-128 key)")
                    }
                    keys.append(key)
                }
                self.keys = keys
            case "ndef_file_settings_hex":
                guard let text = member.string, let bytes = Hex.decode(text), bytes.count >= 3 else {
                    throw DataFileError(
                        line: member.line, message: "\"ndef_file_settings_hex\" is hex: FileOption, AccessRights and the SDM settings")
                }
                ndefFileSettings = bytes
            case "sdm_read_counter":
                guard let number = member.double, let counter = UInt32(exactly: number), counter <= 0xFF_FFFF else {
                    throw DataFileError(line: member.line, message: "\"sdm_read_counter\" is a whole number from 0 to 16777215")
                }
                sdmReadCounter = counter
            default:
                throw DataFileError(
                    line: member.line,
                    message: "unknown member \"\(name)\" in ntag424 (expected keys_hex, ndef_file_settings_hex, sdm_read_counter)")
            }
        }
    }
}
