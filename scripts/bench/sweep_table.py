#!/usr/bin/env python3
"""Markdown table of a sweep's JSON reports (scripts/bench/sweep.sh), by level.

usage: sweep_table.py DIR NAME... [--ratio A/B ...]

Reads DIR/sweep-NAME.json or, after an ALTERNATE=1 run, DIR/sweep-NAME-cLEVEL.json,
and prints one row per server and level, then for each --ratio A/B the row
A's figure over B's (tok/s and goodput: above 1 is A better; latencies: below
1 is A better).
"""
import glob
import json
import os
import sys


def runs(d, name):
    out = {}
    paths = glob.glob(os.path.join(d, f"sweep-{name}.json")) + glob.glob(os.path.join(d, f"sweep-{name}-c*.json"))
    for p in paths:
        with open(p) as f:
            for r in json.load(f)["runs"]:
                out[r["concurrency"]] = r["summary"]
    return out


COLS = [
    ("out tok/s", lambda s: s["output_tokens_per_s"], "{:.1f}"),
    ("TTFT p50", lambda s: s["ttft_s"]["p50"] * 1000, "{:,.0f} ms"),
    ("TTFT p99", lambda s: s["ttft_s"]["p99"] * 1000, "{:,.0f} ms"),
    ("ITL p50", lambda s: s["itl_s"]["p50"] * 1000, "{:.0f} ms"),
    ("ITL p90", lambda s: s["itl_s"]["p90"] * 1000, "{:.0f} ms"),
    ("ITL p99", lambda s: s["itl_s"]["p99"] * 1000, "{:.0f} ms"),
    ("TPOT p50", lambda s: s["tpot_s"]["p50"] * 1000, "{:.0f} ms"),
    ("E2E p50", lambda s: s["e2e_s"]["p50"], "{:.1f} s"),
]


def main(argv):
    d, rest = argv[0], argv[1:]
    names = [a for a in rest if not a.startswith("--") and "/" not in a]
    ratios = [a.split("/") for a in rest if "/" in a and not a.startswith("--")]
    data = {n: runs(d, n) for n in names}
    levels = sorted({c for n in names for c in data[n]})
    print("| server | clients | ok / err / cut | " + " | ".join(c[0] for c in COLS) + " |")
    print("|---|---:|---|" + "---:|" * len(COLS))
    for c in levels:
        for n in names:
            s = data[n].get(c)
            if s is None or not s["ttft_s"]["n"]:
                continue
            cells = [fmt.format(f(s)) for _, f, fmt in COLS]
            print(f"| {n} | {c} | {s['ok']} / {s['errors']} / {s['cut']} | " + " | ".join(cells) + " |")
        for a, b in ratios:
            sa, sb = data.get(a, {}).get(c), data.get(b, {}).get(c)
            if not sa or not sb or not sa["ttft_s"]["n"] or not sb["ttft_s"]["n"]:
                continue
            cells = []
            for _, f, _ in COLS:
                vb = f(sb)
                cells.append(f"{f(sa) / vb:.2f}" if vb else "—")
            cells[0] = f"**{cells[0]}**"
            cells[1] = f"**{cells[1]}**"
            print(f"| **{a} / {b}** | {c} | | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1:])
