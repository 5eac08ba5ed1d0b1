import Foundation
public import TagFixCore
public import TagFixDevices
public import TagFixNDEF

/// Why `tagfix emulate` could not start its emulator.
public enum EmulatorLabError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A dump, script, route or log that is missing or malformed (the file and line named).
    case file(DataFileError)
    /// The pty, the link or gpsd could not be had.
    case unavailable(String)

    public var description: String {
        switch self {
        case .file(let error): error.description
        case .unavailable(let message): message
        }
    }
}

/// `tagfix emulate pn532`: a PN532 emulator on a pty presenting the tags of dump files, with an
/// optional fault script. The CLI parses the options and prints; this starts and runs it.
public struct PN532Lab: Sendable {
    public let emulator: PN532Emulator
    public let images: [TagImage]
    let faults: FaultScript?

    /// Loads the dumps and the script, then starts the emulator, with the `weak` tags weak from
    /// the start (their faults drawn from `seed`).
    public init(tagFiles: [String], script: String?, baud: Int?, weak: [WeakTag] = [], seed: UInt64 = 1) throws(EmulatorLabError) {
        let images = try Self.loadDumps(tagFiles)
        faults = try Self.loadScript(script, tagCount: images.count)
        do {
            emulator = try PN532Emulator(dumps: images, options: .init(baud: baud, seed: seed))
        } catch {
            throw .unavailable(error.description)
        }
        for tag in weak {
            guard images.indices.contains(tag.tag) else {
                emulator.stop()
                throw .unavailable("--weak-tag \(tag.tag): there is no tag \(tag.tag) (tags are numbered from 0)")
            }
            emulator.setWeak(rfErrorRate: tag.rfErrorRate, lossRate: tag.lossRate, tag: tag.tag)
        }
        self.images = images
    }

    /// Runs until one of `stop`'s signals (or a scripted hang-up), telling `note` each script step.
    public func run(until stop: StopSignals, note: @escaping @Sendable (String) -> Void) async {
        let emulator = self.emulator
        await EmulatorLab.runUntilInterrupted(
            stop, script: faults?.steps.map { ($0.at, $0.line, "\($0.action)", $0.action) } ?? [], note: note
        ) {
            emulator.apply($0)
        }
    }
}

extension PN532Lab {
    /// The tag dumps `--tag` names, in order.
    static func loadDumps(_ tagFiles: [String]) throws(EmulatorLabError) -> [TagImage] {
        var images: [TagImage] = []
        for path in tagFiles {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw .file(DataFileError(file: path, line: nil, message: "no such file or not readable", unreadable: true))
            }
            do {
                images.append(try TagDump.load(Array(data)))
            } catch {
                throw .file(error.inFile(path))
            }
        }
        return images
    }

    /// The fault script `--script` names, if any.
    static func loadScript(_ script: String?, tagCount: Int) throws(EmulatorLabError) -> FaultScript? {
        guard let script else { return nil }
        do {
            return try FaultScript.parse(try TextFile.read(script), tagCount: tagCount)
        } catch {
            throw .file(error.file == nil ? error.inFile(script) : error)
        }
    }
}

/// `tagfix emulate pcsc`: a contactless card behind pcscd's virtual reader (vpcd), from dump
/// files, with the PN532 emulator's fault script. A private pcscd (`--pcscd`) is the CLI's to
/// start (TagFixDaemons' `PrivatePCSCD`), between `load` and the card.
public struct PCSCLab: Sendable {
    /// The port of Debian's own vpcd reader (/etc/reader.conf.d/vpcd: CHANNELID 0x8C7B).
    public static let systemVPCDPort = 0x8C7B

    public let emulator: VPCDEmulator
    public let images: [TagImage]
    let faults: FaultScript?

    /// The dumps and the fault script, read and checked.
    public struct Files: Sendable {
        public let images: [TagImage]
        let faults: FaultScript?
    }

    /// Loads the dumps and the script (before any pcscd is started).
    public static func load(tagFiles: [String], script: String?) throws(EmulatorLabError) -> Files {
        let images = try PN532Lab.loadDumps(tagFiles)
        let faults = try PN532Lab.loadScript(script, tagCount: images.count)
        for step in faults?.steps ?? [] {
            if case .weak = step.action {
                throw .file(
                    DataFileError(
                        file: script, line: step.line,
                        message: "weak is a fault of the PN532 emulator's air link; vpcd's card has none (use emulate pn532)"))
            }
        }
        return Files(images: images, faults: faults)
    }

    /// Starts the card of `files` for vpcd on `port` (Debian's own vpcd reader's when `nil`).
    /// - Parameter model: the reader family the card answers as.
    public init(_ files: Files, port: Int?, model: PCSCPart3Reader.Model = .virtual) throws(EmulatorLabError) {
        images = files.images
        faults = files.faults
        do {
            emulator = try VPCDEmulator(dumps: images, options: .init(port: port ?? Self.systemVPCDPort, model: model))
        } catch {
            throw .unavailable(error.description)
        }
    }

    /// Runs until one of `stop`'s signals (or a scripted hang-up), telling `note` each script step.
    public func run(until stop: StopSignals, note: @escaping @Sendable (String) -> Void) async {
        let emulator = self.emulator
        await EmulatorLab.runUntilInterrupted(
            stop, script: faults?.steps.map { ($0.at, $0.line, "\($0.action)", $0.action) } ?? [], note: note
        ) {
            emulator.apply($0)
        }
    }

    /// Stops the card: returns at once (`VPCDEmulator.stop()`).
    public func stop() {
        emulator.stop()
    }

    /// Stops the card and returns once it has left and its loop has ended.
    public func stopped() async {
        await emulator.stopped()
    }
}

/// `tagfix emulate nmea`: an NMEA emulator on a pty from a position, a route or a recorded log,
/// with an optional fault script (a private gpsd reading it is the CLI's to start: TagFixDaemons).
public struct NMEALab: Sendable {
    /// Where the receiver's sentences come from.
    public enum Origin: Sendable, Hashable {
        case at(Coordinate)
        /// A GeoJSON LineString or GPX track file, walked at `speed` m/s.
        case route(file: String, speed: Double)
        /// A recorded NMEA log file, played over and over, or once.
        case log(file: String, once: Bool)
    }

    public let emulator: NMEAEmulator
    let faults: NMEAScript?

    /// Reads the route, log and script, then creates the emulator (not yet talking: `start`).
    public init(
        origin: Origin, rate: Double, noise: Double, seed: UInt64, sky: GNSSErrorModel.Sky = .open, script: String?
    ) throws(EmulatorLabError) {
        let source: NMEAEmulator.Source
        switch origin {
        case .log(let log, _):
            do {
                source = .log(try TextFile.read(log).split(whereSeparator: \.isNewline).map(String.init))
            } catch {
                throw .file(error)
            }
        case .route(let route, let speed):
            do {
                source = .route(try Route.parse(try TextFile.read(route)), speed: speed, noise: noise, seed: seed, sky: sky)
            } catch {
                throw .file(error.file == nil ? error.inFile(route) : error)
            }
        case .at(let position):
            source = .at(position, noise: noise, seed: seed, sky: sky)
        }
        if let script {
            do {
                faults = try NMEAScript.parse(try TextFile.read(script))
            } catch {
                throw .file(error.file == nil ? error.inFile(script) : error)
            }
        } else {
            faults = nil
        }
        do {
            emulator = try NMEAEmulator(source: source, rate: rate)
        } catch {
            throw .unavailable(error.description)
        }
        if case .log(_, let once) = origin { emulator.setRepeatsLog(!once) }
    }

    /// Starts talking and runs until one of `stop`'s signals, telling `note` each script step.
    public func run(until stop: StopSignals, note: @escaping @Sendable (String) -> Void) async {
        let emulator = self.emulator
        emulator.start()
        await EmulatorLab.runUntilInterrupted(
            stop, script: faults?.steps.map { ($0.at, $0.line, "\($0.action)", $0.action) } ?? [], note: note
        ) {
            emulator.apply($0)
            return true
        }
    }
}

public enum EmulatorLab {
    /// The emulators stop on SIGQUIT too (Ctrl-\): they hold nothing a core dump would explain.
    public static let stopSignals = StopSignals.standard + [SIGQUIT]

    /// Runs `body`, then stops an emulator with `stop` (its `stopped()`: awaited, no thread
    /// blocked), whether `body` returns or throws.
    public static func stopping<Failure: Error>(
        _ stop: @Sendable () async -> Void, isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws(Failure) -> Void
    ) async throws(Failure) {
        do {
            try await body()
        } catch {
            await stop()
            throw error
        }
        await stop()
    }

    /// Makes `link` (if given) a symbolic link to `path`, replacing an old link.
    public static func makeLink(_ link: String?, to path: String) throws(EmulatorLabError) {
        guard let link else { return }
        try? FileManager.default.removeItem(atPath: link)
        do {
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
        } catch {
            throw .unavailable("cannot create the link \(link): \(error.localizedDescription)")
        }
    }

    /// Runs until one of `stop`'s signals, carrying out the script's steps at their times meanwhile;
    /// an action that returns false (a hang-up) ends the run early.
    static func runUntilInterrupted<Action: Sendable>(
        _ stop: StopSignals, script steps: [(at: Duration, line: Int, text: String, action: Action)],
        note: @escaping @Sendable (String) -> Void, apply: @escaping @Sendable (Action) -> Bool
    ) async {
        guard !steps.isEmpty else {
            _ = await stop.wait()
            return
        }
        _ = await stop.run {
            // The monotonic clock's timer, not Task.sleep: a script keeps its timeline under a wrong or
            // faked wall clock too.
            let clock = MonotonicClock()
            let start = clock.now
            for step in steps {
                try? await clock.sleep(until: start.advanced(by: step.at), tolerance: nil)
                if Task.isCancelled { return }
                note("script line \(step.line): \(step.text)")
                if !apply(step.action) { return }
            }
            // The script is done: the emulator runs on until a signal.
            _ = await stop.wait()
        }
    }
}
