import TagFixCore

/// A command's options and arguments, declared once: parsing, validation and help come from it
/// (the shape of swift-argument-parser, which cannot be fetched here).
struct CommandSpec: Sendable {
    struct Option: Sendable {
        var name: String
        /// `nil` for a flag.
        var valueName: String?
        var help: String
        var repeatable = false
    }

    struct Positional: Sendable {
        var name: String
        var help: String
        var optional = false
    }

    var name: String
    var abstract: String
    var discussion: String = ""
    var options: [Option] = []
    var positionals: [Positional] = []
    var examples: [String] = []

    var usage: String {
        var parts = ["tagfix", name]
        parts += positionals.map { $0.optional ? "[\($0.name)]" : $0.name }
        if !options.isEmpty { parts.append("[options]") }
        return parts.joined(separator: " ")
    }

    var help: String {
        var text = "\(abstract)\n\nUSAGE: \(usage)\n"
        if !discussion.isEmpty { text += "\n\(discussion)\n" }
        if !positionals.isEmpty {
            text += "\nARGUMENTS:\n"
            for positional in positionals { text += Self.row(positional.name, positional.help) }
        }
        text += "\nOPTIONS:\n"
        for option in options {
            let left = "--\(option.name)" + (option.valueName.map { " \($0)" } ?? "")
            text += Self.row(left, option.help + (option.repeatable ? " (repeatable)" : ""))
        }
        text += Self.row("-h, --help", "Show help for this command.")
        if !examples.isEmpty {
            text += "\nEXAMPLES:\n" + examples.map { "  \($0)\n" }.joined()
        }
        return text
    }

    static func row(_ left: String, _ right: String) -> String {
        let padded =
            left.count < 26 ? left + String(repeating: " ", count: 26 - left.count) : left + "\n" + String(repeating: " ", count: 28)
        return "  \(padded)\(right)\n"
    }
}

/// The parsed command line of one command.
struct ParsedArguments: Sendable {
    var values: [String: [String]] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []
    var helpRequested = false

    func value(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }
    func flag(_ name: String) -> Bool { flags.contains(name) }
}

extension CommandSpec {
    /// Parses `arguments` (after the command name). `--name value`, `--name=value`, flags, and
    /// `--` to end options.
    func parse(_ arguments: [String]) throws(CLIError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            if argument == "-h" || argument == "--help" {
                parsed.helpRequested = true
                continue
            }
            guard argument.hasPrefix("--") else {
                throw .usage("unknown option \(argument)", command: name)
            }
            var optionName = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = optionName.firstIndex(of: "=") {
                inlineValue = String(optionName[optionName.index(after: equals)...])
                optionName = String(optionName[..<equals])
            }
            guard let option = options.first(where: { $0.name == optionName }) else {
                throw .usage("unknown option --\(optionName)", command: name)
            }
            if option.valueName == nil {
                guard inlineValue == nil else { throw .usage("--\(optionName) takes no value", command: name) }
                parsed.flags.insert(optionName)
                continue
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else {
                    throw .usage("--\(optionName) needs a value (\(option.valueName ?? "VALUE"))", command: name)
                }
                value = arguments[index]
                index += 1
            }
            if !option.repeatable, parsed.values[optionName] != nil {
                throw .usage("--\(optionName) given more than once", command: name)
            }
            parsed.values[optionName, default: []].append(value)
        }
        if parsed.helpRequested { return parsed }
        let required = positionals.filter { !$0.optional }.count
        if parsed.positionals.count < required {
            throw .usage("missing \(positionals[parsed.positionals.count].name)", command: name)
        }
        if parsed.positionals.count > positionals.count {
            throw .usage("unexpected argument \"\(parsed.positionals[positionals.count])\"", command: name)
        }
        return parsed
    }
}

extension ParsedArguments {
    /// A number option, validated: finite and within `range`.
    func number(_ name: String, in range: ClosedRange<Double>, command: String) throws(CLIError) -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = Double(text), number.isFinite, range.contains(number) else {
            throw .usage("--\(name) \(text) must be a number in \(range.lowerBound)…\(range.upperBound)", command: command)
        }
        return number
    }

    /// A duration option in seconds.
    func seconds(_ name: String, in range: ClosedRange<Double>, command: String) throws(CLIError) -> Duration? {
        try number(name, in: range, command: command).flatMap { Duration.seconds(exactly: $0) }
    }
}
