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
    taps = [r for r in rows if r.get("bench") == "sun-tap"]
    rows = [r for r in rows if r.get("bench", "sun") == "sun"]
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
    for t in taps:
        ratio = t["tagfix_verdict_ms"] / t["floor_ms"]
        lines += ["### A SUN tap on the wire\n",
                  "Tag placed → verdict for a provisioned NTAG 424 DNA (a SUN URL, encrypted PICC data, SDMMAC) on the "
                  "PN532 emulator at 115200 baud, read by the real libnfc and checked by the live verifier with the "
                  "site's key set, the read counter accepted durably in SQLite (synchronous=FULL) before the verdict "
                  "leaves, as `verify --sun-keys` does (`TagFixBench sun-tap`). The wire floor is the fewest bytes a "
                  "SUN tap must move: InListPassiveTarget (the PN532 fetches the ATS), SELECT of the NDEF application, "
                  "SELECT of the NDEF file, one READ BINARY of NLEN ‖ message, as if the reader knew the length. "
                  "TagFix recognises the chip by its ATS and skips the capability container (its layout is the "
                  "datasheet's), and asks for NLEN and the last tap's message length in one READ BINARY (a site's "
                  "tags share a template; NLEN decides what is kept): the first tap of a session reads NLEN on its "
                  "own. Bytes are the last tap's; times are medians [min, max].\n",
                  "| | bytes on the wire | ms |", "| --- | ---: | ---: |",
                  f"| wire floor | {t['floor_bytes']} | {t['floor_ms']:.2f} |",
                  f"| TagFix, on the wire | {t['tagfix_bytes']} | {t['tagfix_wire_ms']:.2f} |",
                  f"| TagFix, tag placed → verdict ({t['rounds']} taps, {t['confirmed']} confirmed) | | "
                  f"{t['tagfix_verdict_ms']:.2f} [{t['tagfix_verdict_ms_min']:.2f}, {t['tagfix_verdict_ms_max']:.2f}] |",
                  f"| ratio to the floor | {t['tagfix_bytes'] / t['floor_bytes']:.2f}× | {ratio:.2f}× |", ""]
    goals = [(r["microseconds_median"] <= 20, f"SUN verification ≤ 20 µs on one core ({r['case']}): "
              f"{r['microseconds_median']:.2f} µs") for r in rows if r["case"] == "picc_data"]
    goals += [(t["tagfix_verdict_ms"] <= 1.25 * t["floor_ms"], "SUN tap (select, read the NDEF file, verdict) ≤ 1.25× "
               f"the wire floor: {t['tagfix_verdict_ms'] / t['floor_ms']:.2f}×") for t in taps]
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
