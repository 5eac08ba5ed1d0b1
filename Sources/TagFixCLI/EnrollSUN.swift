import Foundation
import Synchronization
import TagFixCore
import TagFixCrypto
import TagFixDevices

/// `enroll --sun KEYSET --sun-keys FILE`: the key set that provisions the tag and then checks it,
/// and the parameter names its URL carries the SUN in. The provisioning itself is
/// `NTAG424Provisioner` (TagFixCrypto), run in the tag session's dialogue.
struct SUNEnrolment: Sendable {
    var keyName: String
    var names: SUNParameterNames
    var keys: SUNVerifier

    /// `nil` without --sun. Replaces `template`'s {picc_data} and {cmac} by the zeros the tag
    /// mirrors over.
    init?(_ arguments: ParsedArguments, template: inout String?, command: String) throws(CLIError) {
        guard let keyName = arguments.value("sun") else {
            if arguments.value("sun-keys") != nil { throw .usage("--sun-keys FILE goes with --sun KEYSET", command: command) }
            return nil
        }
        guard let keysPath = arguments.value("sun-keys") else {
            throw .usage("--sun \(keyName) needs --sun-keys FILE (the key file verify --sun-keys reads)", command: command)
        }
        guard let raw = template else {
            throw .usage(
                "--sun needs --write-url with {picc_data} and {cmac}, e.g. 'https://t.example/t/{id}?picc_data={picc_data}&cmac={cmac}'",
                command: command)
        }
        guard arguments.value("sign-key") == nil else {
            throw .usage("--sign-key and --sun: a SUN tag proves itself on every tap; leave out --sign-key", command: command)
        }
        do {
            (template, names) = try NTAG424Provisioner.prepare(template: raw)
        } catch {
            throw .usage(error.description, command: command)
        }
        let keyring = try SunCommand.readKeyring(keysPath)
        guard let keys = keyring.sets[keyName] else {
            throw .usage(
                "--sun \(keyName): \(keysPath) has no [\(keyName)] key set (it has: \(keyring.names.joined(separator: ", ")))",
                command: command)
        }
        self.keyName = keyName
        self.keys = keys
    }

    var settings: SUNSettings { SUNSettings(keyName: keyName, names: names) }

    /// Waits for the tag, provisions it with `url` (whose NDEF message is `message`) and returns
    /// the tag as first read and the SUN read back.
    func provision(
        url: String, message: [UInt8], reader: ReaderAddress, timeout: Duration, clock: MonotonicClock, io: some TerminalOutput
    ) async throws(CLIError) -> (TagScan, SUNResult) {
        let session = try ReaderOption.session(reader, clock: clock, command: EnrollCommand.spec.name)
        let outcome = ProvisionOutcome()
        let (keys, names) = (self.keys, self.names)
        let dialogue = TagDialogue { identity, exchange in
            let result: Result<SUNResult, NTAG424ProvisionError>
            do {
                let provisioner = try NTAG424Provisioner(uid: identity.uid.bytes, url: url, message: message, names: names, keys: keys)
                result = .success(
                    try withoutActuallyEscaping(exchange) { exchange in
                        try provisioner.run(exchange: exchange) { io.err("  \($0.rawValue)") }
                    })
            } catch let error as NTAG424ProvisionError {
                result = .failure(error)
            } catch {
                result = .failure(.tag(.transport("\(error)"), reached: nil))
            }
            outcome.value.withLock { $0 = result }
        }
        let found = await race(deadline: clock.now.advanced(by: timeout), clock: clock) {
            () async -> Result<(TagScan, SUNResult), CLIError> in
            for await event in session.run(TagSessionRequest(dialogue: dialogue)) {
                switch event {
                case .ready(let description): io.err("reader: \(description)")
                case .done(let done):
                    switch outcome.value.withLock({ $0 }) {
                    case .success(let sun): return .success((done.scan, sun))
                    case .failure(let error): return .failure(.unavailable("nothing was enrolled: \(error)"))
                    case nil:
                        return .failure(.unavailable("reader \(reader) cannot exchange commands with a tag: --sun needs a libnfc reader"))
                    }
                case .writeFailed(let uid, let error): return .failure(.unavailable("cannot write tag \(uid.hex): \(error)"))
                case .readFailed(let error): return .failure(.unavailable("cannot read the tag: \(error)"))
                case .unavailable(let error): return .failure(.unavailable("cannot open the reader \(reader): \(error)"))
                }
            }
            return .failure(.unavailable("the reader stopped"))
        }
        switch found {
        case .value(let read): return try read.get()
        case .timedOut: throw .timedOut("no tag within \(Coordinate.format(timeout.seconds, 0)) s: nothing was enrolled")
        case .cancelled: throw .unavailable("the reader stopped")
        }
    }
}

/// What the dialogue found, for the task that waits on the session.
private final class ProvisionOutcome: Sendable {
    let value = Mutex<Result<SUNResult, NTAG424ProvisionError>?>(nil)
}
