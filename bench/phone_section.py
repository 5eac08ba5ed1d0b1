"""The phone-tap section of docs/benchmarks.md (bench tooling), from `TagFixBench phone-tap` rows.

Its own module so the section can be rendered without a whole bench/run:
    TAGFIX_BENCH_PYTHON=.build/bench-venv/bin/python .build/release/TagFixBench phone-tap 20000 \\
        --serve .build/release/tagfix > .build/bench-last/phone.jsonl
    python3 bench/phone_section.py .build/bench-last/phone.jsonl
"""
import json, sys


def best(rows, side, path, commits=None, load="back-to-back", tokens=1):
    """The faster run of a side (bench/run's habit: the machine's speed drifts within minutes),
    with `tokens` named tokens in serve's token file (one but in the run made for it)."""
    found = [r for r in rows if r.get("side") == side and r.get("path") == path and "skipped" not in r
             and r.get("tokens", 1) == tokens and (commits is None or r.get("commits", "").startswith(commits))
             and (load is None or r.get("load", load) == load)]
    return max(found, key=lambda r: r["per_second"]) if found else None


def holds(r):
    """A sweep step held: every tap confirmed, the rate kept (95 %), p99 within 10 ms."""
    return (r["confirmed"] == r["taps"] and r["per_second"] >= 0.95 * r["offered_per_second"]
            and r["p99_ms"] <= 10)


def render(rows):
    """Returns the section's text and its goals as (met, text) pairs."""
    rows = [r for r in rows if r.get("bench") == "phone-tap"]
    grouped = best(rows, "tagfix", "in-process", "grouped")
    per_tap = best(rows, "tagfix", "in-process", "per tap")
    http = best(rows, "tagfix", "http")
    peer = best(rows, "peer", "http")
    paced_grouped = best(rows, "tagfix", "in-process", "grouped", load="paced")
    paced_http = best(rows, "tagfix", "http", load="paced")
    paced_peer = best(rows, "peer", "http", load="paced")
    peer_check = best(rows, "peer", "in-process", load=None)
    bursts_http = best(rows, "tagfix", "http", load="bursts")
    bursts_peer = best(rows, "peer", "http", load="bursts")
    floor = best(rows, "floor", "http")
    floor_bursts = best(rows, "floor", "http", load="bursts")
    many = max((r.get("tokens", 1) for r in rows if r.get("side") == "tagfix"), default=1)
    many_bursts = best(rows, "tagfix", "http", load="bursts", tokens=many) if many > 1 else None
    rounds = (bursts_http or bursts_peer or {}).get("taps", 0) // max(1, (bursts_http or bursts_peer or {}).get("phones_at_once", 200))
    skipped = next((r["skipped"] for r in rows if r.get("side") == "tagfix" and "skipped" in r), None)
    phones = (grouped or peer or {}).get("phones_at_once", 200)
    lines = [f"## Phone taps: SUN URLs POSTed by {phones} phones at once, beside a Flask SUN backend\n",
             f"{phones} phones tap at once, each its own emulated NTAG 424 DNA (its URL read through the tag's ISO "
             "commands, so every tap carries a fresh SUN and a higher counter), each POSTing its taps one after "
             "another with the head a phone's browser sends (the 16 headers Chromium 156 sent for the tap page's "
             "`fetch` at a phone's viewport, some 610 bytes; until 07 Dec the phones sent 5 headers, 170 bytes, "
             "and serve's CPU a tap rose by a quarter when they sent the browser's) on a connection it keeps (HTTP/1.1 persistent connections, as a browser does; it connects "
             "again when the server closes it, so the peer, whose werkzeug closes every connection, is connected "
             "to anew for each tap); back to back and in bursts the phones over HTTP share one event loop "
             "(`LoopPhones`, as a load generator such as wrk keeps its connections), so they take as little of the "
             "machine's two cores from the server as they can; paced, each phone has a thread that sleeps to its "
             "tap's due time (one loop thread beside a busy server is scheduled late, and that lateness would be "
             "charged to the server); `TAGFIX_BENCH_PHONE_THREADS=1` puts every load on threads, and the in-process "
             "rows have a thread a phone; "
             "times are POST → answer, per tap (`TagFixBench phone-tap`). TagFix parses the body "
             "(`PhoneTapRequest`), checks the SUN, the counter and the position (`PhoneTapHandler`, the verifier "
             "`verify` runs), and answers only once the counter (SQLite, `synchronous = FULL`) and the verdict "
             "(the `SessionLog`, fsync) are on the disk. *Grouped*: serve's own group commits (`PhoneTapGroups`): the "
             "taps that arrive while a commit is being made share the next one (one `SQLiteSUNCounters` transaction, "
             "one `SessionLog` write and fsync), over HTTP through `tagfix serve` and in-process without HTTP; *per tap*: "
             "one tap at a time, as serve committed before it grouped (a transaction and an fsync a tap). `tagfix serve` "
             "runs with `--tap-limit 1000000,1000000`: its limit per client (10 taps at once, then one a second) is for "
             "a tech's phone and would refuse a benchmark phone's back-to-back taps; each phone taps from a loopback "
             "address of its own. The peer (`bench/sun_peer_flask.py`) is built "
             "the way the open SUN backends are (nfc-developer/sdm-backend: Flask and a crypto library), written "
             "for this benchmark: it checks the same URLs' SUN (AN12196) and the position over HTTP on loopback, "
             "keeps no counter and writes nothing. *Back to back*: every phone taps again as soon as it has its "
             "answer (the phones keep the server saturated; the faster of two runs of each is shown); *bursts*: "
             f"all {phones} phones tap at the same moment, once each, and the next round begins when the last has its "
             f"answer ({rounds} rounds: the wait of a tap when every phone taps at once); *paced*: "
             "the phones together at a fixed rate, each tap timed from when it was due (open loop: a server that falls "
             "behind is charged for it). "
             "*Floor*: the same phones "
             "against `bench/floor.c`, a server in C that answers every POST at once with a fixed verdict (one "
             "epoll thread, nothing parsed past the head, nothing checked or written): what this machine, its "
             "kernel's TCP and the phones themselves cost before any server works. *Server CPU a tap*: the "
             "server process's user + system time (/proc/PID/stat, all its threads) over the run, ÷ the taps "
             "answered; it leaves out the time a tap waits, so it shows a change in serve's own work better than a "
             "rate does (it still moves with the machine: caches, migrations, and clock ticks of 10 ms); in brackets, "
             "its user time alone, which moves less (the system time is mostly the kernel's loopback TCP).\n",
             "| who | path | load | commits | taps | confirmed | connections | taps/s | POST → answer p50 ms | p99 ms | taps a commit | server CPU µs a tap |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, r in (("TagFix", http), ("TagFix", grouped), ("TagFix", per_tap), ("peer (Flask)", peer),
                     ("TagFix", bursts_http), ("peer (Flask)", bursts_peer),
                     ("TagFix", paced_http), ("TagFix", paced_grouped), ("peer (Flask)", paced_peer),
                     ("floor (C)", floor), ("floor (C)", floor_bursts)):
        if r is None:
            continue
        commits = r["commits"].split(":")[0]
        load = r.get("load", "back-to-back") + (f", {r['offered_per_second']:,.0f}/s" if "offered_per_second" in r else "")
        refused = ", ".join(f"{'no answer' if str(status) == '0' else status} ×{n}" for status, n in sorted(r.get("not_200", {}).items()))
        confirmed = f"{r['confirmed']}" + (f" (not 200: {refused})" if refused else "")
        lines.append(f"| {label} | {r['path']} | {load} | {commits} | {r['taps']} | {confirmed} | {r.get('connections', '–')} | "
                     f"{r['per_second']:,.0f} | "
                     f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r.get('taps_per_commit', '–')} | "
                     f"{r.get('server_cpu_us_per_tap', '–')}"
                     + (f" ({r['server_user_us_per_tap']})" if "server_user_us_per_tap" in r else "") + " |")
    if http is None:
        lines.append(f"| TagFix | http (`tagfix serve`) | – | – | – | – | – | – | – | – | skipped: {skipped or 'not run'} | – |")
    lines.append("")
    if floor_bursts and bursts_http and "server_cpu_us_per_tap" in bursts_http and "server_cpu_us_per_tap" in floor_bursts:
        serve_cpu, floor_cpu = float(bursts_http["server_cpu_us_per_tap"]), float(floor_bursts["server_cpu_us_per_tap"])
        lines.append(f"*Where a burst's time goes.* {phones} phones tapping at once are answered by the floor within "
                     f"{floor_bursts['p99_ms']:.2f} ms at the p99 ({floor_cpu:.1f} µs of the floor's CPU a tap), by `tagfix serve` "
                     f"within {bursts_http['p99_ms']:.2f} ms ({serve_cpu:.1f} µs a tap). The server's work on {phones} taps is "
                     f"{phones * serve_cpu / 1000:.1f} ms of CPU, {phones * serve_cpu / 2000:.1f} ms with both cores busy on "
                     f"it and nothing else. A rough budget, not a bound: if the floor's p99 stands for what the phones and "
                     f"the kernel take of a burst, a p99 within 10 ms leaves the server about "
                     f"{max(0.0, (10 - floor_bursts['p99_ms'])) * 2000 / phones:.0f} µs of CPU a tap on this machine's 2 cores "
                     f"(serve's figure also holds the loopback sends that deliver its answers, which the floor's p99 counts too)."
                     + (" Serve's CPU is within that budget and its p99 is not: the budget gives the server both cores "
                        "throughout, and the phones' loop and the kernel's loopback deliveries take part of them while a "
                        "burst runs, and the server's own stages run partly in series (see the notes below)."
                        if serve_cpu <= max(0.0, (10 - floor_bursts['p99_ms'])) * 2000 / phones and bursts_http['p99_ms'] > 10 else "")
                     + "\n")
    if many_bursts and bursts_http and "server_cpu_us_per_tap" in many_bursts and "server_cpu_us_per_tap" in bursts_http:
        one_cpu, many_cpu = float(bursts_http["server_cpu_us_per_tap"]), float(many_bursts["server_cpu_us_per_tap"])
        if many_bursts["confirmed"] != many_bursts["taps"]:
            lines.append(f"*A site of {many} techs* (`--tokens {many}`): only {many_bursts['confirmed']} of {many_bursts['taps']} "
                         f"taps confirmed ({many_bursts.get('not_200', {})} not answered 200), so its figures are not shown.\n")
        else:
            ratio = f" ({many_cpu / one_cpu:.2f}×)" if one_cpu > 0 else ""
            lines.append(f"*A site of {many} techs.* The same bursts with {many} named tokens in serve's token file (`--tokens {many}`, "
                         f"the phones' the last of them; every tap confirmed), a serve of its own started after the one above: "
                         f"p99 {many_bursts['p99_ms']:.2f} ms, {many_cpu:.1f} µs of serve's CPU a tap, against {one_cpu:.1f} µs with "
                         f"one token{ratio}. A tap's token is found by its keyed digest and compared in constant time with the "
                         f"entry it names, not with every entry of the file.\n")
    sweep = sorted((r for r in rows if r.get("side") == "tagfix" and r.get("path") == "http" and r.get("load") == "sweep"),
                   key=lambda r: r["offered_per_second"])
    capacity = None
    if sweep:
        lines += [f"*Paced sweep* through `tagfix serve` (the same {phones} phones, each rate with taps of its own, "
                  "three seconds' worth; it stops at a rate the server does not keep up with, 90 % answered; a rate "
                  "holds when every tap is confirmed, 95 % of the rate is answered and the p99 is within 10 ms):\n",
                  "| offered taps/s | answered taps/s | taps | confirmed | connections | p50 ms | p99 ms | max ms | p99 ≤ 10 ms |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in sweep:
            held = holds(r)
            lines.append(f"| {r['offered_per_second']:,.0f} | {r['per_second']:,.0f} | {r['taps']} | {r['confirmed']} | "
                         f"{r.get('connections', '–')} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['max_ms']:.2f} | "
                         f"{'yes' if held else 'no'} |")
        held = [r for r in sweep if holds(r)]
        capacity = held[-1] if held else None
        lines.append("")
        if capacity:
            below = [r for r in sweep if r["offered_per_second"] < capacity["offered_per_second"] and not holds(r)]
            lines.append(f"The highest rate at which the p99 held within 10 ms: "
                         f"**{capacity['offered_per_second']:,.0f} taps/s** (p50 {capacity['p50_ms']:.2f} ms, "
                         f"p99 {capacity['p99_ms']:.2f} ms)"
                         + (f"; {len(below)} lower rate(s) missed in this run" if below else "") + ".\n")
        else:
            lines.append("At no rate of the sweep did the p99 hold within 10 ms.\n")
    if peer_check:
        lines.append(f"The peer's SUN check alone, in its own process on the same URLs (no HTTP, no position): "
                     f"{peer_check['per_second']:,.0f} checks/s on one core.\n")
    goals = []
    measured = http or grouped
    paced = paced_http if http else paced_grouped
    where = "over `tagfix serve`" if http else "in-process (tagfix serve has no /api/tap in this build)"
    if measured:
        # A tap that was not answered `confirmed` was not verified: the goals count only a run that confirmed every tap.
        whole = measured["confirmed"] == measured["taps"]
        short = "" if whole else f" (only {measured['confirmed']} of {measured['taps']} taps confirmed)"
        also = f"; in bursts of {phones} at once: {bursts_http['p99_ms']:.2f} ms" if http and bursts_http else ""
        also += f"; paced at {paced['offered_per_second']:,.0f} taps/s: {paced['p99_ms']:.2f} ms" if paced else ""
        if http and sweep:
            also += (f"; within 10 ms up to {capacity['offered_per_second']:,.0f} taps/s paced (the sweep)" if capacity
                     else "; at no paced rate of the sweep")
        # Met when the taps of all the phones at once are answered within 10 ms at the p99: back
        # to back (always 200 in flight), or in bursts (200 at the same moment).
        at_once = min([measured["p99_ms"]] + ([bursts_http["p99_ms"]] if http and bursts_http else []))
        goals.append((whole and at_once <= 10, f"phone tap POST → answer p99 ≤ 10 ms with {phones} phones at once (met when back "
                      f"to back or in bursts holds), counter "
                      f"and log on the disk first ({measured['commits'].split(':')[0]} commits, {where}): "
                      f"{measured['p99_ms']:.2f} ms back to back{also}{short}"))
        if peer:
            ratio = measured["per_second"] / peer["per_second"]
            unequal = "" if http else "; TagFix without HTTP, the peer with it"
            goals.append((whole and ratio >= 10, f"phone taps verified per second ≥ 10× the Flask SUN peer's ({where}{unequal}): "
                          f"{measured['per_second']:,.0f} against {peer['per_second']:,.0f}, {ratio:.1f}×{short}"))
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
