#!/usr/bin/env python3
"""Records fuzzing runs in docs/fuzzing.md (test tooling). Reads result lines on standard input,
`TARGET STATUS EXECUTIONS SECONDS CORPUS` (what Fuzz/run prints), and keeps the rows of targets not
in them, so runs of different lengths add up to one table. Usage: Fuzz/record.py LIMIT_TEXT < results"""
import datetime, os, platform, re, subprocess, sys

path = "docs/fuzzing.md"
label = sys.argv[1] if len(sys.argv) > 1 else ""
old = open(path).read() if os.path.exists(path) else ""
rows = {}
for line in old.splitlines():
    m = re.match(r"\| `([a-z0-9-]+)` \|", line)
    if m:
        rows[m.group(1)] = line
stamp = f"{datetime.datetime.utcnow():%Y-%m-%d}"
for line in sys.stdin.read().splitlines():
    if not line.strip():
        continue
    target, status, runs, seconds, corpus = line.split()
    rate = int(runs) // max(1, int(seconds))
    result = "no crash, leak, hang or wrong answer" if status == "0" else "FAILED"
    rows[target] = f"| `{target}` | {int(runs):,} | {int(seconds):,} | {rate:,} | {corpus} | {label} | {stamp} | {result} |"
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
head = old.split("\n## Executions")[0] if "## Executions" in old else """# Fuzzing

Every parser that takes bytes or text from outside — a tag, a dump file, a serial line, gpsd, a
registry or scenario file — has a libFuzzer target (`Fuzz/Targets/FuzzTarget.swift`). Each run
checks what must hold whatever the input: nothing traps (AddressSanitizer and Swift's own checks
turn a force unwrap, an index out of range or an overflow into a crash), a rejection is a typed
error, and an accepted input gives a sane answer (coordinates in range, "encode then decode gives
the same message", the read planner agreeing with the full TLV walk, a frame decoder that does not
care how bytes arrive). `Fuzz/run` runs them; CI runs each for 30 s; the test suite runs every
target over its seeds, its regressions and seeded random inputs (`FuzzCorpusTests`).
"""
with open(path, "w") as f:
    f.write(head.rstrip() + "\n")
    f.write(f"""
## Executions

On {cpu}, {swift}, libFuzzer with AddressSanitizer (`-sanitize=fuzzer,address`), 2 cores shared.
Each row is the latest recorded run of that target (`Fuzz/run --runs N --record`, `--time S`, or both:
whichever limit comes first).

| target | executions | seconds | executions/s | corpus | limit | date | result |
| --- | ---: | ---: | ---: | ---: | --- | --- | --- |
""")
    for target in sorted(rows):
        f.write(rows[target] + "\n")
print("wrote docs/fuzzing.md", file=sys.stderr)
