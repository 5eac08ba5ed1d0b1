import Foundation
import Testing

@testable import TagFixCore

/// The byte-level reader of plain http(s) URLs must answer exactly as URLComponents does.
@Suite("URL locations: the fast path agrees with URLComponents")
struct URLFastPathTests {
    static func agree(_ url: String) -> Bool {
        let fast = Result { () throws(URLLocationError) in try URLLocation(url: url, defaultRadius: 20, maximumRadius: 500) }
        let slow = Result { () throws(URLLocationError) in
            try URLLocation(url: url, defaultRadius: 20, maximumRadius: 500, viaURLComponents: true)
        }
        return fast == slow
    }

    static let examples = [
        "https://tags.example.org/t/A17", "https://tags.example.org/t/A17/", "HTTPS://Tags.Example.org/t/A17?LAT=52.52&Lon=13.405&R=25",
        "http://h/t/B2?lat=1&lon=2&r=3&lat=4", "http://h:8080/x?id=Z9", "http://h:80a/x", "http://h::80/x", "http://:80/x",
        "https://h/t/A?lat=52.5&lon=13.4", "https://h/t/A?lat&lon=2&r=3", "https://h/t/A?lat=1=2&lon=3&r=4",
        "https://h/t/A?&&lat=1&lon=2&r=3&",
        "https://h/t/A?tag=T&id=I", "https://h/t/A?radius=5&r=6&lat=1&lon=2", "https://h/t/A#frag", "https://h/t/A?lat=1#x&lon=2",
        "https://h/t/%41", "https://h/t/A B", "https://h/t/Ä", "https://user@h/t/A", "https://[::1]/t/A", "https://h/t/A?x=[1]",
        "https://h//", "https://h", "https://h?lat=1&lon=2&r=3", "https://h/a/b/c?q=1?2", "https://h/t/A?lat=+1&lon=-2&r=.5",
        "https://h/t/A?lat=1e3&lon=2&r=3", "https://h/t/A?lat=91&lon=2&r=3", "https://h/t/A?lat=1&lon=2&r=0",
        "https://h/t/A?lat=1&lon=2&r=600",
        "https://h/t/A?lat=1&lon=2", "https://h/p;q/A", "https://h/t/A?lat=1;lon=2", "https://h/(x)/A*", "https://h/t/A'",
        "https://h/t/~A.-_", "httpx://h/t/A", "http:/h/t/A", "https:h/t/A", "https://h/t/A?id=", "https://h/t/A?ID=Q",
    ]

    @Test("hand-picked URLs, edge cases included", arguments: examples)
    func handPicked(_ url: String) {
        #expect(Self.agree(url), "\(url)")
    }

    /// The reader takes host and path bytes four at a time: a byte that stops it (a separator, a
    /// colon, a byte URLComponents would escape) must be seen at every offset within a block.
    @Test(
        "each stopping byte at every position of host and path",
        arguments: ["/", "?", "#", "%", ":", "@", "\"", " ", "^", "|", "\u{7F}", "\u{0}", "&", "=", "_", "Ä"])
    func stopAtEveryOffset(_ stop: String) {
        for base in ["https://abcdefghijk.example.org/t/ABCDEFGH1234", "HtTp://h1/a/bb/ccc/dddd/eeeee?lat=1&lon=2&r=3"] {
            let characters = Array(base)
            let start = characters.firstIndex(of: ":")! + 3
            for k in start...characters.count {
                let url = String(characters[..<k]) + stop + String(characters[k...])
                #expect(Self.agree(url), "\(url.debugDescription)")
            }
        }
    }

    @Test(
        "the scheme: http and https in any case, nothing else",
        arguments: ["http", "HTTP", "hTtP", "https", "HTTPS", "httpS", "hxtp", "htt", "httpss", "h\u{54}tp", "(ttp", "Http\u{0}"])
    func scheme(_ scheme: String) {
        #expect(Self.agree(scheme + "://tags.example.org/t/A17"))
        #expect(Self.agree(scheme + "://h/t/A?lat=1&lon=2&r=3"))
    }

    @Test("20 000 generated URLs from a grammar of the characters that matter")
    func generated() {
        var generator = SeededGenerator(seed: 1234)
        let pieces = [
            "a", "Z", "9", "-", ".", "_", "~", "/", "//", "?", "&", "=", "#", "%", "%41", " ", ":", "@", "[", "]", "+", ";", ",", "!", "'",
            "(",
            "lat=", "lon=", "r=", "radius=", "id=", "tag=", "LAT=", "53.5", "-9.9", "25", "1e2", ".5", "Ä", "\"", "{", "|",
        ]
        // Half the URLs use only characters the fast path takes, so it is tested on its own turf too.
        let safe = pieces.filter { piece in piece.unicodeScalars.allSatisfy { $0.isASCII && !"% \"{|[]#Ä@".unicodeScalars.contains($0) } }
        var disagreements: [String] = []
        var fast = 0
        for _ in 0..<20_000 {
            let scheme = ["https://", "http://", "HTTP://", "https:/", "ftp://"][Int(generator.next() % 5)]
            let host = ["tags.example.org", "h", "h:8080", "h:x", "", "1.2.3.4", "[::1]"][Int(generator.next() % 7)]
            var rest = ""
            let alphabet = generator.next() % 2 == 0 ? safe : pieces
            for _ in 0..<Int(generator.next() % 14) { rest += alphabet[Int(generator.next() % UInt64(alphabet.count))] }
            let url = scheme + host + (generator.next() % 3 == 0 ? "" : "/") + rest
            if !Self.agree(url) { disagreements.append(url) }
            var parameters = URLLocation.Parameters()
            if (try? URLLocation.plainHTTP(url, into: &parameters)) != nil { fast += 1 }
        }
        #expect(fast > 2_500, "only \(fast) of the URLs took the fast path: the comparison would prove little")
        #expect(disagreements.isEmpty, "\(disagreements.prefix(10))")
    }
}

/// Found by the url-location fuzzer (`Fuzz/regressions/url-location/`): a Prepend character
/// (U+0600–U+0605, U+110BD) joins the space after it into one Character, so a trim by
/// Characters kept the padding and the padded URL decoded differently.
@Suite("URL locations: surrounding blanks never change the answer")
struct URLPaddingTests {
    @Test(
        "padded with spaces and tabs, each URL decodes as it does bare",
        arguments: [
            "http://s:/\u{604}", "https://h/t/A\u{600}", "https://h/t/A?lat=1&lon=2&r=3\u{605}", "\u{604}https://h/t/A",
            "https://h/t/A\u{110BD}", "https://h/t/A\u{301}", "geo:52.5,13.4\u{604}", "https://h/t/A",
        ])
    func padding(_ url: String) {
        // A refusal quotes the text as given, padding included, so answers are compared as
        // decoded-or-refused.
        let bare = try? URLLocation(url: url, defaultRadius: 20)
        for padded in [" \(url) ", "\t\(url)", "\(url)\t ", "  \(url)"] {
            #expect((try? URLLocation(url: padded, defaultRadius: 20)) == bare, "\(padded.debugDescription)")
        }
    }

    @Test("trimming cuts Unicode scalars: a space after a Prepend character goes")
    func scalars() {
        #expect(" a\u{604} \t".trimmingSpaces() == "a\u{604}")
        #expect(" \t ".trimmingSpaces() == "")
        #expect("a b".trimmingSpaces() == "a b")
    }
}
