import Foundation
import TagFixCore
import TagFixCrypto
import TagFixNDEF
import TagFixReport

/// `tagfix inspect`: what a tag dump holds.
struct InspectCommand: Subcommand {
    static let spec = CommandSpec(
        name: "inspect",
        abstract: "Show what a tag dump holds: format, tag type, UID, capability container, TLVs, NDEF records.",
        discussion: """
            Reads Flipper Zero .nfc files (NTAG/Ultralight and MIFARE Classic), Proxmark3 JSON \
            (hf mfu dump / hf mf dump), nfc-mfultralight and nfc-mfclassic binary dumps, and TagFix \
            tag JSON (docs/tag-json.md). The format is detected by content.
            A tag that is not NDEF formatted says so and exits 0. A malformed dump file exits 65 \
            naming the line; an NDEF structure that is broken (a TLV past the data area, a malformed \
            message) is shown and exits 65.
            """,
        options: [.init(name: "json", valueName: nil, help: "Print one JSON object.")],
        positionals: [.init(name: "FILE", help: "The dump to read.")],
        examples: ["tagfix inspect Call_112.nfc", "tagfix inspect hf-mfu-dump.json --json | jq .url"])

    var path: String
    var json: Bool

    init(_ arguments: ParsedArguments) {
        path = arguments.positionals[0]
        json = arguments.flag("json")
    }

    func run(_ io: some TerminalOutput) throws(CLIError) {
        guard FileManager.default.fileExists(atPath: path) else {
            throw .noInput(DataFileError(file: path, line: nil, message: "no such file", unreadable: true))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .noInput(DataFileError(file: path, line: nil, message: "cannot read the file (check its permissions)", unreadable: true))
        }
        let image: TagImage
        do {
            image = try TagDump.load(Array(data))
        } catch {
            throw .data(error.inFile(path))
        }
        // The signature checked as a live read checks it.
        let originality = image.uid.map { NXPOriginality.check(uid: $0, signature: image.signature, type: image.chip.type) }
        let inspection = TagInspection(path: path, image: image, originality: originality)
        if json {
            io.out(inspection.json)
        } else {
            for line in inspection.lines { io.out(line) }
        }
        if let broken = inspection.broken { throw .data(DataFileError(file: path, line: nil, message: broken)) }
    }
}
