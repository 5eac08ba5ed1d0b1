"""The fleet store on PostgreSQL section of docs/benchmarks.md (bench tooling), from `TagFixBench fleet-postgres` rows.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench fleet-postgres > .build/bench-last/fleet-postgres.jsonl
    python3 bench/postgres_section.py .build/bench-last/fleet-postgres.jsonl
"""
import json, sys


def render(rows):
    """Returns the section's text and its goals as (met, text) pairs."""
    runs = [r for r in rows if r["bench"] == "fleet-postgres"]
    latency = [r for r in rows if r["bench"] == "fleet-postgres-latency"]
    lines = ["## 8b. The fleet store on PostgreSQL (a private cluster and a private mosquitto on loopback)\n",
             "`TagFixBench fleet-postgres`: a private PostgreSQL 15 cluster (`PrivatePostgres`: initdb, default settings "
             "but dynamic shared memory in files of its folder, fsync on) and a private mosquitto (no persistence) on this machine. The same stream of verdicts (the example "
             "site's records, repeated) is queued in the broker for kept sessions, then drained in turn, in the same run: "
             "by `mosquitto_sub -q 1 -C N` writing to a file; by one collector, a `tagfix collect --db postgresql://…` "
             "process (storing what each read of the socket brought as one multi-row `INSERT … ON CONFLICT (id) DO NOTHING`); "
             "by two such processes in one shared subscription (`--group pg`: `$share/pg/…`, the broker dealing the queue "
             "between their sessions), as a fleet runs them, each on its own MQTT loop and its own connection, into the same "
             "table (emptied before). A collector's rate runs from its first row committed to the last row seen; \"from "
             "start\" includes starting the processes. Cores: CPU time from /proc while they drain (the collector processes, "
             "every process of the PostgreSQL cluster, mosquitto, the benchmark's own polling), and the whole machine's busy "
             "share of its cores (/proc/stat), load average at the end. **Verdict → row**: from the fan-out (the session "
             "log's append and fsync first) to the collector's commit, one verdict every 20 ms.\n",
             "| run | verdicts | mosquitto_sub to a file /s | one collector /s | ratio | two collectors /s | two ÷ one | verdict → row p50 | p99 |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i, (r, l) in enumerate(zip(runs, latency), 1):
        lines.append(f"| {i} | {r['verdicts']:,} | {r['mosquitto_sub_per_s']:,} | {r['one_per_s']:,} | {float(r['one_ratio']):.2f} | "
                     f"{r['two_per_s']:,} | {float(r['two_over_one']):.2f} | {float(l['p50_ms']):.2f} ms | {float(l['p99_ms']):.2f} ms |")
    lines.append("")
    if any("one_cores" in r for r in runs):
        lines += ["| run | collectors | /s from start | collector processes | PostgreSQL | mosquitto | benchmark | machine busy (cores of 2) | load |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for i, r in enumerate(runs, 1):
            for n, key in ((1, "one"), (2, "two")):
                c = r.get(f"{key}_cores")
                if c:
                    lines.append(f"| {i} | {n} | {r.get(f'{key}_per_s_from_start', 0):,} | {c['collectors']:.2f} | {c['postgres']:.2f} | "
                                 f"{c['mosquitto']:.2f} | {c['bench']:.2f} | {c['machine']:.2f} | {r.get('load', '')} |")
        lines.append("")
    if any("one_waits" in r for r in runs):
        lines += ["What the collectors' PostgreSQL backends were doing, sampled every 2 ms or so while they drained "
                  "(`pg_stat_activity`; shares of all samples of all their backends): running; waiting for the collector's "
                  "next statement (`ClientRead`, idle or between a transaction's statements); on the WAL (`WALWrite`, "
                  "`WALSync`, `WALInit…`); on a lock or a buffer (`LockManager`, `BufferContent`, the relation's `extend`); "
                  "on the disk (`DataFileExtend`).\n",
                  "| run | collectors | running | waiting for the collector | WAL | locks, buffers | disk | samples |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for i, r in enumerate(runs, 1):
            for n, key in ((1, "one"), (2, "two")):
                w = r.get(f"{key}_waits")
                if not w:
                    continue
                total = sum(w.values()) or 1
                def share(test):
                    return f"{100 * sum(v for k, v in w.items() if test(k.split('/', 1)[1])) / total:.0f} %"
                lines.append(f"| {i} | {n} | {share(lambda e: e == 'running')} | {share(lambda e: e == 'ClientRead')} | "
                             f"{share(lambda e: e.startswith('WAL'))} | "
                             f"{share(lambda e: e in ('LockManager', 'BufferContent', 'BufferMapping', 'extend', 'transactionid', 'tuple'))} | "
                             f"{share(lambda e: e.startswith('DataFile'))} | {total} |")
        lines.append("")
    goals = []
    if runs:
        exact = all(r["one_stored"] == r["verdicts"] and r["two_stored"] == r["verdicts"] for r in runs)
        ratios = [float(r["one_ratio"]) for r in runs]
        goals.append((min(ratios) >= 0.5 and exact, "one collector into PostgreSQL keeps ≥ ½ of mosquitto_sub's rate, each verdict once: "
                      + ", ".join(f"{v:.2f}×" for v in ratios) + (", every verdict stored once" if exact else ", NOT every verdict stored")))
        scale = [float(r["two_over_one"]) for r in runs]
        goals.append((min(scale) >= 1.6, "two collectors store ≥ 1.6× one: " + ", ".join(f"{v:.2f}×" for v in scale)))
    if latency:
        values = [float(l["p50_ms"]) for l in latency]
        goals.append((max(values) <= 50, "verdict → row committed in PostgreSQL p50 ≤ 50 ms on loopback: "
                      + ", ".join(f"{v:.2f} ms" for v in values)))
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
