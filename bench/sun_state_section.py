"""The SUN counters on PostgreSQL section of docs/benchmarks.md (bench tooling), from
`TagFixBench sun-state` rows.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench sun-state > .build/bench-last/sun-state.jsonl
    python3 bench/sun_state_section.py .build/bench-last/sun-state.jsonl
"""
import json, sys


def render(rows):
    """Returns the section's text and its goals as (met, text) pairs."""
    rows = [r for r in rows if r.get("bench") == "sun-state"]
    lines = ["## SUN read counters on one PostgreSQL `--state`, from one and two servers\n",
             "What the verifier asks of the counter store for each SUN tap, in a loop: the last accepted counter "
             "read, then the accept, one upsert that only raises the stored counter (`INSERT … ON CONFLICT … DO "
             "UPDATE … WHERE stored.counter < EXCLUDED.counter`), committed with `synchronous_commit = on` before it "
             "returns (`TagFixBench sun-state`). PostgreSQL is a private cluster on loopback (fsync on, the same "
             "disk); each server is a process of its own with one connection, as a `tagfix serve --state "
             "postgresql://…` is. Two servers tap their own 100 tags each, then the same 100 tags with the same "
             "counters (every URL presented at both: one accepts it, the other sees a replay). Beside them one "
             "server on a SQLite counter file (`synchronous = FULL`, as `verify --sun-counters` keeps them). "
             "Times per tap are the slower server's median and p99.\n",
             "| case | store | taps | accepted | commits/s | taps/s | ms per tap, median | p99 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['storage']} | {r['taps']} | {r['accepted']} | {r['commits_per_second']:,.0f} | "
                     f"{r['taps_per_second']:,.0f} | {r['tap_ms_median']:.2f} | {r['tap_ms_p99']:.2f} |")
    lines.append("")
    goals = []
    for r in rows:
        if r["case"].endswith("every URL at both"):
            goals.append((r["accepted"] == r["taps"] / 2, "two servers on one `--state`, every URL presented at both: each "
                          f"counter accepted exactly once ({r['accepted']} of {r['taps']} taps, the rest replays)"))
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
