import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixMQTT
@testable import TagFixStore

/// A collector commits on a thread of its own, not on the MQTT loop every client of the process
/// shares: a commit held up (a locked or slow store, a retry's wait of up to 15 s) holds up that
/// collector's PUBACKs and nobody else's traffic.
@Suite("The collector commits off the MQTT loop", .enabled(if: haveBroker, "needs mosquitto and mosquitto-clients"))
struct CollectorCommitThreadTests {
    /// A fleet store whose commits wait at a gate the test opens: while it is closed, a commit
    /// blocks (on whatever thread the collector commits on) until `open(failing:)`.
    final class GatedStore: FleetVerdictStore {
        struct Refused: Error, CustomStringConvertible {
            var description: String { "the test's gate refused the commit" }
        }
        private struct State {
            var closed = true
            var entered = 0
            var failing = false
        }
        let inner: FleetStore
        private let state = Mutex(State())
        private let gate = DeviceThread.Wakeup()

        init(_ inner: FleetStore) { self.inner = inner }

        /// Commits that reached the closed gate.
        var entered: Int { state.withLock { $0.entered } }

        /// Lets the commit waiting at the gate go on, and every later one; with `failing`, the one
        /// waiting fails (nothing stored) and so does every later one.
        func open(failing: Bool = false) {
            let waiting = state.withLock { state in
                defer {
                    state.closed = false
                    state.failing = failing
                }
                return state.closed && state.entered > 0
            }
            if waiting { gate.signal() }
        }

        var location: String { inner.location }

        func store(_ messages: [FleetStore.Stored], receivedNanoseconds: Int64) throws -> [Bool] {
            let wait = state.withLock { state in
                guard state.closed else { return false }
                state.entered += 1
                return true
            }
            if wait { gate.block() }
            if state.withLock({ $0.failing }) { throw Refused() }
            return try inner.store(messages, receivedNanoseconds: receivedNanoseconds)
        }

        func replacePlacements(sites: Set<String>, with placements: [FleetStore.Placement], loadedNanoseconds: Int64) throws {
            try inner.replacePlacements(sites: sites, with: placements, loadedNanoseconds: loadedNanoseconds)
        }
        func placements() throws -> [FleetStore.Placement] { try inner.placements() }
        func all() throws -> [FleetStore.Stored] { try inner.all() }
        func count() throws -> Int { try inner.count() }
    }

    static func publish(_ broker: PrivateMosquitto, _ index: Int) async throws {
        let verdicts = try exampleVerdicts()
        let payload = FleetMessage.payload(
            line: Array(SessionRecord(verdicts[index % verdicts.count]).encoded().utf8), id: "pi:0123456789abcdef:\(index + 1)",
            device: "pi")
        try await publishOnce(broker, topic: "tagfix/harbour/verdict/T\(index)", payload: payload)
    }

    @Test("a commit held up holds up no other MQTT client of the process: a second collector stores on, and the first catches up")
    func otherClientsGoOn() async throws {
        try await PrivateMosquitto.with { broker in
            let gated = GatedStore(try FleetStore(path: try temporaryFolder() + "/office.sqlite", create: true))
            let depot = try FleetStore(path: try temporaryFolder() + "/depot.sqlite", create: true)
            try await withCollector(broker, store: gated, id: "office-gated") { office in
                try await withCollector(broker, store: depot, id: "depot-free") { _ in
                    try await Self.publish(broker, 0)
                    #expect(await RunningProgram.poll { gated.entered == 1 }, "the office's commit never started")
                    // The office's commit waits at the gate; the depot, another client of the
                    // process's one MQTT loop, receives and stores what comes next.
                    try await Self.publish(broker, 1)
                    #expect(
                        await RunningProgram.poll { (try? depot.count()) == 2 },
                        "the depot's collector stopped while the office committed: the commit held the shared loop")
                    #expect(office.counts.stored == 0)
                    gated.open()
                    #expect(await RunningProgram.poll { (try? gated.count()) == 2 && office.counts.stored == 2 }, "\(office.counts)")
                }
            }
        }
    }

    @Test("a commit under way when the collector stops: its message is not acknowledged, and the broker sends it again")
    func stopMidCommit() async throws {
        try await PrivateMosquitto.with { broker in
            let inner = try FleetStore(path: try temporaryFolder() + "/office.sqlite", create: true)
            let gated = GatedStore(inner)
            let office = try await startedCollector(broker, store: gated, id: "office-stopping")
            try await Self.publish(broker, 0)
            #expect(await RunningProgram.poll { gated.entered == 1 }, "the commit never started")
            let stopped = Task { await office.stop() }
            // The commit then fails; stopping, the collector does not try it again.
            gated.open(failing: true)
            await stopped.value
            #expect(try inner.count() == 0)
            #expect(office.counts.stored == 0)

            // Its PUBACK never left: the session gets the message again, stored this time.
            try await withCollector(broker, store: inner, id: "office-stopping") { again in
                #expect(await RunningProgram.poll { (try? inner.count()) == 1 && again.counts.stored == 1 }, "\(again.counts)")
            }
        }
    }
}
