/// The fleet store's schema as `collect` wrote it before the schema was versioned (`user_version`
/// 0, `fleet_verdict` only), written out here on its own, not taken from `FleetStore`'s
/// migrations: tests that open an old store check the migrations against it.
public enum OldFleetStore {
    public static let unversionedSchema = """
        CREATE TABLE IF NOT EXISTS fleet_verdict (
            id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
            site TEXT NOT NULL, device TEXT NOT NULL, payload TEXT NOT NULL, received_ns INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX IF NOT EXISTS fleet_verdict_site ON fleet_verdict (site, device);
        """
}
