public import TagFixCore
public import TagFixDevices
import TagFixNFC
import TagFixPCSC
import TagFixScenarios

/// A reader backend as the factory knows it: which addresses it serves, and how it opens a
/// reader (a stream of tags) and a tag session (one tag, once) for one of them.
///
/// A new backend (PC/SC…) implements this beside its reader and session types, and is added to
/// `ReaderFactory.standard`'s list: nothing else in the product names it.
public protocol ReaderBackend: Sendable {
    /// The addresses it serves (`ReaderAddress.backend`).
    var kind: ReaderAddress.Backend { get }
    func reader<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagReader
    where C.Instant == Timestamp, C.Duration == Duration
    func session<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagSession
    where C.Instant == Timestamp, C.Duration == Duration
}

/// Turns a reader address (`--reader`) into a `TagReader` or a `TagSession` of the backend that
/// serves it: the one place the product constructs readers from what a person typed.
public struct ReaderFactory: Sendable {
    public let backends: [any ReaderBackend]

    public init(backends: [any ReaderBackend]) { self.backends = backends }

    /// The backends built into tagfix: libnfc, PC/SC (pcsc-lite) and the scenario mock.
    public static let standard = ReaderFactory(backends: [LibNFCBackend(), PCSCBackend(), MockBackend()])

    /// The backend that serves `address`, or why none does.
    public func backend(for address: ReaderAddress) throws(ReaderAddressError) -> any ReaderBackend {
        guard let backend = backends.first(where: { $0.kind == address.backend }) else {
            throw .noBackend(address.backend, address: address.description)
        }
        return backend
    }

    /// Parses `text` (a `--reader` value; `nil` for libnfc's default) and checks that a backend
    /// serves it, before anything is opened: a command can refuse it before it waits for anything.
    public func address(_ text: String?) throws(ReaderAddressError) -> ReaderAddress {
        let address = try ReaderAddress(text)
        _ = try backend(for: address)
        return address
    }

    public func reader<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagReader
    where C.Instant == Timestamp, C.Duration == Duration {
        try backend(for: address).reader(address, clock: clock)
    }

    public func session<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagSession
    where C.Instant == Timestamp, C.Duration == Duration {
        try backend(for: address).session(address, clock: clock)
    }
}

/// libnfc (TagFixNFC): connstrings, and libnfc's default reader.
public struct LibNFCBackend: ReaderBackend {
    public init() {}
    public var kind: ReaderAddress.Backend { .libnfc }

    public func reader<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagReader
    where C.Instant == Timestamp, C.Duration == Duration {
        LibNFCReader(connstring: address.connstring, clock: clock)
    }

    public func session<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagSession
    where C.Instant == Timestamp, C.Duration == Duration {
        LibNFCTagSession(connstring: address.connstring, clock: clock)
    }
}

/// PC/SC through pcsc-lite (TagFixPCSC): `pcsc:` (whichever reader holds a card), `pcsc:N`,
/// `pcsc:NAME`.
public struct PCSCBackend: ReaderBackend {
    public init() {}
    public var kind: ReaderAddress.Backend { .pcsc }

    static func selection(_ address: ReaderAddress) throws(ReaderAddressError) -> PCSCSelection {
        guard case .pcsc(let reader) = address else { throw .noBackend(address.backend, address: address.description) }
        switch reader {
        case .first: return .any
        case .index(let index): return .index(index)
        case .name(let name): return .name(name)
        }
    }

    public func reader<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagReader
    where C.Instant == Timestamp, C.Duration == Duration {
        PCSCReader(selection: try Self.selection(address), clock: clock)
    }

    public func session<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagSession
    where C.Instant == Timestamp, C.Duration == Duration {
        PCSCTagSession(selection: try Self.selection(address), clock: clock)
    }
}

/// `mock:SCENARIO`: the scenario's reader events (docs/scenarios.md), played from the clock's
/// now; its session is read-only (`ReaderTagSession`).
public struct MockBackend: ReaderBackend {
    public init() {}
    public var kind: ReaderAddress.Backend { .mock }

    public func reader<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagReader
    where C.Instant == Timestamp, C.Duration == Duration {
        guard case .mock(let path) = address else { throw .noBackend(address.backend, address: address.description) }
        let scenario: Scenario
        do {
            scenario = try ScenarioLoader.load(path: path)
        } catch {
            throw .scenario(error)
        }
        return scenario.devices(clock: clock, origin: clock.now).reader
    }

    public func session<C: Clock>(_ address: ReaderAddress, clock: C) throws(ReaderAddressError) -> any TagSession
    where C.Instant == Timestamp, C.Duration == Duration {
        ReaderTagSession(reader: try reader(address, clock: clock))
    }
}
