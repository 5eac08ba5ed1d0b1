import TagFixCore

/// Tells two clients fighting over one client id from a broker that is away, restarting or
/// refusing. Each connection of one takes the session from the other. A broker that says so
/// (MQTT 5 DISCONNECT 0x8E, session taken over) is believed when the connection it ends was
/// young (`quick`): this client is the newcomer, or took the session back a moment ago. After a
/// longer life it connects once more, and the newcomer (a collector too) is told the same and
/// ends: the one that was there stays. A broker that does not say so (mosquitto 2.0.11 closes
/// without its DISCONNECT; MQTT 3.1.1 has none) only closes the connection: both see every
/// attempt accepted and then, as soon as the other connects again, closed with no reason. `limit`
/// of those in a row, each within `quick` of being accepted, all within `window`, is that fight.
/// A refused attempt (a broker that is down), a connection that lived longer, another reason from
/// the broker (quota, ACL, shared subscriptions unsupported…), an error of libmosquitto's own, or
/// a connection this client dropped itself each starts the count again. The one that was there
/// first counts its first loss as a long one, so the newcomer counts `limit` first and ends.
struct TakeoverWatch: Sendable, Hashable {
    static let limit = 5
    static let quick: Duration = .seconds(2)
    static let window: Duration = .seconds(10)

    /// How one connection ended.
    enum Ending: Sendable, Hashable {
        /// Never accepted (no CONNACK, or a refusal).
        case refused
        /// Accepted, then closed or reset with no reason given.
        case dropped
        /// Accepted, then ended by the broker with DISCONNECT 0x8E (session taken over).
        case takenOver
        /// Anything else.
        case other
    }

    /// Why the client should end rather than connect again.
    enum Decision: Sendable, Hashable {
        /// The broker said another client took the session, from a young connection.
        case takenOver
        /// `limit` quick drops with no reason: a fight the broker does not name.
        case fight
    }

    /// When each of the quick drops in a row came.
    private(set) var drops: [Timestamp] = []

    /// A connection accepted at `acceptedAt` ended at `now`; returns why to end, or `nil` to
    /// connect again.
    mutating func ended(_ ending: Ending, acceptedAt: Timestamp?, at now: Timestamp) -> Decision? {
        let young = acceptedAt.map { $0.duration(to: now) < Self.quick } ?? false
        guard young, ending == .dropped || ending == .takenOver else {
            drops = []
            return nil
        }
        if ending == .takenOver { return .takenOver }
        drops.append(now)
        while let first = drops.first, first.duration(to: now) > Self.window { drops.removeFirst() }
        return drops.count >= Self.limit ? .fight : nil
    }

    func explanation(_ decision: Decision, address: MQTTAddress, clientID: String) -> String {
        switch decision {
        case .takenOver:
            "another client connected to \(address) with this one's client id (\(clientID)) and the broker gave it the session"
        case .fight:
            "\(address) closed this client's connection \(drops.count) times in a row, each within \(Self.quick.components.seconds) s of accepting it and with no reason given, as a broker does when another client keeps connecting with the same client id (\(clientID))"
        }
    }
}
