import Testing

@testable import TagFixCore

/// The pure half of SUN checking: finding the fields in a URL, the byte layouts.
@Suite struct SUNMessageTests {
    private func hex(_ text: String) -> [UInt8] { SUNHex.decode(Array(text.utf8))! }

    @Test func encryptedParameters() throws {
        let message = try SUNMessage.parse(
            "https://ntag.nxp.com/424?e=EF963FF7828658A599F3041510671E88&c=94EED9EE65337086",
            names: SUNParameterNames(piccData: "e", cmac: "c"))
        #expect(
            message
                == .encrypted(
                    piccData: hex("EF963FF7828658A599F3041510671E88"), encryptedFileData: nil, mac: hex("94EED9EE65337086"), macInput: []))
    }

    /// SDMMACInputOffset ≠ SDMMACOffset: the input is the URL's ASCII from the named value up to
    /// the CMAC value, the `&cmac=` between them included (AN12196 §3.4.4.2).
    @Test func macInputRunsUpToTheCMACValue() throws {
        let url =
            "https://www.my424dna.com/?picc_data=FD91EC264309878BE6345CBE53BADF40&enc=CEE9A53E3E463EF1F459635736738962&cmac=ECC1E7F6C6C73BF6"
        let message = try SUNMessage.parse(url, names: SUNParameterNames(encryptedFileData: "enc", macInputFrom: "enc"))
        guard case .encrypted(_, let file, _, let input) = message else {
            Issue.record("not encrypted: \(message)")
            return
        }
        #expect(file == hex("CEE9A53E3E463EF1F459635736738962"))
        #expect(input == Array("CEE9A53E3E463EF1F459635736738962&cmac=".utf8))
    }

    @Test func plainParametersCounterMostSignificantFirst() throws {
        let message = try SUNMessage.parse("https://x.example/t?uid=041E3C8A2D6B80&ctr=00012A&cmac=4B00064004B0B3D3")
        #expect(message == .plain(uid: hex("041E3C8A2D6B80"), counter: 0x12A, mac: hex("4B00064004B0B3D3"), macInput: []))
    }

    @Test(arguments: [
        (
            "https://x/?picc_data=00&cmac=0011223344556677",
            SUNError.wrongLength(parameter: "picc_data", expected: "32 (AES; LRP is not supported)", found: 2)
        ),
        ("https://x/?uid=041E3C8A2D6B80&cmac=00112233445566", .wrongLength(parameter: "cmac", expected: "16", found: 14)),
        ("https://x/?uid=041E3C8A2D6B80&cmac=0011223344556677&ctr=12345", .wrongLength(parameter: "ctr", expected: "6", found: 5)),
        ("https://x/?uid=041E3C8A2D6B8Z&cmac=0011223344556677", .badHex(parameter: "uid")),
        ("https://x/?cmac=0011223344556677", .missingParameter("picc_data")),
        ("https://x/no-query", .missingParameter("cmac")),
        ("https://x/?cmac=0011223344556677#picc_data=00", .missingParameter("picc_data")),
    ])
    func malformed(url: String, error: SUNError) {
        #expect(throws: error) { try SUNMessage.parse(url) }
    }

    /// Datasheet §9.3.4: bit 7 UID mirrored, bit 6 counter mirrored, bits 5–4 zero, bits 3–0 = 7.
    @Test func piccDataTag() throws {
        let body: [UInt8] = [0x04, 0xDE, 0x5F, 0x1E, 0xAC, 0xC0, 0x40, 0x3D, 0x00, 0x00, 0, 0, 0, 0, 0]
        #expect(try PICCData(decrypted: [0xC7] + body).counter == 61)
        #expect(try PICCData(decrypted: [0x87] + body).counter == nil)
        for tag: UInt8 in [0x47, 0xC6, 0xD7, 0xE7, 0x00, 0xFF, 0xCA] {
            #expect(throws: SUNError.unknownPICCDataTag(tag)) { try PICCData(decrypted: [tag] + body) }
        }
    }

    /// SV2 / SV1 layouts (AN12196 §3.4.2.2: SV2 = 3CC30001008004DE5F1EACC0403D0000), zero
    /// padding without a counter, the counter least significant byte first.
    @Test func sessionVectors() {
        let picc = PICCData(uid: hex("04DE5F1EACC040"), counter: 61)
        #expect(picc.sv2 == hex("3CC30001008004DE5F1EACC0403D0000"))
        #expect(picc.sv1 == hex("C33C0001008004DE5F1EACC0403D0000"))
        #expect(picc.fileDataIVInput == hex("3D000000000000000000000000000000"))
        #expect(PICCData(uid: hex("04DE5F1EACC040"), counter: nil).sv2 == hex("3CC30001008004DE5F1EACC040000000"))
        #expect(PICCData(uid: hex("04DE5F1EACC040"), counter: 0x010203).sessionContext.suffix(3) == [3, 2, 1])
    }

    @Test func truncationKeepsOddBytes() {
        #expect(truncatedMAC(Array(0..<16)) == [1, 3, 5, 7, 9, 11, 13, 15])
    }

    @Test func resultJSON() {
        #expect(SUNResult.verified(uid: hex("04DE5F1EACC040"), counter: 61).json == #"{"valid":true,"uid":"04DE5F1EACC040","counter":61}"#)
        #expect(SUNResult.invalid(.macMismatch).json == #"{"valid":false,"reason":"mac_mismatch"}"#)
        #expect(SUNResult.verified(uid: [4], counter: nil, fileData: [0x78]).json == #"{"valid":true,"uid":"04","file_data":"78"}"#)
    }
}
