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
             "The rows with groups commit the taps GROUP at a time as `serve`'s phone taps are "
             "(`SUNCounterStore.acceptAll`): on PostgreSQL the group's counters are one statement over arrays "
             "(`INSERT … SELECT * FROM unnest($1::text[], $2::integer[], $3::text[]) ON CONFLICT … WHERE "
             "stored.counter < EXCLUDED.counter RETURNING uid`), one round trip; a tag raised twice in one group "
             "takes a statement per raise in one transaction. A tap's time is its group's commit. Without reads, "
             "only the commit; \"read first\" adds the read of each tag's last counter that serve's group still "
             "makes tap by tap (one round trip each).\n",
             "| case | store | group | taps | accepted | commits/s | taps/s | ms per tap, median | p99 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['storage']} | {r.get('group', 1)} | {r['taps']} | {r['accepted']} | "
                     f"{r['commits_per_second']:,.0f} | "
                     f"{r['taps_per_second']:,.0f} | {r['tap_ms_median']:.2f} | {r['tap_ms_p99']:.2f} |")
    lines.append("")
    goals = []
    for r in rows:
        if r["case"].endswith("every URL at both"):
            goals.append((r["accepted"] == r["taps"] / 2, "two servers on one `--state`, every URL presented at both: each "
                          f"counter accepted exactly once ({r['accepted']} of {r['taps']} taps, the rest replays)"))
    one = next((r for r in rows if r["case"] == "one server" and r["storage"] == "postgresql"), None)
    for r in rows:
        if one and r["storage"] == "postgresql" and r.get("group", 1) > 1 and r["servers"] == 1:
            lines.append(f"- {r['case']}: {r['taps_per_second'] / one['taps_per_second']:.1f}× the taps/s of one by one.")
    if one:
        lines.append("")
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
