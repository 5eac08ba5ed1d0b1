public import TagFixCore

/// The registry's evidence of where its tags are (`tagfix registry refine`): the confirmed taps
/// of session logs, and the refinements applied to placements, each kept with what it replaced.
extension SQLiteRegistry {
    /// What recording taps did.
    public struct TapImport: Sendable, Hashable {
        /// Taps new to the registry.
        public var added = 0
        /// Taps it held already (the same log, or a copy of it, imported again).
        public var known = 0
        /// Taps of ids the registry has no tag for.
        public var unknownTag = 0
    }

    /// Records confirmed taps, in one transaction. A tap is known by its tag and key (the
    /// verdict's time and UID): recording it again changes nothing.
    public func recordTaps(_ taps: [PlacementTap]) throws(RegistryStoreError) -> TapImport {
        var result = TapImport()
        try transaction { db throws(RegistryStoreError) in
            do throws(SQLiteError) {
                for tap in taps {
                    var exists = false
                    try db.query("SELECT 1 FROM tag WHERE id = ?1", [.text(tap.tagID)]) { _ in exists = true }
                    guard exists else {
                        result.unknownTag += 1
                        continue
                    }
                    try db.query(
                        """
                        INSERT INTO tap (tag_id, key, at_ns, lat, lon, accuracy_m, region_lat, region_lon)
                        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (tag_id, key) DO NOTHING
                        """,
                        [
                            .text(tap.tagID), .text(tap.key), .integer(tap.time.nanosecondsSinceEpoch), .real(tap.coordinate.latitude),
                            .real(tap.coordinate.longitude), .real(tap.accuracy), .real(tap.confirmedAgainst.latitude),
                            .real(tap.confirmedAgainst.longitude),
                        ])
                    if db.changes > 0 { result.added += 1 } else { result.known += 1 }
                }
            } catch {
                throw RegistryStoreError(error, path: self.path)
            }
        }
        return result
    }

    /// The taps recorded for `id` (every tag's when nil), oldest first.
    public func taps(forID id: String? = nil) throws(RegistryStoreError) -> [PlacementTap] {
        var taps: [PlacementTap] = []
        try run { db throws(SQLiteError) in
            try db.query(
                "SELECT tag_id, key, at_ns, lat, lon, accuracy_m, region_lat, region_lon FROM tap"
                    + (id == nil ? "" : " WHERE tag_id = ?1") + " ORDER BY at_ns, key", id.map { [.text($0)] } ?? []
            ) { row throws(SQLiteError) in
                taps.append(
                    PlacementTap(
                        tagID: row.text(0) ?? "", time: Timestamp(nanosecondsSinceEpoch: row.integer(2)),
                        coordinate: Coordinate(validLatitude: row.real(3), longitude: row.real(4)), accuracy: row.real(5),
                        confirmedAgainst: Coordinate(validLatitude: row.real(6), longitude: row.real(7)), key: row.text(1) ?? ""))
            }
        }
        return taps
    }

    /// The refinements applied to `id` (every tag's when nil), oldest first.
    public func placementHistory(forID id: String? = nil) throws(RegistryStoreError) -> [PlacementChange] {
        var changes: [PlacementChange] = []
        try run { db throws(SQLiteError) in
            try db.query(
                "SELECT tag_id, changed_at_ns, from_lat, from_lon, from_accuracy_m, to_lat, to_lon, to_accuracy_m, visits FROM placement_history"
                    + (id == nil ? "" : " WHERE tag_id = ?1") + " ORDER BY seq", id.map { [.text($0)] } ?? []
            ) { row throws(SQLiteError) in
                changes.append(
                    PlacementChange(
                        tagID: row.text(0) ?? "", at: Timestamp(nanosecondsSinceEpoch: row.integer(1)),
                        from: Coordinate(validLatitude: row.real(2), longitude: row.real(3)),
                        fromAccuracy: row.isNull(4) ? nil : row.real(4),
                        to: Coordinate(validLatitude: row.real(5), longitude: row.real(6)), toAccuracy: row.isNull(7) ? nil : row.real(7),
                        visits: Int(row.integer(8))))
            }
        }
        return changes
    }

    /// Every tag's evidence: its entry, the refinements that led to it, and its recorded taps.
    public func placementEvidence() throws(RegistryStoreError) -> [PlacementEvidence] {
        let taps = Dictionary(grouping: try taps(), by: \.tagID)
        let history = Dictionary(grouping: try placementHistory(), by: \.tagID)
        return try entries().map { PlacementEvidence(entry: $0, history: history[$0.id] ?? [], taps: taps[$0.id] ?? []) }
    }

    /// Records a refined placement for `id`: its centre and accuracy become `to` and `accuracy`,
    /// and what they were is kept in the history, in one transaction.
    /// - Returns: the change recorded.
    /// - Throws: `.invalidEntry` when the tag is gone.
    @discardableResult
    public func applyRefinement(id: String, to: Coordinate, accuracy: Double, visits: Int, at: Timestamp) throws(RegistryStoreError)
        -> PlacementChange
    {
        var change: PlacementChange?
        try transaction { db throws(RegistryStoreError) in
            var from: (Coordinate, Double?)?
            do throws(SQLiteError) {
                try db.query("SELECT lat, lon, accuracy_m FROM tag WHERE id = ?1", [.text(id)]) { row in
                    from = (Coordinate(validLatitude: row.real(0), longitude: row.real(1)), row.isNull(2) ? nil : row.real(2))
                }
            } catch {
                throw RegistryStoreError(error, path: self.path)
            }
            guard let from else { throw RegistryStoreError.invalidEntry(self.path, id: id, reason: "it is no longer in the registry") }
            let recorded = PlacementChange(
                tagID: id, at: at, from: from.0, fromAccuracy: from.1, to: to, toAccuracy: accuracy, visits: visits)
            do throws(SQLiteError) {
                try db.query(
                    """
                    INSERT INTO placement_history (tag_id, changed_at_ns, from_lat, from_lon, from_accuracy_m, to_lat, to_lon, to_accuracy_m, visits)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                    """,
                    [
                        .text(id), .integer(at.nanosecondsSinceEpoch), .real(from.0.latitude), .real(from.0.longitude),
                        from.1.map { .real($0) } ?? .null, .real(to.latitude), .real(to.longitude), .real(accuracy),
                        .integer(Int64(visits)),
                    ])
                try db.query(
                    "UPDATE tag SET lat = ?2, lon = ?3, accuracy_m = ?4 WHERE id = ?1",
                    [.text(id), .real(to.latitude), .real(to.longitude), .real(accuracy)])
            } catch {
                throw RegistryStoreError(error, path: self.path)
            }
            change = recorded
        }
        guard let change else { throw .invalidEntry(path, id: id, reason: "it is no longer in the registry") }
        return change
    }
}
