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
public struct FaultScript: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        case remove(tag: Int)
        case present(tag: Int)
        case removeAfter(exchanges: Int)
        case hang
        case resume
        case corrupt
        case hangUp
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
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = index + 1
            let content = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = content.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard !words.isEmpty else { continue }
            guard let seconds = Double(words[0]), seconds >= 0, let at = Duration.seconds(exactly: seconds) else {
                throw DataFileError(line: line, message: "\"\(words[0])\" is not a time in seconds")
            }
            guard words.count >= 2 else { throw DataFileError(line: line, message: "an action must follow the time") }
            func number(_ what: String) throws(DataFileError) -> Int {
                guard words.count == 3, let value = Int(words[2]), value >= 0 else {
                    throw DataFileError(line: line, message: "\(words[1]) needs \(what)")
                }
                return value
            }
            func none() throws(DataFileError) {
                guard words.count == 2 else { throw DataFileError(line: line, message: "\(words[1]) takes no argument") }
            }
            let action: Action
            switch words[1] {
            case "remove", "present":
                let tag = try number("a tag number")
                guard tag < tagCount else { throw DataFileError(line: line, message: "there is no tag \(tag) (tags are numbered from 0)") }
                action = words[1] == "remove" ? .remove(tag: tag) : .present(tag: tag)
            case "remove-after": action = .removeAfter(exchanges: try number("a number of exchanges"))
            case "hang": try none(); action = .hang
            case "resume": try none(); action = .resume
            case "corrupt": try none(); action = .corrupt
            case "hangup": try none(); action = .hangUp
            default:
                throw DataFileError(
                    line: line, message: "unknown action \"\(words[1])\" (remove, present, remove-after, hang, resume, corrupt, hangup)")
            }
            steps.append(Step(at: at, action: action, line: line))
        }
        return FaultScript(steps: steps.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element))
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
        case .hangUp: return false
        }
        return true
    }
}
