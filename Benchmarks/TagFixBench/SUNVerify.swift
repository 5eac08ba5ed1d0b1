import Foundation
import TagFixCore
import TagFixCrypto

/// `TagFixBench sun [ROUNDS]`: the cost of checking one SUN URL on one core — AN12196's example
/// (encrypted PICC data, empty MAC input: one AES block decrypted, two CMACs) and its
/// SDMENCFileData example (plus a CMAC, an AES block and a CBC decryption). Each round times a
/// batch of verifications; prints the median, min and max per verification in µs.
func sunBenchmark(rounds: Int) -> [String] {
    let cases: [(name: String, url: String, names: SUNParameterNames)] = [
        (
            "picc_data", "https://ntag.nxp.com/424?e=EF963FF7828658A599F3041510671E88&c=94EED9EE65337086",
            SUNParameterNames(piccData: "e", cmac: "c")
        ),
        (
            "picc_data+enc_file_data",
            "https://www.my424dna.com/?picc_data=FD91EC264309878BE6345CBE53BADF40&enc=CEE9A53E3E463EF1F459635736738962&cmac=ECC1E7F6C6C73BF6",
            SUNParameterNames(encryptedFileData: "enc", macInputFrom: "enc")
        ),
    ]
    let batch = 20_000
    let clock = ContinuousClock()
    return cases.map { test in
        let verifier = SUNVerifier(metaReadKey: .zero, fileReadKey: .fixed(.zero), names: test.names)
        // Warm up: libcrypto's algorithm fetch happens once, on the first call.
        precondition(verifier.verify(url: test.url).valid, "the benchmark's SUN does not verify")
        var perVerification: [Double] = []
        var valid = 0
        for _ in 0..<max(rounds, 1) {
            let start = clock.now
            for _ in 0..<batch where verifier.verify(url: test.url).valid { valid += 1 }
            let elapsed = start.duration(to: clock.now)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            perVerification.append(seconds / Double(batch) * 1e6)
        }
        precondition(valid == batch * max(rounds, 1))
        let sorted = perVerification.sorted()
        let median = sorted[sorted.count / 2]
        return String(
            format:
                #"{"bench":"sun","case":"%@","verifications":%d,"microseconds_median":%.3f,"microseconds_min":%.3f,"microseconds_max":%.3f}"#,
            test.name, batch * sorted.count, median, sorted.first ?? 0, sorted.last ?? 0)
    }
}
