import Foundation
import Synchronization
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixNDEF
import TagFixPCSC
import TagFixStore
import TagFixSystem
import TagFixTesting
import Testing

/// The NTAG dumps in the shared data.
private let flipperDumps = TestData.files(in: "nfc/flipper", suffix: ".nfc")
/// Every Type 2 dump in the shared data: the Flipper ones and the Proxmark3 ones.
private let type2Dumps = flipperDumps + TestData.files(in: "nfc/proxmark", suffix: ".json")
private let classicDump = TestData.files(in: "nfc/tags", suffix: "mifare_classic_1k_mad_ndef.json").first
private let skip = Comment(rawValue: TestData.skipReason)
private let binary = TestBinaries.tagfix
/// A private pcscd with vpcd, and the built tagfix to run as its client.
private let canRun = PrivatePCSCD.available && FileManager.default.isExecutableFile(atPath: binary)
private let why = Comment(rawValue: "needs pcscd, vsmartcard-vpcd, unshare and the built tagfix")
/// Debian's python3-pyscard, for a second PC/SC client.
private let hasPyscard = FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/smartcard/scard/__init__.py")

/// The built tagfix as a client of `pcscd` (libpcsclite reads PCSCLITE_CSOCK_NAME once per
/// process, so a PC/SC client runs as a process of its own), waited for off the pool. Standard
/// output is written to a file, readable while it runs (`lines`).
private final class TagfixProcess: Sendable {
    let process: RunningProgram
    let outFile: String
    let errFile: String

    init(_ arguments: [String], pcscd: PrivatePCSCD) throws {
        let folder = (try temporaryFile("x", "") as NSString).deletingLastPathComponent
        outFile = folder + "/out"
        errFile = folder + "/err"
        _ = FileManager.default.createFile(atPath: outFile, contents: nil)
        _ = FileManager.default.createFile(atPath: errFile, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outFile))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errFile))
        defer {
            try? out.close()
            try? err.close()
        }
        process = try RunningProgram(
            binary, arguments, environment: pcscd.environment, standardOutput: .descriptor(out.fileDescriptor),
            standardError: .descriptor(err.fileDescriptor))
    }

    /// Waits for the exit, polling, off the pool.
    func wait() async -> Int32 {
        _ = await process.exit(upTo: .seconds(3600))
        return process.status ?? -1
    }

    var lines: [String] { (try? String(contentsOfFile: outFile, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? [] }
    var err: String { (try? String(contentsOfFile: errFile, encoding: .utf8)) ?? "" }

    /// Runs tagfix to the end: its status, output lines and standard error.
    static func run(_ arguments: [String], pcscd: PrivatePCSCD) async throws -> (code: Int32, out: [String], err: String) {
        let child = try TagfixProcess(arguments, pcscd: pcscd)
        let code = await child.wait()
        return (code, child.lines, child.err)
    }

    func terminate() { process.signal(SIGTERM) }
}

/// Waits (polling, off the pool) until `condition` holds, at most `seconds`: progress, not timing.
private func eventually(_ seconds: Double = 30, _ condition: @escaping @Sendable () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// A private pcscd and a card behind its vpcd for the length of a test's body, both stopped
/// however it ends (the card, then pcscd, its exit awaited).
private struct PCSCBench: Sendable {
    let pcscd: PrivatePCSCD
    let card: VPCDEmulator

    /// - Parameters:
    ///   - model: the reader family the card answers as.
    ///   - name: the reader's name in pcscd (the model's unless given: a reader whose name and
    ///     behaviour disagree shows what the capability probe does).
    static func with<Value>(
        tags: [any EmulatedTag], model: PCSCPart3Reader.Model = .virtual, name: String? = nil,
        isolation: isolated (any Actor)? = #isolation, _ body: (PCSCBench) async throws -> Value
    ) async throws -> Value {
        try await PrivatePCSCD.with(friendlyName: name ?? model.friendlyName) { pcscd in
            let card = VPCDEmulator(tags: tags, options: .init(port: pcscd.port, model: model))
            do {
                let value = try await body(PCSCBench(pcscd: pcscd, card: card))
                // The card's stop joins its thread: not on the pool.
                await offThePool { card.stop() }
                return value
            } catch {
                await offThePool { card.stop() }
                throw error
            }
        }
    }
}

/// The reader families with a raw pass-through, one per shared Flipper dump in turn (7 dumps, 7
/// families: each family reads a different dump, every dump is read).
private let families: [PCSCPart3Reader.Model] = PCSCPart3Reader.Model.allCases.filter { $0.passThrough != .none && $0 != .virtual }
private let familyRuns = Array(zip(flipperDumps, flipperDumps.indices.map { families[$0 % families.count] }))

/// The fields of a scan's JSON that say what the tag holds (not when or how fast it was read).
private func essentials(_ object: JSONValue) -> [String] {
    ["uid", "tag_type", "url", "ndef", "problem"].map { "\($0)=\(object[$0].map { "\($0)" } ?? "nil")" }
        + ["originality=\(object["originality"].map { "\($0)" } ?? "nil")", "records=\(object["records"].map { "\($0)" } ?? "nil")"]
}

/// The same dump scanned through pcscd (`reader` on `bench`) and through libnfc (a PN532 emulator
/// holding it, returned for more taps; its caller stops it): both scans, each checked to have
/// succeeded.
private func scannedBothWays(_ image: TagImage, bench: PCSCBench, reader: String) async throws -> (
    pcsc: JSONValue, libnfc: JSONValue, pn532: PN532Emulator
) {
    let pn532 = try PN532Emulator(dumps: [image])
    do {
        let pcsc = try await TagfixProcess.run(
            ["scan", "--reader", reader, "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
        #expect(pcsc.code == 0, "\(reader): \(pcsc.err)")
        let libnfc = await run(["scan", "--reader", "pn532_uart:\(pn532.path)", "--json", "--count", "1", "--timeout", "30"])
        #expect(libnfc.code == 0, "\(libnfc.err)")
        return (try JSONValue.parse(try #require(pcsc.out.first)), try JSONValue.parse(try #require(libnfc.out.first)), pn532)
    } catch {
        pn532.stop()
        throw error
    }
}

/// Each test starts its own pcscd (in a mount namespace of its own, on a port of its own), card and
/// tagfix processes: nothing is shared, so they run side by side.
@Suite(
    "Through pcscd: tagfix emulate pcsc's card behind vpcd, a private pcscd, libpcsclite", .enabled(if: canRun, why),
    .timeLimit(.minutes(3)))
struct PCSCEndToEndTests {
    @Test(
        "scan and verify give the same tag and verdict as through libnfc, for every shared NTAG dump (Flipper, Proxmark3)",
        .enabled(if: !type2Dumps.isEmpty, skip), arguments: type2Dumps)
    func sameAsLibNFC(_ path: String) async throws {
        let image = try TagDump.load(Array(try #require(FileManager.default.contents(atPath: path))))
        try await PCSCBench.with(tags: [try image.emulatedTag()]) { bench in
            let (viaPCSC, viaLibNFC, pn532) = try await scannedBothWays(image, bench: bench, reader: "pcsc:")
            defer { pn532.stop() }
            #expect(essentials(viaPCSC) == essentials(viaLibNFC))
            #expect(viaPCSC["uid"]?.string == image.uid?.hex)
            #expect(viaPCSC["reader"]?.string == "pcsc:")

            // The card was read once; it is read again after it leaves and comes back.
            let gps = try stillGPSScenario()
            let verify = ["--gps", gps, "--json", "--count", "1", "--timeout", "60", "--fix-timeout", "30", "--max-fix-age", "30"]
            let viaPCSCVerdict = try await TagfixProcess.run(["verify", "--reader", "pcsc:Virtual PCD 00 00"] + verify, pcscd: bench.pcscd)
            #expect(viaPCSCVerdict.code == 0, "\(viaPCSCVerdict.err)")
            let viaLibNFCVerdict = await run(["verify", "--reader", "pn532_uart:\(pn532.path)"] + verify)
            #expect(viaLibNFCVerdict.code == 0, "\(viaLibNFCVerdict.err)")
            let one = try JSONValue.parse(try #require(viaPCSCVerdict.out.first))
            let other = try JSONValue.parse(try #require(viaLibNFCVerdict.out.first))
            for field in ["verdict", "uid", "url", "tag_id", "reason"] {
                #expect(one[field].map { "\($0)" } == other[field].map { "\($0)" }, "\(field): \(one) vs \(other)")
            }
        }
    }

    @Test("verify confirms a tag whose URL names the place, read through pcscd")
    func confirmed() async throws {
        let tag = ntag213(url: "https://tags.example.org/t/P1?lat=53.545&lon=9.966&r=25")
        try await PCSCBench.with(tags: [tag]) { bench in
            let result = try await TagfixProcess.run(
                [
                    "verify", "--reader", "pcsc:0", "--gps", try stillGPSScenario(), "--json", "--count", "1", "--timeout", "60",
                    "--fix-timeout",
                    "30", "--max-fix-age", "30",
                ], pcscd: bench.pcscd)
            #expect(result.code == 0, "\(result.err)")
            let verdict = try JSONValue.parse(try #require(result.out.first))
            #expect(verdict["verdict"]?.string == "confirmed", "\(verdict)")
            #expect(verdict["uid"]?.string == Hex.encode(tag.uid))
            // The PC/SC reader says how its read went too: one attempt, none failed on the air.
            #expect(verdict["read"]?["attempts"]?.double == 1, "\(verdict)")
            #expect(verdict["read"]?["rf_errors"]?.double == 0)
        }
    }

    @Test("the card logs every APDU whole and in order, with its times (TagFixBench pcsc-read measures from them)")
    func exchangeLog() async throws {
        // A URL that fits pages 3–10 with its TLV: the planner's first FAST_READ takes it whole.
        let url = "https://t.example/A1"
        let tag = ntag213(url: url)
        #expect(NDEFMessage(records: [.uri(url)]).encoded().count + 2 + 16 <= 4 * 11)
        try await PCSCBench.with(tags: [tag]) { bench in
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(result.code == 0, "\(result.err)")
            let traffic = bench.card.traffic
            #expect(traffic.exchanges.count == traffic.apdus)
            #expect(traffic.exchanges.map { Array($0.command.prefix(4)) } == traffic.headers)
            #expect(traffic.exchanges.allSatisfy { $0.received <= $0.answered })
            #expect(zip(traffic.exchanges, traffic.exchanges.dropFirst()).allSatisfy { $0.answered <= $1.received })
            let placed = try #require(traffic.connectedAt)
            let noticed = try #require(traffic.noticedAt)
            #expect(placed <= noticed && noticed <= (traffic.exchanges.first?.received ?? noticed))
            // GET DATA (the UID), one FAST_READ of pages 3–10, READ_SIG: the read planner's minimum.
            #expect(traffic.exchanges.count == 3, "\(traffic.exchanges.map { Hex.encode($0.command) })")
            bench.card.clearTraffic()
            #expect(bench.card.traffic.exchanges.isEmpty && bench.card.traffic.connectedAt == nil)
        }
    }

    @Test(
        "the read planner's minimum per pass-through: 3 APDUs with the direct transmit, 6 with the transparent exchange (its session started, switched to layer 3, ended)",
        arguments: [PCSCPart3Reader.Model.acr1252u, .acr1552u])
    func minimumExchanges(_ model: PCSCPart3Reader.Model) async throws {
        let tag = ntag213(url: "https://t.example/A1")
        try await PCSCBench.with(tags: [tag], model: model) { bench in
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(result.code == 0, "\(result.err)")
            let commands = bench.card.traffic.exchanges.map(\.command)
            let shown = commands.map { Hex.encode($0) }
            switch model.passThrough {
            case .direct:
                // GET DATA, FAST_READ 3–10, READ_SIG.
                #expect(commands.count == 3, "\(shown)")
            default:
                // GET DATA, start session, switch to 14443-A layer 3, FAST_READ 3–10, READ_SIG, end session.
                #expect(commands.count == 6, "\(shown)")
                #expect(commands.count > 2 && commands[2] == PCSCTransparentExchange.switchToTypeALayer3, "\(shown)")
                #expect(
                    commands.dropFirst().first == PCSCTransparentExchange.startSession
                        && commands.last == PCSCTransparentExchange.endSession)
            }
        }
    }

    @Test("a Type 4 tag: SELECT, the CC file and the NDEF file, through pcscd")
    func type4() async throws {
        let url = "https://type4.example/" + String(repeating: "p", count: 300)
        let tag = EmulatedType4Tag(uid: [0x04, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6], message: NDEFMessage(records: [.uri(url)]).encoded())
        try await PCSCBench.with(tags: [tag]) { bench in
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(result.code == 0, "\(result.err)")
            let object = try JSONValue.parse(try #require(result.out.first))
            #expect(object["tag_type"]?.string == "type4")
            #expect(object["uid"]?.string == "04A1B2C3D4E5F6")
            #expect(object["url"]?.string == url)
        }
    }

    /// When the other PC/SC client connects: a desktop's smart-card service or a browser's
    /// PKCS#11 module is connected before the tag comes (its command then waits in its own
    /// libpcsclite, which pcscd refuses while TagFix's transaction lasts); a program started
    /// during the read connects then (pcscd holds its connection until the transaction ends).
    enum OtherClient: Sendable, CaseIterable {
        case connectedBefore
        case connectingDuring
    }

    /// Another PC/SC client of the same reader sends a command while TagFix reads a tag: it
    /// waits for the read to end. Here, the Type 4 tag's CC file selected while the read waits
    /// for the answer to its selection of the NDEF file: before TagFix read in a transaction,
    /// that selection came between TagFix's selection and its READ BINARY, and TagFix read the
    /// CC file's bytes as the NDEF file's (the tap failed).
    @Test(
        "another program's command to the tag waits for TagFix's read to end: never between two of its commands",
        .enabled(if: hasPyscard, "needs python3-pyscard"), arguments: OtherClient.allCases)
    func anotherClientWaits(_ other: OtherClient) async throws {
        let url = "https://type4.example/t/" + String(repeating: "q", count: 40)
        let tag = EmulatedType4Tag(uid: [0x04, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF7], message: NDEFMessage(records: [.uri(url)]).encoded())
        let selectCC: [UInt8] = [0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x03]
        let selectNDEF: [UInt8] = [0x00, 0xA4, 0x00, 0x0C, 0x02, 0xE1, 0x04]
        try await PCSCBench.with(tags: [tag]) { bench in
            // The read's commands until its selection of the NDEF file, as the card saw them.
            let plain = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(plain.code == 0, "\(plain.err)")
            let before = try #require(bench.card.traffic.exchanges.firstIndex { $0.command == selectNDEF }, "no selection of the NDEF file")
            bench.card.setPresent(false)
            #expect(await eventually { !bench.card.connected })
            // The other client: connected to the reader (before the tag, or once the read is
            // held), it selects the CC file when told to (a line on its standard input).
            let script = """
                import sys, time
                from smartcard.scard import *
                context = SCardEstablishContext(SCARD_SCOPE_USER)[1]
                reader = [name for name in SCardListReaders(context, [])[1] if "Virtual PCD 00 00" in name][0]
                sys.stdin.readline()
                for _ in range(600):  # until pcscd has seen the card come (a test's limit, not the subject)
                    result, card, protocol = SCardConnect(context, reader, SCARD_SHARE_SHARED, SCARD_PROTOCOL_T0 | SCARD_PROTOCOL_T1)
                    if result != SCARD_E_NO_SMARTCARD: break
                    time.sleep(0.05)
                print("connected", hex(result & 0xFFFFFFFF), flush=True)
                sys.stdin.readline()
                print("asking", flush=True)
                result, answer = SCardTransmit(card, protocol, [\(selectCC.map { "0x" + Hex.encode([$0]) }.joined(separator: ", "))])
                print("answered", hex(result & 0xFFFFFFFF), bytes(answer).hex().upper(), flush=True)
                """
            let client = try RunningProgram("/usr/bin/python3", ["-c", script], environment: bench.pcscd.environment, input: .pipe)
            defer { client.terminate() }
            bench.card.clearTraffic()
            bench.card.setPresent(true)
            #expect(await eventually { bench.card.connected })
            if other == .connectedBefore {
                try client.write(Array("connect\n".utf8))
                #expect(await client.waitFor("connected 0x0"), "\(client.transcript)")
            }
            // The next read's selection of the NDEF file is held unanswered.
            bench.card.holdAnswer(after: before)
            let reading = try TagfixProcess(["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            defer { reading.terminate() }
            #expect(await eventually { bench.card.holding }, "the read's selection was not held")
            try client.write(Array((other == .connectedBefore ? "go\n" : "connect\ngo\n").utf8))
            if other == .connectedBefore { #expect(await client.waitFor("asking"), "\(client.transcript)") }
            // Its command on its way to pcscd (not a condition of the result: only a chance for
            // it to come before the read's next command).
            try await Task.sleep(for: .milliseconds(300))
            bench.card.releaseHeld()
            #expect(await reading.wait() == 0, "\(reading.err)")
            let object = try JSONValue.parse(try #require(reading.lines.first))
            #expect(object["url"]?.string == url, "the read took another program's selection as its own")
            #expect(await client.exit() == .exited(0), "\(client.transcript)")
            #expect(client.stdout.contains("answered 0x0 9000"), "\(client.transcript)")
            let commands = bench.card.traffic.exchanges.map(\.command)
            #expect(commands.last == selectCC, "the other program's command came between the read's: \(commands.map(Hex.encode))")
            #expect(commands.dropLast().contains(selectNDEF), "\(commands.map(Hex.encode))")
        }
    }

    @Test("a MIFARE Classic card through PC/SC: an unsupported tag, said so, not a broken one", .enabled(if: classicDump != nil, skip))
    func classic() async throws {
        let path = try #require(classicDump)
        let image = try TagDump.load(Array(try #require(FileManager.default.contents(atPath: path))))
        try await PCSCBench.with(tags: [try image.emulatedTag()]) { bench in
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "4"], pcscd: bench.pcscd)
            #expect(result.out.isEmpty, "\(result.out)")
            #expect(result.err.contains("only Type 2 (NTAG, Ultralight) and Type 4 tags are read through PC/SC"), "\(result.err)")
            #expect(result.err.contains("MIFARE Classic"), "\(result.err)")
        }
    }

    @Test("a reader without pass-through: pages by READ BINARY, and the scan says originality cannot be asked")
    func noPassThrough() async throws {
        let url = "https://plain.example/" + String(repeating: "r", count: 120)
        let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [.uri(url)]).encoded())
        try await PCSCBench.with(tags: [tag], model: .plain) { bench in
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(result.code == 0, "\(result.err)")
            let object = try JSONValue.parse(try #require(result.out.first))
            #expect(object["url"]?.string == url)
            #expect(object["originality"]?["status"]?.string == "unsupported")
            #expect(object["originality"]?["key"]?.string == "unsupported by this reader")
            // Only READ BINARY of the NDEF TLV's pages after the one refused direct transmit and the
            // one refused transparent session (a reader named "Virtual PCD" is probed with both).
            let headers = bench.card.traffic.headers
            #expect(headers.filter { $0.starts(with: [0xFF, 0x00]) }.count == 1, "\(headers.map { Hex.encode($0) })")
            #expect(headers.filter { $0.starts(with: [0xFF, 0xC2]) }.count == 1, "\(headers.map { Hex.encode($0) })")
            #expect(headers.contains { $0.starts(with: [0xFF, 0xB0]) })
            // And in words: a new process asks the reader once again, and says what it could not ask.
            let text = try await TagfixProcess.run(["scan", "--reader", "pcsc:", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(text.out.first?.contains("originality: unsupported by this reader") == true, "\(text.out)")
        }
    }

    @Test("enroll --write-url writes the tag through pcscd and reads it back; scan then reads the new URL")
    func enrollWrites() async throws {
        let tag = try EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [.uri("https://old.example/x")]).encoded())
        try await PCSCBench.with(tags: [tag]) { bench in
            let registry = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/site.sqlite"
            let enrolled = try await TagfixProcess.run(
                [
                    "enroll", "--id", "PC1", "--name", "Door", "--radius", "20", "--reader", "pcsc:", "--gps", try stillGPSScenario(),
                    "--allow-simulated", "--registry", registry, "--average", "2", "--max-accuracy", "15", "--write-url",
                    "https://tags.example.org/t/{id}?lat={lat}&lon={lon}&r={r}", "--json",
                ], pcscd: bench.pcscd)
            #expect(enrolled.code == 0, "\(enrolled.err)")
            let report = try JSONValue.parse(try #require(enrolled.out.first))
            #expect(report["written"]?.bool == true)
            // Read health through PC/SC too: the read and nine more, each completed, kept in the registry.
            let health = try #require(report["read_health"], "\(report)")
            #expect(health["reads"]?.double == 10 && health["completed"]?.double == 10, "\(health)")
            #expect(health["retries"]?.double == 0 && health["weak"]?.bool == false, "\(health)")
            #expect(try SQLiteRegistry(path: registry, mode: .readOnly).readHealth()["PC1"]?.health.completed == 10)
            let bytes = try #require(try Type2Memory.read(tag.pages).ndefMessage)
            let written = try #require(try NDEFMessage(bytes: bytes).firstURL)
            #expect(written.hasPrefix("https://tags.example.org/t/PC1?lat=53.545"))
            #expect(report["url"]?.string == written)
            // Taken away and put back: read as written.
            bench.card.setPresent(false)
            #expect(await eventually { !bench.card.connected })
            bench.card.setPresent(true)
            let scan = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(try JSONValue.parse(try #require(scan.out.first))["url"]?.string == written)
        }
    }

    @Test("a tag pulled mid-read: a clean incomplete read, never a wrong URL")
    func pulledMidRead() async throws {
        let url = "https://pulled.example/" + String(repeating: "m", count: 400)
        let tag = try EmulatedType2Tag.ntag(216, message: NDEFMessage(records: [.uri(url)]).encoded())
        try await PCSCBench.with(tags: [tag]) { bench in
            // GET DATA and the first FAST_READ are answered; the card leaves on the next.
            bench.card.removeAfter(exchanges: 2)
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "8"], pcscd: bench.pcscd)
            #expect(result.code == 75, "\(result.err)")
            #expect(result.err.contains("incomplete read"), "\(result.err)")
            for line in result.out {
                #expect(try JSONValue.parse(line)["url"]?.string == nil, "\(line)")
            }
        }
    }

    @Test("pcscd killed and started again: the reader says so, reconnects, and reads the next tag")
    func pcscdRestarted() async throws {
        let tag = ntag213(url: "https://restart.example/t/R1")
        try await PCSCBench.with(tags: [tag]) { bench in
            let scan = try TagfixProcess(["scan", "--reader", "pcsc:", "--json", "--count", "2", "--timeout", "60"], pcscd: bench.pcscd)
            defer { scan.terminate() }
            #expect(await eventually { scan.lines.count == 1 })
            await bench.pcscd.kill()
            #expect(await eventually { !bench.card.connected })
            try await bench.pcscd.restart()
            let code = await scan.wait()
            #expect(code == 0, "\(scan.err)")
            #expect(scan.lines.count == 2)
            for line in scan.lines { #expect(try JSONValue.parse(line)["url"]?.string == "https://restart.example/t/R1") }
            #expect(scan.err.contains("reader disconnected"), "\(scan.err)")
        }
    }

    @Test("the emulator gone: the card's removal is reported and nothing more is read")
    func emulatorGone() async throws {
        let tag = ntag213(url: "https://gone.example/t/G1")
        try await PCSCBench.with(tags: [tag]) { bench in
            let scan = try TagfixProcess(["scan", "--reader", "pcsc:", "--json", "--count", "2", "--timeout", "6"], pcscd: bench.pcscd)
            defer { scan.terminate() }
            #expect(await eventually { scan.lines.count == 1 })
            await offThePool { bench.card.stop() }
            let code = await scan.wait()
            #expect(code == 75, "\(scan.err)")
            #expect(scan.lines.count == 1)
        }
    }

    @Test("no pcscd: scan --reader pcsc: says so and exits 69")
    func noPCSCD() async throws {
        try await PCSCBench.with(tags: []) { bench in
            await bench.pcscd.kill()
            let result = try await TagfixProcess.run(["scan", "--reader", "pcsc:", "--count", "1", "--timeout", "10"], pcscd: bench.pcscd)
            #expect(result.code == 69, "\(result.err)")
            #expect(result.err.contains("SCARD_E_NO_SERVICE"), "\(result.err)")
            #expect(result.err.contains("pcscd"), "\(result.err)")
        }
    }

    @Test("tagfix devices lists pcscd's readers as pcsc:NAME")
    func devices() async throws {
        try await PCSCBench.with(tags: []) { bench in
            let result = try await TagfixProcess.run(["devices", "--gps", "none", "--json"], pcscd: bench.pcscd)
            let object = try JSONValue.parse(try #require(result.out.first))
            #expect(object["readers"]?.array?.contains { $0.string == "pcsc:\(PrivatePCSCD.readerName)" } == true, "\(result.out)")
        }
    }

    @Test("tagfix doctor names the readers pcscd has")
    func doctor() async throws {
        try await PCSCBench.with(tags: []) { bench in
            let result = try await TagfixProcess.run(["doctor", "--gps", "none", "--json"], pcscd: bench.pcscd)
            let found = try result.out.map { try JSONValue.parse($0) }.first { $0["code"]?.string == "pcsc-readers" }
            #expect(found?["message"]?.string?.contains("pcsc:\(PrivatePCSCD.readerName)") == true, "\(result.out)")
        }
    }

    @Test(
        "tagfix emulate pcsc --pcscd: its card is read through the socket it prints; its script takes the tag away and back",
        .enabled(if: !flipperDumps.isEmpty, skip))
    func emulateCommand() async throws {
        let dump = try #require(flipperDumps.first)
        // Away from the start, then back and away again every few seconds: two taps, whenever the
        // scan starts in the first 11 s.
        let script = try temporaryFile(
            "faults.txt", "0 remove 0\n3 present 0\n6 remove 0\n8 present 0\n11 remove 0\n13 present 0\n16 remove 0\n18 present 0\n")
        let emulator = try RunningProgram(
            binary, ["emulate", "pcsc", "--tag", dump, "--pcscd", "--script", script], standardError: .discard)
        // Stopped and reaped on the process's loop; no wait here, on the pool.
        defer { emulator.terminate(grace: .seconds(10)) }
        _ = await RunningProgram.poll(upTo: .seconds(120)) { emulator.stdout.contains("reader: ") || emulator.outputClosed }
        let text = emulator.stdout
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("pcscd: PCSCLITE_CSOCK_NAME=") }) else {
            throw EmulateOutput.noSocket(text)
        }
        let socket = String(line.dropFirst("pcscd: PCSCLITE_CSOCK_NAME=".count))
        let image = try TagDump.load(Array(try #require(FileManager.default.contents(atPath: dump))))
        let lines = try await TestProgram.run(
            binary, ["scan", "--reader", "pcsc:", "--json", "--count", "2", "--timeout", "30"],
            environment: ["PCSCLITE_CSOCK_NAME": socket],
            standardError: .discard
        ).out
        // Read each time the script puts it back.
        #expect(lines.count == 2, "\(lines)")
        for line in lines { #expect(try JSONValue.parse(line)["uid"]?.string == image.uid?.hex) }
    }

    @Test(
        "tagfix emulate pcsc --pcscd stopped as it should be (SIGTERM) or killed at once (SIGKILL): its pcscd is gone, and so is pcscd's folder",
        .enabled(if: !flipperDumps.isEmpty, skip), arguments: [SIGTERM, SIGKILL])
    func emulatorLeavesNoFolder(signal: Int32) async throws {
        let dump = try #require(flipperDumps.first)
        let emulator = try RunningProgram(binary, ["emulate", "pcsc", "--tag", dump, "--pcscd"], standardError: .discard)
        defer { emulator.terminate() }
        _ = await RunningProgram.poll(upTo: .seconds(120)) { emulator.stdout.contains("reader: ") || emulator.outputClosed }
        let text = emulator.stdout
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("pcscd: PCSCLITE_CSOCK_NAME=") }) else {
            throw EmulateOutput.noSocket(text)
        }
        // FOLDER/run/pcscd.comm: the folder PrivatePCSCD made for this pcscd.
        let socket = String(line.dropFirst("pcscd: PCSCLITE_CSOCK_NAME=".count))
        let folder = ((socket as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        #expect((folder as NSString).lastPathComponent.hasPrefix("tagfix-pcscd-"), "\(socket)")
        #expect(FileManager.default.fileExists(atPath: folder))
        let pcscd = try #require(
            PrivateDaemon.children(of: emulator.pid).first { Processes.status(of: $0)?.name == "pcscd" }, "no pcscd is tagfix's child")
        emulator.child.signal(signal)
        _ = await RunningProgram.poll(upTo: .seconds(30)) { emulator.outputClosed }
        #expect(await RunningProgram.poll(upTo: .seconds(10)) { !Processes.isRunning(pcscd) }, "pcscd outlived tagfix")
        // The watchdog removes it once pcscd has gone, when the emulator was killed; before, a
        // killed emulator left it, one a run, in the temporary folder.
        #expect(
            await RunningProgram.poll(upTo: .seconds(10)) { !FileManager.default.fileExists(atPath: folder) }, "\(folder) was left behind")
    }

    @Test(
        "each reader family's pass-through (ACS direct transmit, PC/SC Part 3 transparent exchange) carries FAST_READ and READ_SIG: same scan and originality as libnfc, for every shared Flipper dump",
        .enabled(if: !flipperDumps.isEmpty, skip), arguments: familyRuns)
    func familyPassThrough(_ path: String, _ model: PCSCPart3Reader.Model) async throws {
        let image = try TagDump.load(Array(try #require(FileManager.default.contents(atPath: path))))
        try await PCSCBench.with(tags: [try image.emulatedTag()], model: model) { bench in
            // The reader is listed under the family's name, and addressed by it.
            let (viaPCSC, viaLibNFC, pn532) = try await scannedBothWays(image, bench: bench, reader: "pcsc:\(model.readerName)")
            defer { pn532.stop() }
            #expect(essentials(viaPCSC) == essentials(viaLibNFC), "\(model)")
            #expect(viaPCSC["originality"]?["status"]?.string != "unsupported", "\(model): \(viaPCSC)")
            #expect(viaPCSC["originality"]?["status"] == viaLibNFC["originality"]?["status"], "\(model)")
            // The raw commands went the family's way, and only that way.
            let commands = bench.card.traffic.exchanges.map(\.command)
            let direct = commands.filter { $0.starts(with: [0xFF, 0x00, 0x00, 0x00]) }
            let transparent = commands.filter { $0.starts(with: [0xFF, 0xC2, 0x00, 0x01]) }
            let sessions = commands.filter { $0.starts(with: [0xFF, 0xC2, 0x00, 0x00]) }
            let shown = commands.map { Hex.encode($0) }
            switch model.passThrough {
            case .direct:
                #expect(transparent.isEmpty && sessions.isEmpty, "\(shown)")
                #expect(direct.contains { $0.count == 7 && $0[5...] == [0x3C, 0x00] || $0.suffix(2) == [0x3C, 0x00] }, "\(shown)")
            case .transparent:
                #expect(direct.isEmpty, "\(shown)")
                // READ_SIG and the first FAST_READ in 95 objects, in one session, started and ended.
                #expect(transparent.contains { $0.suffix(5) == [0x95, 0x02, 0x3C, 0x00, 0x00] }, "\(shown)")
                #expect(transparent.contains { $0.suffix(6) == [0x95, 0x03, 0x3A, 0x03, 0x0A, 0x00] }, "\(shown)")
                #expect(sessions.first == PCSCTransparentExchange.startSession, "\(shown)")
                #expect(sessions.last == PCSCTransparentExchange.endSession, "\(shown)")
            case .none:
                Issue.record("\(model) has no pass-through")
            }
        }
    }

    @Test("a long NDEF message through the transparent exchange: FAST_READ split so each answer fits 256 bytes, the URL whole")
    func transparentLongRead() async throws {
        let url = "https://long.example/" + String(repeating: "t", count: 600)
        let tag = try EmulatedType2Tag.ntag(216, message: NDEFMessage(records: [.uri(url)]).encoded())
        try await PCSCBench.with(tags: [tag], model: .omnikey5022) { bench in
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:OMNIKEY 5022", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(result.code == 0, "\(result.err)")
            let object = try JSONValue.parse(try #require(result.out.first))
            #expect(object["url"]?.string == url)
            #expect(object["originality"]?["status"]?.string != "unsupported", "\(object)")
            // Each FAST_READ asked at most 56 pages, so its answer (224 bytes and 17 of framing) fits 256.
            let exchanges = bench.card.traffic.exchanges.map(\.command).filter { $0.starts(with: [0xFF, 0xC2, 0x00, 0x01]) }
            let fastReads = exchanges.compactMap { command -> Int? in
                guard command.count >= 6, command.suffix(6).prefix(3) == [0x95, 0x03, 0x3A] else { return nil }
                return Int(command[command.count - 2]) - Int(command[command.count - 3]) + 1
            }
            #expect(fastReads.count >= 3 && fastReads.allSatisfy { $0 <= 56 }, "\(fastReads)")
            #expect(fastReads.reduce(0, +) >= (url.count + 8) / 4, "\(fastReads)")
        }
    }

    @Test("a reader whose name says nothing is probed: the direct transmit refused, the transparent exchange taken")
    func probe() async throws {
        let tag = ntag213(url: "https://probe.example/p")
        try await PCSCBench.with(tags: [tag], model: .omnikey5422, name: "Virtual PCD") { bench in
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(result.code == 0, "\(result.err)")
            let object = try JSONValue.parse(try #require(result.out.first))
            #expect(object["url"]?.string == "https://probe.example/p")
            #expect(object["originality"]?["status"]?.string != "unsupported", "\(object)")
            let headers = bench.card.traffic.headers
            #expect(headers.filter { $0.starts(with: [0xFF, 0x00, 0x00, 0x00]) }.count == 1, "\(headers.map { Hex.encode($0) })")
            #expect(headers.contains([0xFF, 0xC2, 0x00, 0x01]), "\(headers.map { Hex.encode($0) })")
        }
    }

    @Test("an OMNIKEY that refuses the transparent session: READ BINARY, the same URL, and originality said unsupported, never wrong")
    func familyRefuses() async throws {
        let url = "https://refused.example/" + String(repeating: "o", count: 60)
        let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [.uri(url)]).encoded())
        try await PCSCBench.with(tags: [tag], model: .plain, name: PCSCPart3Reader.Model.omnikey5022.friendlyName) { bench in
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:OMNIKEY 5022", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            #expect(result.code == 0, "\(result.err)")
            let object = try JSONValue.parse(try #require(result.out.first))
            #expect(object["url"]?.string == url)
            #expect(object["originality"]?["key"]?.string == "unsupported by this reader", "\(object)")
            // One refused session start; an OMNIKEY is never sent ACS's direct transmit.
            let headers = bench.card.traffic.headers
            #expect(headers.filter { $0.starts(with: [0xFF, 0xC2]) }.count == 1, "\(headers.map { Hex.encode($0) })")
            #expect(!headers.contains { $0.starts(with: [0xFF, 0x00, 0x00, 0x00]) }, "\(headers.map { Hex.encode($0) })")
            #expect(headers.contains { $0.starts(with: [0xFF, 0xB0]) })
        }
    }

    @Test("enroll --write-url through a transparent-exchange reader: the session is ended before UPDATE BINARY")
    func enrollThroughTransparent() async throws {
        let tag = try EmulatedType2Tag.ntag(213, message: NDEFMessage(records: [.uri("https://old.example/x")]).encoded())
        try await PCSCBench.with(tags: [tag], model: .utrust3700f) { bench in
            let registry = (try temporaryFile("x", "") as NSString).deletingLastPathComponent + "/site.sqlite"
            let enrolled = try await TagfixProcess.run(
                [
                    "enroll", "--id", "UT1", "--name", "Gate", "--radius", "20", "--reader", "pcsc:uTrust 3700 F", "--gps",
                    try stillGPSScenario(), "--allow-simulated", "--registry", registry, "--average", "2", "--max-accuracy", "15",
                    "--write-url", "https://tags.example.org/t/{id}?lat={lat}&lon={lon}&r={r}", "--json",
                ], pcscd: bench.pcscd)
            #expect(enrolled.code == 0, "\(enrolled.err)")
            let report = try JSONValue.parse(try #require(enrolled.out.first))
            #expect(report["written"]?.bool == true)
            let message = try #require(try Type2Memory.read(tag.pages).ndefMessage)
            let written = try #require(try NDEFMessage(bytes: message).firstURL)
            #expect(written.hasPrefix("https://tags.example.org/t/UT1?lat=53.545"))
            #expect(report["url"]?.string == written)
            // Every UPDATE BINARY came with no session open (the emulated reader refuses it inside one).
            let commands = bench.card.traffic.exchanges.map(\.command)
            #expect(commands.contains { $0.starts(with: [0xFF, 0xD6]) })
            #expect(commands.contains(PCSCTransparentExchange.startSession), "\(commands.map { Hex.encode($0) })")
        }
    }

    @Test("emulate pcsc --model: an unknown family is a usage error, in one line")
    func unknownModel() async throws {
        let result = await run(["emulate", "pcsc", "--tag", "/nonexistent.nfc", "--model", "acr9999"])
        #expect(result.code == 64, "\(result.code) \(result.err)")
        #expect(result.err.count == 1 && result.err.first?.contains("--model is one of virtual, plain, acr122u") == true, "\(result.err)")
    }

    enum EmulateOutput: Error { case noSocket(String) }

    @Test(
        "Debian's pcsc_scan and python3-pyscard see the card and read the same bytes",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/pcsc_scan")))
    func interop() async throws {
        let tag = ntag213(url: "https://interop.example/pcsc")
        try await PCSCBench.with(tags: [tag]) { bench in
            let environment = bench.pcscd.environment
            // pcsc_scan runs until stopped: its first report is enough.
            let scanned = try await TestProgram.run(
                "/usr/bin/timeout", ["-s", "KILL", "3", "/usr/bin/pcsc_scan"], environment: environment, standardError: .standardOutput)
            let atr = PCSCPart3Reader.atr(for: tag).map { Hex.encode([$0]) }.joined(separator: " ")
            #expect(scanned.output.contains(atr), "\(scanned.output)")
            let script = """
                from smartcard.System import readers
                connection = [r for r in readers() if "Virtual PCD 00 00" in str(r)][0].createConnection()
                connection.connect()
                uid, sw1, sw2 = connection.transmit([0xFF, 0xCA, 0x00, 0x00, 0x00])
                pages = []
                for page in range(0, 16, 4):
                    data, sw1, sw2 = connection.transmit([0xFF, 0xB0, 0x00, page, 0x10])
                    pages += data
                print(bytes(uid).hex().upper())
                print(bytes(pages).hex().upper())
                """
            let python = try await TestProgram.run(
                "/usr/bin/python3", ["-c", script], environment: environment, standardError: .standardOutput)
            let lines = python.output.split(separator: "\n").map(String.init)
            #expect(lines.first == Hex.encode(tag.uid), "\(python.output)")
            #expect(lines.last == Hex.encode(tag.pages.prefix(64)), "\(python.output)")
            // And tagfix reads the same tag.
            let result = try await TagfixProcess.run(
                ["scan", "--reader", "pcsc:", "--json", "--count", "1", "--timeout", "30"], pcscd: bench.pcscd)
            let object = try JSONValue.parse(try #require(result.out.first))
            #expect(object["uid"]?.string == lines.first)
            #expect(object["url"]?.string == "https://interop.example/pcsc")
        }
    }
}
