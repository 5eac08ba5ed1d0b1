"""Checks one bench/run section's results before anything is written from them (bench tooling).

A section's JSONL passes when it has at least one row, every line is a JSON object (Python's
NaN, Infinity and Swift's nan and inf are not JSON, and are refused), no row says "error", every
number in it is finite, and the counts that say how much was measured are above zero. bench/run
checks each section as it ends and every file again before the report; bench/report.py reads its
rows through `load`, so nothing unchecked reaches docs/benchmarks.md.

    python3 bench/check.py SECTION FILE      exit 0, or exit 1 with one line: "SECTION: why"
"""
import json, math, os, sys


class Failed(Exception):
    """A section that measured nothing, or something that is not a number."""


# Fields that count what was measured: a row with one of them at zero measured nothing.
COUNTS = ("epochs", "messages", "rounds", "verdicts", "taps")


def _constant(name):
    raise ValueError(f"{name} is not a number")


def _numbers(value, path):
    """Every number in a JSON value, with where it is."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{path}[{index}]")


def load(path, section=None):
    """The rows of one section's JSONL, checked; raises `Failed` saying what is wrong."""
    section = section or os.path.basename(path).removesuffix(".jsonl")
    if not os.path.exists(path):
        raise Failed(f"{section}: measured nothing ({path} was not written)")
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line, parse_constant=_constant)
            except ValueError as error:
                # Swift prints nan and inf bare, which json reports as invalid JSON.
                raise Failed(f"{section}: line {number} is not JSON ({error}): {line.strip()[:120]}")
            if not isinstance(row, dict):
                raise Failed(f"{section}: line {number} is not a JSON object: {line.strip()[:120]}")
            if "error" in row:
                raise Failed(f"{section}: measured nothing: {row['error']}")
            numbers = list(_numbers(row, ""))
            for where, value in numbers:
                if not math.isfinite(value):
                    raise Failed(f"{section}: line {number}: {where} is {value}")
            if not numbers:
                raise Failed(f"{section}: line {number} holds no number: {line.strip()[:120]}")
            for count in COUNTS:
                if count in row and row[count] <= 0:
                    raise Failed(f"{section}: measured nothing: line {number} has {count} {row[count]}")
            rows.append(row)
    if not rows:
        raise Failed(f"{section}: measured nothing ({os.path.basename(path)} is empty)")
    return rows


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python3 bench/check.py SECTION FILE")
    try:
        load(sys.argv[2], sys.argv[1])
    except Failed as failure:
        print(failure, file=sys.stderr)
        sys.exit(1)
