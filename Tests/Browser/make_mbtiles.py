"""Makes a small MBTiles file (test tooling): every tile one colour, a 256 x 256 PNG, at zooms
ZMIN to ZMAX, SPAN tiles on every side of the tile holding LAT, LON; written as MBTiles keeps
them (TMS rows: row = 2^z - 1 - y). The attribution is MBTILES_ATTRIBUTION when set (a hostile
one for the escaping tests), else a little markup that must reach a page as text.

usage: python3 make_mbtiles.py OUT R G B LAT LON [ZMIN ZMAX SPAN]"""
import math, os, sqlite3, struct, sys, zlib

out, r, g, b, lat, lon = sys.argv[1], *map(int, sys.argv[2:5]), *map(float, sys.argv[5:7])
zmin, zmax, span = (int(v) for v in (sys.argv[7:10] if len(sys.argv) > 9 else (10, 20, 8)))

def png(rgb, size=256):
    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")

db = sqlite3.connect(out)
db.execute("CREATE TABLE IF NOT EXISTS metadata (name text, value text)")
db.execute("CREATE TABLE IF NOT EXISTS tiles (zoom_level integer, tile_column integer, tile_row integer, tile_data blob)")
fresh = db.execute("SELECT count(*) FROM metadata").fetchone()[0] == 0
if fresh:  # a second call adds the tiles around another place to the same file
    db.executemany("INSERT INTO metadata VALUES (?, ?)",
                   [("name", "one colour"), ("format", "png"), ("attribution", os.environ.get("MBTILES_ATTRIBUTION", "<b>test</b> tiles & co")),
                    ("minzoom", str(zmin)), ("maxzoom", str(zmax))])
tile = png((r, g, b))
for z in range(zmin, zmax + 1):
    n = 2 ** z
    x = int((lon + 180) / 360 * n)
    y = int((1 - math.log(math.tan(math.radians(lat)) + 1 / math.cos(math.radians(lat))) / math.pi) / 2 * n)
    for tx in range(max(0, x - span), min(n, x + span + 1)):
        for ty in range(max(0, y - span), min(n, y + span + 1)):
            db.execute("INSERT INTO tiles VALUES (?, ?, ?, ?)", (z, tx, n - 1 - ty, tile))
db.commit()
