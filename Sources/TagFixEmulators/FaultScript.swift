public import TagFixCore

/// Faults on a timeline for the PN532 emulator (`tagfix emulate pn532 --script FILE`).
///
/// One step per line: seconds after start, an action, its argument. `#` starts a comment.
///
///     2.0   remove        0     # tag 0 leaves the field
///     3.5   present       0     # and comes back
///     5     remove-after  2     # the tags answer 2 more exchanges, then leave (pulled mid-read)
///     6     hang                # the reader stops answering
///     7     resume              # and answers again
///     8     corrupt             # the next reply has a broken checksum
///     9     hangup              # the line goes away (reader unplugged); the emulator exits
///     0     weak    0  0.3      # tag 0 reads badly: 30 % of its exchanges fail on the air
///     0     weak    1  0.2 0.1  # tag 1: 20 % RF errors, and 10 % of exchanges it browns out
///     10    weak    0  0        # tag 0 reads well again
///
/// A weak tag's faults are drawn from the emulator's seed (`--seed`): the same on every run.
public struct FaultScript: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        case remove(tag: Int)
        case present(tag: Int)
        case removeAfter(exchanges: Int)
        case hang
        case resume
        case corrupt
        case hangUp
        /// Tag `tag` reads badly from now on (`PN532Emulator.setWeak`); rates of 0: well again.
        case weak(tag: Int, rfErrorRate: Double, lossRate: Double)
    }

    public struct Step: Sendable, Hashable {
        public var at: Duration
        public var action: Action
        public var line: Int
    }

    public var steps: [Step]

    /// Parses a script; steps are sorted by time.
    /// - Throws: `DataFileError` naming the line.
    public static func parse(_ text: String, tagCount: Int) throws(DataFileError) -> FaultScript {
        var steps: [Step] = []
        for line in try ScriptLine.parse(text) {
            func number(_ what: String) throws(DataFileError) -> Int {
                guard line.arguments.count == 1, let value = Int(line.arguments[0]), value >= 0 else {
                    throw DataFileError(line: line.number, message: "\(line.action) needs \(what)")
                }
                return value
            }
            let action: Action
            switch line.action {
            case "remove", "present":
                let tag = try number("a tag number")
                guard tag < tagCount else {
                    throw DataFileError(line: line.number, message: "there is no tag \(tag) (tags are numbered from 0)")
                }
                action = line.action == "remove" ? .remove(tag: tag) : .present(tag: tag)
            case "remove-after": action = .removeAfter(exchanges: try number("a number of exchanges"))
            case "hang": try line.noArguments(); action = .hang
            case "resume": try line.noArguments(); action = .resume
            case "corrupt": try line.noArguments(); action = .corrupt
            case "hangup": try line.noArguments(); action = .hangUp
            case "weak":
                switch WeakTag.parse(line.arguments, tagCount: tagCount) {
                case .success(let weak): action = .weak(tag: weak.tag, rfErrorRate: weak.rfErrorRate, lossRate: weak.lossRate)
                case .failure(let problem): throw DataFileError(line: line.number, message: "weak: \(problem.message)")
                }
            default:
                throw DataFileError(
                    line: line.number,
                    message: "unknown action \"\(line.action)\" (remove, present, remove-after, hang, resume, corrupt, hangup, weak)")
            }
            steps.append(Step(at: line.at, action: action, line: line.number))
        }
        return FaultScript(steps: steps.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element))
    }
}

/// A weak tag for the PN532 emulator, as a script's `weak TAG RATE [LOSS]` and `emulate pn532
/// --weak-tag TAG:RATE[:LOSS]` give it: the tag's number (from 0), the share of its exchanges that
/// fail on the air, and the share after which it browns out until selected again.
public struct WeakTag: Sendable, Hashable {
    public var tag: Int
    public var rfErrorRate: Double
    public var lossRate: Double

    public struct Problem: Error, Sendable, Hashable {
        public var message: String
    }

    /// Parses the words `TAG RATE [LOSS]`; rates are shares from 0 to 1 (or percentages: `30%`).
    public static func parse(_ words: [String], tagCount: Int) -> Result<WeakTag, Problem> {
        let usage = Problem(message: "needs a tag number, a rate of RF errors and optionally a rate of losses, e.g. weak 0 0.3 or 0:30%")
        guard (2...3).contains(words.count), let tag = Int(words[0]), tag >= 0 else { return .failure(usage) }
        guard tag < tagCount else { return .failure(Problem(message: "there is no tag \(tag) (tags are numbered from 0)")) }
        func rate(_ word: String) -> Double? {
            let percent = word.hasSuffix("%")
            guard let value = Double(percent ? String(word.dropLast()) : word), value.isFinite else { return nil }
            let share = percent ? value / 100 : value
            return (0...1).contains(share) ? share : nil
        }
        guard let rf = rate(words[1]), let loss = words.count == 3 ? rate(words[2]) : 0 else {
            return .failure(Problem(message: "rates are shares from 0 to 1 (or 0% to 100%)"))
        }
        guard rf + loss <= 1 else { return .failure(Problem(message: "the two rates add up to more than 1")) }
        return .success(WeakTag(tag: tag, rfErrorRate: rf, lossRate: loss))
    }
}

/// One line of an emulator script: seconds after start, an action, its arguments; `#` comments.
public struct ScriptLine: Sendable, Hashable {
    public var number: Int
    public var at: Duration
    public var action: String
    public var arguments: [String]

    /// The script's steps, blank lines and comments left out.
    public static func parse(_ text: String) throws(DataFileError) -> [ScriptLine] {
        var lines: [ScriptLine] = []
        // Lines end in LF or CR LF. Lines, comments and words are cut on the bytes (LF, "#",
        // space, tab and CR are single bytes that never occur inside a multi-byte character),
        // which is several times cheaper than breaking the text into Characters; a CR is blank
        // space like a tab.
        let bytes = Array(text.utf8)
        for (index, line) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let content = line.prefix { $0 != UInt8(ascii: "#") }
            let words = content.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }).map {
                String(decoding: $0, as: UTF8.self)
            }
            guard !words.isEmpty else { continue }
            guard let seconds = Double(words[0]), seconds >= 0, let at = Duration.seconds(exactly: seconds) else {
                throw DataFileError(line: number, message: "\"\(words[0])\" is not a time in seconds")
            }
            guard words.count >= 2 else { throw DataFileError(line: number, message: "an action must follow the time") }
            lines.append(ScriptLine(number: number, at: at, action: words[1], arguments: Array(words.dropFirst(2))))
        }
        return lines
    }

    func noArguments() throws(DataFileError) {
        guard arguments.isEmpty else { throw DataFileError(line: number, message: "\(action) takes no argument") }
    }
}

/// Faults for the NMEA emulator (`tagfix emulate nmea --script FILE`):
///
///     5    no-fix          # the receiver loses its fix
///     9    fix             # and regains it
///     12   degrade  40     # σ = 40 m per axis
///     15   normal          # back to its usual accuracy
///     18   silent          # stops talking
///     21   talk
///     24   garbage  3      # three lines of garbage
///     27   jump     86400  # its clock jumps a day (also 86400s)
///     30   jump     800m   # its position jumps 800 m east (jump 800m 45: north-east), and stays
///     33   teleport 53.545 9.966  # it reports this place from now on, accuracy unchanged
///
/// `jump …m` and `teleport` are a GPS that lies: the position moves farther than anyone walks or
/// drives between two fixes while the reported accuracy stays small (`untrusted(gps_jump)`).
public struct NMEAScript: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        case fixLost(Bool)
        case degrade(sigma: Double?)
        case silent(Bool)
        case garbage(lines: Int)
        case jump(seconds: Double)
        /// The position is displaced by `metres` towards `bearing` (degrees from north), from now on.
        case displace(metres: Double, bearing: Double)
        /// The position is this place from now on.
        case teleport(Coordinate)
    }

    public struct Step: Sendable, Hashable {
        public var at: Duration
        public var action: Action
        public var line: Int
    }

    public var steps: [Step]

    /// The most lines one `garbage` step sends.
    public static let maximumGarbageLines = 100_000
    /// The largest `jump`, seconds either way (about 30 years; a receiver's week-rollover bug is
    /// 19.6 years).
    public static let maximumJump = 1e9
    /// The largest position `jump`, metres (half the Earth's circumference).
    public static let maximumDisplacement = 20_000_000.0

    public static func parse(_ text: String) throws(DataFileError) -> NMEAScript {
        var steps: [Step] = []
        for line in try ScriptLine.parse(text) {
            func value(_ text: String? = nil) throws(DataFileError) -> Double {
                guard line.arguments.count == 1, let value = Double(text ?? line.arguments[0]), value.isFinite else {
                    throw DataFileError(line: line.number, message: "\(line.action) needs a number")
                }
                return value
            }
            let action: Action
            switch line.action {
            case "no-fix": try line.noArguments(); action = .fixLost(true)
            case "fix": try line.noArguments(); action = .fixLost(false)
            case "degrade":
                let sigma = try value()
                guard sigma > 0 else { throw DataFileError(line: line.number, message: "degrade needs a σ above 0 metres") }
                action = .degrade(sigma: sigma)
            case "normal": try line.noArguments(); action = .degrade(sigma: nil)
            case "silent": try line.noArguments(); action = .silent(true)
            case "talk": try line.noArguments(); action = .silent(false)
            case "garbage":
                // A whole number of lines, bounded: converting an arbitrary Double to Int traps
                // (the fuzzer found "garbage 333333333333333333333333").
                let lines = try value()
                guard lines.rounded() == lines, (1...Double(NMEAScript.maximumGarbageLines)).contains(lines) else {
                    throw DataFileError(
                        line: line.number, message: "garbage needs a whole number of lines from 1 to \(NMEAScript.maximumGarbageLines)")
                }
                action = .garbage(lines: Int(lines))
            case "jump" where line.arguments.first?.hasSuffix("m") == true:
                guard (1...2).contains(line.arguments.count), let metres = Double(line.arguments[0].dropLast()), metres.isFinite,
                    abs(metres) <= NMEAScript.maximumDisplacement
                else {
                    throw DataFileError(
                        line: line.number,
                        message: "jump METRESm [BEARING] needs metres within ±\(Int(NMEAScript.maximumDisplacement)), e.g. jump 800m 90")
                }
                var bearing = 90.0
                if line.arguments.count == 2 {
                    guard let degrees = Double(line.arguments[1]), (0...360).contains(degrees) else {
                        throw DataFileError(line: line.number, message: "jump's bearing is degrees from north, 0 to 360")
                    }
                    bearing = degrees
                }
                action = .displace(metres: metres, bearing: bearing)
            case "teleport":
                guard line.arguments.count == 2, let latitude = Double(line.arguments[0]), let longitude = Double(line.arguments[1]),
                    let place = try? Coordinate(latitude: latitude, longitude: longitude)
                else {
                    throw DataFileError(
                        line: line.number, message: "teleport needs a latitude and a longitude in degrees, e.g. teleport 53.545 9.966")
                }
                action = .teleport(place)
            case "jump":
                let seconds = try value(line.arguments.first?.hasSuffix("s") == true ? String(line.arguments[0].dropLast()) : nil)
                guard Duration.seconds(exactly: seconds) != nil, abs(seconds) <= NMEAScript.maximumJump else {
                    throw DataFileError(
                        line: line.number, message: "jump needs seconds within ±\(Int(NMEAScript.maximumJump)) (about 30 years)")
                }
                action = .jump(seconds: seconds)
            default:
                throw DataFileError(
                    line: line.number,
                    message: "unknown action \"\(line.action)\" (no-fix, fix, degrade, normal, silent, talk, garbage, jump, teleport)")
            }
            steps.append(Step(at: line.at, action: action, line: line.number))
        }
        return NMEAScript(steps: steps.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element))
    }
}

extension NMEAEmulator {
    /// Carries out one scripted fault.
    public func apply(_ action: NMEAScript.Action) {
        switch action {
        case .fixLost(let lost): setFixLost(lost)
        case .degrade(let sigma): setAccuracy(sigma: sigma)
        case .silent(let silent): setSilent(silent)
        case .garbage(let lines): sendGarbage(lines: lines)
        case .jump(let seconds): jumpTime(by: .seconds(exactly: seconds) ?? .zero)
        case .displace(let metres, let bearing): displace(metres: metres, bearing: bearing)
        case .teleport(let place): move(to: place)
        }
    }
}

extension PN532Emulator {
    /// Carries out one scripted fault. Returns false for `hangup` (the caller stops the emulator).
    public func apply(_ action: FaultScript.Action) -> Bool {
        switch action {
        case .remove(let tag): setPresent(false, tag: tag)
        case .present(let tag): setPresent(true, tag: tag)
        case .removeAfter(let exchanges): removeAfter(exchanges: exchanges)
        case .hang: setHung(true)
        case .resume: setHung(false)
        case .corrupt: corruptNextReply()
        case .weak(let tag, let rf, let loss): setWeak(rfErrorRate: rf, lossRate: loss, tag: tag)
        case .hangUp: return false
        }
        return true
    }
}
