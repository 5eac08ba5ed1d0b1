import CMosquitto
import Foundation
public import TagFixCore
import TagFixDevices

// MARK: - Settings

/// MQTT's protocol version on the wire.
public enum MQTTVersion: String, Sendable, Hashable, CaseIterable {
    case v311 = "3.1.1"
    case v5 = "5"

    var option: Int32 { self == .v5 ? Int32(MQTT_PROTOCOL_V5) : Int32(MQTT_PROTOCOL_V311) }
}

/// How to reach the broker and who to be there. The password is never in a description.
public struct MQTTSettings: Sendable {
    public struct Will: Sendable, Hashable {
        public var topic: String
        public var payload: String
        public init(topic: String, payload: String) {
            self.topic = topic
            self.payload = payload
        }
    }

    public var address: MQTTAddress
    public var clientID: String
    public var password: String?
    /// The CA certificate(s) an `mqtts://` broker's certificate must chain to (PEM).
    public var caFile: String?
    public var version: MQTTVersion
    /// `false`: the broker keeps the session (subscriptions, queued messages) across connections.
    public var cleanSession: Bool
    /// MQTT 5: how long the broker keeps a session that is not clean after the client goes.
    public var sessionExpiry: UInt32 = 7 * 24 * 3600
    public var will: Will?
    public var keepAlive: Int32 = 20
    /// MQTT 5: how many QoS 1 messages the broker may send before this client acknowledges them
    /// (libmosquitto's default: 20). A collector takes more, so one read brings a larger batch.
    public var receiveMaximum: Int32?
    /// How many QoS 1 messages this client may have unacknowledged at once, until the broker's
    /// CONNACK says otherwise (MQTT 5 Receive Maximum); libmosquitto's default is 20.
    public var sendMaximum: Int32 = 20
    /// The first wait before connecting again; doubled up to `maximumRetryDelay`.
    public var retryDelay: Duration = .milliseconds(200)
    public var maximumRetryDelay: Duration = .seconds(5)
    /// When another client connected with the same client id has the session, end instead of
    /// connecting again, which would take it back and start a fight neither wins. The broker
    /// says so (MQTT 5 DISCONNECT 0x8E, session taken over), or, as mosquitto 2.0 does and MQTT
    /// 3.1.1 must, only closes the connection: then `TakeoverWatch` tells the fight by its
    /// pattern. The delegate's `ended` says why.
    public var yieldsSession = false

    public init(
        address: MQTTAddress, clientID: String, password: String? = nil, caFile: String? = nil, version: MQTTVersion = .v5,
        cleanSession: Bool = true, will: Will? = nil
    ) {
        self.address = address
        self.clientID = clientID
        self.password = password
        self.caFile = caFile
        self.version = version
        self.cleanSession = cleanSession
        self.will = will
    }
}

// MARK: - Settings from the command line

/// Why the broker's settings cannot be used.
public enum MQTTSettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    case address(FleetTopicError)
    case passwordFile(DataFileError)
    case passwordWithoutUser(String)
    case caWithoutTLS
    case caFile(String)
    case version(String)

    public var description: String {
        switch self {
        case .address(let error): error.description
        case .passwordFile(let error): "--mqtt-password-file: \(error)"
        case .passwordWithoutUser(let address):
            "--mqtt-password-file needs a user in the address: mqtt://USER@HOST/PREFIX (\(address) has none)"
        case .caWithoutTLS: "--mqtt-ca is for an mqtts:// broker (TLS): use mqtts://HOST/PREFIX"
        case .caFile(let path): "--mqtt-ca \(path): no such file (give the broker's CA certificate, PEM)"
        case .version(let text): "--mqtt-version \(text): give 5 or 3.1.1"
        }
    }
}

extension MQTTSettings {
    /// The settings `--publish` / `collect` give: the address, the password read from its file
    /// (mode 0600 enforced, `SecretFile`; never logged), the CA file, the protocol version.
    public static func parse(
        address text: String, passwordFile: String?, caFile: String?, version: String?, clientID: String
    ) throws(MQTTSettingsError) -> MQTTSettings {
        let address: MQTTAddress
        do {
            address = try MQTTAddress(text)
        } catch {
            throw .address(error)
        }
        var password: String?
        if let passwordFile {
            guard address.user != nil else { throw .passwordWithoutUser(text) }
            do {
                password = try SecretFile.read(passwordFile).trimmingCharacters(in: .newlines)
            } catch {
                throw .passwordFile(error)
            }
        }
        if let caFile {
            guard address.tls else { throw .caWithoutTLS }
            guard FileManager.default.isReadableFile(atPath: caFile) else { throw .caFile(caFile) }
        }
        let chosen: MQTTVersion
        if let version {
            guard let known = MQTTVersion(rawValue: version == "3" || version == "311" ? "3.1.1" : version) else { throw .version(version) }
            chosen = known
        } else {
            chosen = .v5
        }
        return MQTTSettings(address: address, clientID: clientID, password: password, caFile: caFile, version: chosen)
    }
}
