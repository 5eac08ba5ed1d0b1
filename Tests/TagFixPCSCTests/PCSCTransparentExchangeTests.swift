import Foundation
import TagFixCore
import TagFixEmulators
import TagFixNDEF
import TagFixPCSC
import TagFixTesting
import Testing

private let flipperDumps = TestData.files(in: "nfc/flipper", suffix: ".nfc")
private let skip = Comment(rawValue: TestData.skipReason)
typealias Exchange = PCSCTransparentExchange

private func bytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.utf8.filter { $0 != UInt8(ascii: " ") })
    return stride(from: 0, to: digits.count - 1, by: 2).map { (Hex.nibble(digits[$0]) ?? 0) << 4 | (Hex.nibble(digits[$0 + 1]) ?? 0) }
}

/// What `body` throws, as a `Failure` (nil when it does not throw).
private func failure<T>(_ body: () throws(Exchange.Failure) -> T) -> Exchange.Failure? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

@Suite("PC/SC Part 3 Transparent Exchange: the APDUs and the data objects, hostile answers included")
struct PCSCTransparentExchangeTests {
    @Test("READ_SIG and FAST_READ become FF C2 00 01 with the timer and one 95 object, Le 00")
    func encoding() throws {
        #expect(try Exchange.transceive([0x3C, 0x00]) == bytes("FF C2 00 01 0B 5F 46 04 50 C3 00 00 95 02 3C 00 00"))
        #expect(
            try Exchange.transceive([0x3A, 0x03, 0x0A], timeoutMicroseconds: 0x0102_0304)
                == bytes("FF C2 00 01 0C 5F 46 04 04 03 02 01 95 03 3A 03 0A 00"))
        #expect(Exchange.startSession == bytes("FF C2 00 00 02 81 00 00"))
        #expect(Exchange.endSession == bytes("FF C2 00 00 02 82 00 00"))
        // A frame of 128 bytes or more takes the 81 length form, and Lc still counts every byte.
        let long = [UInt8](repeating: 0xA5, count: Exchange.maximumFrame)
        let apdu = try Exchange.transceive(long)
        #expect(apdu[4] == 0xFF && apdu.count == 5 + 0xFF + 1)
        #expect(Array(apdu[12..<14]) == [0x95, 0x81] && apdu[14] == UInt8(Exchange.maximumFrame))
    }

    @Test(
        "a frame the APDU cannot carry is refused before anything is sent", arguments: [0, PCSCTransparentExchange.maximumFrame + 1, 300])
    func frameLength(_ count: Int) {
        #expect(
            failure { () throws(Exchange.Failure) in try Exchange.transceive([UInt8](repeating: 0, count: count)) } == .frameLength(count))
    }

    @Test("an answer's data objects: one- and two-byte tags, the 81 and 82 length forms")
    func dataObjects() throws {
        let objects = try Exchange.dataObjects(bytes("C0 03 00 90 00 5F 46 04 01 02 03 04 97 81 02 AA BB 92 82 00 01 04"))
        #expect(objects.map(\.tag) == [0xC0, 0x5F46, 0x97, 0x92])
        #expect(objects.map(\.value) == [bytes("00 90 00"), bytes("01 02 03 04"), bytes("AA BB"), [0x04]])
        #expect(try Exchange.dataObjects([]).isEmpty)
        #expect(
            failure { () throws(Exchange.Failure) in try Exchange.dataObjects(bytes("C0 03 00 90 00 5F")) }
                == .malformed("a two-byte tag cut short"))
    }

    @Test("a card's answer comes out of 97; a 4-bit ACK or NAK as its one byte")
    func response() throws {
        let signature = (0..<32).map { UInt8($0) }
        let answer = bytes("C0 03 00 90 00 92 01 00 96 02 00 00 97 20") + signature + [0x90, 0x00]
        #expect(try Exchange.response(answer) == signature)
        #expect(try Exchange.response(bytes("C0 03 00 90 00 92 01 04 96 02 00 00 97 01 00 90 00")) == [0x00])
        // The objects in another order, and without the optional 92 and 96.
        #expect(try Exchange.response(bytes("97 02 01 02 C0 03 00 90 00 90 00")) == [0x01, 0x02])
        try Exchange.checkSession(bytes("C0 03 00 90 00 90 00"))
    }

    /// Hostile answers, each with the failure it must give (never a crash, never data).
    static let hostile: [(String, Exchange.Failure)] = [
        ("", .malformed("0 bytes, not even a status word")),
        ("90", .malformed("1 bytes, not even a status word")),
        ("6D 00", .unsupported(sw: [0x6D, 0x00])),
        ("6A 81", .unsupported(sw: [0x6A, 0x81])),
        ("64 01", .noAnswer),
        ("90 00", .malformed("no generic error status (C0) in 9000")),
        ("97 02 01 02 90 00", .malformed("no generic error status (C0) in 9702010290 00")),
        ("C0 02 00 90 90 00", .malformed("a generic error status of 2 bytes")),
        ("C0 03 00 90 00 97 05 01 02 90 00", .malformed("data object 97 says 5 bytes, 2 follow")),
        ("C0 03 00 90 00 97 83 00 00 01 90 00", .malformed("a length of 3 bytes")),
        ("C0 03 00 90 00 97 81 90 00", .malformed("a length cut short")),
        // Cut short as SW-stripped, but whole as SW-less objects (5F 90, empty): still no data.
        ("C0 03 00 90 00 5F 90 00", .noAnswer),
        ("C0 03 00 90 00 5F", .malformed("data object C0 says 3 bytes, 2 follow")),
        ("C0 03 00 90 00 97 90 00", .malformed("data object 97 without a length")),
        ("C0 03 00 90 00 96 02 01 00 97 01 00 90 00", .transmission(status: 0x0100)),
        ("C0 03 00 90 00 96 01 00 97 01 00 90 00", .malformed("a response status of 1 bytes")),
        ("C0 03 00 90 00 92 02 00 00 97 01 00 90 00", .malformed("a bit-framing object of 2 bytes")),
        ("C0 03 00 90 00 92 01 00 96 02 00 00 90 00", .noAnswer),
        ("C0 03 00 90 00 97 00 90 00", .noAnswer),
        ("C0 03 00 90 00 97 01 00 97 01 00 90 00", .malformed("2 response data objects")),
        ("C0 03 01 64 01 90 00", .noAnswer),
        ("C0 03 02 6A 81 90 00", .unsupported(sw: [0x6A, 0x81])),
        ("C0 03 01 67 00 67 00", .failed(index: 1, sw: [0x67, 0x00])),
        ("C0 03 00 90 00 6F 00", .failed(index: 0, sw: [0x6F, 0x00])),
    ]

    @Test(
        "hostile answers (short, wrong tags, wrong lengths) give a clean failure", arguments: 0..<PCSCTransparentExchangeTests.hostile.count
    )
    func hostileAnswer(_ index: Int) {
        let (hex, expected) = Self.hostile[index]
        let got = failure { () throws(Exchange.Failure) in try Exchange.response(bytes(hex)) }
        // A malformed answer's message names the bytes; only the kind is compared for those.
        if case .malformed = expected {
            guard case .malformed(let why) = got else {
                Issue.record("\(hex): \(String(describing: got))")
                return
            }
            #expect(!why.isEmpty)
            if case .malformed(let wanted) = expected, !wanted.contains("C0") { #expect(why == wanted, "\(hex)") }
        } else {
            #expect(got == expected, "\(hex)")
        }
    }

    @Test("every truncation of a good answer fails cleanly, or (without its status word only) gives the whole data, never part of it")
    func truncations() {
        let answer = bytes("C0 03 00 90 00 92 01 00 96 02 00 00 97 04 01 02 03 04 90 00")
        for count in 0..<answer.count {
            let cut = Array(answer.prefix(count))
            switch Result(catching: { () throws(Exchange.Failure) in try Exchange.response(cut) }) {
            case .success(let data):
                // An answer without a status word is taken as a reader that sends none (an
                // ACR1552U capture does so) when it is whole data objects: all four bytes.
                #expect(count == answer.count - 2 && data == [0x01, 0x02, 0x03, 0x04], "\(Hex.encode(cut)) gave \(Hex.encode(data))")
            case .failure(let failure): #expect(!failure.description.isEmpty)
            }
        }
    }

    @Test("answers that end with the C0 object and no status word (as captured from an ACR1552U) are taken")
    func withoutStatusWord() throws {
        try Exchange.checkSession(bytes("C0 03 00 90 00"))
        #expect(try Exchange.response(bytes("C0 03 00 90 00 92 01 00 96 02 00 00 97 02 AB CD")) == [0xAB, 0xCD])
        #expect(
            failure { () throws(Exchange.Failure) in try Exchange.checkSession(bytes("C0 03 01 6A 81")) } == .unsupported(sw: [0x6A, 0x81]))
        #expect(Exchange.switchToTypeALayer3 == bytes("FF C2 00 02 04 8F 02 00 03 00"))
    }

    @Test("which pass-through a reader name suggests: ACS PN53x direct, ACR1552U / OMNIKEY / uTrust transparent, others both")
    func candidates() {
        #expect(PCSCPassThrough.candidates(forReader: "ACS ACR122U PICC Interface 00 00") == [.direct])
        #expect(PCSCPassThrough.candidates(forReader: "ACS ACR1252 Reader [ACR1252 Reader PICC] 00 00") == [.direct])
        #expect(PCSCPassThrough.candidates(forReader: "ACS ACR1552 1S CL Reader 00 00") == [.transparent])
        #expect(
            PCSCPassThrough.candidates(forReader: "HID Global OMNIKEY 5422 Smartcard Reader [OMNIKEY 5422CL Smartcard Reader] 00 00")
                == [.transparent])
        #expect(PCSCPassThrough.candidates(forReader: "HID OMNIKEY 5427 CK 00 00") == [.transparent])
        #expect(PCSCPassThrough.candidates(forReader: "Identiv uTrust 3700 F CL Reader 00 00") == [.transparent])
        #expect(PCSCPassThrough.candidates(forReader: "Virtual PCD 00 00") == [.direct, .transparent])
        #expect(PCSCPassThrough(readerName: "Virtual PCD 00 00").current == .unknown)
    }

    @Test(
        "the emulated OMNIKEY/uTrust/ACR1552U answers READ_SIG and FAST_READ in a session as the tag does, for every shared NTAG dump",
        .enabled(if: !flipperDumps.isEmpty, skip), arguments: flipperDumps)
    func emulatedReader(_ path: String) throws {
        let image = try TagDump.load(Array(try #require(FileManager.default.contents(atPath: path))))
        for model in PCSCPart3Reader.Model.allCases where model.passThrough == .transparent {
            let tag = try image.emulatedTag()
            let reader = PCSCPart3Reader(tag: tag, model: model)
            // No exchange outside a session; READ BINARY refused inside one.
            let outside = failure { () throws(Exchange.Failure) in
                try Exchange.response(reader.answer(try Exchange.transceive([0x3C, 0x00])))
            }
            #expect(outside == .failed(index: 0, sw: [0x69, 0x85]), "\(model)")
            try Exchange.checkSession(reader.answer(Exchange.startSession))
            try Exchange.checkSession(reader.answer(Exchange.switchToTypeALayer3))
            #expect(reader.answer([0xFF, 0xB0, 0x00, 0x04, 0x10]) == [0x69, 0x85])
            for command in [[0x3C, 0x00], [0x3A, 0x03, 0x0A]] as [[UInt8]] {
                let viaReader = try Exchange.response(reader.answer(try Exchange.transceive(command)))
                guard case .data(let direct) = tag.transceive(command) else {
                    Issue.record("\(model): the tag did not answer \(Hex.encode(command))")
                    continue
                }
                #expect(viaReader == direct, "\(model) \(Hex.encode(command))")
            }
            // A NAK comes back as its one byte (the transport turns it into a refusal).
            #expect(try Exchange.response(reader.answer(try Exchange.transceive([0x3A, 0xFE, 0xFF]))).count == 1)
            try Exchange.checkSession(reader.answer(Exchange.endSession))
            #expect(reader.answer([0xFF, 0xB0, 0x00, 0x04, 0x10]).suffix(2) == [0x90, 0x00])
            // The direct transmit is not this family's: refused, never a PN532 frame.
            #expect(reader.answer([0xFF, 0x00, 0x00, 0x00, 0x04, 0xD4, 0x42, 0x3C, 0x00]) == [0x6A, 0x81])
        }
        // ACS's family refuses FF C2 outright.
        let acs = PCSCPart3Reader(tag: try image.emulatedTag(), model: .acr1252u)
        #expect(
            failure { () throws(Exchange.Failure) in try Exchange.checkSession(acs.answer(Exchange.startSession)) }
                == .unsupported(sw: [0x6D, 0x00]))
    }
}
