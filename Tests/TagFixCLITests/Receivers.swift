import Foundation
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixGPSD

/// Whether a private gpsd can be started here.
let gpsdInstalled = PrivateGPSD.installedPath != nil

/// A receiver standing at `spot` under `sky` (by default open sky: errors with memory, σ `noise`
/// per axis, τ 180 s), its clock `days` ahead of today (a later visit, stamped as one), read by a
/// private gpsd, for the length of `body`; `body` runs once gpsd delivers a fix, with its gpsd://
/// URL. Both are stopped when `body` ends.
func withReceiver<Value>(
    at spot: Coordinate, sky: GNSSErrorModel.Sky = .open, noise: Double = 0.8, seed: UInt64 = 5, days: Int = 0,
    isolation: isolated (any Actor)? = #isolation, _ body: (NMEAEmulator, PrivateGPSD, String) async throws -> Value
) async throws -> Value {
    let receiver = try NMEAEmulator(source: .at(spot, noise: noise, seed: seed, sky: sky), rate: 5)
    defer { receiver.stop() }
    if days != 0 { receiver.jumpTime(by: .seconds(days * 86_400)) }
    return try await PrivateGPSD.with(device: receiver.path) { gpsd in
        receiver.start()
        var probe = GPSDFixSource(endpoint: GPSDEndpoint(port: gpsd.port), clock: MonotonicClock()).events().makeAsyncIterator()
        while let event = await probe.next() {
            if case .fix(let fix) = event, fix.hasPosition { break }
        }
        return try await body(receiver, gpsd, "gpsd://127.0.0.1:\(gpsd.port)")
    }
}
