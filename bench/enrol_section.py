"""The enrolment section of docs/benchmarks.md (bench tooling), from `TagFixBench enrol` rows.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench enrol 1000 > .build/bench-last/enrol.jsonl
    python3 bench/enrol_section.py .build/bench-last/enrol.jsonl
"""
import json, sys

RULES = {"stopping_rule": "stopping rule (`enroll` now)", "average_30s": "30 s average (`enroll` before)"}
SKIES = {"all": "all", "open": "open sky", "settling": "settling after lock", "multipath": "multipath episodes"}


def metres(value):
    return "—" if value is None else f"{value:.2f}"


def render(rows):
    """Returns the section's text and its goals as (met, text) pairs."""
    rows = [r for r in rows if r.get("bench") == "enrol"]
    if not rows:
        return "", []
    count = next(r["enrolments"] for r in rows if r["sky"] == "all")
    lines = ["## 12. Enrolment: a stopping rule against the 30 s average\n",
             f"{count:,} simulated enrolments (`TagFixBench enrol`) on the correlated sky of the NMEA emulator "
             "(GNSSErrorModel): a receiver at 1 Hz standing at a known spot, σ 1–3 m per axis, τ 30–600 s "
             "(log-uniform), 0.2 m of jitter; a quarter with multipath episodes (3–10 m, on 5–20 s, off 10–40 s on "
             "average), a fifth still settling after lock (2–8 m off, τ 3 s). The stopping rule (PositionAverager, "
             "at most 30 s) and the old 30 s average (kept in the benchmark as the baseline) see the same streams. "
             "Seconds are simulated, from the first fix to the decision; the true error is the distance of the "
             "recorded centre from the spot; coverage is how often the spot lies inside the stated 95 % accuracy. "
             "\"Both\" compares the true errors on the streams both accepted.\n",
             "| sky | rule | accepted | refused | s median | s p90 | error median m | error p95 m | both: median | "
             "both: p95 | accuracy median m | coverage |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        refusals = ", ".join(f"{k} {v}" for k, v in sorted(r["refusals"].items()))
        coverage = "—" if r["coverage"] is None else f"{100 * r['coverage']:.1f} %"
        lines.append(f"| {SKIES.get(r['sky'], r['sky'])} ({r['enrolments']}) | {RULES.get(r['rule'], r['rule'])} | "
                     f"{r['accepted']} | {r['refused']}{' (' + refusals + ')' if refusals else ''} | "
                     f"{metres(r['seconds_median'])} | {metres(r['seconds_p90'])} | {metres(r['error_median_m'])} | "
                     f"{metres(r['error_p95_m'])} | {metres(r['both_error_median_m'])} | "
                     f"{metres(r['both_error_p95_m'])} | {metres(r['accuracy_median_m'])} | {coverage} |")
    lines.append("")
    goals = []
    new = next((r for r in rows if r["sky"] == "all" and r["rule"] == "stopping_rule"), None)
    old = next((r for r in rows if r["sky"] == "all" and r["rule"] == "average_30s"), None)
    if new and old:
        goals.append((new["seconds_median"] <= 5, f"median enrolment ≤ 5 s: {new['seconds_median']:.1f} s "
                      f"(p90 {new['seconds_p90']:.1f} s; the 30 s average: 30 s)"))
        for key, name in (("error_median_m", "median"), ("error_p95_m", "p95")):
            ratio = new[key] / old[key]
            goals.append((ratio <= 1.10, f"true error ({name}) no worse than the 30 s average's within 10 %: "
                          f"{new[key]:.2f} m against {old[key]:.2f} m ({100 * (ratio - 1):+.1f} %)"))
        goals.append((new["coverage"] >= 0.95, f"coverage of the stated 95 % accuracy ≥ 95 %: "
                      f"{100 * new['coverage']:.1f} % (the 30 s average's: {100 * old['coverage']:.1f} %)"))
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
