import Foundation
import TagFixCore
import TagFixServe

/// `tagfix tokens add NAME | list | revoke NAME --file FILE`: the named tokens of `serve --token`.
struct TokensCommand: Subcommand {
    static let spec = CommandSpec(
        name: "tokens",
        abstract: "Make, list and revoke the named tokens phones and clients give tagfix serve.",
        discussion: """
            tokens add NAME --file FILE makes a fresh random token named NAME (a tech, or a device), \
            adds it to FILE (made if missing, mode 0600) and prints it once, with the link that sets \
            it on a phone (--url https://HOST:PORT gives the server's address). tokens list prints \
            the names, never a token. tokens revoke NAME takes NAME's token out: a phone that has it \
            is refused once serve reads the file again. The file is replaced atomically. A file of one token, as \
            serve has always read, is the token named "default". A file that others can read is \
            refused (exit 66: chmod 600 it).
            """,
        options: [
            .init(name: "file", valueName: "FILE", help: "The token file (serve --token FILE)."),
            .init(name: "url", valueName: "URL", help: "add: the server's address for the link (https://HOST:PORT)."),
        ],
        positionals: [
            .init(name: "ACTION", help: "add, list or revoke."),
            .init(name: "NAME", help: "add, revoke: the token's name (letters, digits, _ - . @).", optional: true),
        ],
        examples: [
            "tagfix tokens add anna --file /etc/tagfix/tokens --url https://tags.example.org:8443",
            "tagfix tokens list --file /etc/tagfix/tokens",
            "tagfix tokens revoke anna --file /etc/tagfix/tokens",
        ])

    enum Action {
        case add(String)
        case list
        case revoke(String)
    }

    var action: Action
    var path: String
    var url: String?

    init(_ arguments: ParsedArguments) throws(CLIError) {
        let name = Self.spec.name
        guard let path = arguments.value("file") else { throw .usage("tokens needs --file FILE (serve's --token file)", command: name) }
        self.path = path
        url = arguments.value("url")
        let positionals = arguments.positionals
        switch positionals[0] {
        case "add", "revoke":
            guard positionals.count == 2 else { throw .usage("tokens \(positionals[0]) needs a NAME", command: name) }
            guard TokenFile.isName(positionals[1]) else { throw .usage(TokenFileError.badName(positionals[1]).description, command: name) }
            action = positionals[0] == "add" ? .add(positionals[1]) : .revoke(positionals[1])
        case "list":
            guard positionals.count == 1 else { throw .usage("tokens list takes no NAME", command: name) }
            action = .list
        case let other:
            throw .usage("no tokens action \"\(other)\" (add, list, revoke)", command: name)
        }
        if url != nil, case .add = action {} else if url != nil { throw .usage("--url is for tokens add", command: name) }
    }

    func run(_ io: some TerminalOutput) throws(CLIError) {
        var file = try read(missingIsEmpty: { if case .add = action { true } else { false } }())
        do {
            switch action {
            case .list:
                for entry in file.entries { io.out(entry.name) }
                return
            case .add(let name):
                let token = TokenFile.generateToken()
                try file.add(name: name, token: token)
                try file.write(to: path)
                io.out(token)
                let base = url.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? "https://HOST:PORT"
                io.err("added \(name) to \(path); open this link once on \(name)'s phone (it sets the token as a cookie):")
                io.err("  \(base)/?token=\(token)")
            case .revoke(let name):
                try file.revoke(name: name)
                try file.write(to: path)
                io.err("revoked \(name): phones with its token are refused once tagfix serve reads the file again")
            }
        } catch {
            switch error {
            case .cannotWrite: throw .ioError(error.description)
            default: throw .usage(error.description, command: Self.spec.name)
            }
        }
    }

    private func read(missingIsEmpty: Bool) throws(CLIError) -> TokenFile {
        if missingIsEmpty, !FileManager.default.fileExists(atPath: path) { return TokenFile() }
        do {
            return try TokenFile.read(path)
        } catch {
            throw error.unreadable ? .noInput(error) : .data(error)
        }
    }
}
