import Foundation
import TagFixCore
import TagFixCrypto
import TagFixDevices
import TagFixPostgres
import TagFixStore

/// `tagfix sun verify`: checks one NTAG 424 DNA SUN URL (Secure Dynamic Messaging).
struct SunCommand: Subcommand {
    static let spec = CommandSpec(
        name: "sun",
        abstract: "Check an NTAG 424 DNA SUN URL: decrypt its PICC data, verify its CMAC (AES, NXP AN12196).",
        discussion: """
            sun verify URL checks a URL an NTAG 424 DNA wrote with Secure Dynamic Messaging: the \
            PICC data (picc_data=, 32 hex digits) is decrypted with the SDM meta-read key, the \
            SDMMAC (cmac=, 16 hex digits) recomputed with the SDM file-read key and compared in \
            constant time. A URL with the UID and counter in clear (uid=, ctr=) is checked the same \
            way. Prints valid with the UID and read counter, or invalid with the reason; exits 0 \
            when valid, 65 when not, 64 for a bad command line. A valid URL proves the tag wrote it \
            with that counter, not that this is the first time it is seen: a copied URL verifies \
            again (replay), so a verifier must also keep the highest counter accepted per UID. \
            Keys: --key (the SDM file-read key; also the meta-read key unless --meta-key) or \
            --key-file FILE with lines key = HEX and meta_key = HEX (and diversify = HEX), or the \
            key file verify --sun-keys and serve --sun-keys read, with [NAME] sections (--key-set \
            NAME chooses one when it has several), refused unless only its owner can read it \
            (chmod 600). A key on the command line lands in shell history and is \
            visible in ps to other users; a key file does not. Keys never appear in output. \
            --diversify HEX treats the key as an AN10922 master key: the tag's file-read key is \
            diversified with UID ‖ HEX (e.g. application id ‖ system identifier). When the MAC \
            covers part of the URL (SDMMACInputOffset before SDMMACOffset), --mac-input-from NAME \
            names the parameter whose value starts it; it runs up to the CMAC value.
            """,
        options: [
            .init(name: "key", valueName: "HEX", help: "The SDM file-read key (32 hex digits); see --key-file."),
            .init(
                name: "key-file", valueName: "FILE",
                help:
                    "Read key = HEX (and meta_key = HEX, diversify = HEX) from FILE, mode 0600: a --sun-keys file with [NAME] sections too."
            ),
            .init(name: "key-set", valueName: "NAME", help: "With --key-file: the [NAME] set to use, when it has several."),
            .init(name: "meta-key", valueName: "HEX", help: "The SDM meta-read key; default: the --key."),
            .init(name: "diversify", valueName: "HEX", help: "The key is an AN10922 master key; diversify it with UID ‖ HEX."),
            .init(name: "picc-param", valueName: "NAME", help: "The encrypted PICC data's parameter; default picc_data."),
            .init(name: "cmac-param", valueName: "NAME", help: "The SDMMAC's parameter; default cmac."),
            .init(name: "uid-param", valueName: "NAME", help: "Plain mirroring: the UID's parameter; default uid."),
            .init(name: "ctr-param", valueName: "NAME", help: "Plain mirroring: the counter's parameter; default ctr."),
            .init(name: "enc-param", valueName: "NAME", help: "The encrypted file data's parameter (SDMENCFileData), if any."),
            .init(name: "mac-input-from", valueName: "NAME", help: "The MAC input starts at this parameter's value; default: empty input."),
            .init(name: "json", valueName: nil, help: "Print one JSON object."),
        ],
        positionals: [
            .init(name: "ACTION", help: "verify."),
            .init(name: "URL", help: "The URL the tag wrote (quote it: it holds &).", optional: true),
        ],
        examples: [
            "tagfix sun verify 'https://ntag.nxp.com/424?e=EF963FF7828658A599F3041510671E88&c=94EED9EE65337086' \\\n      --key-file sun.keys --picc-param e --cmac-param c --json",
            "tagfix sun verify \"$URL\" --key-file site.keys --diversify 3042F54E585020416275",
        ])

    var url: String
    var verifier: SUNVerifier
    var json: Bool

    init(_ arguments: ParsedArguments) throws(CLIError) {
        let name = Self.spec.name
        guard arguments.positionals[0] == "verify" else {
            throw .usage("no sun action \"\(arguments.positionals[0])\" (verify)", command: name)
        }
        guard arguments.positionals.count > 1 else { throw .usage("sun verify needs a URL", command: name) }
        url = arguments.positionals[1]
        json = arguments.flag("json")
        var metaKey: AES128Key
        var fileReadKey: SUNVerifier.FileReadKey
        switch (arguments.value("key"), arguments.value("key-file")) {
        case (.some, .some):
            throw .usage("give --key or --key-file, not both", command: name)
        case (nil, nil):
            throw .usage("sun verify needs --key HEX or --key-file FILE", command: name)
        case (let hex?, nil):
            guard let key = AES128Key(hex: hex) else { throw .usage("--key: give 32 hex digits (an AES-128 key)", command: name) }
            if arguments.value("key-set") != nil { throw .usage("--key-set NAME goes with --key-file FILE", command: name) }
            (metaKey, fileReadKey) = (key, .fixed(key))
        case (nil, let path?):
            let set = try Self.keySet(path, named: arguments.value("key-set"))
            (metaKey, fileReadKey) = (set.metaReadKey, set.fileReadKey)
        }
        if let hex = arguments.value("meta-key") {
            guard let key = AES128Key(hex: hex) else { throw .usage("--meta-key: give 32 hex digits (an AES-128 key)", command: name) }
            metaKey = key
        }
        if let hex = arguments.value("diversify") {
            guard let suffix = SUNHex.decode(Array(hex.utf8)), suffix.count <= 24 else {
                throw .usage("--diversify: give up to 24 bytes of hex (UID ‖ HEX must fit AN10922's 31 bytes)", command: name)
            }
            guard case .fixed(let master) = fileReadKey else {
                throw .usage("--diversify: the key file's set diversifies already (diversify = HEX); give one or the other", command: name)
            }
            fileReadKey = .diversified(master: master, suffix: suffix)
        }
        let names = SUNParameterNames(
            piccData: arguments.value("picc-param") ?? "picc_data", cmac: arguments.value("cmac-param") ?? "cmac",
            uid: arguments.value("uid-param") ?? "uid", counter: arguments.value("ctr-param") ?? "ctr",
            encryptedFileData: arguments.value("enc-param"), macInputFrom: arguments.value("mac-input-from"))
        verifier = SUNVerifier(metaReadKey: metaKey, fileReadKey: fileReadKey, names: names)
    }

    /// The key set of `--key-file FILE`: a file of `key = HEX` lines (the set `default`) or of
    /// `[NAME]` sections, as `--sun-keys` reads it; `name` chooses a set, needed when it has
    /// several. Refused unless only its owner can read it: the keys in it are every tag's keys.
    static func keySet(_ path: String, named name: String?) throws(CLIError) -> SUNVerifier {
        let keyring = try readKeyring(path)
        if let name {
            guard let set = keyring.sets[name] else {
                throw .usage(
                    "--key-set \(name): \(path) has no [\(name)]; its sets: \(keyring.names.joined(separator: ", "))", command: spec.name)
            }
            return set
        }
        guard keyring.sets.count == 1, let only = keyring.sets.values.first else {
            throw .usage(
                "\(path) holds several key sets (\(keyring.names.joined(separator: ", "))): choose one with --key-set NAME",
                command: spec.name)
        }
        return only
    }

    /// The key sets of `--sun-keys FILE` (verify, enroll --sun), refused unless only its owner can read it.
    static func readKeyring(_ path: String) throws(CLIError) -> SUNKeyring {
        do {
            return try SUNKeyring.parse(try SecretFile.read(path))
        } catch {
            throw error.unreadable ? .noInput(error) : .file(error.file == nil ? error.inFile(path) : error)
        }
    }

    /// How `verify` checks SUN registry tags: the key sets from `--sun-keys` (refused unless
    /// 0600) and the counters: in `--state` (a SQLite file, or PostgreSQL that several servers
    /// share), `--sun-counters FILE`, or else the registry itself (SQLite, or PostgreSQL: the same
    /// database). `nil` without `--sun-keys`: SUN tags are then `sun_unchecked`.
    /// - Parameters:
    ///   - passwordFile: `--db-password-file`, for a PostgreSQL `--state`.
    ///   - note: where a PostgreSQL state says it cannot be used, and that it works again.
    static func verifierCheck(
        keysPath: String?, countersPath: String?, statePath: String? = nil, passwordFile: String? = nil, registryPath: String?,
        registry: any TagRegistry, command: String, note: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(CLIError) -> Verifier.SUNCheck? {
        guard let keysPath else {
            if countersPath != nil { throw .usage("--sun-counters needs --sun-keys FILE", command: command) }
            if statePath != nil { throw .usage("--state keeps the SUN read counters: it needs --sun-keys FILE", command: command) }
            return nil
        }
        if countersPath != nil, statePath != nil {
            throw .usage("give --state or --sun-counters, not both (--sun-counters FILE is --state FILE)", command: command)
        }
        let keyring = try readKeyring(keysPath)
        let countersFile: String
        if let chosen = statePath ?? countersPath {
            countersFile = chosen
        } else if let registryPath, registry is SQLiteRegistry || registry is PostgresRegistry {
            countersFile = registryPath
        } else {
            throw .usage(
                "SUN read counters must be kept on disk: give --sun-counters FILE (a SQLite file, created if missing), "
                    + "--state postgresql://… (shared by several servers) or a SQLite registry (tagfix registry import)", command: command)
        }
        if PostgresAddress.isAddress(countersFile) {
            let (address, password) = try FleetOptions.postgres(
                countersFile, passwordFile: passwordFile, label: statePath == nil ? "--registry: " : "--state: ", command: command)
            do throws(PostgresError) {
                let counters = try PostgresSUNCounters(address: address, password: password, report: note)
                return Verifier.SUNCheck(authenticator: keyring, counters: counters)
            } catch {
                throw RegistrySource.failure(error, address: address)
            }
        }
        do {
            let counters = try SQLiteSUNCounters(path: countersFile, create: countersPath != nil || statePath != nil)
            return Verifier.SUNCheck(authenticator: keyring, counters: counters)
        } catch {
            throw .registry(error)
        }
    }

    func run(_ io: some TerminalOutput) throws(CLIError) {
        let result = verifier.verify(url: url)
        if json {
            io.out(result.json)
        } else if result.valid, let uid = result.uid {
            var line = "valid: UID \(SUNHex.encode(uid))"
            if let counter = result.counter { line += ", read counter \(counter)" }
            if let data = result.fileData { line += ", file data \(SUNHex.encode(data))" }
            io.out(line)
        } else {
            io.out("invalid: \(result.failure?.code ?? "invalid")")
        }
        if !result.valid {
            throw .data(DataFileError(file: "URL", line: nil, message: result.failure?.description ?? "not a valid SUN"))
        }
    }
}
