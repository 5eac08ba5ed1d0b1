/// A conversation with the tag while it stays selected (`TagSessionRequest.dialogue`): the backend
/// runs it on its device thread after the read, handing it the tag's identity and an exchange
/// that sends one raw command (an ISO 7816 APDU to an ISO-DEP tag) and returns the answer. What it
/// finds it keeps itself (e.g. in a `Mutex` its creator holds); a backend that cannot exchange
/// commands never runs it. `tagfix enroll --sun` provisions an NTAG 424 DNA this way.
public struct TagDialogue: Sendable, Hashable {
    /// Sends one raw command; throws when the tag or the reader fails.
    public typealias Exchange = ([UInt8]) throws -> [UInt8]

    private final class Body: Sendable {
        let run: @Sendable (TagIdentity, Exchange) -> Void
        init(_ run: @escaping @Sendable (TagIdentity, Exchange) -> Void) { self.run = run }
    }

    private let body: Body

    public init(_ run: @escaping @Sendable (TagIdentity, _ exchange: Exchange) -> Void) { body = Body(run) }

    /// Runs the dialogue (the backend calls it, on its device thread).
    public func run(_ identity: TagIdentity, exchange: Exchange) { body.run(identity, exchange) }

    public static func == (a: TagDialogue, b: TagDialogue) -> Bool { a.body === b.body }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(body)) }
}
