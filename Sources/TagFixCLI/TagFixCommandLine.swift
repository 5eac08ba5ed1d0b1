import Foundation

/// The `tagfix` command line: parses arguments, runs one command, returns its exit code.
public enum TagFixCommandLine {
    static let version = "0.1.0"

    /// Every command, in the order the overview lists them. Dispatch, `help COMMAND` and the
    /// overview all read this one list, so a command cannot be runnable yet missing from help.
    static var subcommands: [any Subcommand.Type] {
        [
            VerifyCommand.self, ServeCommand.self, ScanCommand.self, FixCommand.self, DevicesCommand.self, InspectCommand.self,
            SunCommand.self, EnrollCommand.self, ReportCommand.self, CollectCommand.self, RegistryCommand.self, DoctorCommand.self,
            EmulateCommand.self,
            KeysCommand.self, SignURLCommand.self, TokensCommand.self,
        ]
    }

    static let commands: [CommandSpec] = subcommands.map { $0.spec } + [helpSpec]

    static let helpSpec = CommandSpec(
        name: "help", abstract: "Show help for tagfix or one of its commands.",
        positionals: [.init(name: "COMMAND", help: "The command to explain.", optional: true)])

    static var overview: String {
        var text = """
            tagfix — confirm NFC tag placements against live GPS.

            USAGE: tagfix COMMAND [options]

            COMMANDS:

            """
        for command in commands { text += CommandSpec.row(command.name, command.abstract) }
        text += """

            Run 'tagfix help COMMAND' for a command's options and examples.
            Exit codes: 0 ok, 64 usage error, 65 malformed input file, 66 input file missing or \
            unreadable, 69 device unavailable or blocked, 70 internal error, 74 output error, 75 timed out or \
            refused for now (try again).
            """
        return text
    }

    /// Runs the process's command line and exits with the command's code.
    public static func main() async -> Never {
        // A closed pipe is an EPIPE error that StandardOutput and OutputFile handle, not a
        // signal that kills the process with nothing said.
        signal(SIGPIPE, SIG_IGN)
        let code = await run(Array(CommandLine.arguments.dropFirst()), output: StandardOutput())
        exit(code)
    }

    /// Runs one command line (without the program name), writing to `output`.
    /// - Returns: the exit code (see `overview`).
    public static func run(_ arguments: [String], output: some TerminalOutput) async -> Int32 {
        do {
            try await dispatch(arguments, output)
            return ExitCode.success
        } catch {
            output.err(error.message)
            return error.exitCode
        }
    }

    private static func dispatch(_ arguments: [String], _ io: some TerminalOutput) async throws(CLIError) {
        guard let first = arguments.first else {
            io.err(overview)
            throw .usage("no command given", command: nil)
        }
        let rest = Array(arguments.dropFirst())
        switch first {
        case "-h", "--help":
            io.out(overview)
        case "--version":
            io.out("tagfix \(version)")
        case "help":
            if rest == ["--man"] { return io.out(String(ManPage.render().dropLast())) }
            let parsed = try helpSpec.parse(rest)
            guard let name = parsed.positionals.first else {
                io.out(overview)
                return
            }
            guard let spec = commands.first(where: { $0.name == name }) else {
                throw .usage("no command named \"\(name)\"", command: nil)
            }
            io.out(spec.help)
        default:
            guard let command = subcommands.first(where: { $0.spec.name == first }) else {
                throw .usage(first.hasPrefix("-") ? "unknown option \(first)" : "unknown command \"\(first)\"", command: nil)
            }
            try await runSubcommand(command, rest, io)
        }
    }

    private static func runSubcommand<Command: Subcommand>(
        _: Command.Type, _ arguments: [String], _ io: some TerminalOutput
    ) async throws(CLIError) {
        let parsed = try Command.spec.parse(arguments)
        if parsed.helpRequested { return io.out(Command.spec.help) }
        try await Command(parsed).run(io)
    }
}

/// A `tagfix` command: its options, how it reads them, and what it does.
protocol Subcommand {
    static var spec: CommandSpec { get }
    init(_ arguments: ParsedArguments) throws(CLIError)
    func run(_ io: some TerminalOutput) async throws(CLIError)
}
