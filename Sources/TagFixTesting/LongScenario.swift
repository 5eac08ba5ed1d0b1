import Foundation

/// A scenario (docs/scenarios.md) long enough that a replay is still running when a test acts on
/// its first verdicts (a kill, a signal): one fix a second at the same spot and `taps` taps of
/// different tags (K1, K2, …), each 0.2 s after a fix, every one inside its 30 m region.
public enum LongScenario {
    public static func json(taps: Int) -> String {
        let fixes = (0...taps + 2).map { #"{"t":\#($0),"lat":53.545,"lon":9.966,"accuracy_m":3}"# }.joined(separator: ",")
        let reads = (1...taps).map { i in
            #"{"t":\#(i).2,"uid":"04A224B2C5\#(String(format: "%04X", i))","url":"https://tags.example.org/t/K\#(i)?lat=53.545&lon=9.966&r=30"}"#
        }.joined(separator: ",")
        return #"{"name":"long","start":"2026-05-14T08:00:00Z","gps":{"fixes":[\#(fixes)]},"taps":[\#(reads)]}"#
    }
}
