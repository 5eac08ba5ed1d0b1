import Foundation
import Glibc
import TagFixCore
import TagFixDevices
import TagFixStore

/// What `verify --publish` was given, as text: turned into a publisher once the log is open.
/// (The CLI parses the options; everything that checks and builds them is here.)
public struct FleetPublishRequest: Sendable {
    public var address: String
    public var site: String
    public var device: String
    public var passwordFile: String?
    public var caFile: String?
    public var version: String?
    public var linger: Duration

    /// - Throws: `FleetPublishError` for an address, a site or a device id that cannot be used,
    ///   checked before the session starts.
    public init(
        address: String, site: String?, device: String?, passwordFile: String?, caFile: String?, version: String?, linger: Duration?
    ) throws(FleetPublishError) {
        self.address = address
        self.site = site ?? "default"
        self.device = device ?? Self.hostDevice
        self.passwordFile = passwordFile
        self.caFile = caFile
        self.version = version
        self.linger = linger ?? .seconds(10)
        let settings = try settings()
        do {
            _ = try FleetTopics(prefix: settings.address.prefix, site: self.site, device: self.device)
        } catch {
            throw .topics(error)
        }
    }

    /// The broker's settings (the password read from its file, never logged).
    func settings() throws(FleetPublishError) -> MQTTSettings {
        do {
            return try MQTTSettings.parse(
                address: address, passwordFile: passwordFile, caFile: caFile, version: version, clientID: "tagfix")
        } catch {
            throw .settings(error)
        }
    }

    /// The host's name as a device id: a character that is not allowed in a topic level
    /// becomes `-`.
    public static var hostDevice: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "tagfix" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let cleaned = String(name.map { "/+#$".contains($0) ? "-" : $0 })
        return cleaned.isEmpty ? "tagfix" : cleaned
    }

    /// A started publisher for the session log at `logPath` (opened by the caller).
    public func start(logPath: String) throws(FleetPublishError) -> FleetPublisher {
        let publisher = try FleetPublisher(settings: try settings(), site: site, device: device, logPath: logPath)
        publisher.start()
        return publisher
    }
}

extension FleetPublisher.Outcome {
    /// The closing line: what reached the broker, and what waits in the log.
    /// `interrupted`: a stop signal ended the wait before `linger`, or came before it began (a
    /// publishing replay's Ctrl-C: no wait).
    public func summary(address: String, log: String, linger: Duration, interrupted: Bool = false) -> String {
        let acknowledged = "\(acknowledged) verdict\(acknowledged == 1 ? "" : "s") acknowledged by \(address)"
        guard unsent > 0 else { return "published: \(acknowledged); none unsent" }
        let seconds = Coordinate.format(linger.seconds, 0)
        let wait = interrupted ? ", a signal ended the run before the broker had them" : " after waiting \(seconds) s"
        return "published: \(acknowledged); \(unsent) unsent\(wait)"
            + (problem.map { " (\($0))" } ?? "") + ": they stay in \(log) and go with the next run on it (verify --publish … --log \(log))"
    }
}
