"""The SUN verification section of docs/benchmarks.md (bench tooling), from `TagFixBench sun` rows.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench sun > .build/bench-last/sun.jsonl
    python3 bench/sun_section.py .build/bench-last/sun.jsonl
"""
import json, sys

NAMES = {
    "picc_data": "AN12196's PICC-data example: AES-CBC of one block, two AES-CMACs (session key, SDMMAC)",
    "picc_data+enc_file_data": "AN12196's SDMENCFileData example: also the file data's session key, IV and CBC decryption",
}


def render(rows):
    """Returns the section's text and its goals as (met, text) pairs."""
    lines = ["## 6. NTAG 424 DNA SUN verification (one core)\n",
             "`tagfix sun verify`'s check without the process around it: parsing the URL, decrypting the PICC data with "
             "the meta-read key, deriving the session MAC key, the SDMMAC over the MAC input, the constant-time "
             "comparison. Every libcrypto algorithm is fetched once per process; each check makes its own cipher and "
             "MAC contexts. Batches of 20,000 verifications of the same URL, on one core (`taskset -c 0`).\n",
             "| URL | µs per verification |", "| --- | ---: |"]
    for r in rows:
        lines.append(f"| {NAMES.get(r['case'], r['case'])} | {r['microseconds_median']:.2f} "
                     f"[{r['microseconds_min']:.2f}, {r['microseconds_max']:.2f}] |")
    lines.append("")
    goals = [(r["microseconds_median"] <= 20, f"SUN verification ≤ 20 µs on one core ({r['case']}): "
              f"{r['microseconds_median']:.2f} µs") for r in rows if r["case"] == "picc_data"]
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
