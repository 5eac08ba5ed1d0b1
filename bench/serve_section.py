"""The tagfix serve section of docs/benchmarks.md (bench tooling), from `TagFixBench serve-fan-out`
rows and, when there is one, a `scripts/soak-serve` result.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench serve-fan-out 500 > .build/bench-last/serve.jsonl
    scripts/soak-serve 100000 > .build/bench-last/serve-soak.jsonl      (about 90 minutes; not in CI)
    python3 bench/serve_section.py .build/bench-last/serve.jsonl [.build/bench-last/serve-soak.jsonl]
"""
import json, sys


def render(rows, soak=None):
    """Returns the section's text and its goals as (met, text) pairs."""
    lines = ["## 9. tagfix serve: a verdict to its clients, beside gpsd's own fan-out\n",
             "`TagFixBench serve-fan-out`: a `ServeHub` (tagfix serve's sink) takes a verdict, as the session's "
             "fan-out hands it on after the log, 50 times a second; 1, then 100 clients watch its Unix socket, "
             "each reading on its own thread and stamping every line as it arrives. Beside it, in the same run, "
             "gpsd's own fan-out: the NMEA emulator (10 Hz) writes an epoch on the pty, a private gpsd reads it, "
             "and 1, then 100 clients watching gpsd over TCP stamp each TPV (matched to its epoch by its time). "
             "gpsd's figure includes its read and parse of the sentences; ours starts at the verdict. Every "
             "client runs in the benchmark's process, on the same cores as the server.\n",
             "| server | clients | messages | p50 | p99 | max |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    by = {(r["server"], r["clients"]): r for r in rows if "p50_ms" in r}
    for r in rows:
        if "p50_ms" in r:
            lines.append(f"| {r['server']} | {r['clients']} | {r['messages']:,} | {r['p50_ms']:.3f} ms | "
                         f"{r['p99_ms']:.3f} ms | {r['max_ms']:.3f} ms |")
    lines.append("")
    goals = []
    ours, theirs = by.get(("tagfix serve", 100)), by.get(("gpsd", 100))
    if ours:
        goals.append((ours["p99_ms"] <= 2, f"verdict → socket client p99 ≤ 2 ms with 100 clients: {ours['p99_ms']:.2f} ms"))
    if ours and theirs:
        ratio = ours["p99_ms"] / theirs["p99_ms"]
        goals.append((ratio <= 1.5, f"≤ 1.5× gpsd's own fan-out (p99, 100 clients): {ratio:.2f}×"))
    if soak:
        s = soak[-1]
        lines += ["### Soak\n",
                  f"`scripts/soak-serve {s['taps']} {s['interval_s']}`: {s['taps']:,} taps through the emulators "
                  f"({s['interval_s']} s apart: two tags taking turns in the field), one client watching throughout "
                  "and 20 more connecting, watching for 0.2–3 s (a fifth of them never reading) and leaving, over "
                  "and over; tagfix serve's resident memory and open descriptors sampled every 5 s.\n",
                  "| verdicts logged | seen by the watching client | each logged once | the client saw the log | "
                  "resident memory (after warm-up) | open descriptors |",
                  "| ---: | ---: | --- | --- | ---: | ---: |",
                  f"| {s['verdicts_logged']:,} | {s['verdicts_seen']:,} | {'yes' if s['logged_once'] else 'NO'} | "
                  f"{'yes' if s['client_saw_the_log'] else 'NO'} | {s['rss_kib_min']:,}–{s['rss_kib_max']:,} KiB | "
                  f"{s['fds_min']}–{s['fds_max']} |", ""]
        goals.append((s["rss_flat"] and s["fds_flat"], f"soak ({s['verdicts_logged']:,} verdicts): memory and descriptors within 10 % after warm-up "
                      f"({s['rss_kib_max'] / s['rss_kib_min']:.2f}×, {s['fds_min']}–{s['fds_max']})"))
        goals.append((s["logged_once"] and s["client_saw_the_log"], f"soak ({s['verdicts_logged']:,} verdicts): every verdict logged once, and sent as logged"))
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    load = lambda path: [json.loads(l) for l in open(path) if l.strip()]
    text, goals = render(load(sys.argv[1]), load(sys.argv[2]) if len(sys.argv) > 2 else None)
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
