import TagFixCore
import TagFixCrypto

/// `tagfix sign-url URL --key site.key [--uid UID]`: signs the location in a tag URL.
struct SignURLCommand: Subcommand {
    static let spec = CommandSpec(
        name: "sign-url",
        abstract: "Sign the location in a tag URL with the site key, for verify --trust-key.",
        discussion: """
            Prints URL with a sig= parameter added: an Ed25519 signature (unpadded base64url) over \
            the location as tagfix verify reads it — lat, lon, r, the tag id and, with --uid, the \
            tag's UID (then the signature starts u.; the URL copied onto another tag no longer \
            verifies). The exact signed text is in docs/trust.md. The URL must carry lat=, lon= \
            and r= and no sig= yet. The key file must be readable by its owner only (chmod 600); \
            the key is never printed. tagfix verify --trust-key site.pub makes an unsigned or \
            badly signed URL location untrusted; registry tags need no signature.
            """,
        options: [
            .init(name: "key", valueName: "FILE", help: "The private site key (tagfix keys generate), mode 0600."),
            .init(name: "uid", valueName: "HEX", help: "Bind the signature to the tag with this UID."),
            .init(name: "max-radius", valueName: "M", help: "Cap for the radius, as verify's --max-radius; default 500."),
        ],
        positionals: [.init(name: "URL", help: "The tag URL with ?lat=…&lon=…&r=… (quote it: it holds &).")],
        examples: [
            "tagfix sign-url 'https://tags.example.org/t/V1?lat=53.5462&lon=9.9671&r=30' --key site.key",
            "tagfix sign-url 'https://tags.example.org/t/V1?lat=53.5462&lon=9.9671&r=30' --key site.key --uid 04A1A2A3A4A5A6",
        ])

    var url: String
    var keyPath: String
    var uid: TagUID?
    var maximumRadius: Double

    init(_ arguments: ParsedArguments) throws(CLIError) {
        let name = Self.spec.name
        url = arguments.positionals[0]
        guard let key = arguments.value("key") else { throw .usage("sign-url needs --key FILE (tagfix keys generate)", command: name) }
        keyPath = key
        if let hex = arguments.value("uid") {
            do {
                uid = try TagUID(hex: hex)
            } catch {
                throw .usage("--uid: \(error)", command: name)
            }
        }
        maximumRadius = try arguments.number("max-radius", in: 0.1...100_000, command: name) ?? CircularRegion.defaultMaximumRadius
    }

    func run(_ io: some TerminalOutput) throws(CLIError) {
        let key = try SiteKeyFiles.readPrivate(keyPath)
        io.out(try Self.sign(url, key: key, uid: uid, maximumRadius: maximumRadius))
    }

    /// `url` with its location signed (also `enroll --write-url … --sign-key`).
    static func sign(_ url: String, key: Ed25519PrivateKey, uid: TagUID?, maximumRadius: Double) throws(CLIError) -> String {
        let message: [UInt8]
        do {
            message = try SignedLocation.message(forURL: url, uid: uid, maximumRadius: maximumRadius)
        } catch {
            throw .data(DataFileError(file: "URL", line: nil, message: "\(error)"))
        }
        do {
            let signature = try key.sign(message)
            return SignedLocation.appending(SignedLocation.Signature(bytes: signature, bindsUID: uid != nil), to: url)
        } catch {
            throw .unavailable("cannot sign: \(error)")
        }
    }
}
