"""The fleets-over-MQTT section of docs/benchmarks.md (bench tooling), from `TagFixBench fleet` rows.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench fleet > .build/bench-last/fleet.jsonl
    python3 bench/fleet_section.py .build/bench-last/fleet.jsonl
"""
import json, sys


def render(rows):
    """Returns the section's text and its goals as (met, text) pairs."""
    collect = [r for r in rows if r["bench"] == "fleet-collect"]
    cpu = [r for r in rows if r["bench"] == "fleet-publish-cpu"]
    latency = [r for r in rows if r["bench"] == "fleet-latency"]
    lines = ["## 8. Fleets over MQTT (a private mosquitto on loopback)\n",
             "`TagFixBench fleet`: a private mosquitto (`PrivateMosquitto`, no persistence) on this machine. "
             "**Collector**: the same stream of verdicts (the example site's records, repeated) is queued in the broker for two "
             "kept sessions, then drained by `tagfix collect`'s collector (one pass over each message for its syntax and its "
             "`id`, `device`, `time`, `verdict`; `INSERT OR IGNORE` into the fleet store, one transaction per read) and by "
             "`mosquitto_sub -q 1 -C N` writing to a file, one after the other in the same run. **Publisher CPU**: what "
             "publishing adds, user + system time of the process per verdict while a `FleetPublisher` takes verdicts "
             "(`receive`: the tag noted, the thread woken), reads each record's line back from the session log, sends it "
             "(the retained last at QoS 0, then the verdict at QoS 1), reads the PUBACKs and records them in `LOG.acks` "
             "(one fsync once nothing is in flight or 256 have gathered). The log's own work (encoding, append, fsync) is "
             "there without publishing: its records are written before the clock starts. The broker's work is another "
             "process. **Verdict → stored**: from the fan-out (the session log's append and fsync first) to the "
             "collector's committed row, one verdict every 20 ms.\n",
             "| run | verdicts | collector stored/s | mosquitto_sub to a file /s | ratio | publisher CPU µs/verdict | verdict → stored p50 | p99 |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i, (c, p, l) in enumerate(zip(collect, cpu, latency), 1):
        lines.append(f"| {i} | {c['verdicts']:,} | {c['collector_per_s']:,} | {c['mosquitto_sub_per_s']:,} | {float(c['ratio']):.2f} | "
                     f"{float(p['cpu_us_per_verdict']):.1f} | {float(l['p50_ms']):.2f} ms | {float(l['p99_ms']):.2f} ms |")
    lines.append("")
    goals = []
    if collect:
        ratios = [float(c["ratio"]) for c in collect]
        exact = all(c["collector_stored"] == c["verdicts"] for c in collect)
        goals.append((min(ratios) >= 0.5 and exact, "a collector keeps ≥ ½ of mosquitto_sub's rate, storing each verdict once: "
                      + ", ".join(f"{r:.2f}×" for r in ratios) + (", every verdict stored once" if exact else ", NOT every verdict stored")))
    if cpu:
        values = [float(p["cpu_us_per_verdict"]) for p in cpu]
        goals.append((max(values) <= 50, "publishing adds ≤ 50 µs of CPU a verdict: " + ", ".join(f"{v:.1f} µs" for v in values)))
    if latency:
        values = [float(l["p50_ms"]) for l in latency]
        goals.append((max(values) <= 50, "verdict → stored at the collector p50 ≤ 50 ms on loopback: " + ", ".join(f"{v:.2f} ms" for v in values)))
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
