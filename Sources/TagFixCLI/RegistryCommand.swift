import Foundation
import TagFixCore
import TagFixDevices
import TagFixReport
import TagFixStore

/// Where tag placements come from for a run: a SQLite registry, or a CSV / JSON file. The format
/// is found by content (SQLite's header), not by the file's name.
enum RegistrySource {
    /// Opens the registry at `path` for lookups.
    static func open(_ path: String, maximumRadius: Double) throws(CLIError) -> (registry: any TagRegistry, description: String) {
        if isSQLite(path) {
            do {
                let store = try SQLiteRegistry(path: path, mode: .readOnly, maximumRadius: maximumRadius)
                let count = try store.count()
                return (store, "\(count) tag\(count == 1 ? "" : "s") in \(path)")
            } catch {
                throw .registry(error)
            }
        }
        do {
            let registry = try RegistryFile.parse(try TextFile.read(path), maximumRadius: maximumRadius)
            return (registry, "\(registry.count) tag\(registry.count == 1 ? "" : "s") from \(path)")
        } catch {
            throw .file(error.file == nil ? error.inFile(path) : error)
        }
    }

    /// Every placement in the registry at `path` (SQLite, CSV or JSON).
    static func entries(_ path: String) throws(CLIError) -> [RegistryEntry] {
        if isSQLite(path) {
            do {
                return try SQLiteRegistry(path: path, mode: .readOnly).entries()
            } catch {
                throw .registry(error)
            }
        }
        do {
            return try RegistryFile.parse(try TextFile.read(path)).entries
        } catch {
            throw .file(error.file == nil ? error.inFile(path) : error)
        }
    }

    static func isSQLite(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return SQLiteRegistry.isSQLite(header: (try? handle.read(upToCount: 16)) ?? Data())
    }

    /// The SQLite registry named by --registry, else by TAGFIX_REGISTRY.
    static func storePath(_ arguments: ParsedArguments, command: String) throws(CLIError) -> String {
        if let path = arguments.value("registry") ?? ProcessInfo.processInfo.environment["TAGFIX_REGISTRY"], !path.isEmpty {
            return path
        }
        throw .usage("\(command) needs --registry FILE.sqlite (or TAGFIX_REGISTRY set)", command: command)
    }
}

/// `tagfix registry`: the SQLite registry of tag placements — import, export, list, show, remove.
struct RegistryCommand: Subcommand {
    static let spec = CommandSpec(
        name: "registry",
        abstract: "Manage the SQLite registry of tag placements: import, export, list, show, remove, migrate.",
        discussion: """
            The registry (a SQLite file, WAL mode) is where each tag should be: id, UID, name, centre, \
            radius, when, by whom and how accurately it was enrolled, and notes. CSV and JSON files \
            (id,uid,lat,lon,radius_m,name,enrolled_at,enrolled_by,accuracy_m,fixes,notes) are its \
            import and export format. import adds every row in one transaction: all or nothing; an \
            id already in the registry is refused unless --replace. A CSV text cell that starts with \
            = + - @, a tab or CR is exported with an apostrophe in front (formula-safe in a \
            spreadsheet) and imported without it; numbers stay numbers. export --output FILE \
            replaces an existing file atomically (its permissions kept; a failure leaves it as it \
            was); a FIFO, a device, - or /dev/stdout is written in place, a symlink is followed. \
            tagfix verify reads the registry while other commands write it.
            """,
        options: [
            .init(name: "registry", valueName: "FILE", help: "The SQLite registry; default: $TAGFIX_REGISTRY."),
            .init(name: "replace", valueName: nil, help: "import: replace entries whose id exists (else that is an error)."),
            .init(name: "format", valueName: "csv|json", help: "export: the format; default csv."),
            .init(
                name: "output", valueName: "FILE",
                help: "export: write to FILE instead of stdout (replaced atomically; a FIFO or device is written in place)."),
            .init(name: "json", valueName: nil, help: "list, show: JSON instead of text."),
        ],
        positionals: [
            .init(name: "ACTION", help: "import FILE, export, list, show ID, remove ID, or migrate."),
            .init(name: "ARGUMENT", help: "The file (import) or tag id (show, remove).", optional: true),
        ],
        examples: [
            "tagfix registry import Examples/site/registry.csv --registry site.sqlite",
            "tagfix registry list --registry site.sqlite",
            "tagfix registry show T01 --registry site.sqlite --json",
            "tagfix registry export --registry site.sqlite --format json --output site.json",
            "tagfix registry remove T09 --registry site.sqlite",
        ])

    enum Action: String, CaseIterable {
        case `import`, export, list, show, remove, migrate
    }

    var action: Action
    var argument: String?
    var path: String
    var replace: Bool
    var format: RegistryFile.Format
    var output: String?
    var json: Bool

    init(_ arguments: ParsedArguments) throws(CLIError) {
        let name = Self.spec.name
        guard let action = Action(rawValue: arguments.positionals[0]) else {
            throw .usage(
                "no registry action \"\(arguments.positionals[0])\" (\(Action.allCases.map(\.rawValue).joined(separator: ", ")))",
                command: name)
        }
        self.action = action
        argument = arguments.positionals.count > 1 ? arguments.positionals[1] : nil
        switch action {
        case .import, .show, .remove:
            guard argument != nil else {
                throw .usage("registry \(action.rawValue) needs \(action == .import ? "a FILE" : "a tag ID")", command: name)
            }
        case .export, .list, .migrate:
            if let argument { throw .usage("registry \(action.rawValue) takes no argument, found \"\(argument)\"", command: name) }
        }
        path = try RegistrySource.storePath(arguments, command: name)
        replace = arguments.flag("replace")
        let formatName = arguments.value("format") ?? "csv"
        guard let format = RegistryFile.Format(rawValue: formatName) else {
            throw .usage("--format \(formatName): give csv or json", command: name)
        }
        self.format = format
        output = arguments.value("output")
        json = arguments.flag("json")
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        do {
            try perform(io)
        } catch let error as CLIError {
            throw error
        } catch let error as RegistryStoreError {
            throw .registry(error)
        } catch {
            // `perform` throws only the two kinds above: anything else is a bug.
            throw .software("registry \(action.rawValue): unexpected \(type(of: error)): \(error)")
        }
    }

    private func perform(_ io: some TerminalOutput) throws {
        switch action {
        case .import:
            let file = argument ?? ""
            let entries: [RegistryEntry]
            do {
                entries = try RegistryFile.parse(try TextFile.read(file)).entries
            } catch {
                throw CLIError.file(error.file == nil ? error.inFile(file) : error)
            }
            let store = try SQLiteRegistry(path: path, mode: .create)
            let before = try store.count()
            try store.add(entries, replace: replace)
            let after = try store.count()
            io.out(
                "imported \(entries.count) tag\(entries.count == 1 ? "" : "s") from \(file) into \(path) (\(after - before) new, \(after) in all)"
            )
        case .export:
            let text = RegistryFile.write(try SQLiteRegistry(path: path, mode: .readOnly).entries(), format: format)
            if let output {
                try writeOutput(text, to: output)
            } else {
                for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() { io.out(String(line)) }
            }
        case .list:
            let entries = try SQLiteRegistry(path: path, mode: .readOnly).entries()
            if json {
                for entry in entries { io.out(RegistryEntryReport.json(entry)) }
            } else {
                for entry in entries { io.out(RegistryEntryReport.line(entry)) }
                io.out("\(entries.count) tag\(entries.count == 1 ? "" : "s") in \(path)")
            }
        case .show:
            let id = argument ?? ""
            guard let entry = try SQLiteRegistry(path: path, mode: .readOnly).storedEntry(withID: id) else {
                throw CLIError.noInput(DataFileError(file: path, line: nil, message: "no tag \"\(id)\" in the registry", unreadable: true))
            }
            io.out(json ? RegistryEntryReport.json(entry) : RegistryEntryReport.details(entry))
        case .remove:
            let id = argument ?? ""
            guard try SQLiteRegistry(path: path, mode: .readWrite).remove(id: id) else {
                throw CLIError.noInput(DataFileError(file: path, line: nil, message: "no tag \"\(id)\" in the registry", unreadable: true))
            }
            io.out("removed \(id) from \(path)")
        case .migrate:
            let store = try SQLiteRegistry(path: path, mode: .readWrite)
            io.out("\(path): schema version \(SQLiteRegistry.schemaVersion), \(counted(try store.count(), "tag"))")
        }
    }
}
