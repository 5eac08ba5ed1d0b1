import TagFixEmulators
import Testing

@Suite("PN532 chip: several tags take turns")
struct PN532TurnTests {
    /// The UID the chip lists first for a one-target InListPassiveTarget, as libnfc polls.
    static func listed(_ chip: inout PN532Chip) -> [UInt8]? {
        guard case .response(let answer) = chip.handle([0x4A, 0x01, 0x00]), answer.count > 7, answer[1] == 1 else { return nil }
        return Array(answer[7..<7 + Int(answer[6])])
    }

    @Test(
        "with two tags and no script, each reader session after a release (InRelease, the field off, PowerDown) gets the next tag",
        arguments: [[UInt8(0x52), 0x00], [0x32, 0x01, 0x00], [0x16, 0x10]])
    func cycle(_ release: [UInt8]) {
        let a = ntag213(url: "https://a.example"), b = ntag213(url: "https://b.example", uid: [0x04, 1, 2, 3, 4, 5, 6])
        var chip = PN532Chip()
        chip.slots = [a, b].map { .init(tag: $0, present: true) }
        #expect(Self.listed(&chip) == a.uid)
        #expect(Self.listed(&chip) == a.uid, "polling again in the same session finds the same tag")
        _ = chip.handle(release)
        #expect(Self.listed(&chip) == b.uid)
        _ = chip.handle(release)
        #expect(Self.listed(&chip) == a.uid, "and round again")
        // A release with nothing listed since (libnfc switches the field off when it opens a
        // device) does not skip a tag.
        _ = chip.handle(release)
        _ = chip.handle(release)
        #expect(Self.listed(&chip) == b.uid)
    }

    @Test("one tag is always the one listed")
    func single() {
        let a = ntag213(url: "https://a.example")
        var chip = PN532Chip()
        chip.slots = [.init(tag: a, present: true)]
        for _ in 0..<3 {
            #expect(Self.listed(&chip) == a.uid)
            _ = chip.handle([0x52, 0x00])
        }
    }
}
