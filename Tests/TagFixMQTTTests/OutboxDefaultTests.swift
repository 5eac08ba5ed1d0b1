import Foundation
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixStore
import TagFixTestDaemons
import TagFixTesting
import Testing

@testable import TagFixMQTT

/// `--publish` without `--log`: the outbox is a session log in the state directory, one per site
/// and device, and what a run could not send goes with the next run.
@Suite("the outbox in the state directory (--publish without --log)", .timeLimit(.minutes(3)))
struct OutboxDefaultTests {
    @Test(
        "the state directory: systemd's STATE_DIRECTORY first, then /var/lib as root, then XDG_STATE_HOME (absolute), then ~/.local/state",
        arguments: [
            (["STATE_DIRECTORY": "/var/lib/tagfix:/var/lib/other", "HOME": "/home/tech"], false, "/var/lib/tagfix/outbox"),
            (["STATE_DIRECTORY": "/srv/state", "XDG_STATE_HOME": "/x"], true, "/srv/state/outbox"),
            (["HOME": "/root", "XDG_STATE_HOME": "/x"], true, "/var/lib/tagfix/outbox"),
            (["HOME": "/home/tech", "XDG_STATE_HOME": "/home/tech/st"], false, "/home/tech/st/tagfix/outbox"),
            (["HOME": "/home/tech", "XDG_STATE_HOME": "relative/st"], false, "/home/tech/.local/state/tagfix/outbox"),
            (["HOME": "/home/tech", "STATE_DIRECTORY": "not/absolute"], false, "/home/tech/.local/state/tagfix/outbox"),
            ([:], false, nil),
        ] as [([String: String], Bool, String?)])
    func directory(environment: [String: String], isRoot: Bool, expected: String?) {
        #expect(OutboxLocation.directory(environment: environment, isRoot: isRoot) == expected)
    }

    @Test(
        "one file per site and device inside the outbox: . and .. cannot name another folder",
        arguments: [
            ("harbour", "van-1", "/s/outbox/harbour/van-1.jsonl"), ("..", "van", "/s/outbox/%2E%2E/van.jsonl"),
            ("yard", ".", "/s/outbox/yard/%2E.jsonl"), ("a.b", "..c", "/s/outbox/a.b/..c.jsonl"),
        ])
    func path(site: String, device: String, expected: String) {
        #expect(OutboxLocation.path(site: site, device: device, environment: ["STATE_DIRECTORY": "/s"], isRoot: false) == expected)
    }

    @Test("an outbox folder that cannot be made says so and what to do")
    func unmakeable() throws {
        let folder = try temporaryFolder()
        try "not a folder".write(toFile: folder + "/outbox", atomically: true, encoding: .utf8)
        #expect(throws: OutboxLocationError.self) { try OutboxLocation.prepare(folder + "/outbox/harbour/van.jsonl") }
        do {
            _ = try OutboxLocation.prepare(folder + "/outbox/harbour/van.jsonl")
        } catch {
            #expect(error.description.contains("--log FILE") && error.description.contains(folder + "/outbox/harbour"))
        }
    }

    @Test(
        "verify --publish without --log: the broker down, the verdicts kept in the state directory's outbox and said so once; the next run sends them and its own",
        .enabled(if: haveBroker && FileManager.default.isExecutableFile(atPath: tagfixBinary), "needs mosquitto and the built tagfix"))
    func brokerDownThenUp() async throws {
        let folder = try temporaryFolder()
        let environment = ["STATE_DIRECTORY": folder + "/state"]
        let outbox = folder + "/state/outbox/harbour/van-1.jsonl"
        let scenario = packageRoot + "/Examples/site/scenario.json"
        let dead = try DeadPort()
        defer { withExtendedLifetime(dead) {} }
        let port = dead.port
        let down = try await TestProgram.run(
            tagfixBinary,
            ["verify", "--scenario", scenario, "--json", "--publish", "mqtt://127.0.0.1:\(port)/tagfix", "--site", "harbour"]
                + ["--device-id", "van-1", "--publish-linger", "1"], environment: environment)
        #expect(down.status == 0, "\(down.err)")
        let shown = down.out.count
        #expect(shown > 0)
        #expect(down.err.contains("note: --publish keeps its outbox in \(outbox)"), "\(down.err)")
        #expect(down.err.contains("\(shown) unsent"), "\(down.err)")
        #expect(try SessionLog.read(path: outbox).records.count == shown, "every verdict kept in the outbox")
        let mode = try FileManager.default.attributesOfItem(atPath: folder + "/state/outbox")[.posixPermissions] as? Int
        #expect(mode == 0o700, "the outbox is the site's, not every user's")

        try await PrivateMosquitto.with { broker in
            let store = try FleetStore(path: folder + "/fleet.sqlite", create: true)
            try await withCollector(broker, store: store, id: "office-outbox") { _ in
                let up = try await TestProgram.run(
                    tagfixBinary,
                    [
                        "verify", "--scenario", scenario, "--json", "--publish", "mqtt://127.0.0.1:\(broker.port)/tagfix", "--site",
                        "harbour",
                    ]
                        + ["--device-id", "van-1"], environment: environment)
                #expect(up.status == 0, "\(up.err)")
                #expect(!up.err.contains("note: --publish keeps its outbox"), "said once, when the outbox was made: \(up.err)")
                #expect(up.err.contains("\(2 * shown) verdicts acknowledged"), "\(up.err)")
                #expect(try await eventually { try store.count() == 2 * shown })
            }
        }
    }

    @Test(
        "verify --demo --publish with no --log: the demo's nine verdicts reach the broker through the outbox of the default site and this host",
        .enabled(if: haveBroker && FileManager.default.isExecutableFile(atPath: tagfixBinary), "needs mosquitto and the built tagfix"))
    func demo() async throws {
        let folder = try temporaryFolder()
        try await PrivateMosquitto.with { broker in
            let store = try FleetStore(path: folder + "/fleet.sqlite", create: true)
            try await withCollector(broker, store: store, id: "office-demo") { _ in
                let run = try await TestProgram.run(
                    tagfixBinary, ["verify", "--demo", "--json", "--publish", "mqtt://127.0.0.1:\(broker.port)/tagfix"],
                    environment: ["STATE_DIRECTORY": folder + "/state"])
                #expect(run.status == 0, "\(run.err)")
                #expect(run.out.count == 9, "\(run.err)")
                let outbox = folder + "/state/outbox/default/\(FleetPublishRequest.hostDevice).jsonl"
                #expect(run.err.contains("note: --publish keeps its outbox in \(outbox)"), "\(run.err)")
                #expect(run.err.contains("9 verdicts acknowledged"), "\(run.err)")
                #expect(try SessionLog.read(path: outbox).records.count == 9)
                #expect(try await eventually { try store.count() == 9 })
            }
        }
    }
}
