import TagFixCore
import TagFixEmulators
import TagFixMQTT
import TagFixNDEF
import TagFixScenarios
import TagFixServe

/// The fuzz targets: every parser that takes bytes or text from outside (a tag, a file, a serial
/// line, gpsd). Each one runs a parser on arbitrary input and checks what must hold whatever the
/// input: nothing traps (the fuzzer's sanitizers see that), a rejection is a typed error (the
/// parsers' typed `throws` guarantee it), and what is accepted is sane — values in range, and
/// differential properties such as "encode then decode gives the same message".
///
/// The same targets run in three places: under libFuzzer (`Fuzz/run`), over the seed corpus and
/// the regression inputs in the test suite (`FuzzCorpusTests`), and nowhere else.
public enum FuzzTarget: String, CaseIterable, Sendable {
    case ndefMessage = "ndef-message"
    case type2Memory = "type2-memory"
    case type4File = "type4-file"
    case type3Blocks = "type3-blocks"
    case mifareClassic = "mifare-classic"
    case dump
    case urlLocation = "url-location"
    case registryFile = "registry-file"
    case scenario
    case gpsdReport = "gpsd-report"
    case json
    case pn532Frame = "pn532-frame"
    case pn532Chip = "pn532-chip"
    case emulatorScripts = "emulator-scripts"
    case route
    case serveCommand = "serve-command"
    case fleetMessage = "fleet-message"
    case phoneTap = "phone-tap"

    /// Runs the target on one input.
    /// - Throws: `FuzzViolation` when accepted input gives an answer that breaks an invariant.
    public func run(_ data: [UInt8]) throws(FuzzViolation) {
        switch self {
        case .ndefMessage: try Self.ndefMessage(data)
        case .type2Memory: try Self.type2Memory(data)
        case .type4File: try Self.type4File(data)
        case .type3Blocks: try Self.type3Blocks(data)
        case .mifareClassic: try Self.mifareClassic(data)
        case .dump: try Self.dump(data)
        case .urlLocation: try Self.urlLocation(data)
        case .registryFile: try Self.registryFile(data)
        case .scenario: try Self.scenario(data)
        case .gpsdReport: try Self.gpsdReport(data)
        case .json: _ = try? JSONValue.parse(data)
        case .pn532Frame: try Self.pn532Frame(data)
        case .pn532Chip: Self.pn532Chip(data)
        case .emulatorScripts: Self.emulatorScripts(data)
        case .route: try Self.route(data)
        case .serveCommand: try Self.serveCommand(data)
        case .fleetMessage: try Self.fleetMessage(data)
        case .phoneTap: try Self.phoneTap(data)
        }
    }
}

/// An accepted input whose answer breaks an invariant: a wrong answer, as bad as a crash.
public struct FuzzViolation: Error, Sendable, CustomStringConvertible {
    public var target: String
    public var message: String
    public var description: String { "\(target): \(message)" }
}

extension FuzzTarget {
    private static func check(_ condition: Bool, _ target: FuzzTarget, _ message: @autoclosure () -> String) throws(FuzzViolation) {
        if !condition { throw FuzzViolation(target: target.rawValue, message: message()) }
    }

    private static func text(_ data: [UInt8]) -> String { String(decoding: data, as: UTF8.self) }

    // MARK: NDEF

    /// A message that parses re-encodes (shortest form) to bytes that parse to the same message,
    /// and every record's payload decodes or is refused without trapping.
    static func ndefMessage(_ data: [UInt8]) throws(FuzzViolation) {
        guard let message = try? NDEFMessage(bytes: data) else { return }
        let again = try? NDEFMessage(bytes: message.encoded())
        try check(again == message, .ndefMessage, "encode → decode changed the message")
        try payloads(message, depth: 0)
    }

    private static func payloads(_ message: NDEFMessage, depth: Int) throws(FuzzViolation) {
        for record in message.records {
            guard let payload = try? record.decoded() else { continue }
            switch payload {
            case .uri(let uri):
                // The expanded URI re-abbreviates to a record that expands to the same text.
                let again = try? NDEFRecord.uri(uri.uri).decoded()
                guard case .uri(let back)? = again else {
                    throw FuzzViolation(target: FuzzTarget.ndefMessage.rawValue, message: "URI \(uri.uri) did not re-encode")
                }
                try check(back.uri == uri.uri, .ndefMessage, "URI \(uri.uri) came back as \(back.uri)")
            case .smartPoster(let poster) where depth < 4:
                try payloads(poster.message, depth: depth + 1)
            default: break
            }
        }
    }

    // MARK: Tag memory

    /// The TLV walk of a whole image and the read planner agree: when the image reads, planning
    /// over the same pages is complete with the same NDEF bytes; a plan never asks for pages
    /// already in hand (a reader would loop).
    static func type2Memory(_ data: [UInt8]) throws(FuzzViolation) {
        let pages = Array(data.prefix(data.count / 4 * 4))
        let read = try? Type2Memory.read(pages)
        let plan = Type2Memory.plan(known: pages)
        switch plan {
        case .read(let range):
            try check(range.lowerBound == pages.count / 4, .type2Memory, "plan asks for \(range) with \(pages.count / 4) pages known")
            try check(read?.ndefMessage == nil, .type2Memory, "the image reads, yet the plan wants pages \(range)")
        case .complete(let contents):
            if let read, let message = read.ndefMessage {
                try check(contents.ndefMessage == message, .type2Memory, "planner and reader disagree on the NDEF bytes")
            }
        case .noNDEF:
            try check(read?.ndefMessage == nil, .type2Memory, "the image holds NDEF, the planner says none")
        }
        if let message = read?.ndefMessage { _ = try? NDEFMessage(bytes: message) }
        _ = Type2Identification.identify(getVersion: Array(data.prefix(8)))
    }

    /// The first byte splits the input into the CC file and the NDEF file.
    static func type4File(_ data: [UInt8]) throws(FuzzViolation) {
        guard let first = data.first else { return }
        let ccLength = min(Int(first & 0x3F), data.count - 1)
        let ccFile = Array(data[1..<1 + ccLength])
        let ndefFile = Array(data[(1 + ccLength)...])
        guard let cc = try? Type4CapabilityContainer(ccFile) else { return }
        guard let message = try? Type4Memory.ndefMessage(file: ndefFile, cc: cc) else { return }
        try check(message.count <= ndefFile.count, .type4File, "message of \(message.count) bytes from a \(ndefFile.count)-byte file")
        try check(message.count <= cc.ndefFileMaxSize, .type4File, "message longer than the CC's maximum file size")
        _ = try? NDEFMessage(bytes: message)
    }

    static func type3Blocks(_ data: [UInt8]) throws(FuzzViolation) {
        guard let (attributes, message) = try? Type3Memory.read(blocks: data) else { return }
        try check(message.count == attributes.length, .type3Blocks, "Ln \(attributes.length) but \(message.count) bytes")
    }

    /// The first byte picks a 1K or 4K card; the rest is its memory, zero-padded.
    static func mifareClassic(_ data: [UInt8]) throws(FuzzViolation) {
        guard let first = data.first else { return }
        let size = first & 1 == 0 ? 1024 : 4096
        var memory = Array(data.dropFirst().prefix(size))
        memory += [UInt8](repeating: 0, count: size - memory.count)
        if let contents = try? MifareClassicMemory.read(memory) {
            try check(contents.area.count <= size, .mifareClassic, "NDEF area larger than the card")
            if let message = contents.ndefMessage {
                try check(message.count <= contents.area.count, .mifareClassic, "message longer than its area")
            }
        }
        _ = MifareClassicMemory.ndef(partialArea: Array(data.dropFirst()), totalSize: data.count + Int(first))
    }

    static func dump(_ data: [UInt8]) throws(FuzzViolation) {
        guard let image = try? TagDump.load(data) else { return }
        _ = image.chip
        let readout = image.readNDEF()
        if let bytes = readout.messageBytes, case .success(let message)? = readout.message {
            try check((try? NDEFMessage(bytes: bytes)) == message, .dump, "readout's message differs from its bytes")
        }
    }

    // MARK: Locations, registries, scenarios

    private static func sane(_ region: CircularRegion?, _ target: FuzzTarget) throws(FuzzViolation) {
        guard let region else { return }
        let c = region.center
        try check((-90...90).contains(c.latitude) && (-180...180).contains(c.longitude), target, "center \(c) out of range")
        try check(region.radius > 0 && region.radius <= CircularRegion.defaultMaximumRadius, target, "radius \(region.radius)")
    }

    /// Accepted URLs give coordinates in range and a radius within the cap; the decoder does not
    /// depend on surrounding spaces.
    static func urlLocation(_ data: [UInt8]) throws(FuzzViolation) {
        let url = text(data)
        let location = try? URLLocation(url: url, defaultRadius: 25)
        try sane(location?.region, .urlLocation)
        let padded = try? URLLocation(url: " \(url) ", defaultRadius: 25)
        try check(padded == location, .urlLocation, "surrounding spaces changed the answer")
        if location != nil, let strict = try? URLLocation(url: url) {
            try check(strict.tagID == location?.tagID, .urlLocation, "the default radius changed the tag id")
        }
        // The verifier reads a registry tag's id straight from the URL's bytes: against a
        // registry that holds every id, the id it looks up must be the decoder's.
        var policy = VerificationPolicy()
        policy.defaultURLRadius = 25
        let scan = TagScan(readerID: "fuzz", uid: echoUID, tagType: .ntag213, url: url, time: Timestamp(nanosecondsSinceEpoch: 0))
        let expectation = Verifier(policy: policy, registry: EchoRegistry()).expectation(for: scan)
        switch (expectation, Result { () throws(URLLocationError) in try URLLocation(url: url, defaultRadius: 25) }) {
        case (.region(_, .registry, let id, _, _), .success(let decoded)):
            try check(
                id != nil && id == decoded.tagID, .urlLocation, "looked up \(id ?? "no id"), the URL names \(decoded.tagID ?? "none")")
        case (_, .success(let decoded)):
            try check(decoded.tagID == nil, .urlLocation, "the URL names \(decoded.tagID ?? "") but the registry was not asked for it")
        case (.decided(let verdict), .failure(let error)):
            try check(verdict.kind == .inconclusive(.invalidTagLocation(error)), .urlLocation, "a broken URL gave \(verdict.kind)")
        case (_, .failure(let error)):
            try check(false, .urlLocation, "a broken URL (\(error)) found a region")
        }
    }

    private static let echoUID = try! TagUID(hex: "04A1B2C3D4E5F6")

    /// Holds every id (a 10 m region named after it) and no UID.
    private struct EchoRegistry: TagRegistry {
        func entry(forID id: String) -> RegistryEntry? {
            let region = try! CircularRegion(center: Coordinate(validLatitude: 0, longitude: 0), radius: 10, identifier: id)
            return RegistryEntry(id: id, uid: nil, region: region, name: nil)
        }
        func entry(forUID uid: TagUID) -> RegistryEntry? { nil }
    }

    static func registryFile(_ data: [UInt8]) throws(FuzzViolation) {
        guard let registry = try? RegistryFile.parse(text(data)) else { return }
        for entry in registry.entries {
            try sane(entry.region, .registryFile)
            try check(registry.entry(forID: entry.id) == entry, .registryFile, "entry \(entry.id) not found by its id")
        }
    }

    static func scenario(_ data: [UInt8]) throws(FuzzViolation) {
        _ = try? ScenarioLoader.parse(text(data))
    }

    /// A TPV that becomes a fix has a position in range and a non-negative accuracy.
    static func gpsdReport(_ data: [UInt8]) throws(FuzzViolation) {
        // gpsd ends each report with CR LF; lines are split on the bytes, as a socket reader would.
        for line in data.split(separator: 0x0A) {
            guard case .tpv(let tpv)? = try? GPSDReport.parse(line: String(decoding: line, as: UTF8.self)) else { continue }
            guard case .success(let fix) = tpv.fix(satellitesUsed: 5) else { continue }
            if let c = fix.coordinate {
                try check((-90...90).contains(c.latitude) && (-180...180).contains(c.longitude), .gpsdReport, "fix at \(c)")
            }
            if let accuracy = fix.horizontalAccuracy {
                try check(accuracy >= 0 && accuracy.isFinite, .gpsdReport, "accuracy \(accuracy)")
            }
        }
    }

    // MARK: Emulator inputs

    /// The frame decoder gives the same events whether the bytes arrive at once or one by one,
    /// and never holds more than a frame's worth of bytes.
    static func pn532Frame(_ data: [UInt8]) throws(FuzzViolation) {
        var whole = PN532Frame.Decoder()
        let atOnce = whole.feed(data)
        var trickle = PN532Frame.Decoder()
        var oneByOne: [PN532Frame.Event] = []
        for index in data.indices { oneByOne += trickle.feed(data[index..<index + 1]) }
        try check(atOnce == oneByOne, .pn532Frame, "events depend on how the bytes arrive")
        try check(whole.pending <= PN532Frame.Decoder.maximumLength + 16, .pn532Frame, "\(whole.pending) bytes pending")
        for case .frame(let tfi, let payload) in atOnce {
            var again = PN532Frame.Decoder()
            try check(
                again.feed(PN532Frame.encode(tfi: tfi, payload)) == [.frame(tfi: tfi, data: payload)], .pn532Frame, "re-encoded frame")
        }
    }

    /// The tag's message, encoded once. (The tag itself is a class whose memory the commands
    /// write, so each input gets a new one.)
    private static let message = NDEFMessage(records: [.uri("https://example.org/t/A17?lat=52.52&lon=13.405&r=25")]).encoded()

    /// Host commands (each one a length byte and its bytes) to a chip with an NTAG213 in the
    /// field.
    static func pn532Chip(_ data: [UInt8]) {
        var chip = PN532Chip()
        if let tag = try? EmulatedType2Tag.ntag(213, message: message) {
            chip.slots = [.init(tag: tag, present: true)]
        }
        var rest = data[...]
        while let length = rest.first {
            let command = Array(rest.dropFirst().prefix(Int(length)))
            rest = rest.dropFirst(1 + Int(length))
            _ = chip.handle(command)
        }
    }

    /// The fault and NMEA scripts the emulators take with `--script`.
    static func emulatorScripts(_ data: [UInt8]) {
        let script = text(data)
        _ = try? FaultScript.parse(script, tagCount: 3)
        _ = try? NMEAScript.parse(script)
    }

    /// A route that parses has points in range and positions along it stay in range.
    static func route(_ data: [UInt8]) throws(FuzzViolation) {
        guard let route = try? Route.parse(text(data)) else { return }
        for metres in [0, 1, 1000, 1e7, -5] as [Double] {
            let p = route.position(at: metres)
            try check(
                (-90...90).contains(p.latitude) && (-180...180).contains(p.longitude), .route, "position \(p) at \(metres) m")
        }
    }

    // MARK: tagfix serve

    /// What an event-socket client sends: the framer gives the same commands whether the bytes
    /// arrive at once or one by one and never holds more than its limit; every command parses or
    /// is refused with a message; an accepted command written back the documented way parses
    /// to the same command. The HTTP request head parser takes the same bytes.
    /// A collector's message from the broker (anyone who can publish there): the one-pass scan
    /// answers only when the JSON parser gives the same four strings, and never takes what the
    /// parser refuses.
    static func fleetMessage(_ data: [UInt8]) throws(FuzzViolation) {
        let (quick, parsed) = data.withUnsafeBytes { (MessageScan.fields($0), FleetMessageFields.parsed($0)) }
        if let quick { try check(quick == parsed, .fleetMessage, "the scan found \(quick), the parser \(String(describing: parsed))") }
        if parsed == nil { try check(quick == nil, .fleetMessage, "the scan took what the parser refuses") }
    }

    static func serveCommand(_ data: [UInt8]) throws(FuzzViolation) {
        var whole = CommandFramer(limit: 256)
        let atOnce = whole.feed(data)
        var trickle = CommandFramer(limit: 256)
        var oneByOne: [CommandFramer.Piece] = []
        for index in data.indices { oneByOne += trickle.feed(data[index..<index + 1]) }
        try check(atOnce == oneByOne, .serveCommand, "commands depend on how the bytes arrive")
        try check(whole.pendingCount <= 256, .serveCommand, "\(whole.pendingCount) bytes pending")
        for case .command(let bytes) in atOnce {
            let command: ClientCommand
            do {
                command = try ClientCommand.parse(bytes)
            } catch {
                try check(!error.message.isEmpty, .serveCommand, "an error without a message")
                continue
            }
            let written: String
            switch command {
            case .watch(let enable?): written = "?WATCH={\"enable\":\(enable)};"
            case .watch(nil): written = "?WATCH;"
            case .poll: written = "?POLL;"
            case .devices: written = "?DEVICES;"
            case .version: written = "?VERSION;"
            case .auth(let token): written = "?AUTH=\(JSONValue.quoted(token));"
            }
            try check((try? ClientCommand.parse(written)) == command, .serveCommand, "\(command) written as \(written) parses otherwise")
        }
        if let end = HTTPRequest.headEnd(data), let request = try? HTTPRequest(head: data[..<end]) {
            try check(request.path.hasPrefix("/"), .serveCommand, "a request path \(request.path) not starting with /")
            // A header read by itself is the one the whole dictionary holds.
            for (name, value) in request.headers {
                try check(request.header(name) == value, .serveCommand, "header(\(name)) is not the headers' \(value)")
            }
        }
    }

    /// A phone tap's POST body (anyone who can reach `serve` sends it): a refusal says what is
    /// wrong; an accepted body has its position in range and a URL within bounds, and the body
    /// the page would send for it parses to the same request, which writes the same body.
    static func phoneTap(_ data: [UInt8]) throws(FuzzViolation) {
        let request: PhoneTapRequest
        do {
            request = try PhoneTapRequest(body: data)
        } catch {
            try check(!error.description.isEmpty, .phoneTap, "a refusal without a message")
            return
        }
        try check(data.count <= PhoneTapRequest.maximumBody, .phoneTap, "a body of \(data.count) bytes accepted")
        try check(request.url.utf8.count <= PhoneTapRequest.maximumURL, .phoneTap, "a URL of \(request.url.utf8.count) bytes")
        if case .fix(let coordinate, let accuracy) = request.position {
            try check(
                coordinate.latitude.isFinite && abs(coordinate.latitude) <= 90 && abs(coordinate.longitude) <= 180, .phoneTap,
                "a position out of range: \(coordinate)")
            try check(accuracy > 0 && accuracy <= PhoneTapRequest.maximumAccuracy, .phoneTap, "an accuracy of \(accuracy) m")
        }
        let body = request.body
        guard let again = try? PhoneTapRequest(body: Array(body.utf8)) else {
            throw FuzzViolation(target: FuzzTarget.phoneTap.rawValue, message: "\(body) written for an accepted tap is refused")
        }
        try check(again.body == body, .phoneTap, "\(body) reads back as \(again.body)")
    }
}
