import Foundation
import TagFixCore
import TagFixCrypto
import TagFixStore
import Testing

/// `verify --sun-keys`: SUN registry tags through the command line. The counters live in the
/// SQLite registry, so a URL accepted in one run is a replay in the next (the process gone in
/// between, as after a crash or a reboot).
@Suite struct SUNVerifyTests {
    static let uid = "04DE5F1EACC040"

    /// A URL as the tag writes it on read `counter`, factory keys.
    static func mint(counter: UInt32) throws -> String {
        let uid = try TagUID(hex: Self.uid)
        let picc = PICCData(uid: uid.bytes, counter: counter)
        let encrypted = try AES128.cbcEncrypt(key: .zero, [picc.tag] + picc.sessionContext + [9, 8, 7, 6, 5])
        let mac = try #require(SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero)).sdmMAC(picc, input: []))
        return "https://tags.example/t/T01?e=\(SUNHex.encode(encrypted))&c=\(SUNHex.encode(mac))"
    }

    /// A scenario of taps at the tag's centre, one per URL, with a still GPS.
    static func scenario(_ urls: [String], registry: String) -> String {
        let taps = urls.enumerated().map { index, url in
            #"{"t": \#(10 + 10 * index), "uid": "\#(uid)", "type": "type4", "url": "\#(url)"}"#
        }
        return """
            {"name": "SUN taps", "start": "2026-05-14T08:00:00Z", "registry": "\(registry)",
             "gps": {"rate_hz": 1, "accuracy_m": 3, "noise_m": 0, "seed": 1, "satellites": 9,
                     "route": [{"t": 0, "lat": 53.545, "lon": 9.966}, {"t": 600, "lat": 53.545, "lon": 9.966}]},
             "taps": [\(taps.joined(separator: ", "))]}
            """
    }

    static func setUp() throws -> (folder: String, registry: String, keys: String) {
        let folder = NSTemporaryDirectory() + "sun-verify-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let registry = folder + "/site.sqlite"
        let region = try CircularRegion(center: try Coordinate(latitude: 53.545, longitude: 9.966), radius: 25, identifier: "T01")
        try SQLiteRegistry.withRegistry(path: registry, mode: .create) { store throws(RegistryStoreError) in
            try store.add(
                RegistryEntry(
                    id: "T01", uid: try? TagUID(hex: uid), region: region, name: "Gate",
                    sun: SUNSettings(keyName: "site", names: SUNParameterNames(piccData: "e", cmac: "c"))))
        }
        let keys = folder + "/site.keys"
        try "[site]\nkey = 00000000000000000000000000000000\n".write(toFile: keys, atomically: true, encoding: .utf8)
        chmod(keys, 0o600)
        return (folder, registry, keys)
    }

    static func verdicts(_ lines: [String]) -> [String] {
        lines.compactMap { line in
            guard let object = try? JSONValue.parse(line), let verdict = object["verdict"]?.string else { return nil }
            return verdict + (object["reason"]?.string.map { "(\($0))" } ?? "")
                + (object["sun_counter"]?.double.map { " #\(Int($0))" } ?? "")
        }
    }

    @Test func countersRiseAcrossRunsAndAReplayIsCaught() async throws {
        let (folder, registry, keys) = try Self.setUp()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = try temporaryFile(
            "sun1.json", Self.scenario([try Self.mint(counter: 3), try Self.mint(counter: 4)], registry: registry))
        let run1 = await run(["verify", "--scenario", first, "--sun-keys", keys, "--json"])
        #expect(run1.code == 0, "\(run1.err)")
        #expect(Self.verdicts(run1.out) == ["confirmed #3", "confirmed #4"])
        // Another process, later: the tag's next read, and a copy of the first URL.
        let second = try temporaryFile(
            "sun2.json", Self.scenario([try Self.mint(counter: 5), try Self.mint(counter: 3)], registry: registry))
        let run2 = await run(["verify", "--scenario", second, "--sun-keys", keys, "--json"])
        #expect(Self.verdicts(run2.out) == ["confirmed #5", "untrusted(sun_replayed)"])
        #expect(try SQLiteSUNCounters(path: registry, create: false).lastAccepted(uid: TagUID(hex: Self.uid)) == 5)
        // No key, no MAC and no PICC data in any line.
        for line in run1.out + run1.err + run2.out + run2.err {
            #expect(!line.contains("00000000000000000000000000000000"))
        }
    }

    @Test func withoutKeysTheTagIsUnchecked() async throws {
        let (folder, registry, _) = try Self.setUp()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = try temporaryFile("sun3.json", Self.scenario([try Self.mint(counter: 3)], registry: registry))
        let result = await run(["verify", "--scenario", file, "--json"])
        #expect(Self.verdicts(result.out) == ["inconclusive(sun_unchecked)"])
    }

    @Test func keyFilesOthersCanReadAreRefused() async throws {
        let (folder, registry, keys) = try Self.setUp()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        chmod(keys, 0o640)
        let file = try temporaryFile("sun4.json", Self.scenario([try Self.mint(counter: 3)], registry: registry))
        let result = await run(["verify", "--scenario", file, "--sun-keys", keys, "--json"])
        #expect(result.code == 66)
        #expect(result.err.count == 1 && result.err[0].contains("chmod 600"))
        #expect(result.out.isEmpty)
    }

    @Test func aCSVRegistryNeedsACounterFile() async throws {
        let (folder, _, keys) = try Self.setUp()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let csv = folder + "/site.csv"
        try "id,uid,lat,lon,radius_m,sun\nT01,\(Self.uid),53.545,9.966,25,site;picc=e;cmac=c\n".write(
            toFile: csv, atomically: true, encoding: .utf8)
        let file = try temporaryFile("sun5.json", Self.scenario([try Self.mint(counter: 3)], registry: csv))
        let refused = await run(["verify", "--scenario", file, "--sun-keys", keys, "--json"])
        #expect(refused.code == 64)
        #expect(refused.err.first?.contains("--sun-counters") == true)
        let counters = folder + "/counters.sqlite"
        let accepted = await run(["verify", "--scenario", file, "--sun-keys", keys, "--sun-counters", counters, "--json"])
        #expect(Self.verdicts(accepted.out) == ["confirmed #3"])
        let again = await run(["verify", "--scenario", file, "--sun-keys", keys, "--sun-counters", counters, "--json"])
        #expect(Self.verdicts(again.out) == ["untrusted(sun_replayed)"])
    }
}
