import TagFixCore
import TagFixEmulators
import Testing

@Suite("PN532 emulator: the weak-tag fault")
struct WeakTagTests {
    /// A chip holding one NTAG213, listed (selected) once.
    func selected(_ weakness: PN532Chip.Weakness?) -> PN532Chip {
        var chip = PN532Chip()
        chip.slots = [.init(tag: ntag213(url: "https://a.example/t/W1"), present: true)]
        chip.setWeakness(weakness, slot: 0)
        _ = chip.handle([0x4A, 0x01, 0x00])
        return chip
    }

    /// The status bytes of `count` InDataExchange READ 3 commands.
    func statuses(_ chip: inout PN532Chip, _ count: Int) -> [UInt8] {
        (0..<count).map { _ in
            guard case .response(let answer) = chip.handle([0x40, 0x01, 0x30, 0x03]) else { return 0xFF }
            return answer[1]
        }
    }

    @Test("a healthy tag answers every exchange")
    func healthy() {
        var chip = selected(nil)
        #expect(statuses(&chip, 200).allSatisfy { $0 == 0x00 })
    }

    @Test(
        "RF errors come at the rate asked, as the PN532's RF status bytes, the same for the same seed",
        arguments: [0.1, 0.3, 0.6])
    func rate(_ rate: Double) {
        var chip = selected(PN532Chip.Weakness(rfErrorRate: rate, seed: 7))
        let seen = statuses(&chip, 2000)
        let failed = seen.filter { $0 != 0x00 }
        // 2000 draws: the share is within 4 σ of the rate.
        let sigma = (rate * (1 - rate) / 2000).squareRoot()
        #expect(abs(Double(failed.count) / 2000 - rate) < 4 * sigma, "\(failed.count) failed")
        #expect(Set(failed).isSubset(of: Set(PN532Chip.Weakness.rfStatuses)))
        #expect(Set(failed).count == PN532Chip.Weakness.rfStatuses.count, "time-out, CRC, parity and framing errors all occur")
        // An RF error leaves the tag selected: the next good exchange reads its page.
        var again = selected(PN532Chip.Weakness(rfErrorRate: rate, seed: 7))
        #expect(statuses(&again, 2000) == seen, "deterministic from the seed")
        var other = selected(PN532Chip.Weakness(rfErrorRate: rate, seed: 8))
        #expect(statuses(&other, 2000) != seen)
    }

    @Test("a brown-out: the tag answers nothing (time-out) until it is selected again")
    func brownOut() {
        var chip = selected(PN532Chip.Weakness(rfErrorRate: 0, lossRate: 1, seed: 1))
        #expect(statuses(&chip, 1) == [0x01])
        // No more faults drawn: still silent, until selected again.
        chip.slots[0].weakness = nil
        #expect(statuses(&chip, 3) == [0x01, 0x01, 0x01])
        _ = chip.handle([0x4A, 0x01, 0x00])
        #expect(statuses(&chip, 3) == [0x00, 0x00, 0x00])
    }

    @Test("script: weak TAG RATE [LOSS], rates as shares or percentages")
    func script() throws {
        let script = try FaultScript.parse("0 weak 1 0.3\n2 weak 0 20% 10%\n5 weak 1 0\n", tagCount: 2)
        #expect(
            script.steps.map(\.action) == [
                .weak(tag: 1, rfErrorRate: 0.3, lossRate: 0), .weak(tag: 0, rfErrorRate: 0.2, lossRate: 0.1),
                .weak(tag: 1, rfErrorRate: 0, lossRate: 0),
            ])
    }

    @Test(
        "script mistakes name their line",
        arguments: [
            ("1 weak", "needs a tag"), ("1 weak 2 0.1", "no tag 2"), ("1 weak 0 1.5", "shares"), ("1 weak 0 0.7 0.5", "more than 1"),
        ])
    func mistakes(_ text: String, _ fragment: String) {
        do {
            _ = try FaultScript.parse(text, tagCount: 1)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.line == 1)
            #expect(error.message.contains(fragment), "\(error)")
        }
    }
}
