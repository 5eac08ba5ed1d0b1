"""The report's map, for bench/run (bench tooling, not the product): the size of `tagfix report`'s
page for a fleet store of VERDICTS verdicts (TagFixBench fleet-store: three sites 1 km apart, the
example site's registry at each) and the time to make it, without tiles (Leaflet over a plain
background), with an MBTiles file's tiles embedded (--tiles FILE.mbtiles --max-zoom 18: the tiles
over each site), and with a tile server's template (--tiles URL: nothing embedded). The MBTiles
file is made here (Tests/Browser/make_mbtiles.py: one-colour PNG tiles of a few hundred bytes at
zooms 13-18 around each site). Each case runs ROUNDS times; prints one JSON object per case.
Usage: python3 maps_section.py TAGFIX TAGFIXBENCH WORKDIR [VERDICTS] [ROUNDS]"""
import json, os, re, statistics, subprocess, sys, time


def render(rows):
    """The section's text and its goals as (met, text) pairs, from the measured rows."""
    cases = {r["case"]: r for r in rows if r.get("bench") == "maps"}
    plain, tiles, server = cases["plain"], cases["mbtiles"], cases["server"]
    mib = lambda b: f"{b / 1048576:.1f} MiB"
    lines = ["## 13. The report's map: a fleet's report with and without tiles\n",
             f"`tagfix report` on a fleet store of {plain['verdicts']:,} verdicts (`TagFixBench fleet-store`: the example site's "
             f"registry at {plain['sites']} sites 1 km apart, 12 devices, a working week of taps, every verdict kind), the whole "
             "page one self-contained file with Leaflet inline (Debian's libjs-leaflet). *MBTiles*: `--tiles site.mbtiles "
             "--max-zoom 18`, the tiles over each site at the zooms its map uses embedded, so the report opens offline; the "
             "file's tiles are one-colour PNGs of a few hundred bytes (a real base map's weigh 10–40 KB: the page grows by "
             "about 4/3 of the tiles' bytes, base64, so count that). *Tile server*: `--tiles https://…/{z}/{x}/{y}.png`, "
             f"nothing embedded, the browser fetches them. Medians of {plain['rounds']} runs [min, max] of the release build.\n",
             "| base map | time to make | page size | tiles embedded (their bytes) |", "| --- | ---: | ---: | ---: |"]
    for name, label in (("plain", "none (plain background)"), ("mbtiles", "MBTiles, embedded"), ("server", "tile server")):
        r = cases[name]
        lines.append(f"| {label} | {r['seconds_median']:.2f} s [{r['seconds_min']:.2f}, {r['seconds_max']:.2f}] | {mib(r['bytes'])} | "
                     f"{r['tiles']:,} ({r['tile_bytes'] / 1024:.0f} KiB) |")
    lines.append("")
    lines.append(f"With tiles the page is {tiles['bytes'] / plain['bytes']:.2f}× the plain one's size and took "
                 f"{tiles['seconds_median'] / plain['seconds_median']:.2f}× as long to make. `--max-zoom` bounds it: each zoom "
                 "deeper about quadruples a site's tiles, and at most 4 096 are embedded (the note says how many and their size).\n")
    return "\n".join(lines), []


if __name__ == "__main__":

    tagfix, bench, work = sys.argv[1:4]
    verdicts = int(sys.argv[4]) if len(sys.argv) > 4 else 36_000
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    os.makedirs(work, exist_ok=True)
    store, mbtiles = f"{work}/fleet.sqlite", f"{work}/site.mbtiles"
    made = json.loads(subprocess.run([bench, "fleet-store", store, str(verdicts)], check=True, capture_output=True, text=True).stdout)
    if os.path.exists(mbtiles):
        os.remove(mbtiles)
    for site in made["sites"]:
        subprocess.run([sys.executable, "Tests/Browser/make_mbtiles.py", mbtiles, "51", "102", "153", str(site["lat"]), str(site["lon"]),
                        "13", "18", "12"], check=True)
    cases = [("plain", []), ("mbtiles", ["--tiles", mbtiles, "--max-zoom", "18"]),
             ("server", ["--tiles", "https://tiles.example.org/{z}/{x}/{y}.png"])]
    for name, extra in cases:
        seconds, size, tiles, tile_bytes = [], 0, 0, 0
        for _ in range(rounds):
            out = f"{work}/report-{name}.html"
            started = time.monotonic()
            run = subprocess.run([tagfix, "report", store, "--output", out] + extra, capture_output=True, text=True)
            seconds.append(time.monotonic() - started)
            if run.returncode != 0:
                print(json.dumps({"bench": "maps", "case": name, "error": run.stderr.strip()[:300]}))
                sys.exit(1)
            size = os.path.getsize(out)
            notes = re.findall(r"embedded (\d+) tiles? from .*?, ([\d.]+) (KiB|MiB)", run.stderr)
            tiles = sum(int(n) for n, _, _ in notes)
            tile_bytes = sum(float(v) * (1024 if unit == "KiB" else 1048576) for _, v, unit in notes)
        print(json.dumps({"bench": "maps", "case": name, "verdicts": made["verdicts"], "sites": len(made["sites"]), "rounds": rounds,
                          "seconds_median": statistics.median(seconds), "seconds_min": min(seconds), "seconds_max": max(seconds),
                          "bytes": size, "tiles": tiles, "tile_bytes": round(tile_bytes)}))
