import TagFixNFC
import TagFixTags
import Testing

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
