import TagFixCore
import TagFixServe
import Testing

@Suite("A phone tap's POST body")
struct PhoneTapRequestTests {
    private func parse(_ text: String) throws(PhoneTapRequestError) -> PhoneTapRequest {
        try PhoneTapRequest(body: Array(text.utf8))
    }

    @Test("a position with its accuracy and the browser's timestamp")
    func position() throws {
        let request = try parse(
            #"{"url":"https://tags.example.org/t/E1","lat":53.545,"lon":9.966,"accuracy_m":12.5,"timestamp_ms":1780305243201}"#)
        #expect(request.url == "https://tags.example.org/t/E1")
        #expect(request.position == .fix(try Coordinate(latitude: 53.545, longitude: 9.966), accuracy: 12.5))
        #expect(request.timestamp == Timestamp(nanosecondsSinceEpoch: 1_780_305_243_201_000_000))
        #expect(try parse(request.body) == request)
    }

    @Test("each of the browser's three errors", arguments: PhoneTapRequest.PositionError.allCases)
    func errors(_ error: PhoneTapRequest.PositionError) throws {
        let request = try parse(#"{"url":"https://t.example/t/E1","error":"\#(error.rawValue)"}"#)
        #expect(request.position == .unavailable(error))
        #expect(request.timestamp == nil)
        #expect(try parse(request.body) == request)
    }

    @Test(
        "hostile and malformed bodies are refused with what is wrong",
        arguments: [
            (
                #"{"url":"https://t.example/t/E1","lat":91,"lon":0,"accuracy_m":5}"#,
                PhoneTapRequestError.outOfRange(member: "lat", value: 91)
            ),
            (#"{"url":"https://t.example/t/E1","lat":-90.5,"lon":0,"accuracy_m":5}"#, .outOfRange(member: "lat", value: -90.5)),
            (#"{"url":"https://t.example/t/E1","lat":0,"lon":180.01,"accuracy_m":5}"#, .outOfRange(member: "lon", value: 180.01)),
            (#"{"url":"https://t.example/t/E1","lat":0,"lon":0,"accuracy_m":-1}"#, .outOfRange(member: "accuracy_m", value: -1)),
            (#"{"url":"https://t.example/t/E1","lat":0,"lon":0,"accuracy_m":0}"#, .outOfRange(member: "accuracy_m", value: 0)),
            (#"{"url":"https://t.example/t/E1","lat":0,"lon":0,"accuracy_m":1e9}"#, .outOfRange(member: "accuracy_m", value: 1e9)),
            (
                #"{"url":"https://t.example/t/E1","lat":"NaN","lon":0,"accuracy_m":5}"#,
                .wrongType(member: "lat", expected: "a number", found: "a string")
            ),
            (#"{"url":"https://t.example/t/E1","lat":1,"lon":2,"accuracy_m":5,"source":"nfc"}"#, .unknownMember("source")),
            (#"{"url":"https://t.example/t/E1","lat":1,"lon":2,"accuracy_m":5,"verdict":"confirmed"}"#, .unknownMember("verdict")),
            (#"{"url":"https://t.example/t/E1","lat":1,"lon":2}"#, .missingMember("accuracy_m")),
            (#"{"lat":1,"lon":2,"accuracy_m":3}"#, .missingMember("url")),
            (#"{"url":"javascript:alert(1)","error":"denied"}"#, .badURL("it is not an http(s) URL")),
            (#"{"url":"https://t.example/t/E 1","error":"denied"}"#, .badURL("it holds spaces or control characters")),
            (#"{"url":"https://t.example/t/E1","error":"nope"}"#, .unknownError("nope")),
            (#"{"url":"https://t.example/t/E1","error":"denied","lat":1}"#, .positionAndError),
            (#"{"url":"https://t.example/t/E1","error":"denied","timestamp_ms":5}"#, .outOfRange(member: "timestamp_ms", value: 5)),
            (#"["https://t.example/t/E1"]"#, .notAnObject("an array")),
        ])
    func refused(_ body: String, _ expected: PhoneTapRequestError) {
        #expect(throws: expected) { try parse(body) }
        #expect(!expected.description.isEmpty)
        #expect(expected.status == 400)
    }

    @Test("a body that is not JSON, a number out of range, a member given twice, and one too large are refused")
    func bounds() {
        for body in [
            #"{"url":"https://t.example/t/E1","lat":0,"lon":0,"accuracy_m":1e999}"#,
            #"{"url":"https://t.example/t/E1","url":"https://t.example/t/E2","error":"denied"}"#,
        ] {
            #expect {
                try parse(body)
            } throws: { error in
                guard case .notJSON(let why) = error as? PhoneTapRequestError else { return false }
                return why.contains("out of range") || why.contains("duplicate member")
            }
        }
        #expect(throws: PhoneTapRequestError.self) { try parse("{\"url\":") }
        let huge = #"{"url":"https://t.example/t/"# + String(repeating: "A", count: 5000) + #"","error":"denied"}"#
        #expect(throws: PhoneTapRequestError.tooLarge(huge.utf8.count)) { try parse(huge) }
        #expect(PhoneTapRequestError.tooLarge(5000).status == 413)
        let longURL = #"{"url":"https://t.example/t/"# + String(repeating: "A", count: 2100) + #"","error":"denied"}"#
        #expect(throws: PhoneTapRequestError.badURL("it is empty or longer than 2048 bytes")) { try parse(longURL) }
    }

    @Test("a member name from the body is printed safely in the error")
    func printable() {
        let body = #"{"url":"https://t.example/t/E1","\u001b[31mred":1}"#
        #expect(throws: PhoneTapRequestError.unknownMember("?[31mred")) { try parse(body) }
    }

    @Test("a number of 1 500 digits, or a member name as long, is not echoed whole in the 400's message")
    func longValuesCut() {
        let digits = "9" + String(repeating: "0", count: 1500) + "e999"
        let name = String(repeating: "u", count: 1500)
        for body in [
            #"{"url":"https://t.example/t/E1","lat":\#(digits),"lon":0,"accuracy_m":5}"#,
            #"{"url":"https://t.example/t/E1","\#(name)":1,"\#(name)":2}"#,
        ] {
            #expect {
                try parse(body)
            } throws: { error in
                let message = (error as? PhoneTapRequestError)?.description ?? ""
                return message.utf8.count < 300 && message.contains("…") && message.contains("JSON")
            }
        }
    }

    @Test(
        "an accuracy below a centimetre (a subnormal 1e-320, logged as 0) is refused; one of a centimetre is taken",
        arguments: ["1e-320", "5e-324", "0.009", "2.2250738585072014e-308"])
    func accuracyFloor(_ accuracy: String) throws {
        #expect {
            try parse(#"{"url":"https://t.example/t/E1","lat":0,"lon":0,"accuracy_m":\#(accuracy)}"#)
        } throws: { error in
            guard case .outOfRange(let member, _) = error as? PhoneTapRequestError else { return false }
            return member == "accuracy_m" && (error as? PhoneTapRequestError)?.description.contains("0.01") == true
        }
        let least = try parse(#"{"url":"https://t.example/t/E1","lat":0,"lon":0,"accuracy_m":0.01}"#)
        #expect(least.position == .fix(try Coordinate(latitude: 0, longitude: 0), accuracy: 0.01))
    }
}
