"""The tagfix serve section of docs/benchmarks.md (bench tooling), from `TagFixBench serve-fan-out`
rows and, when there is one, a `scripts/soak-serve` result.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench serve-fan-out 500 > .build/bench-last/serve.jsonl      (both harnesses)
    scripts/soak-serve 100000 > .build/bench-last/serve-soak.jsonl      (about 90 minutes; not in CI)
    python3 bench/serve_section.py .build/bench-last/serve.jsonl [.build/bench-last/serve-soak.jsonl]
"""
import json, sys


HARNESSES = {
    "threads": "each client reads on a thread of its own in the benchmark's process (100 threads on the server's 2 cores: "
               "every line wakes 100 threads, and the p99 is the scheduler's as much as the server's); a read only appends "
               "its bytes and its time, the lines are cut out after the run",
    "process": "every client's socket is read by one poll(2) loop in a child process (one thread wakes and reads what is "
               "ready), the same for both servers",
}


def render(rows, soak=None):
    """Returns the section's text and its goals as (met, text) pairs."""
    lines = ["## 9. tagfix serve: a verdict to its clients, beside gpsd's own fan-out\n",
             "`TagFixBench serve-fan-out`: a `ServeHub` (tagfix serve's sink) takes a verdict, as the session's "
             "fan-out hands it on after the log, 50 times a second; 1, then 100 clients watch its Unix socket and "
             "stamp every line as its read returns. Beside it, in the same run, gpsd's own fan-out: the NMEA "
             "emulator (10 Hz) writes an epoch on the pty, a private gpsd reads it, and 1, then 100 clients watching "
             "gpsd over TCP stamp each TPV (matched to its epoch by its time). gpsd's figure includes its read and "
             "parse of the sentences; ours starts at the verdict (and includes encoding it). gpsd 3.22 serves at most "
             "64 clients (its MAX_CLIENTS): it closes the 36 connections past them, so its \"100 clients\" rows are "
             "64 (*served*). Two harnesses, each applied to both servers alike:\n"]
    for harness, text in HARNESSES.items():
        lines.append(f"- **{harness}**: {text}.")
    lines += ["", "*hand-off* is how long tagfix serve's `receive` held the session's fan-out (the verifier's thread): "
              "the state update, the line's encoding and its sends to every socket that takes it at once.\n",
              "| harness | server | clients (served) | messages | p50 | p99 | max | hand-off p50 / p99 |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = [dict(r, harness=r.get("harness", "threads"), served=r.get("served", r.get("clients"))) for r in rows]
    by = {(r["harness"], r["server"], r["clients"]): r for r in rows if "p50_ms" in r}
    for r in rows:
        if "p50_ms" in r:
            hand = (f"{r['receive_p50_us']:.0f} µs / {r['receive_p99_us']:.0f} µs" if "receive_p50_us" in r else "")
            lines.append(f"| {r['harness']} | {r['server']} | {r['clients']} ({r['served']}) | {r['messages']:,} | "
                         f"{r['p50_ms']:.3f} ms | {r['p99_ms']:.3f} ms | {r['max_ms']:.3f} ms | {hand} |")
    lines.append("")
    split = [r for r in rows if "first_p99_ms" in r and r["clients"] == 100]
    if split:
        lines += ["Where tagfix serve's tail goes with 100 clients: each verdict's *first* arrival (from the hand-off to the "
                  "first client's read: encoding, one send and the reader's wake-up) and its *spread* (first to last "
                  "client: the 100 sends one after another and the reading of them). A tail in the first arrival is the "
                  "reader not running when the line came, the machine's scheduling; a tail in the spread is the server's "
                  "sends or the harness's reading.\n",
                  "| harness | first arrival p50 / p99 | spread p50 / p99 |", "| --- | ---: | ---: |"]
        for r in split:
            lines.append(f"| {r['harness']} | {r['first_p50_ms']:.3f} / {r['first_p99_ms']:.3f} ms | "
                         f"{r['spread_p50_ms']:.3f} / {r['spread_p99_ms']:.3f} ms |")
        lines.append("")
    goals = []
    for harness in HARNESSES:
        ours, theirs = by.get((harness, "tagfix serve", 100)), by.get((harness, "gpsd", 100))
        if ours:
            goals.append((ours["p99_ms"] <= 2, f"verdict → socket client p99 ≤ 2 ms with 100 clients ({harness} harness): "
                                               f"{ours['p99_ms']:.2f} ms"))
        if ours and theirs:
            ratio = ours["p99_ms"] / theirs["p99_ms"]
            goals.append((ratio <= 1.5, f"≤ 1.5× gpsd's own fan-out (p99, 100 clients; gpsd served {theirs['served']}; "
                                        f"{harness} harness): {ratio:.2f}×"))
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
