import TagFixDevices
import TagFixTags
import Testing

@testable import TagFixNFC

@Suite("libnfc's errors as the procedures' TagError")
struct NFCErrorMappingTests {
    @Test(
        "each libnfc code maps to the kind the procedures decide on, and keeps libnfc's name",
        arguments: [
            (NFCErrorCode.rfTransmission, TagError.Kind.tagLost), (.targetReleased, .tagLost), (.timeout, .timeout),
            (.mifareAuthFailed, .authenticationFailed), (.io, .readerFailed), (.noSuchDevice, .readerFailed), (.aborted, .cancelled),
            (.chip, .protocolError), (.invalidArgument, .protocolError), (.overflow, .protocolError),
        ])
    func mapping(_ code: NFCErrorCode, _ kind: TagError.Kind) {
        let error = NFCError(code: code, operation: "exchange 30 03…").tagError
        #expect(error.kind == kind)
        #expect(error.detail == code.name, "messages still name libnfc's code (NFC_ERFTRANS…)")
    }

    @Test("an incomplete read through libnfc reads as it did: the libnfc code, then what to do")
    func incompleteReadMessage() {
        let error = NDEFReadError.incompleteRead(after: 2, NFCError(code: .rfTransmission, operation: "exchange").tagError)
        #expect(
            error.description
                == "incomplete read: the tag stopped answering after 2 commands (NFC_ERFTRANS); hold the tag still until the read completes"
        )
    }
}

@Suite("libnfc's errors as the reader's ReaderError")
struct NFCReaderErrorMappingTests {
    /// A reader that is reopened says why through its code: the reader or its line (`io`,
    /// `timeout`, `not_found`), never a tag's exchange that failed on the air (`rf_error`), which
    /// a tag on metal makes now and then.
    @Test(
        "each libnfc code the reader reports has the code of what failed, and its message keeps libnfc's name",
        arguments: [
            (NFCErrorCode.rfTransmission, ReaderError.Code.rfError), (.targetReleased, .rfError), (.timeout, .timeout),
            (.noSuchDevice, .notFound), (.io, .io),
            (.chip, .io), (.aborted, .io),
        ])
    func mapping(_ code: NFCErrorCode, _ expected: ReaderError.Code) {
        let error = LibNFCReader<MonotonicClock>.readerError(NFCError(code: code, operation: "select a tag"))
        #expect(error.code == expected)
        #expect(error.message == "select a tag failed (\(code.name))")
    }
}
