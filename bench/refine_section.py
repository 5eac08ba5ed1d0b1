"""The placement refinement section of docs/benchmarks.md (bench tooling), from `TagFixBench refine` rows.

Its own module so the section can be rendered without a whole bench/run:
    .build/release/TagFixBench refine 1000 > .build/bench-last/refine.jsonl
    python3 bench/refine_section.py .build/bench-last/refine.jsonl
"""
import json, sys


def pct(x):
    return f"{100 * x:.1f} %"


def render(rows):
    """Returns the section's text and its goals as (met, text) pairs."""
    stay = [r for r in rows if r.get("bench") == "refine"]
    moved = {r["multipath_share"]: r for r in rows if r.get("bench") == "refine-moved"}
    lines = ["## 11. Placements that learn: refined from confirmed taps\n",
             "`tagfix registry refine`'s estimator (`PlacementRefiner`) on simulated tags (`TagFixBench refine`). The sky "
             "wanders: a first-order Gauss–Markov error per axis, σ drawn from 1–3 m and τ from 30–600 s per tag, 0.3 m of "
             "white jitter, and in one look in ten a multipath bias of 3–8 m the receiver does not know of (also run without "
             "it); the receiver states 2.45 σ (95 %). Each tag is enrolled with enroll's stopping rule (`PositionAverager`, fed at most 30 s of 1 Hz fixes), then tapped "
             "once a day for 10 days at arm's length (0.5–1 m, mostly from the same side, as from in front of a wall); a tap "
             "feeds the estimator only when the verifier's rule confirms it (distance + accuracy ≤ 25 m). True errors are "
             "from where the tag really is. A tag the refiner reports moved keeps its enrolled centre in these figures.\n",
             "| multipath | tags | enrolled: median / p95 true error | covered by its ±95 % | refined: median / p95 "
             "true error | covered by its ±95 % | reported moved (not moved) | of those, enrolment within its accuracy |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in stay:
        lines.append(f"| {pct(r['multipath_share'])} of looks | {r['tags']:,} | {r['enrolled_error_median_m']:.2f} / "
                     f"{r['enrolled_error_p95_m']:.2f} m | {pct(r['enrolled_coverage'])} | {r['refined_error_median_m']:.2f} / "
                     f"{r['refined_error_p95_m']:.2f} m | {pct(r['refined_only_coverage'])} ({r['refined_tags']:,} refined) | "
                     f"{pct(r['false_moved'])} | {pct(r['false_moved_good_enrolment'])} |")
    lines += ["", "Tags moved 8 m after enrolment (radius 25 m, so every tap is still confirmed), reported moved after:\n",
              "| multipath | confirmed taps | 3 days | 5 days | 10 days |", "| --- | ---: | ---: | ---: | ---: |"]
    for share, r in sorted(moved.items(), reverse=True):
        lines.append(f"| {pct(share)} of looks | {r['taps_confirmed']:,} of {r['taps_offered']:,} | "
                     f"{pct(r['detected_after_3'])} | {pct(r['detected_after_5'])} | {pct(r['detected_after_10'])} |")
    good = max((r["false_moved_good_enrolment"] for r in stay), default=0)
    lines += ["", "An enrolment is one visit: whatever it states, the refiner weighs it as no better than the taps' typical "
              "visit. A tag reported moved that was not is one whose enrolled centre is off by more than that accuracy "
              "(the larger of its stated one and one visit's) and the taps can tell: "
              + ("none of them had an enrolment within its accuracy. " if good == 0 else
                 f"up to {pct(good)} of the tags had an enrolment within its accuracy and were still reported moved. ")
              + "A move of 8 m is told from a poor enrolment at the 99 % level only where the sky is good enough: on "
              "σ = 3 m skies a single visit's 95 % radius is 7.4 m.\n"]
    goals = [(r["refined_error_median_m"] <= 0.5 * r["enrolled_error_median_m"],
              f"placements refined from 10 confirmed taps on 10 days: median true error ≤ half the enrolled one "
              f"({pct(r['multipath_share'])} multipath): {r['refined_error_median_m']:.2f} m against "
              f"{r['enrolled_error_median_m']:.2f} m ({r['refined_error_median_m'] / r['enrolled_error_median_m']:.2f}×)")
             for r in stay]
    return "\n".join(lines) + "\n", goals


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text, goals = render([json.loads(l) for l in f if l.strip()])
    print(text)
    for ok, goal in goals:
        print(f"- {'**met**' if ok else '**missed**'}: {goal}")
