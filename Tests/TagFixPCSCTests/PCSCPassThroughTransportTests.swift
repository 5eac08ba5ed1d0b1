import Foundation
import TagFixCore
import TagFixEmulators
import TagFixNDEF
import TagFixTags
import TagFixTesting
import Testing

@testable import TagFixPCSC

private let flipperDumps = TestData.files(in: "nfc/flipper", suffix: ".nfc")
private let skip = Comment(rawValue: TestData.skipReason)
private let passThroughModels = PCSCPart3Reader.Model.allCases.filter { $0.passThrough != .none }

/// A card channel straight to the emulated reader (no pcscd): every APDU the transports send,
/// and an optional rewrite of the reader's answers (hostile readers).
private final class EmulatedChannel: PCSCChannel {
    let reader: PCSCPart3Reader
    var sent: [[UInt8]] = []
    var tamper: ([UInt8], [UInt8]) -> [UInt8] = { $1 }

    init(_ reader: PCSCPart3Reader) { self.reader = reader }

    func transmit(_ apdu: [UInt8]) throws(PCSCError) -> [UInt8] {
        sent.append(apdu)
        // A runaway loop shows as an error here rather than as a hung test.
        guard sent.count < 500 else { throw PCSCError(code: -1, operation: "too many APDUs") }
        return tamper(apdu, reader.answer(apdu))
    }
    func reset() throws(PCSCError) { reader.reset() }
    func disconnect() {}
}

/// What one read through the emulated reader gave: the message and signature, or the error.
private struct Outcome {
    var message: [UInt8]?
    var signature: [UInt8]?
    var error: String?
    var channel: EmulatedChannel
    var passThrough: PCSCPassThrough
}

private func readThrough(
    _ tag: any EmulatedTag, model: PCSCPart3Reader.Model, tamper: (([UInt8], [UInt8]) -> [UInt8])? = nil
) throws -> Outcome {
    let channel = EmulatedChannel(PCSCPart3Reader(tag: tag, model: model))
    if let tamper { channel.tamper = tamper }
    let passThrough = PCSCPassThrough(readerName: model.readerName)
    let card = try PCSCTag(card: channel, atr: channel.reader.atr, passThrough: passThrough)
    var outcome = Outcome(channel: channel, passThrough: passThrough)
    switch card.read() {
    case .success(let read):
        outcome.message = read.message
        outcome.signature = read.signature
    case .failure(let error):
        outcome.error = error.description
    }
    card.disconnect()
    return outcome
}

@Suite("PC/SC pass-through: the Type 2 transport over each emulated reader family, honest and hostile")
struct PCSCPassThroughTransportTests {
    @Test(
        "every family reads every shared Flipper dump with FAST_READ and READ_SIG through its own pass-through, and leaves no session open",
        .enabled(if: !flipperDumps.isEmpty, skip), arguments: flipperDumps)
    func families(_ path: String) throws {
        let image = try TagDump.load(Array(try #require(FileManager.default.contents(atPath: path))))
        for model in passThroughModels {
            let tag = try image.emulatedTag()
            guard case .data(let signature) = tag.transceive([0x3C, 0x00]) else { throw TransportUnexpected.noSignature }
            let outcome = try readThrough(tag, model: model)
            let (channel, passThrough) = (outcome.channel, outcome.passThrough)
            #expect(outcome.error == nil && outcome.signature == signature, "\(model): \(outcome.error ?? "")")
            let method: PCSCPassThrough.Method = model.passThrough == .direct ? .direct : .transparent
            // Learnt from the reader's answers, and kept for the reader's life.
            #expect(passThrough.current == PCSCPassThrough.State.supported(method), "\(model)")
            let shown = channel.sent.map { Hex.encode($0) }
            if method == .transparent {
                #expect(channel.sent.last == PCSCTransparentExchange.endSession, "\(model): \(shown)")
                #expect(!channel.sent.contains { $0.starts(with: [0xFF, 0xB0]) }, "\(model): \(shown)")
            } else {
                #expect(!channel.sent.contains { $0.starts(with: [0xFF, 0xC2]) }, "\(model): \(shown)")
            }
        }
    }

    // No time limit: EmulatedChannel ends a runaway loop with an error at 500 APDUs.
    @Test("a reader known to pass through that then garbles an answer: a clean end, not APDUs without end")
    func garbledAfterLearning() throws {
        let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [.uri("https://garble.example/x")]).encoded())
        for model in [PCSCPart3Reader.Model.acr1252u, .omnikey5422] {
            // READ_SIG (the second raw command) answered with a bare 90 00.
            let readSignature: ([UInt8]) -> Bool = { command in
                let tail = Array(command.suffix(3))
                return tail == [0x3C, 0x00, 0x00] || Array(tail.suffix(2)) == [0x3C, 0x00]
            }
            let outcome = try readThrough(tag, model: model) { command, answer in readSignature(command) ? [0x90, 0x00] : answer }
            #expect(outcome.message != nil && outcome.signature == nil, "\(model): \(outcome.error ?? "")")
            #expect(outcome.channel.sent.count < 10, "\(model): \(outcome.channel.sent.count) APDUs")
        }
    }

    @Test(
        "a hostile transparent-exchange answer to the first FAST_READ: never a wrong URL (a clean failure, or the pages by READ BINARY)",
        arguments: 0..<PCSCTransparentExchangeTests.hostile.count)
    func hostileFastRead(_ index: Int) throws {
        let url = "https://hostile.example/" + String(repeating: "h", count: 90)
        let tag = try EmulatedType2Tag.ntag(215, message: NDEFMessage(records: [.uri(url)]).encoded())
        let hostile = PCSCTransparentExchangeTests.hostile[index].0
        let answer = hexBytes(hostile)
        var tampered = false
        let outcome = try readThrough(tag, model: .omnikey5022) { command, real in
            guard !tampered, command.starts(with: [0xFF, 0xC2, 0x00, 0x01]), command.contains(0x3A) else { return real }
            tampered = true
            return answer
        }
        if let error = outcome.error {
            #expect(!error.isEmpty && outcome.message == nil, "\(hostile)")
        } else {
            let message = try #require(outcome.message, "\(hostile): read without a message")
            let found = try NDEFMessage(bytes: message).firstURL
            #expect(found == url, "\(hostile)")
        }
    }
}

private func hexBytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.utf8.filter { $0 != UInt8(ascii: " ") })
    return stride(from: 0, to: digits.count - 1, by: 2).map { (Hex.nibble(digits[$0]) ?? 0) << 4 | (Hex.nibble(digits[$0 + 1]) ?? 0) }
}

private enum TransportUnexpected: Error { case noSignature }
