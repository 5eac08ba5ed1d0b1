import Foundation
import TagFixCore
import TagFixDevices
import TagFixMQTT
import TagFixPostgres
import TagFixReport
import TagFixStore

/// `tagfix report`: a session log as a map and tables people look at.
struct ReportCommand: Subcommand {
    static let spec = CommandSpec(
        name: "report",
        abstract: "Turn a session log into GeoJSON, GPX, CSV, an SVG map or a self-contained HTML report.",
        discussion: """
            Reads the JSON Lines a verify run wrote with --log (a torn last line, from a run that \
            was killed, is skipped with a note). With --registry (SQLite, CSV or JSON), tags that \
            were never scanned are shown too. geojson: expected regions as polygons, each scan's \
            fix, lines from where each tag should be to where it was scanned (opens in QGIS or \
            geojson.io). gpx: waypoints. csv: one row per scan. svg: the site to scale, each \
            region coloured by its tag's last verdict. html: the map, the counts, tags never \
            scanned, tags moved and every scan, in one file that needs no network. The html map is \
            Leaflet, from Debian's libjs-leaflet, inlined (without it, a note and the plain SVG map): \
            each region coloured by its last verdict, every tap (one decided without a fix drawn \
            hollow at its tag's place), a legend, a scale bar and the tech's last position. \
            --tiles FILE.mbtiles embeds the file's tiles over the site, at the zooms the page uses \
            down to --max-zoom (default 18; at most 4096 tiles), and says how many and their size: \
            the report still opens offline. --tiles https://…/{z}/{x}/{y}.png has the browser read \
            a tile server (OpenStreetMap's asks for its attribution, given by default, and forbids \
            heavy use: https://operations.osmfoundation.org/policies/tiles/). A --tiles file that \
            is not MBTiles exits 65 (66 when it cannot be read); --tiles without Leaflet exits 69. In csv, a text \
            cell that starts with = + - @, a tab or CR gets an apostrophe in front, so a spreadsheet \
            does not run it as a formula; numbers are written as numbers. --output FILE replaces an \
            existing file atomically (a temporary file beside it, synced, renamed over it, its \
            permissions kept: a failure leaves the old file as it was); a FIFO, a device, - or \
            /dev/stdout is written in place, a symlink is followed and stays a link. A fleet store \
            (tagfix collect --db) is reported as html (the whole fleet on one map, each tag coloured \
            by its site's last verdict for it and the tags of the sites' registries never tapped in \
            grey; then per site its map, on Leaflet over --tiles as a log's is, its tags never tapped and a table per device) or csv (every \
            verdict with its site and device); its registries are the ones collect --registry stored.
            """,
        options: [
            .init(name: "format", valueName: "FORMAT", help: "geojson, gpx, csv, svg or html; default html."),
            .init(name: "registry", valueName: "FILE", help: "The registry the session was verified against (adds tags never scanned)."),
            .init(
                name: "db-password-file", valueName: "FILE",
                help: "A PostgreSQL fleet store's password (mode 0600; else libpq's PGPASSFILE or ~/.pgpass)."),
            .init(
                name: "output", valueName: "FILE",
                help: "Write to FILE instead of standard output (replaced atomically; a FIFO or device is written in place)."),
            .init(name: "title", valueName: "TEXT", help: "The report's title; default from the log's name."),
            .init(
                name: "tiles", valueName: "FILE|URL",
                help:
                    "html: draw the map on tiles: an MBTiles file (its tiles over the site are embedded, so the report opens offline) or an XYZ tile server's https://…/{z}/{x}/{y}.png (read by the browser; mind the server's usage policy)."
            ),
            .init(
                name: "max-zoom", valueName: "Z",
                help:
                    "The deepest zoom whose tiles are embedded from --tiles FILE.mbtiles (default 18; each zoom deeper about quadruples the tiles; one shallower than the site's zooms embeds that zoom alone, scaled up on the page)."
            ),
            .init(
                name: "attribution", valueName: "TEXT",
                help: "The base map's credit, shown on the map (default: the MBTiles file's, or OpenStreetMap's for its servers)."),
        ],
        positionals: [
            .init(name: "SESSION", help: "A session log (verify --log FILE), or a fleet store (collect --db FILE): html or csv.")
        ],
        examples: [
            "tagfix report today.jsonl --registry site.sqlite --output today.html",
            "tagfix report today.jsonl --format geojson --output today.geojson",
            "tagfix report today.jsonl --format csv | column -s, -t",
            "tagfix report today.jsonl --registry site.sqlite --tiles site.mbtiles --max-zoom 19 --output today.html",
        ])

    enum Format: String, CaseIterable {
        case geojson, gpx, csv, svg, html
    }

    var session: String
    var format: Format
    var registry: String?
    var dbPasswordFile: String?
    var output: String?
    var title: String?
    /// --tiles: an MBTiles file's path, or a tile server's template.
    var tiles: Tiles?
    var maximumZoom = 18
    var attribution: String?
    /// Where Leaflet is read from (Debian's libjs-leaflet; tests may point elsewhere).
    var leafletDirectory = ProcessInfo.processInfo.environment["TAGFIX_LEAFLET_DIR"] ?? Leaflet.debianDirectory

    enum Tiles {
        case file(String)
        case server(TileTemplate)

        /// `--tiles TEXT`: a template when it has a scheme, else a file.
        static func parse(_ text: String, command: String) throws(CLIError) -> Tiles {
            guard text.contains("://") else { return .file(text) }
            do {
                return .server(try TileTemplate(text))
            } catch {
                throw .usage(error.message, command: command)
            }
        }
    }

    init(_ arguments: ParsedArguments) throws(CLIError) {
        session = arguments.positionals[0]
        let name = arguments.value("format") ?? "html"
        guard let format = Format(rawValue: name) else {
            throw .usage("--format \(name): give \(Format.allCases.map(\.rawValue).joined(separator: ", "))", command: Self.spec.name)
        }
        self.format = format
        registry = arguments.value("registry")
        dbPasswordFile = arguments.value("db-password-file")
        output = arguments.value("output")
        title = arguments.value("title")
        tiles = try arguments.value("tiles").map { text throws(CLIError) in try Tiles.parse(text, command: Self.spec.name) }
        if let zoom = try arguments.number("max-zoom", in: 0...Double(MBTiles.deepestZoom), command: Self.spec.name) {
            guard zoom == zoom.rounded() else {
                throw .usage("--max-zoom \(zoom): give a whole zoom level, 0 to \(MBTiles.deepestZoom)", command: Self.spec.name)
            }
            maximumZoom = Int(zoom)
        }
        attribution = arguments.value("attribution")
        if tiles != nil || arguments.value("max-zoom") != nil || attribution != nil, format != .html {
            throw .usage("--tiles, --max-zoom and --attribution are for --format html (the map a browser draws)", command: Self.spec.name)
        }
        if arguments.value("max-zoom") != nil, tiles == nil {
            throw .usage("--max-zoom is for --tiles FILE.mbtiles", command: Self.spec.name)
        }
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        if PostgresAddress.isAddress(session) || FleetStore.isFleetStore(session) { return try fleet(io) }
        let contents: SessionLogContents
        do {
            contents = try SessionLog.read(path: session)
        } catch {
            throw .file(error)
        }
        if let torn = contents.tornLastLine {
            io.err("note: \(session):\(torn): skipped a torn last line (the run was cut off while writing it)")
        }
        var records: [SessionRecord] = []
        for (line, value) in contents.records {
            do {
                records.append(try SessionRecord(value, line: line))
            } catch {
                throw .data(error.inFile(session))
            }
        }
        let placements = try registry.map { path throws(CLIError) in try RegistrySource.entries(path) } ?? []
        var report = SiteReport(
            records: records, placements: placements,
            title: title ?? "TagFix report — \(((session as NSString).lastPathComponent as NSString).deletingPathExtension)",
            refinements: try refinements(records: records, placements: placements))
        try noteWeakReaders(&report, io)
        let text: String
        switch format {
        case .geojson: text = report.geoJSON()
        case .gpx: text = report.gpx()
        case .csv: text = report.csv()
        case .svg: text = report.svg()
        case .html: text = report.html(map: try mapStyle(report, io))
        }
        try emit(text, io, summary: "\(counted(records.count, "scan")) of \(counted(report.tags.count, "tag"))")
    }

    /// The placements refined from the registry's recorded taps and this log's confirmed ones (a
    /// SQLite registry also brings its history), so the report can list the tags that moved.
    /// Nothing is written: `tagfix registry refine --log` records the evidence.
    func refinements(records: [SessionRecord], placements: [RegistryEntry]) throws(CLIError) -> [PlacementRefiner.Estimate] {
        guard let registry else { return [] }
        let fromLog = records.compactMap(PlacementTap.init)
        var evidence: [PlacementEvidence]
        if RegistrySource.isSQLite(registry) {
            do {
                evidence = try SQLiteRegistry(path: registry, mode: .readOnly).placementEvidence()
            } catch {
                throw .registry(error)
            }
        } else {
            evidence = placements.map { PlacementEvidence(entry: $0, history: [], taps: []) }
        }
        let byTag = Dictionary(grouping: fromLog, by: \.tagID)
        for index in evidence.indices {
            let known = Set(evidence[index].taps.map(\.key))
            evidence[index].taps += (byTag[evidence[index].entry.id] ?? []).filter { !known.contains($0.key) }
        }
        return PlacementRefiner().refine(evidence)
    }

    /// A fleet store: the fleet's overview map, then per site its map, its tags never tapped and
    /// a table per device (html), or every scan with its site and device (csv). The placements
    /// `collect --registry` stored add the tags never tapped; a store without them (written before
    /// they were kept, or collected without --registry) reports its verdicts alone.
    func fleet(_ io: some TerminalOutput) throws(CLIError) {
        guard format == .html || format == .csv else { throw .usage("a fleet store is reported as html or csv", command: Self.spec.name) }
        if registry != nil {
            throw .usage(
                "a fleet store keeps its sites' registries: give them to tagfix collect --registry [SITE=]FILE", command: Self.spec.name)
        }
        let rows: [FleetReport.Row]
        let placements: [FleetReport.Placement]
        do {
            let store: any FleetVerdictStore = try openFleetStore()
            let read = try store.reportRows()
            if read.skipped > 0 { io.err("note: \(session): skipped \(counted(read.skipped, "message")) that are not verdict records") }
            rows = read.rows
            placements = try store.placements().map { FleetReport.Placement(site: $0.site, entry: $0.entry) }
        } catch let error as FleetStoreError {
            throw error.isWrongFile ? .usage(error.description, command: Self.spec.name) : .ioError(error.description)
        } catch let error as CLIError {
            throw error
        } catch let error as PostgresError {
            throw .unavailable(error.description)
        } catch {
            throw .ioError("\(session): \(error)")
        }
        let report = FleetReport(rows: rows, placements: placements, title: title ?? "TagFix fleet report")
        let never = report.sites.reduce(0) { $0 + report.siteReport($1).neverScanned.count }
        try emit(
            format == .csv ? report.csv() : report.html(map: try fleetMapStyle(report, io)), io,
            summary: "\(counted(rows.count, "verdict")) from \(counted(report.sites.count, "site"))"
                + (placements.isEmpty ? "" : ", \(counted(never, "tag")) never tapped"))
    }

    /// The fleet store `session` names: a SQLite file, or PostgreSQL (its password from
    /// --db-password-file, else libpq's own files). A PostgreSQL database is brought to this
    /// build's schema as `collect` would (an empty one gets the empty tables), a newer one refused.
    private func openFleetStore() throws -> any FleetVerdictStore {
        guard PostgresAddress.isAddress(session) else { return try FleetStore(path: session, create: false) }
        let (address, password) = try FleetOptions.postgres(session, passwordFile: dbPasswordFile, command: Self.spec.name)
        return try PostgresFleetStore(address: address, password: password)
    }

    private func emit(_ text: String, _ io: some TerminalOutput, summary: String) throws(CLIError) {
        if let output {
            try writeOutput(text, to: output)
            io.err("wrote \(output): \(summary) (\(format.rawValue), \(Self.size(text.utf8.count)))")
        } else {
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            if lines.last?.isEmpty == true { lines.removeLast() }
            for line in lines { io.out(String(line)) }
        }
    }
}

extension ReportCommand {
    /// The html report's map: Leaflet over --tiles, or over a plain background. Without
    /// Leaflet (libjs-leaflet not installed) the report keeps its plain SVG map, with a note;
    /// with --tiles that is an error (69), as the tiles could not be drawn.
    func mapStyle(_ report: SiteReport, _ io: some TerminalOutput) throws(CLIError) -> SiteReport.MapStyle {
        let leaflet: Leaflet
        do {
            leaflet = try Leaflet.load(directory: leafletDirectory)
        } catch {
            guard tiles == nil else { throw .unavailable("\(error.message) (--tiles needs it to draw the map)") }
            io.err("note: \(error.message); the report's map is the plain SVG one")
            return .svg
        }
        switch tiles {
        case nil:
            return .leaflet(leaflet, .plain)
        case .server(let template):
            return .leaflet(leaflet, .server(template, attribution: attribution, maximumZoom: 19))
        case .file(let path):
            return .leaflet(leaflet, try embedded(path, report, io))
        }
    }

    /// The fleet report's site maps: Leaflet over each site's tiles, as `mapStyle` decides for one
    /// site (an MBTiles file's tiles are embedded per site, over that site alone).
    func fleetMapStyle(_ report: FleetReport, _ io: some TerminalOutput) throws(CLIError) -> FleetReport.MapStyle {
        guard let first = report.sites.first else { return .svg }
        guard case .leaflet(let leaflet, let base) = try mapStyle(report.siteReport(first), io) else { return .svg }
        var bases = [first: base]
        if case .file(let path) = tiles {
            for site in report.sites.dropFirst() { bases[site] = try embedded(path, report.siteReport(site), io) }
        } else {
            for site in report.sites { bases[site] = base }
        }
        return .leaflet(leaflet, bases: bases)
    }

    /// The tiles of `path` (MBTiles) over the site, at the zooms the page uses, down to --max-zoom.
    func embedded(_ path: String, _ report: SiteReport, _ io: some TerminalOutput) throws(CLIError) -> BaseMap {
        let file: MBTiles
        do {
            file = try MBTiles(path: path)
        } catch {
            throw .file(DataFileError(file: path, line: nil, message: error.message, unreadable: error.kind == .missing))
        }
        let credit = attribution ?? file.metadata["attribution"]
        guard let box = report.mapBounds else {
            io.err("note: \(path): the log has no place to draw, so no tiles were embedded")
            return .plain
        }
        guard let wanted = EmbeddedTiles.wanted(for: box, available: file.zooms, maximumZoom: maximumZoom) else {
            io.err(
                "note: \(path) has tiles at zooms \(file.zooms.lowerBound)–\(file.zooms.upperBound), none of them at the site's zooms down to --max-zoom \(maximumZoom): no tiles embedded"
            )
            return .plain
        }
        var tiles: [MapTile: [UInt8]] = [:]
        for tile in wanted.tiles {
            do {
                if let bytes = try file.tile(z: tile.z, x: tile.x, y: tile.y) { tiles[tile] = bytes }
            } catch {
                throw .data(DataFileError(file: path, line: nil, message: error.message))
            }
        }
        let embedded = EmbeddedTiles(tiles: tiles, mediaType: file.mediaType, zooms: wanted.zooms, attribution: credit)
        let zooms =
            wanted.zooms.count == 1
            ? "zoom \(wanted.zooms.lowerBound), scaled up on the page" : "zooms \(wanted.zooms.lowerBound)–\(wanted.zooms.upperBound)"
        var note = "note: embedded \(counted(tiles.count, "tile")) from \(path), \(zooms), \(Self.size(embedded.byteCount))"
        if tiles.isEmpty { note += " (the file has no tiles over the site: the map's background is plain)" }
        if wanted.cut { note += "; stopped before zoom \(wanted.zooms.upperBound + 1): more than \(EmbeddedTiles.tileLimit) tiles" }
        io.err(note + " (--max-zoom \(maximumZoom) sets the deepest)")
        return .embedded(embedded)
    }

    static func size(_ bytes: Int) -> String {
        bytes < 1024 * 1024
            ? "\(Coordinate.format(Double(bytes) / 1024, 1)) KiB" : "\(Coordinate.format(Double(bytes) / 1024 / 1024, 1)) MiB"
    }

    /// Adds the registry's enrolment read health to the report and names on stderr the tags that
    /// read badly (the html report lists them with the fix).
    func noteWeakReaders(_ report: inout SiteReport, _ io: some TerminalOutput) throws(CLIError) {
        if let registry, RegistrySource.isSQLite(registry) {
            do {
                report.enrolledReadHealth = try SQLiteRegistry(path: registry, mode: .readOnly).readHealth()
            } catch {
                throw .registry(error)
            }
        }
        let weak = report.weakReaders
        guard !weak.isEmpty else { return }
        io.err(
            "note: \(counted(weak.count, "tag")) read\(weak.count == 1 ? "s" : "") badly: \(weak.map(\.key).joined(separator: ", ")) (see hardware.md#tags-that-read-badly)"
        )
    }
}

extension FleetVerdictStore {
    /// Every stored verdict as a fleet report's row; a payload that is not a verdict record is
    /// left out and counted.
    func reportRows() throws -> (rows: [FleetReport.Row], skipped: Int) {
        var rows: [FleetReport.Row] = []
        var skipped = 0
        for stored in try all() {
            guard let value = try? JSONValue.parse(stored.payload), let record = try? SessionRecord(value, line: rows.count + 1) else {
                skipped += 1
                continue
            }
            rows.append(FleetReport.Row(site: stored.site, device: stored.device, record: record))
        }
        return (rows, skipped)
    }
}
