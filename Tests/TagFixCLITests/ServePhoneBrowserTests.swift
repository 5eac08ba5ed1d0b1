import Foundation
import TagFixCore
import TagFixCrypto
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixStore
import TagFixTesting
import Testing

/// A test CA and a server certificate for localhost and 127.0.0.1 it signed, made with openssl at
/// test time; the SPKI hash (base64 SHA-256 of the server key's SubjectPublicKeyInfo) Chromium is
/// told to trust.
struct TestCA: Sendable {
    let folder: String
    var ca: String { folder + "/ca.pem" }
    var certificate: String { folder + "/server.pem" }
    var key: String { folder + "/server-key.pem" }
    let spki: String

    static func make() async throws -> TestCA {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        func openssl(_ arguments: [String]) async throws -> String {
            let result = try await TestProgram.run("/usr/bin/openssl", arguments)
            try #require(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.err)")
            return result.output
        }
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n".write(
            toFile: folder + "/ext.cnf", atomically: true, encoding: .utf8)
        _ = try await openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", folder + "/ca-key.pem", "-out",
            folder + "/ca.pem", "-days", "2", "-subj", "/CN=TagFix test CA",
        ])
        _ = try await openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", folder + "/server-key.pem", "-out",
            folder + "/server.csr", "-subj", "/CN=localhost",
        ])
        _ = try await openssl([
            "x509", "-req", "-in", folder + "/server.csr", "-CA", folder + "/ca.pem", "-CAkey", folder + "/ca-key.pem", "-CAcreateserial",
            "-out", folder + "/server.pem", "-days", "2", "-extfile", folder + "/ext.cnf",
        ])
        chmod(folder + "/server-key.pem", 0o600)
        _ = try await openssl(["pkey", "-in", folder + "/server-key.pem", "-pubout", "-outform", "DER", "-out", folder + "/spki.der"])
        _ = try await openssl(["dgst", "-sha256", "-binary", "-out", folder + "/spki.sha256", folder + "/spki.der"])
        let hash = try Data(contentsOf: URL(fileURLWithPath: folder + "/spki.sha256")).base64EncodedString()
        return TestCA(folder: folder, spki: hash)
    }
}

@Suite("tagfix serve: phone taps in headless Chromium and over HTTPS")
struct ServePhoneBrowserTests {
    static let spot = (lat: 53.545, lon: 9.966)
    static let sunUID: [UInt8] = [0x04, 0x5A, 0x11, 0x42, 0x9C, 0x3D, 0x80]
    static let seleniumPython = ProcessInfo.processInfo.environment["TAGFIX_SELENIUM_PYTHON"]
    static let browserReady =
        RunningTagFix.isBuilt && seleniumPython != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver")

    /// A SQLite registry with E1 (a plain tag, the Gate) and S1 (a SUN tag of key set `site`),
    /// both at the spot with 30 m; and the site's key file.
    static func site() throws -> (registry: String, keys: String) {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        let registry = folder + "/site.sqlite"
        let spot = Coordinate(validLatitude: Self.spot.lat, longitude: Self.spot.lon)
        let entries = [
            RegistryEntry(id: "E1", uid: nil, region: try CircularRegion(center: spot, radius: 30, identifier: "E1"), name: "Gate"),
            RegistryEntry(
                id: "S1", uid: try TagUID(bytes: Self.sunUID), region: try CircularRegion(center: spot, radius: 30, identifier: "S1"),
                name: "Pump", sun: SUNSettings(keyName: "site")),
        ]
        try SQLiteRegistry.withRegistry(path: registry, mode: .create) { store throws(RegistryStoreError) in
            for entry in entries { try store.add(entry) }
        }
        let keys = folder + "/site.keys"
        try SUNEndToEndTests.keyFile.write(toFile: keys, atomically: true, encoding: .utf8)
        chmod(keys, 0o600)
        return (registry, keys)
    }

    /// An NTAG 424 DNA provisioned as `enroll --sun` provisions one (SUNEndToEndTests'
    /// `provisioned`, with the site's keys), its URL template this server's: `base` with the
    /// encrypted PICC data and the CMAC mirrored. Its read-back spent counter 1.
    static func provisioned(base: String) throws -> (tag: EmulatedNTAG424Tag, fileLength: Int) {
        let tag = try EmulatedNTAG424Tag(uid: Self.sunUID)
        let (url, names) = try NTAG424Provisioner.prepare(
            template: "\(base)?picc_data=\(NTAG424Provisioner.piccPlaceholder)&cmac=\(NTAG424Provisioner.cmacPlaceholder)")
        let keys = SUNVerifier(
            metaReadKey: SUNEndToEndTests.metaKey,
            fileReadKey: .diversified(master: SUNEndToEndTests.master, suffix: SUNEndToEndTests.suffix), names: names)
        let provisioner = try NTAG424Provisioner(
            uid: Self.sunUID, url: url, message: NDEFMessage(records: [NDEFRecord.uri(url)]).encoded(), names: names, keys: keys)
        let readBack = try provisioner.run { apdu in
            guard case .data(let answer) = tag.transceive(apdu) else { throw NTAG424Error.transport("no answer") }
            return answer
        }
        #expect(readBack.counter == 1)
        return (tag, 2 + NDEFMessage(records: [NDEFRecord.uri(url)]).encoded().count)
    }

    /// The URL a phone opens when it taps `tag`: a new activation, the NDEF file read as a
    /// phone reads it, in one read of its `fileLength` bytes (the chip mirrors a fresh SUN into it).
    static func tap(_ tag: EmulatedNTAG424Tag, fileLength: Int) throws -> String {
        tag.reset()
        var commands = NTAG424Commander { apdu in
            guard case .data(let answer) = tag.transceive(apdu) else { throw NTAG424Error.transport("no answer") }
            return answer
        }
        try commands.selectApplication()
        let file = try commands.readBinary(fileID: 0xE104, count: fileLength)
        let message = try NDEFMessage(bytes: Array(file[2..<2 + (Int(file[0]) << 8 | Int(file[1]))]))
        return try URIRecord(payload: try #require(message.records.first).payload).uri
    }

    /// Runs the browser's plan; returns its `STEP` lines by step name.
    static func browse(_ rig: PhoneRig, steps: [[String: Any]], spki: String? = nil, live: Bool = false) async throws -> [String: String] {
        let artefacts = packageRoot + "/.build/test-artefacts"
        try FileManager.default.createDirectory(atPath: artefacts, withIntermediateDirectories: true)
        let plan: [String: Any] = [
            "origin": rig.origin, "token": PhoneRig.tokens["alice"]!, "shots": artefacts, "spki": spki as Any, "steps": steps, "live": live,
        ]
        let path = try temporaryFile("plan.json", String(decoding: try JSONSerialization.data(withJSONObject: plan), as: UTF8.self))
        let result = try await TestProgram.run(try #require(seleniumPython), [packageRoot + "/Tests/Browser/phone_tap.py", path])
        #expect(result.status == 0, "\(result.output) \(result.err)")
        var lines: [String: String] = [:]
        for line in result.out where line.hasPrefix("STEP ") {
            let rest = line.dropFirst(5)
            let name = String(rest.prefix { $0 != " " })
            lines[name] = String(rest.dropFirst(name.count + 1))
        }
        if let last = result.out.last(where: { $0.hasPrefix("LIVE ") }) { lines["live"] = String(last.dropFirst(5)) }
        if let feed = result.out.last(where: { $0.hasPrefix("FEED ") }) { lines["feed"] = String(feed.dropFirst(5)) }
        return lines
    }

    /// The log's verdicts as `kind(reason)`, and each SUN counter.
    static func logged(_ rig: PhoneRig) throws -> [(verdict: String, counter: Int?, line: String)] {
        try rig.logLines.map { line in
            let value = try JSONValue.parse(line)
            return (SUNEndToEndTests.describe(value), value["sun_counter"]?.double.map { Int($0) }, line)
        }
    }

    @Test(
        "a phone in headless Chromium: at the tag confirmed, 200 m off outside, ±800 m inconclusive, denied disallowed, a fresh SUN URL confirmed then replayed, no token refused; the tech's link clicked on another site works at once, another site's link without it is refused (screenshots in .build/test-artefacts)",
        .enabled(if: browserReady, "needs the built tagfix, chromium-driver and TAGFIX_SELENIUM_PYTHON (scripts/test sets it up)"))
    func phoneInChromium() async throws {
        let (registry, keys) = try Self.site()
        let rig = try await PhoneRig(registry: registry, extra: ["--sun-keys", keys])
        let (tag, fileLength) = try Self.provisioned(base: "\(rig.origin)/t/S1")
        let sunURL = try Self.tap(tag, fileLength: fileLength)
        let at: [String: Any] = ["lat": Self.spot.lat, "lon": Self.spot.lon, "accuracy": 5]
        func step(
            _ name: String, _ url: String, _ position: [String: Any] = at, permission: String = "granted", cookie: Bool = true,
            otherSite: String = "none"
        ) -> [String: Any] {
            position.merging(["name": name, "url": url, "permission": permission, "cookie": cookie, "other_site": otherSite]) { $1 }
        }
        let tagURL = "\(rig.origin)/t/E1"
        let lines = try await Self.browse(
            rig,
            steps: [
                step("refused", tagURL, cookie: false),
                step("confirmed", tagURL),
                // The tech's link, clicked in webmail (another site): the first page after it has
                // the cookie (a 303 lost the SameSite=Strict cookie: refused until a reload).
                step("link-from-other-site", tagURL, cookie: false, otherSite: "link with token"),
                // Another site's link to the tag's page, the cookie set: sent without it, refused.
                step("other-site-without-token", tagURL, otherSite: "link"),
                step("outside", tagURL, ["lat": Self.spot.lat + 200 / 111_320.0, "lon": Self.spot.lon, "accuracy": 5]),
                step("poor-accuracy", tagURL, ["lat": Self.spot.lat, "lon": Self.spot.lon, "accuracy": 800]),
                step("denied", tagURL, permission: "denied"),
                step("sun", sunURL),
                step("sun-replayed", sunURL),
            ], live: true)
        #expect(lines["refused"]?.hasPrefix("refused") == true, "\(lines)")
        #expect(lines["confirmed"]?.hasPrefix("confirmed | ✓ confirmed") == true, "\(lines)")
        #expect(lines["link-from-other-site"]?.hasPrefix("confirmed") == true, "\(lines)")
        #expect(lines["other-site-without-token"]?.hasPrefix("refused") == true, "\(lines)")
        #expect(lines["outside"]?.hasPrefix("outside") == true, "\(lines)")
        #expect(lines["poor-accuracy"]?.hasPrefix("inconclusive") == true, "\(lines)")
        #expect(lines["denied"]?.hasPrefix("disallowed") == true, "\(lines)")
        #expect(lines["sun"]?.hasPrefix("confirmed") == true, "\(lines)")
        // The page shows the SUN counter it accepted (the provisioner's read-back spent 1); a
        // replay has none, nor has a plain tag.
        #expect(lines["sun"]?.hasSuffix("| SUN counter 2") == true, "\(lines)")
        #expect(lines["confirmed"]?.hasSuffix("| ") == true, "\(lines)")
        #expect(lines["sun-replayed"]?.hasPrefix("untrusted") == true, "\(lines)")
        #expect(lines["sun-replayed"]?.hasSuffix("| ") == true, "\(lines)")
        // The live page, open meanwhile, says the last verdict came from a phone, and whose, and
        // so does its list of the last verdicts.
        #expect(lines["live"]?.hasPrefix("S1 (phone alice): untrusted") == true, "\(lines)")
        #expect(lines["feed"]?.contains("S1 (phone alice) untrusted") == true, "\(lines)")
        #expect(await rig.stop())
        let log = try Self.logged(rig)
        // The refused taps left nothing; each other page's verdict is in the log, in order.
        #expect(
            log.map(\.verdict) == [
                "confirmed", "confirmed", "outside", "inconclusive(poor_accuracy)", "disallowed(position_denied)", "confirmed",
                "untrusted(sun_replayed)",
            ], "\(log.map(\.line))")
        #expect(log.dropFirst(5).first?.counter == 2, "the tap after the provisioner's read-back: \(log.map(\.line))")
        #expect(log.allSatisfy { $0.line.contains(#""source":"phone""#) && $0.line.contains("Pixel 8") })
    }

    @Test(
        "over HTTPS with a test CA Chromium trusts: the same confirmed tap",
        .enabled(if: browserReady, "needs the built tagfix, chromium-driver and TAGFIX_SELENIUM_PYTHON (scripts/test sets it up)"))
    func phoneOverHTTPS() async throws {
        let ca = try await TestCA.make()
        let rig = try await PhoneRig(secure: true, extra: ["--tls-cert", ca.certificate, "--tls-key", ca.key])
        let lines = try await Self.browse(
            rig,
            steps: [["name": "https-confirmed", "url": "\(rig.origin)/t/E1", "lat": Self.spot.lat, "lon": Self.spot.lon, "accuracy": 5]],
            spki: ca.spki)
        #expect(lines["https-confirmed"]?.hasPrefix("confirmed") == true, "\(lines) \(rig.serve.stderr)")
        #expect(await rig.stop())
        #expect(try Self.logged(rig).map(\.verdict) == ["confirmed"])
    }

    @Test(
        "HTTPS through curl and the test CA: the link's cookie is Secure, a tap is confirmed, SIGHUP reloads the certificate and a broken one keeps the last",
        .enabled(
            if: RunningTagFix.isBuilt && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "needs the built tagfix and curl"))
    func httpsWithCurl() async throws {
        let ca = try await TestCA.make()
        let rig = try await PhoneRig(secure: true, extra: ["--tls-cert", ca.certificate, "--tls-key", ca.key])
        func curl(_ arguments: [String]) async throws -> String {
            let result = try await TestProgram.run(
                "/usr/bin/curl", ["-sS", "-i", "--cacert", ca.ca, "--resolve", "localhost:\(rig.port):127.0.0.1"] + arguments)
            return result.output + result.err
        }
        let link = try await curl(["\(rig.origin)/t/E1?token=\(PhoneRig.tokens["alice"]!)"])
        #expect(link.hasPrefix("HTTP/1.1 200") && link.contains("HttpOnly; SameSite=Strict; Secure"), "\(link)")
        #expect(link.contains("Set-Cookie: __Host-tagfix_token=") && !link.contains("Domain="), "\(link)")
        func tap() async throws -> String {
            try await curl([
                "-X", "POST", "-H", "Origin: \(rig.origin)", "-H", "Cookie: __Host-tagfix_token=\(PhoneRig.tokens["alice"]!)", "--data",
                rig.body(), "\(rig.origin)/api/tap",
            ])
        }
        #expect(try await tap().contains(#""verdict":"confirmed""#))
        // Plain HTTP to the TLS port is no request.
        let plain = try? await HTTPExchange.send(port: rig.port, "GET /healthz HTTP/1.1\r\n\r\n")
        #expect(plain?.status != 200)
        // A new certificate from the same CA: reloaded; a broken one: the last stays.
        let next = try await TestCA.make()
        try FileManager.default.removeItem(atPath: ca.certificate)
        try FileManager.default.copyItem(atPath: next.certificate, toPath: ca.certificate)
        try FileManager.default.removeItem(atPath: ca.key)
        try FileManager.default.copyItem(atPath: next.key, toPath: ca.key)
        rig.serve.process.signal(SIGHUP)
        #expect(await rig.serve.waitFor("SIGHUP: TLS certificate reloaded", onStandardError: true), "\(rig.serve.stderr)")
        let renewed = try await TestProgram.run(
            "/usr/bin/curl",
            ["-sS", "--cacert", next.ca, "--resolve", "localhost:\(rig.port):127.0.0.1", "\(rig.origin)/healthz"])
        #expect(renewed.output == "ok\n", "\(renewed.err)")
        try "not a certificate\n".write(toFile: ca.certificate, atomically: true, encoding: .utf8)
        rig.serve.process.signal(SIGHUP)
        #expect(await rig.serve.waitFor("the TLS certificate was not reloaded", onStandardError: true), "\(rig.serve.stderr)")
        // Its line names the file once (a stranger's review read "FILE: FILE: …").
        let refusal = rig.serve.stderr.split(separator: "\n").first { $0.contains("not reloaded") }.map(String.init) ?? ""
        #expect(refusal.components(separatedBy: ca.certificate).count == 2, "\(refusal)")
        let still = try await TestProgram.run(
            "/usr/bin/curl",
            ["-sS", "--cacert", next.ca, "--resolve", "localhost:\(rig.port):127.0.0.1", "\(rig.origin)/healthz"])
        #expect(still.output == "ok\n", "\(still.err)")
        #expect(await rig.stop())
        #expect(try Self.logged(rig).map(\.verdict) == ["confirmed"])
    }

    @Test(
        "HTTPS: a client that connects and never begins its handshake is closed once --client-timeout has passed; the server serves on",
        .enabled(
            if: RunningTagFix.isBuilt && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "needs the built tagfix and curl"))
    func silentTLSClient() async throws {
        let ca = try await TestCA.make()
        let rig = try await PhoneRig(secure: true, extra: ["--tls-cert", ca.certificate, "--tls-key", ca.key, "--client-timeout", "1"])
        let port = rig.port
        // recv's answer: 0 once the server closes; -1 if it has not within 30 s.
        let received = try await offThread { () -> Int in
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { return -2 }
            var buffer = [UInt8](repeating: 0, count: 256)
            return recv(fd, &buffer, buffer.count, 0)
        }
        #expect(received == 0, "the silent client was not closed (\(received))")
        // The timeout holds for curl too: on a loaded machine its handshake and head can take longer
        // than a second to come, and serve answers that (a 408 that names the timeout: it serves
        // on). Only that answer is asked again; anything else is the answer.
        var health = try await TestProgram.run(
            "/usr/bin/curl", ["-sS", "--cacert", ca.ca, "--resolve", "localhost:\(port):127.0.0.1", "\(rig.origin)/healthz"])
        for _ in 0..<4 where health.output.hasPrefix("the request's head did not arrive within") {
            health = try await TestProgram.run(
                "/usr/bin/curl", ["-sS", "--cacert", ca.ca, "--resolve", "localhost:\(port):127.0.0.1", "\(rig.origin)/healthz"])
        }
        #expect(health.output == "ok\n", "\(health.err)")
        #expect(await rig.stop())
    }
}
