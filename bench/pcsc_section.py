"""The PC/SC section of docs/benchmarks.md (bench tooling), from `TagFixBench pcsc-read` rows.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench pcsc-read 15 > .build/bench-last/pcsc.jsonl
    python3 bench/pcsc_section.py .build/bench-last/pcsc.jsonl
"""
import json, sys


def span(r, key):
    return f"{r[key]:.2f} ms [{r[key + '_min']:.2f}, {r[key + '_max']:.2f}]"


def render(rows):
    """Returns the section's text and its goals as (met, text) pairs."""
    rows = [r for r in rows if "tagfix_ms" in r]
    lines = ["## 10. Tag placed → verdict through pcscd (PC/SC), beside pyscard\n",
             "`TagFixBench pcsc-read`: a private pcscd (its own mount namespace) with the vsmartcard reader driver "
             "(vpcd); the card behind it is emulated in the benchmark's process as a PC/SC Part 3 contactless reader "
             "with an NTAG in its field, and logs every APDU with the time it arrived and the time its answer left. "
             "Both clients are measured there, the same way: from pcscd's first word to the card (its power-on, once "
             "pcscd's polling has noticed it) to the answer to the client's last APDU, which includes the client's "
             "SCardGetStatusChange wake-up, its SCardConnect and every APDU. TagFix is the live pipeline (PCSCReader + "
             "LiveVerifier, mock GPS); its verdict time runs from the card's connection to vpcd (placed in the field) "
             "to the verdict, which includes pcscd's polling. The peer, `bench/pcsc_peer.py` (Debian's python3-pyscard, "
             "its `scard` module), waits with SCardGetStatusChange, connects the same way and sends exactly the APDUs "
             "TagFix sent for that tag, taken from the card's log. The **floor** counts the APDUs no reader can do "
             "without (GET DATA for the UID, FAST_READs of the CC through the NDEF TLV's end, 60 pages each, and "
             "READ_SIG); the **planner's minimum** adds the fixed first read of pages 3–10 the planner needs to learn "
             "the message's length.\n",
             "The reader column says which reader the card answers as: vpcd's own (`virtual`, which takes the NTAG "
             "commands wrapped in `FF 00 00 00`, as the ACR122U does), or an ACR1552U, which takes them only through "
             "PC/SC Part 3's transparent exchange (`FF C2`): a session started, switched to ISO 14443-3 and ended "
             "around the read, and FAST_READs of at most 56 pages (the answer's data objects must fit 256 bytes), so its "
             "floor and planner counts have those 3 APDUs added and pieces of 56 pages. A row's TagFix count stops at "
             "the verdict, which may come before the session's end.\n",
             "| reader | tag | NDEF bytes | APDUs: floor / planner / TagFix / pyscard | TagFix, power-on → last answer | "
             "pyscard, the same | TagFix ÷ pyscard | TagFix, placed → verdict |",
             "| --- | --- | ---: | --- | --- | --- | ---: | --- |"]
    goals = []
    for r in rows:
        reader = r.get("reader", "virtual")
        floor, planner = r["floor_apdus"], r["planner_apdus"]
        ratio = r["tagfix_ms"] / r["pyscard_ms"] if "pyscard_ms" in r else float("nan")
        same = "" if r.get("pyscard_same_apdus", False) else " (not the same APDUs!)"
        lines.append(f"| {reader} | {r['tag']} | {r['message_bytes']} | {floor} / {planner} / {r['tagfix_apdus']} / "
                     f"{r.get('pyscard_apdus', '?')}{same} | {span(r, 'tagfix_ms')} | "
                     f"{span(r, 'pyscard_ms') if 'pyscard_ms' in r else '—'} | {ratio:.2f}× | {span(r, 'tagfix_verdict_ms')} |")
        goals.append((ratio <= 1.1, f"PC/SC power-on → last answer ≤ 1.1× pyscard's ({reader}, {r['tag']}): {ratio:.2f}×"))
        goals.append((r["tagfix_apdus"] <= planner,
                      f"PC/SC APDUs no more than the read planner's minimum ({reader}, {r['tag']}): {r['tagfix_apdus']} "
                      f"(planner {planner}, floor {floor})"))
    direct = {r["tag"]: r for r in rows if r.get("reader", "virtual") == "virtual"}
    costs = [(r, direct[r["tag"]]) for r in rows if r.get("pass_through") == "transparent" and r["tag"] in direct]
    if costs:
        lines += ["", "What the transparent exchange costs a read, the same tag as vpcd's own reader and as an ACR1552U, "
                  "in the same run (TagFix's power-on → last answer, medians): " + "; ".join(
                      f"{r['tag']}: {d['tagfix_ms']:.2f} → {r['tagfix_ms']:.2f} ms (+{r['tagfix_ms'] - d['tagfix_ms']:.2f} ms, "
                      f"{r['tagfix_apdus'] - d['tagfix_apdus']:+d} APDUs)" for r, d in costs) + ". The first tap on a "
                  "reader whose name does not say its family also pays the probe (a direct transmit refused, then the "
                  "exchange taken); the rows are the steady state."]
    rows = [r for r in rows if r.get("reader", "virtual") == "virtual"] or rows
    if rows:
        r = rows[0]
        turns = (f", the two clients taking turns in {r['blocks']} blocks (what the machine does meanwhile falls on both), "
                 "each block's first tap a warm-up not counted" if "blocks" in r else "")
        lines += ["", f"{r['rounds']} taps per client and tag{turns}. Of TagFix's placed → verdict time, pcscd's polling "
                  f"(the card connected to vpcd → pcscd's power-on) took {r['placed_to_noticed_ms']:.1f} ms (median, "
                  f"{r['tag']}): the same wait for any PC/SC client, outside both columns it is compared in. The APDUs "
                  f"themselves (TagFix's first APDU → last answer) took {r['tagfix_apdu_span_ms']:.2f} ms, pyscard's "
                  f"{r.get('pyscard_apdu_span_ms', float('nan')):.2f} ms. TagFix's APDUs there: `{r['apdu_headers']}` "
                  "(first 7 bytes each: GET DATA, then FAST_READ and READ_SIG passed through as `FF 00 00 00 Lc D4 42 …`). "
                  "Above the floor, TagFix pays one APDU on the longer messages: the planner's first read of pages 3–10, "
                  "made before the TLV's length is known, so the rest no longer fits in as few 60-page reads. The "
                  "placed → verdict minimum is a tap that fell just before one of pcscd's polls.\n"]
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    load = lambda path: [json.loads(l) for l in open(path) if l.strip()]
    text, goals = render(load(sys.argv[1]))
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
