import CMosquitto
import TagFixSystem

/// The process's one `mosquitto_lib_init`, before the first handle (`MQTTHandle`).
let mosquittoLibrary: Int32 = mosquitto_lib_init()

/// A libmosquitto result code with its name (`MOSQ_ERR_CONN_REFUSED` → "connection refused").
public struct MQTTResultCode: Error, RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let success = MQTTResultCode(rawValue: Int32(MOSQ_ERR_SUCCESS.rawValue))
    public static let noConnection = MQTTResultCode(rawValue: Int32(MOSQ_ERR_NO_CONN.rawValue))
    public static let connectionLost = MQTTResultCode(rawValue: Int32(MOSQ_ERR_CONN_LOST.rawValue))
    public static let tls = MQTTResultCode(rawValue: Int32(MOSQ_ERR_TLS.rawValue))
    public static let errno = MQTTResultCode(rawValue: Int32(MOSQ_ERR_ERRNO.rawValue))

    /// mosquitto_strerror, with errno's text for `MOSQ_ERR_ERRNO`.
    public var description: String {
        if self == .errno { return Errno.current.description }
        return String(cString: mosquitto_strerror(rawValue))
    }
}
