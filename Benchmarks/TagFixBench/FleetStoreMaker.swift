import Foundation
import TagFixCore
import TagFixStore

/// `TagFixBench fleet-store PATH VERDICTS`: a fleet store as `tagfix collect --db` leaves it, for
/// the report benchmark (bench/maps_section.py): the example site's registry at three sites 1 km
/// apart (harbour, depot, yard), 12 devices, and `verdicts` verdicts over a working week, each
/// tapped within its region or outside it as a field day's are (mostly confirmed; some outside,
/// inconclusive, untrusted, disallowed and not registered). Deterministic (one seed). Prints
/// one JSON object: the sites' centres, for the tiles the benchmark makes.
func makeFleetStore(path: String, verdicts: Int) throws -> String {
    try? FileManager.default.removeItem(atPath: path)
    let registry = try RegistryFile.parse(try String(contentsOfFile: "Examples/site/registry.csv", encoding: .utf8)).entries
    let sites = [("harbour", 0.0, 0.0), ("depot", 0.009, 0.0), ("yard", 0.0, 0.015)]
    let store = try FleetStore(path: path, create: true)
    var placements: [FleetStore.Placement] = []
    var entries: [(site: String, entry: RegistryEntry)] = []
    for (site, north, east) in sites {
        for entry in registry {
            var moved = entry
            moved.region = try CircularRegion(
                center: Coordinate(latitude: entry.region.center.latitude + north, longitude: entry.region.center.longitude + east),
                radius: entry.region.radius, identifier: entry.id)
            placements.append(FleetStore.Placement(site: site, entry: moved, registry: "Examples/site/registry.csv"))
            entries.append((site, moved))
        }
    }
    try store.replacePlacements(sites: Set(sites.map(\.0)), with: placements, loadedNanoseconds: 0)
    var random = SeededGenerator(seed: 53)
    let start = Timestamp(iso8601: "2026-05-11T07:00:00Z")!
    var batch: [FleetStore.Stored] = []
    for index in 0..<verdicts {
        let (site, entry) = entries[Int(random.next() % UInt64(entries.count))]
        let device = "\(site)-\(index % 4)"
        let time = start.advanced(by: .seconds(Double(index) * 5 * 86_400 / Double(max(1, verdicts))))
        let roll = random.next() % 100
        let verdict =
            roll < 80
            ? "confirmed"
            : roll < 88 ? "outside" : roll < 93 ? "inconclusive" : roll < 96 ? "untrusted" : roll < 98 ? "disallowed" : "notRegistered"
        let c = entry.region.center
        let metres = verdict == "outside" ? entry.region.radius + 5 + Double(random.next() % 40) : Double(random.next() % 100) / 10
        let bearing = Double(random.next() % 360) * .pi / 180
        let lat = c.latitude + metres * cos(bearing) / 111_300
        let lon = c.longitude + metres * sin(bearing) / (111_300 * cos(c.latitude * .pi / 180))
        let iso = time.formatted(fractionDigits: 3)
        let hasFix = verdict != "untrusted" && verdict != "disallowed" && verdict != "notRegistered"
        let fix = hasFix ? #"{"time":"\#(iso)","mode":"3d","lat":\#(lat),"lon":\#(lon),"accuracy_m":3}"# : "null"
        let region =
            verdict == "notRegistered"
            ? "null"
            : #"{"id":"\#(entry.id)","name":\#(JSONValue.quoted(entry.name ?? entry.id)),"lat":\#(c.latitude),"lon":\#(c.longitude),"radius_m":\#(entry.region.radius),"source":"registry"}"#
        let payload =
            #"{"time":"\#(iso)","verdict":"\#(verdict)","reason":null,"message":"\#(verdict)","uid":null,"tag_type":"ntag213","tag_id":"\#(entry.id)","url":null,"reader":"r","distance_m":\#(hasFix ? "\(metres)" : "null"),"accuracy_m":3,"bearing_deg":0,"region":\#(region),"fix_age_s":0,"interpolated":false,"fix":\#(fix)}"#
        batch.append(FleetStore.Stored(id: "bench-\(index)", site: site, device: device, payload: payload))
        if batch.count == 2_000 {
            _ = try store.store(batch, receivedNanoseconds: 0)
            batch.removeAll(keepingCapacity: true)
        }
    }
    _ = try store.store(batch, receivedNanoseconds: 0)
    let centres = sites.map { site in
        let c = entries.first { $0.site == site.0 }!.entry.region.center
        return #"{"site":"\#(site.0)","lat":\#(c.latitude),"lon":\#(c.longitude)}"#
    }
    return #"{"bench":"fleet-store","verdicts":\#(verdicts),"sites":[\#(centres.joined(separator: ","))]}"#
}
