"""Start-up and memory of `tagfix verify`, for bench/run (bench tooling, not the product).
Start-up: from starting `tagfix verify --reader … --gps gpsd://…` to the reader being ready (its
"reader:" line), on the PN532 emulator and a private gpsd, minus libnfc's fixed 50 ms open sleep.
Memory: peak resident set (VmHWM) of `tagfix verify --scenario` with a 1 M-tag registry, SQLite and
CSV (TAGS tags, 1 M by default; bench/run --quick gives fewer). Prints one JSON object.
Usage: python3 startup.py TAGFIX WORKDIR [TAGS]"""
import atexit, json, os, random, re, statistics, subprocess, sys, time

tagfix, work = sys.argv[1], sys.argv[2]
tags = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
os.makedirs(work, exist_ok=True)
started = []


@atexit.register
def stop_all():
    """Every process started here is stopped, however the script ends (SIGTERM, so that
    `tagfix emulate nmea --gpsd` stops its private gpsd on the way out; killed, it left it running)."""
    for p in started:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start(args, marker):
    p = subprocess.Popen([tagfix] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started.append(p)
    for line in p.stdout:
        if marker in line:
            return p, line.strip()
    raise SystemExit(f"no {marker!r} from {args}")


# A tag dump for the emulator: an NTAG213 with a short URL (TagFix tag JSON).
open(f"{work}/tag.json", "w").write(json.dumps({"chip": "NTAG213", "uid_hex": "04A224B2C56480", "get_version_hex": "0004040201000F03",
    "memory_hex": "04A2240AB2C5648093480000E11012000315D1011155046578616D706C652E6F72672F742F4131FE"}))
pn532, _ = start(["emulate", "pn532", "--tag", f"{work}/tag.json", "--link", f"{work}/pn532"], "connstring:")
nmea, line = start(["emulate", "nmea", "--at", "53.545,9.966", "--rate", "5", "--gpsd"], "gpsd://")
gps = re.search(r"gpsd://[0-9.:]+", line).group(0)
time.sleep(2)
startups = []
for _ in range(7):
    began = time.perf_counter()
    p = subprocess.Popen([tagfix, "verify", "--reader", f"pn532_uart:{work}/pn532", "--gps", gps, "--json", "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started.append(p)
    for err in p.stderr:
        if err.startswith("reader:"):
            startups.append((time.perf_counter() - began) * 1000 - 50)
            break
    p.kill()
    p.wait()
    time.sleep(0.3)
stop_all()

# A registry of `tags` tags (1 M), as SQLite (through tagfix registry import) and as CSV.
rng = random.Random(42)
csv = f"{work}/registry.csv"
with open(csv, "w") as f:
    f.write("id,lat,lon,radius_m\n")
    for i in range(tags):
        f.write(f"T{i},{53.5 + rng.random() * 0.09:.7f},{9.9 + rng.random() * 0.15:.7f},25\n")
db = f"{work}/registry.sqlite"
if os.path.exists(db):
    os.remove(db)
subprocess.run([tagfix, "registry", "import", csv, "--registry", db], check=True, stdout=subprocess.DEVNULL)
scenario = f"{work}/scenario.json"
open(scenario, "w").write(json.dumps({"name": "memory", "start": "2026-05-14T08:00:00Z",
    "gps": {"fixes": [{"t": t, "lat": 53.545, "lon": 9.966, "accuracy_m": 3} for t in range(60)]},
    "taps": [{"t": t + 0.5, "uid": "04A224B2C56480", "url": f"https://t.example/t/T{t * 997 % tags}"} for t in range(50)]}))


def peak(registry):
    """Peak resident set of one verify run, from the kernel's accounting for that child (wait4)."""
    p = subprocess.Popen([tagfix, "verify", "--scenario", scenario, "--registry", registry, "--json"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"tagfix verify --registry {registry} failed (wait status {status})")
    return usage.ru_maxrss / 1024


print(json.dumps({"bench": "startup", "startup_ms_median": statistics.median(startups), "startup_ms_min": min(startups),
                  "startup_ms_max": max(startups), "registry_tags": tags, "peak_mib_sqlite_1m": peak(db), "peak_mib_csv_1m": peak(csv)}))
