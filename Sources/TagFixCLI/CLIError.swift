import TagFixCore
import TagFixDemo
import TagFixStore

/// Exit codes, from BSD sysexits(3) where one fits. Documented in README.md.
enum ExitCode {
    static let success: Int32 = 0
    /// Bad command line.
    static let usage: Int32 = 64
    /// A malformed input file (scenario, registry…).
    static let dataError: Int32 = 65
    /// An input file that does not exist or cannot be read.
    static let noInput: Int32 = 66
    /// A device or service is unavailable.
    static let unavailable: Int32 = 69
    /// An internal error: a bug (an error of a kind the command does not expect).
    static let software: Int32 = 70
    /// An output file could not be written.
    static let ioError: Int32 = 74
    /// A --timeout passed first (try again).
    static let temporaryFailure: Int32 = 75
}

/// A failure that ends a command, with the exit code and the message for stderr.
enum CLIError: Error, Sendable {
    case usage(String, command: String?)
    case data(DataFileError)
    case noInput(DataFileError)
    case ioError(String)
    /// A device or service could not be used (a pty, a reader, gpsd).
    case unavailable(String)
    /// A --timeout passed before the work was done.
    case timedOut(String)
    /// The SQLite registry could not be used.
    case registry(RegistryStoreError)
    /// An invariant broke: an error of a kind the command does not expect. A bug (70).
    case software(String)

    var exitCode: Int32 {
        switch self {
        case .usage: ExitCode.usage
        case .data: ExitCode.dataError
        case .noInput: ExitCode.noInput
        case .ioError: ExitCode.ioError
        case .unavailable: ExitCode.unavailable
        case .timedOut: ExitCode.temporaryFailure
        case .software: ExitCode.software
        case .registry(let error):
            switch error {
            case .missing: ExitCode.noInput
            case .readOnly, .sqlite: ExitCode.ioError
            case .busy: ExitCode.temporaryFailure
            case .notARegistry, .damaged, .newerSchema, .olderSchema, .conflict, .invalidEntry: ExitCode.dataError
            }
        }
    }

    var message: String {
        switch self {
        case .usage(let message, let command):
            let help = command.map { "tagfix help \($0)" } ?? "tagfix --help"
            return "error: \(message)\n(see '\(help)')"
        case .data(let error), .noInput(let error):
            return "error: \(error)"
        case .ioError(let message), .unavailable(let message), .timedOut(let message):
            return "error: \(message)"
        case .registry(let error):
            return "error: \(error)"
        case .software(let message):
            return "internal error: \(message) (a bug in tagfix: please report it)"
        }
    }

    /// The demo's failures: an emulator, gpsd or the reader unavailable (69), or its time limit (75).
    init(_ error: DemoError) {
        switch error {
        case .unavailable(let message): self = .unavailable(message)
        case .timedOut(let message): self = .timedOut(message)
        }
    }

    /// A data-file error as the right exit: a missing or unreadable file is "no input" (66),
    /// anything wrong inside it is "data error" (65).
    static func file(_ error: DataFileError) -> CLIError {
        error.unreadable ? .noInput(error) : .data(error)
    }
}
