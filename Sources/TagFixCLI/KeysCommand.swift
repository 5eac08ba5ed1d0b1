import Foundation
import TagFixCore
import TagFixCrypto
import TagFixDevices

/// `tagfix keys generate | public`: the site key that signs locations in tag URLs.
struct KeysCommand: Subcommand {
    static let spec = CommandSpec(
        name: "keys",
        abstract: "Make the site key that signs locations in tag URLs (Ed25519), and its public key.",
        discussion: """
            keys generate --out site.key writes a new Ed25519 private key (PEM, PKCS #8) to a new \
            file of mode 0600 and its public key beside it (site.pub, or --public-out FILE); an \
            existing file is never overwritten (exit 74). keys public --key site.key prints the \
            public key, or writes it to a new file with --out. The private key signs URLs \
            (tagfix sign-url, tagfix enroll --sign-key); give the public key to tagfix verify \
            --trust-key. A private key file that anyone but its owner can read or write is refused \
            (exit 66: chmod 600 it). Keys are never printed by any other command, nor logged. \
            See docs/trust.md.
            """,
        options: [
            .init(
                name: "out", valueName: "FILE", help: "generate: the private key file to create (mode 0600); public: the public key file."),
            .init(name: "public-out", valueName: "FILE", help: "generate: the public key file; default: --out with .pub for .key."),
            .init(name: "key", valueName: "FILE", help: "public: the private key file."),
        ],
        positionals: [.init(name: "ACTION", help: "generate or public.")],
        examples: [
            "tagfix keys generate --out site.key",
            "tagfix keys public --key site.key --out site.pub",
        ])

    enum Action {
        case generate(privatePath: String, publicPath: String)
        case publicKey(keyPath: String, out: String?)
    }

    var action: Action

    init(_ arguments: ParsedArguments) throws(CLIError) {
        let name = Self.spec.name
        switch arguments.positionals[0] {
        case "generate":
            guard let out = arguments.value("out") else { throw .usage("keys generate needs --out FILE", command: name) }
            guard arguments.value("key") == nil else { throw .usage("keys generate makes a key: drop --key", command: name) }
            let publicPath = arguments.value("public-out") ?? Self.publicPath(for: out)
            guard publicPath != out else { throw .usage("the public key needs a file of its own (--public-out)", command: name) }
            action = .generate(privatePath: out, publicPath: publicPath)
        case "public":
            guard let key = arguments.value("key") else { throw .usage("keys public needs --key FILE", command: name) }
            guard arguments.value("public-out") == nil else { throw .usage("keys public writes to --out", command: name) }
            action = .publicKey(keyPath: key, out: arguments.value("out"))
        case let other:
            throw .usage("no keys action \"\(other)\" (generate, public)", command: name)
        }
    }

    /// `site.key` → `site.pub`; any other name gets `.pub` appended.
    static func publicPath(for privatePath: String) -> String {
        privatePath.hasSuffix(".key") ? String(privatePath.dropLast(4)) + ".pub" : privatePath + ".pub"
    }

    func run(_ io: some TerminalOutput) throws(CLIError) {
        switch action {
        case .generate(let privatePath, let publicPath):
            for path in [privatePath, publicPath] where FileManager.default.fileExists(atPath: path) {
                throw .ioError("\(path) exists: tagfix never overwrites a key file; choose another name or move it away")
            }
            let key: Ed25519PrivateKey
            let privatePEM: String
            let publicPEM: String
            do {
                key = try Ed25519PrivateKey.generate()
                privatePEM = try key.pem()
                publicPEM = try key.publicKey.pem()
            } catch {
                throw .unavailable("cannot make an Ed25519 key: \(error)")
            }
            try SiteKeyFiles.create(privatePath, privatePEM, mode: 0o600)
            try SiteKeyFiles.create(publicPath, publicPEM, mode: 0o644)
            io.out(
                "wrote \(privatePath) (the private site key, mode 0600: keep it off the verifiers) and \(publicPath) (for tagfix verify --trust-key)"
            )
        case .publicKey(let keyPath, let out):
            let key = try SiteKeyFiles.readPrivate(keyPath)
            let pem: String
            do {
                pem = try key.publicKey.pem()
            } catch {
                throw .unavailable("cannot derive the public key: \(error)")
            }
            if let out {
                guard !FileManager.default.fileExists(atPath: out) else {
                    throw .ioError("\(out) exists: tagfix never overwrites a key file; choose another name or move it away")
                }
                try SiteKeyFiles.create(out, pem, mode: 0o644)
                io.out("wrote \(out) (for tagfix verify --trust-key)")
            } else {
                for line in pem.split(separator: "\n") { io.out(String(line)) }
            }
        }
    }
}

/// Reading and writing site key files.
enum SiteKeyFiles {
    /// Creates `path` (never replacing a file: O_EXCL) with `mode`, and writes `text`.
    static func create(_ path: String, _ text: String, mode: mode_t) throws(CLIError) {
        do {
            try SecretFile.create(path, text, mode: UInt32(mode))
        } catch {
            throw .ioError(error.description)
        }
    }

    /// The private site key in `path`, refused unless only its owner can read and write it.
    static func readPrivate(_ path: String) throws(CLIError) -> Ed25519PrivateKey {
        let text: String
        do {
            text = try SecretFile.read(path)
        } catch {
            throw error.unreadable ? .noInput(error) : .file(error.file == nil ? error.inFile(path) : error)
        }
        do {
            return try Ed25519PrivateKey(pem: text)
        } catch {
            throw .data(DataFileError(file: path, line: nil, message: "\(error)"))
        }
    }

    /// The trusted site keys in each of `paths` (PEM PUBLIC KEY blocks; one file may hold several).
    static func readTrusted(_ paths: [String]) throws(CLIError) -> TrustedSiteKeys {
        var keys: [Ed25519PublicKey] = []
        for path in paths {
            let text: String
            do {
                text = try TextFile.read(path)
            } catch {
                throw .file(error.file == nil ? error.inFile(path) : error)
            }
            do {
                keys += try TrustedSiteKeys.parse(text).keys
            } catch {
                throw .data(DataFileError(file: path, line: nil, message: "\(error)"))
            }
        }
        return TrustedSiteKeys(keys)
    }
}
