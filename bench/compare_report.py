"""bench/compare's table: the same figures from the tree before (REF) and this one, each the median
of the rounds with their range, and after/before. Reads the two JSON Lines files TagFixBench wrote,
and the two of the phone taps run with both servers at once (their CPU a tap only)."""
import json
import statistics
import sys

label, before_path, after_path = sys.argv[1:4]
once_paths = sys.argv[4:6]


def rows(path):
    """The JSON objects of a JSON Lines file TagFixBench wrote (other lines passed over)."""
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            yield json.loads(line)


def figures(path, once_path=None):
    found = {}

    def add(name, value, better):
        found.setdefault(name, ([], better))[0].append(value)

    # Both servers loaded at once: only their CPU a tap counts (their p99s share two cores).
    for row in rows(once_path) if once_path else []:
        if row.get("bench") == "phone-tap" and row.get("side") == "tagfix" and "server_cpu_us_per_tap" in row:
            add("phone taps, bursts of 200, both servers at once: serve's CPU a tap (µs)", float(row["server_cpu_us_per_tap"]), "lower")
    for row in rows(path):
        bench = row.get("bench")
        if bench == "serve-fan-out" and row.get("server") == "tagfix serve" and row.get("clients") == 100:
            add(f"serve fan-out p99, 100 clients, {row['harness']} harness (ms)", row["p99_ms"], "lower")
        elif bench == "fleet-collect":
            add("collector / mosquitto_sub rate", row["ratio"], "higher")
        elif bench == "tag-read":
            add(f"tag read / wire floor, {row['tag']}", row["tagfix_verdict_ms"] / row["floor_ms"], "lower")
        elif bench == "verifier" and int(row.get("tags", 0)) == 1_000_000 and not row.get("sqlite"):
            add("verifier at 1 M tags (M verdicts/s)", row["verdicts_per_second_median"] / 1e6, "higher")
        elif bench == "phone-tap" and row.get("side") == "tagfix" and row.get("load") == "bursts" and "p99_ms" in row:
            add("phone taps, bursts of 200: p99 (ms)", row["p99_ms"], "lower")
            if "server_cpu_us_per_tap" in row:
                add("phone taps, bursts of 200: serve's CPU a tap (µs)", float(row["server_cpu_us_per_tap"]), "lower")
            if "server_user_us_per_tap" in row:
                add("phone taps, bursts of 200: serve's user time a tap (µs)", float(row["server_user_us_per_tap"]), "lower")
    return found


before = figures(before_path, once_paths[0] if len(once_paths) == 2 else None)
after = figures(after_path, once_paths[1] if len(once_paths) == 2 else None)
# A REF whose serve takes no phone taps (before issue 34) has no phone figures: said, not compared.
phone_only_after = sorted(name for name in set(after) - set(before) if name.startswith("phone taps"))
for name in phone_only_after:
    del after[name]
if not before or set(before) != set(after):
    sys.exit(f"bench/compare: the two trees measured different things: {sorted(before)} / {sorted(after)}")


def cell(values):
    return f"{statistics.median(values):.3f} [{min(values):.3f}–{max(values):.3f}]"


print(f"| figure | before: {label} | after: this tree | after / before | better is |")
print("| --- | ---: | ---: | ---: | --- |")
for name in sorted(before):
    old, better = before[name]
    new, _ = after[name]
    ratio = statistics.median(new) / statistics.median(old)
    print(f"| {name} | {cell(old)} | {cell(new)} | {ratio:.2f} | {better} |")
if phone_only_after:
    print(f"\nNot compared: {', '.join(phone_only_after)} (the tree before has no phone taps in `tagfix serve`).")
