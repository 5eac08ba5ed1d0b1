import Foundation
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixNDEF

/// `tagfix emulate pn532`: a PN532 on a pseudo-terminal, for labs and CI.
struct EmulateCommand: Subcommand {
    static let spec = CommandSpec(
        name: "emulate",
        abstract:
            "Emulate hardware: a PN532 NFC reader on a pseudo-terminal (emulate pn532), a card behind pcscd's virtual reader (emulate pcsc) or a GNSS receiver (emulate nmea).",
        discussion: """
            emulate pn532 opens a pseudo-terminal and answers on it as a PN532 does over its UART, \
            presenting the tags of the dumps given with --tag (Flipper .nfc, Proxmark3 JSON, \
            nfc-mfultralight binary, TagFix tag JSON). Point libnfc at it with \
            LIBNFC_DEVICE=pn532_uart:PATH, or tagfix scan --reader pn532_uart:PATH.
            emulate pcsc presents the same dumps as a contactless card behind pcscd's virtual reader \
            (Debian vsmartcard-vpcd): it connects to vpcd's --port (default 35963, the system \
            pcscd's vpcd) and answers as a PC/SC Part 3 reader (ATR, GET DATA, READ/UPDATE BINARY) \
            of the --model family: its raw pass-through (ACS's direct transmit, PC/SC Part 3 \
            Transparent Exchange, or none) and, with --pcscd, the reader name pcscd lists. With \
            --pcscd it starts a private pcscd and prints the PCSCLITE_CSOCK_NAME its clients need; \
            a removed tag stays away 1 s, as pcscd needs to see it go.
            emulate nmea writes NMEA 0183 (GGA, GSA, GST, RMC, GSV, with checksums) at --rate, from \
            --at LAT,LON or along a --route (GeoJSON LineString or GPX track, at --speed), with \
            --noise metres and --seed, or from a recorded --log. The noise has memory, as the sky's \
            does: a slow error per axis (first-order Gauss–Markov, σ --noise, correlation time --tau, \
            default 180 s) with --jitter on top; --multipath M adds a reflected signal switching on \
            (the position jumps by about M metres) and off (the bias decays) every --multipath-on / \
            --multipath-off seconds on average; --settle M starts M metres off, converging over a few \
            seconds as a receiver does after lock. The receiver's stated σ (GST, and HDOP: gpsd's \
            eph) follows the slow error and the jitter, not the multipath bias. --errors independent \
            gives the old independent noise at every epoch instead. Point gpsd at it: \
            gpsd -N -n -b -S 2948 PATH, or add --gpsd to start a private gpsd and print its \
            gpsd:// URL. See hardware.md#emulators.
            Both run, script or no script, until SIGINT (Ctrl-C), SIGTERM or SIGQUIT (Ctrl-\\), \
            or a script's hangup; then they remove the --link, stop the private gpsd, close the \
            pty and exit 0.
            """,
        options: [
            .init(
                name: "tag", valueName: "FILE",
                help: "A tag dump to present (repeat for more tags; they take turns, the next for each new reader session).",
                repeatable: true),
            .init(name: "link", valueName: "PATH", help: "Also make PATH a symbolic link to the pty."),
            .init(name: "baud", valueName: "N", help: "Simulate the line's speed (10 bits per byte); default: no delay."),
            .init(
                name: "script", valueName: "FILE",
                help:
                    "Faults on a timeline. pn532, pcsc: remove/present N, remove-after N, hang, resume, corrupt, hangup; pn532 also weak N RATE [LOSS]. nmea: no-fix, fix, degrade M, normal, silent, talk, garbage N, jump S."
            ),
            .init(name: "port", valueName: "N", help: "pcsc: vpcd's port (the reader's CHANNELID); default 35963."),
            .init(name: "pcscd", valueName: nil, help: "pcsc: also start a private pcscd with vpcd and print its socket."),
            .init(
                name: "model", valueName: "NAME",
                help:
                    "pcsc: the reader family to answer as: \(PCSCPart3Reader.Model.allCases.map(\.rawValue).joined(separator: ", ")); default virtual (vpcd with ACS's direct transmit); plain has no pass-through."
            ),
            .init(name: "at", valueName: "LAT,LON", help: "nmea: the receiver's position."),
            .init(name: "route", valueName: "FILE", help: "nmea: walk a GeoJSON LineString or GPX track."),
            .init(name: "speed", valueName: "M/S", help: "nmea: walking speed along --route; default 1.4."),
            .init(
                name: "log", valueName: "FILE",
                help:
                    "nmea: replay a recorded NMEA log, over and over as gpsfake does (each pass starts a new stream); --once plays it once."
            ),
            .init(name: "once", valueName: nil, help: "nmea: with --log, play the log once, then fall silent."),
            .init(name: "rate", valueName: "HZ", help: "nmea: epochs per second; default 1."),
            .init(
                name: "noise", valueName: "M",
                help: "nmea: position noise, σ metres per axis; default 1.5 (an open-sky DGPS fix, which gpsd rates ±3 m)."),
            .init(name: "seed", valueName: "N", help: "nmea: seed of the noise; pn532: of the weak tags' faults; default 1."),
            .init(
                name: "weak-tag", valueName: "N:RATE[:LOSS]",
                help:
                    "pn532: tag N (from 0) reads badly: RATE of its exchanges fail on the air (RF time-out, CRC, parity, framing), LOSS of them brown it out until selected again; e.g. 0:0.3 (repeat for more tags).",
                repeatable: true),
            .init(
                name: "errors", valueName: "KIND",
                help: "nmea: correlated (errors with memory, the default) or independent (new noise at every epoch)."),
            .init(name: "tau", valueName: "S", help: "nmea: correlation time of the slow error, seconds; default 180."),
            .init(name: "jitter", valueName: "M", help: "nmea: white noise on top of the slow error, σ metres per axis; default 0.2."),
            .init(name: "multipath", valueName: "M", help: "nmea: multipath episodes whose bias is about M metres; default none."),
            .init(name: "multipath-on", valueName: "S", help: "nmea: mean length of a multipath episode, seconds; default 8."),
            .init(name: "multipath-off", valueName: "S", help: "nmea: mean clear time between multipath episodes, seconds; default 20."),
            .init(name: "settle", valueName: "M", help: "nmea: start M metres off, converging (time constant 4 s) as after lock."),
            .init(name: "gpsd", valueName: nil, help: "nmea: also start a private gpsd on the pty and print its gpsd:// URL."),
        ],
        positionals: [.init(name: "DEVICE", help: "What to emulate: pn532, pcsc or nmea.")],
        examples: [
            "tagfix emulate pn532 --tag Call_112.nfc --link /tmp/pn532",
            "LIBNFC_DEVICE=pn532_uart:/tmp/pn532 nfc-list",
            "tagfix emulate pcsc --tag Call_112.nfc --pcscd",
            "tagfix emulate pcsc --tag Call_112.nfc --pcscd --model omnikey5422",
            "tagfix emulate nmea --at 53.545,9.966 --rate 5 --gpsd",
            "tagfix emulate nmea --at 53.545,9.966 --noise 2 --tau 300 --multipath 8 --gpsd",
        ])

    var device: String
    var nmea: NMEAOptions?
    var tags: [String]
    var link: String?
    var baud: Int?
    var script: String?
    var port: Int?
    var privatePCSCD: Bool
    var model: PCSCPart3Reader.Model
    /// pn532: --weak-tag, and the --seed their faults are drawn from.
    var weak: [WeakTag] = []
    var seed: UInt64 = 1

    init(_ arguments: ParsedArguments) throws(CLIError) {
        device = arguments.positionals[0]
        guard ["pn532", "pcsc", "nmea"].contains(device) else {
            throw .usage("tagfix emulates pn532, pcsc or nmea, not \"\(device)\"", command: "emulate")
        }
        tags = arguments.all("tag")
        if device == "nmea" {
            nmea = try NMEAOptions(arguments)
        } else {
            guard !tags.isEmpty else { throw .usage("emulate \(device) needs at least one --tag FILE", command: "emulate") }
        }
        port = try arguments.number("port", in: 1...65534, command: "emulate").map { Int($0) }
        privatePCSCD = arguments.flag("pcscd")
        let modelName = arguments.value("model") ?? PCSCPart3Reader.Model.virtual.rawValue
        guard let chosen = PCSCPart3Reader.Model(rawValue: modelName.lowercased()) else {
            let known = PCSCPart3Reader.Model.allCases.map(\.rawValue).joined(separator: ", ")
            throw .usage("--model is one of \(known), not \"\(modelName)\"", command: "emulate")
        }
        guard device == "pcsc" || arguments.value("model") == nil else {
            throw .usage("--model is for emulate pcsc", command: "emulate")
        }
        model = chosen
        link = arguments.value("link")
        baud = try arguments.number("baud", in: 300...4_000_000, command: "emulate").map { Int($0) }
        script = arguments.value("script")
        for text in arguments.all("weak-tag") {
            guard device == "pn532" else { throw .usage("--weak-tag is for emulate pn532", command: "emulate") }
            switch WeakTag.parse(text.split(separator: ":", omittingEmptySubsequences: false).map(String.init), tagCount: tags.count) {
            case .success(let tag): weak.append(tag)
            case .failure(let problem): throw .usage("--weak-tag \(text): \(problem.message)", command: "emulate")
            }
        }
        if device == "pn532" { seed = UInt64(try arguments.number("seed", in: 0...1e15, command: "emulate") ?? 1) }
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        // From the start: a signal while the emulator comes up also removes the link.
        let stop = StopSignals(EmulatorLab.stopSignals)
        defer { stop.cancel() }
        do throws(EmulatorLabError) {
            if let nmea { return try await nmea.run(io, link: link, stop: stop) }
            if device == "pcsc" { return try await runPCSC(io, stop: stop) }
            let lab = try PN532Lab(tagFiles: tags, script: script, baud: baud, weak: weak, seed: seed)
            try await EmulatorLab.stopping({ await lab.emulator.stopped() }) { () throws(EmulatorLabError) in
                try EmulatorLab.makeLink(link, to: lab.emulator.path)
                defer { if let link { try? FileManager.default.removeItem(atPath: link) } }
                io.out("PN532 emulator on \(lab.emulator.path)" + (link.map { " (link \($0))" } ?? ""))
                for (index, image) in lab.images.enumerated() {
                    let weakness = weak.last { $0.tag == index }.map {
                        " (weak: \(Coordinate.format($0.rfErrorRate * 100, 0)) % RF errors, \(Coordinate.format($0.lossRate * 100, 0)) % losses)"
                    }
                    io.out("  tag \(image.uid?.hex ?? "?") \(image.chip.name)\(weakness ?? "")")
                }
                io.out("connstring: pn532_uart:\(link ?? lab.emulator.path)")
                await lab.run(until: stop) { io.err($0) }
            }
        } catch {
            switch error {
            case .file(let error): throw .file(error)
            case .unavailable(let message): throw .unavailable(message)
            }
        }
    }
}

extension EmulateCommand {
    /// `emulate pcsc`: the card behind vpcd, and the private pcscd with --pcscd (its exit awaited
    /// at the end: nothing blocks a thread of the pool).
    func runPCSC(_ io: some TerminalOutput, stop: StopSignals) async throws(EmulatorLabError) {
        let files = try PCSCLab.load(tagFiles: tags, script: script)
        guard privatePCSCD else { return try await runPCSC(io, stop: stop, files: files, pcscd: nil) }
        let pcscd: PrivatePCSCD
        do {
            pcscd = try await PrivatePCSCD.start(friendlyName: model.friendlyName)
        } catch {
            throw .unavailable(error.description)
        }
        do {
            try await runPCSC(io, stop: stop, files: files, pcscd: pcscd)
        } catch {
            await pcscd.stop()
            throw error
        }
        await pcscd.stop()
    }

    private func runPCSC(_ io: some TerminalOutput, stop: StopSignals, files: PCSCLab.Files, pcscd: PrivatePCSCD?)
        async throws(EmulatorLabError)
    {
        let lab = try PCSCLab(files, port: pcscd?.port ?? port, model: model)
        io.out(
            "PC/SC card for vpcd on port \(lab.emulator.options.port), answering as \(model.rawValue) (pass-through: \(model.passThrough.rawValue))"
        )
        for image in lab.images {
            io.out("  tag \(image.uid?.hex ?? "?") \(image.chip.name)")
        }
        if let pcscd { io.out("pcscd: PCSCLITE_CSOCK_NAME=\(pcscd.socketPath)") }
        // Without --pcscd the system pcscd's reader.conf names the reader, whatever the model.
        io.out("reader: pcsc:\(pcscd?.readerName ?? PrivatePCSCD.readerName)")
        await lab.run(until: stop) { io.err($0) }
        await lab.stopped()
    }
}

/// `tagfix emulate nmea`.
struct NMEAOptions: Sendable {
    var position: Coordinate?
    var log: String?
    var once = false
    var route: String?
    var speed: Double
    var rate: Double
    var noise: Double
    var seed: UInt64
    var sky: GNSSErrorModel.Sky
    var startGPSD: Bool
    var script: String?

    init(_ arguments: ParsedArguments) throws(CLIError) {
        script = arguments.value("script")
        if let at = arguments.value("at") {
            let parts = at.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 2, let lat = parts[0], let lon = parts[1], let coordinate = try? Coordinate(latitude: lat, longitude: lon)
            else {
                throw .usage("--at \(at) must be LAT,LON in degrees (e.g. 53.545,9.966)", command: "emulate")
            }
            position = coordinate
        }
        log = arguments.value("log")
        once = arguments.flag("once")
        route = arguments.value("route")
        guard [position != nil, log != nil, route != nil].filter({ $0 }).count == 1 else {
            throw .usage("emulate nmea needs exactly one of --at LAT,LON, --route FILE or --log FILE", command: "emulate")
        }
        speed = try arguments.number("speed", in: 0.01...1000, command: "emulate") ?? 1.4
        rate = try arguments.number("rate", in: 0.1...20, command: "emulate") ?? 1
        noise = try arguments.number("noise", in: 0...1000, command: "emulate") ?? 1.5
        seed = UInt64(try arguments.number("seed", in: 0...1e15, command: "emulate") ?? 1)
        sky = try Self.sky(arguments)
        startGPSD = arguments.flag("gpsd")
    }

    /// --errors, --tau, --jitter, --multipath…, --settle.
    static func sky(_ arguments: ParsedArguments) throws(CLIError) -> GNSSErrorModel.Sky {
        let shaping = ["tau", "jitter", "multipath", "multipath-on", "multipath-off", "settle"]
        switch arguments.value("errors") ?? "correlated" {
        case "independent":
            if let given = shaping.first(where: { arguments.value($0) != nil }) {
                throw .usage("--\(given) shapes correlated errors: it cannot go with --errors independent", command: "emulate")
            }
            return .independent
        case "correlated": break
        case let other: throw .usage("--errors is correlated or independent, not \"\(other)\"", command: "emulate")
        }
        var sky = GNSSErrorModel.Sky.open
        sky.correlationTime = try arguments.number("tau", in: 0.1...86_400, command: "emulate") ?? sky.correlationTime
        sky.jitter = try arguments.number("jitter", in: 0...100, command: "emulate") ?? sky.jitter
        let on = try arguments.number("multipath-on", in: 0.1...86_400, command: "emulate")
        let off = try arguments.number("multipath-off", in: 0.1...86_400, command: "emulate")
        if let magnitude = try arguments.number("multipath", in: 0.1...1000, command: "emulate") {
            sky.multipath = GNSSErrorModel.Multipath(magnitude: magnitude, meanOn: on ?? 8, meanOff: off ?? 20)
        } else if on != nil || off != nil {
            throw .usage("--multipath-on and --multipath-off need --multipath M", command: "emulate")
        }
        if let offset = try arguments.number("settle", in: 0.1...1000, command: "emulate") {
            sky.settling = GNSSErrorModel.Settling(offset: offset)
        }
        return sky
    }

    func run(_ io: some TerminalOutput, link: String?, stop: StopSignals) async throws(EmulatorLabError) {
        let origin: NMEALab.Origin
        if let log {
            origin = .log(file: log, once: once)
        } else if let route {
            origin = .route(file: route, speed: speed)
        } else {
            origin = .at(position ?? Coordinate(validLatitude: 0, longitude: 0))
        }
        let lab = try NMEALab(origin: origin, rate: rate, noise: noise, seed: seed, sky: sky, script: script)
        try await EmulatorLab.stopping({ await lab.emulator.stopped() }) { () throws(EmulatorLabError) in
            try EmulatorLab.makeLink(link, to: lab.emulator.path)
            defer { if let link { try? FileManager.default.removeItem(atPath: link) } }
            io.out("NMEA emulator on \(lab.emulator.path)" + (link.map { " (link \($0))" } ?? ""))
            guard startGPSD else { return await lab.run(until: stop) { io.err($0) } }
            let gpsd: PrivateGPSD
            do throws(DaemonError) {
                gpsd = try await PrivateGPSD.start(device: lab.emulator.path)
            } catch {
                throw .unavailable(error.description)
            }
            io.out("gpsd: gpsd://127.0.0.1:\(gpsd.port)")
            await lab.run(until: stop) { io.err($0) }
            // Its exit awaited, not waited for on a thread of the pool.
            await gpsd.stop()
        }
    }
}
