import Foundation
import TagFixCore
import TagFixDevices
import TagFixPostgres
import TagFixReport
import TagFixStore

/// Where tag placements come from for a run: a SQLite registry, or a CSV / JSON file. The format
/// is found by content (SQLite's header), not by the file's name.
enum RegistrySource {
    /// A registry is a file: a FIFO, a device or a socket is refused before anything opens it
    /// (opening a FIFO that nobody writes blocks for ever; a device is not ours to read).
    static func checkIsFile(_ path: String) throws(CLIError) {
        guard let kind = SQLiteRegistry.notARegularFile(path), kind != "a directory" else { return }
        throw .file(
            DataFileError(
                file: path, line: nil, message: "is \(kind), not a file: give the registry's file (SQLite, CSV or JSON)", unreadable: true))
    }

    /// Opens the registry at `path` for lookups: a SQLite, CSV or JSON file, or PostgreSQL
    /// (`postgresql://…`, its password from `passwordFile`; `note` hears when it cannot be used
    /// and when it works again).
    static func open(
        _ path: String, maximumRadius: Double, passwordFile: String? = nil, command: String = "verify",
        note: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(CLIError) -> (registry: any TagRegistry, description: String) {
        if PostgresAddress.isAddress(path) {
            let store = try postgres(path, passwordFile: passwordFile, maximumRadius: maximumRadius, command: command, note: note)
            let count = try postgres(store) { () throws(PostgresRegistryError) in try store.count() }
            return (store, "\(count) tag\(count == 1 ? "" : "s") in \(store.address)")
        }
        try checkIsFile(path)
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

    /// Every placement in the registry at `path` (SQLite, CSV, JSON or PostgreSQL).
    static func entries(_ path: String, passwordFile: String? = nil, command: String = "verify") throws(CLIError) -> [RegistryEntry] {
        if PostgresAddress.isAddress(path) {
            let store = try postgres(path, passwordFile: passwordFile, command: command)
            defer { store.close() }
            return try postgres(store) { () throws(PostgresRegistryError) in try store.entries() }
        }
        try checkIsFile(path)
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

    /// The registry on PostgreSQL at `text` (connected, its schema brought to this build's).
    static func postgres(
        _ text: String, passwordFile: String?, maximumRadius: Double = CircularRegion.defaultMaximumRadius, command: String,
        note: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(CLIError) -> PostgresRegistry {
        let (address, password) = try FleetOptions.postgres(text, passwordFile: passwordFile, label: "--registry: ", command: command)
        do throws(PostgresError) {
            return try PostgresRegistry(address: address, password: password, maximumRadius: maximumRadius, report: note)
        } catch {
            throw failure(error, address: address)
        }
    }

    /// `body`'s answer from the PostgreSQL registry, its errors as the CLI's: a conflict or an
    /// unusable row as a SQLite registry's (65), a database that cannot be used 69.
    static func postgres<Value>(_ store: PostgresRegistry, _ body: () throws(PostgresRegistryError) -> Value) throws(CLIError) -> Value {
        do {
            return try body()
        } catch {
            switch error {
            case .conflict(let conflict): throw .registry(.conflict(conflict))
            case .invalidEntry: throw .data(DataFileError(file: store.address.description, line: nil, message: error.description))
            case .database(let error): throw failure(error, address: store.address)
            }
        }
    }

    /// A PostgreSQL registry or state that cannot be used: a newer schema is the data's (65), as
    /// a SQLite registry's is; anything else is the service's (69: down, refused, wrong password).
    static func failure(_ error: PostgresError, address: PostgresAddress) -> CLIError {
        if case .newerSchema = error { return .data(DataFileError(file: address.description, line: nil, message: error.description)) }
        return .unavailable(error.description)
    }

    static func isSQLite(_ path: String) -> Bool { SQLiteRegistry.isSQLiteFile(path) }

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
        abstract: "Manage the SQLite registry of tag placements: import, export, list, show, remove, migrate, refine.",
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
            tagfix verify reads the registry while other commands write it. refine learns from \
            confirmed taps: each --log's confirmed verdicts are recorded as evidence (a log read \
            twice counts once), taps minutes apart are one visit, and per tag it shows the enrolled \
            centre and accuracy, where the visits put the tag and how accurately, and the shift; a \
            tag whose taps agree on a place away from its centre beyond both accuracies is reported \
            moved (exit 0: it is a finding, not a failure). --apply records each refined placement, \
            keeping the one it replaces in the registry's history, and prints what changed; a moved \
            tag is never applied (check it, then re-enrol it). See docs/verifier.md. \
            --registry postgresql://[USER@]HOST[:PORT]/DB keeps the registry in PostgreSQL (password: \
            --db-password-file, or libpq's PGPASSFILE): import, export, list, show, remove and migrate \
            work on it as on a file, and every serve or verify given the same address reads it (refine \
            needs a SQLite copy). See docs/fleet.md.
            """,
        options: [
            .init(
                name: "registry", valueName: "FILE|URL",
                help:
                    "The SQLite registry, or PostgreSQL, postgresql://[USER@]HOST[:PORT]/DB (several servers, one registry); default: $TAGFIX_REGISTRY."
            ),
            .init(
                name: "db-password-file", valueName: "FILE",
                help: "PostgreSQL: the user's password (mode 0600; else libpq's PGPASSFILE or ~/.pgpass)."),
            .init(name: "replace", valueName: nil, help: "import: replace entries whose id exists (else that is an error)."),
            .init(name: "format", valueName: "csv|json", help: "export: the format; default csv."),
            .init(
                name: "output", valueName: "FILE",
                help: "export: write to FILE instead of stdout (replaced atomically; a FIFO or device is written in place)."),
            .init(name: "json", valueName: nil, help: "list, show, refine: JSON instead of text."),
            .init(
                name: "log", valueName: "FILE", help: "refine: a session log (verify --log) whose confirmed taps are recorded as evidence.",
                repeatable: true),
            .init(name: "apply", valueName: nil, help: "refine: record the refined placements (the previous ones kept in the history)."),
        ],
        positionals: [
            .init(name: "ACTION", help: "import FILE, export, list, show ID (with its refinements), remove ID, migrate, or refine."),
            .init(name: "ARGUMENT", help: "The file (import) or tag id (show, remove).", optional: true),
        ],
        examples: [
            "tagfix registry import Examples/site/registry.csv --registry site.sqlite",
            "tagfix registry list --registry site.sqlite",
            "tagfix registry show T01 --registry site.sqlite --json",
            "tagfix registry export --registry site.sqlite --format json --output site.json",
            "tagfix registry remove T09 --registry site.sqlite",
            "tagfix registry refine --registry site.sqlite --log monday.jsonl --log tuesday.jsonl",
            "tagfix registry refine --registry site.sqlite --apply",
            "tagfix registry import site.csv --registry postgresql://tagfix@db.example/site --db-password-file pg.pw",
        ])

    enum Action: String, CaseIterable {
        case `import`, export, list, show, remove, migrate, refine
    }

    var action: Action
    var argument: String?
    var path: String
    var replace: Bool
    var format: RegistryFile.Format
    var output: String?
    var json: Bool
    var logs: [String]
    var apply: Bool
    /// --db-password-file, for a PostgreSQL registry.
    var passwordFile: String?

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
        case .export, .list, .migrate, .refine:
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
        logs = arguments.all("log")
        apply = arguments.flag("apply")
        if action != .refine, !logs.isEmpty || apply {
            throw .usage("--log and --apply are for registry refine", command: name)
        }
        passwordFile = arguments.value("db-password-file")
        if passwordFile != nil, !PostgresAddress.isAddress(path) {
            throw .usage("--db-password-file is for a PostgreSQL --registry (postgresql://…)", command: name)
        }
        if action == .refine, PostgresAddress.isAddress(path) {
            throw .usage(
                "registry refine works on a SQLite registry: export the PostgreSQL one, refine a SQLite copy, import it with --replace",
                command: name)
        }
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

    /// import, export, list, show, remove, migrate and refine, on a SQLite registry or a
    /// PostgreSQL one (`ManagedRegistry`), saying the same on each (the address for the file's
    /// name). A PostgreSQL registry is connected to first; a SQLite file is opened by each action
    /// in the mode it needs (created by import, read-only to read).
    private func perform(_ io: some TerminalOutput) throws {
        let connected: PostgresRegistry? =
            PostgresAddress.isAddress(path) ? try RegistrySource.postgres(path, passwordFile: passwordFile, command: Self.spec.name) : nil
        defer { connected?.close() }
        let path = path
        func open(_ mode: SQLiteRegistry.Mode) throws -> any ManagedRegistry {
            if let connected { return PostgresManagedRegistry(store: connected) }
            return SQLiteManagedRegistry(store: try SQLiteRegistry(path: path, mode: mode), place: path)
        }
        let place = connected?.address.description ?? path
        switch action {
        case .import:
            let file = argument ?? ""
            let entries: [RegistryEntry]
            do {
                entries = try RegistryFile.parse(try TextFile.read(file)).entries
            } catch {
                throw CLIError.file(error.file == nil ? error.inFile(file) : error)
            }
            let store = try open(.create)
            let before = try store.count()
            try store.add(entries, replace: replace)
            let after = try store.count()
            io.out(
                "imported \(entries.count) tag\(entries.count == 1 ? "" : "s") from \(file) into \(place) (\(after - before) new, \(after) in all)"
            )
        case .export:
            let text = RegistryFile.write(try open(.readOnly).entries(), format: format)
            if let output {
                try writeOutput(text, to: output)
            } else {
                for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() { io.out(String(line)) }
            }
        case .list:
            let entries = try open(.readOnly).entries()
            if json {
                for entry in entries { io.out(RegistryEntryReport.json(entry)) }
            } else {
                for entry in entries { io.out(RegistryEntryReport.line(entry)) }
                io.out("\(entries.count) tag\(entries.count == 1 ? "" : "s") in \(place)")
            }
        case .show:
            let id = argument ?? ""
            let store = try open(.readOnly)
            guard let entry = try store.storedEntry(withID: id) else {
                throw CLIError.noInput(DataFileError(file: place, line: nil, message: "no tag \"\(id)\" in the registry", unreadable: true))
            }
            let history = try store.placementHistory(forID: id)
            io.out(json ? RegistryEntryReport.json(entry, history: history) : RegistryEntryReport.details(entry, history: history))
        case .remove:
            let id = argument ?? ""
            guard try open(.readWrite).remove(id: id) else {
                throw CLIError.noInput(DataFileError(file: place, line: nil, message: "no tag \"\(id)\" in the registry", unreadable: true))
            }
            io.out("removed \(id) from \(place)")
        case .migrate:
            let store = try open(.readWrite)
            io.out("\(place): schema version \(store.schemaVersion), \(counted(try store.count(), "tag"))")
        case .refine:
            if connected != nil { throw CLIError.usage("registry refine works on a SQLite registry", command: Self.spec.name) }
            try refine(io)
        }
    }

    /// `registry refine`: records the logs' confirmed taps, refines every placement, and with
    /// --apply records the refined ones.
    private func refine(_ io: some TerminalOutput) throws {
        var taps: [PlacementTap] = []
        for log in logs {
            let read = try Self.confirmedTaps(log)
            if let torn = read.torn { io.err("note: \(log):\(torn): skipped a torn last line (the run was cut off while writing it)") }
            taps += read.taps
        }
        let store = try SQLiteRegistry(path: path, mode: logs.isEmpty && !apply ? .readOnly : .readWrite)
        if !logs.isEmpty {
            let recorded = try store.recordTaps(taps)
            var note = "recorded \(counted(recorded.added, "new confirmed tap")) from \(counted(logs.count, "log"))"
            if recorded.known > 0 { note += " (\(recorded.known) known already)" }
            if recorded.unknownTag > 0 { note += "; \(counted(recorded.unknownTag, "tap")) of tags not in the registry ignored" }
            io.err(note)
        }
        let estimates = PlacementRefiner().refine(try store.placementEvidence())
        for estimate in estimates { io.out(json ? RefinementReport.json(estimate) : RefinementReport.line(estimate)) }
        var applied = 0
        if apply {
            let now = MonotonicClock().now
            for estimate in estimates where estimate.changesPlacement && !estimate.moved {
                guard let refined = estimate.refined else { continue }
                let change = try store.applyRefinement(
                    id: estimate.tagID, to: refined.coordinate, accuracy: refined.accuracy, visits: estimate.independentVisits, at: now)
                io.out(json ? RefinementReport.appliedJSON(change) : RefinementReport.applied(change))
                applied += 1
            }
        }
        let moved = estimates.filter(\.moved)
        if !json {
            var summary =
                "\(counted(estimates.count, "tag")): \(estimates.filter { $0.refined != nil }.count) refined, \(moved.count) moved"
            summary += ", \(estimates.filter { $0.fromTaps == nil }.count) without confirmed taps"
            if apply { summary += "; \(applied) placement\(applied == 1 ? "" : "s") changed in \(path)" }
            io.out(summary)
        }
        if !moved.isEmpty {
            io.err(
                "moved: \(moved.map(\.tagID).joined(separator: ", ")): the taps place \(moved.count == 1 ? "it" : "them") away from the registry's centre; check before trusting \(moved.count == 1 ? "its" : "their") placement"
            )
        }
    }

    /// The confirmed taps of the session log at `path` (any other verdict is no evidence).
    static func confirmedTaps(_ path: String) throws(CLIError) -> (taps: [PlacementTap], torn: Int?) {
        if RegistrySource.isSQLite(path) {
            throw .data(
                DataFileError(
                    file: path, line: nil,
                    message: "a SQLite file (a registry?), not a session log: give --log the JSON Lines file verify --log wrote"))
        }
        let contents: SessionLogContents
        do {
            contents = try SessionLog.read(path: path)
        } catch {
            throw .file(error)
        }
        var taps: [PlacementTap] = []
        for (line, value) in contents.records {
            do {
                if let tap = PlacementTap(try SessionRecord(value, line: line)) { taps.append(tap) }
            } catch {
                throw .data(error.inFile(path))
            }
        }
        return (taps, contents.tornLastLine)
    }
}
