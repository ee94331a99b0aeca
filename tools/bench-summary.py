#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarise a `make bench` run across allocators.

    tools/bench-summary.py build/bench/<run>/results.json [--rows]

For every row in which all allocators (but hakozuna-nocheck, which only shows
the checks' cost) finished, each allocator's median is divided by the best
median of the row (inverted where higher is better, so 1.00 = the best) and
its peak RSS by the lowest of the row; the table gives the geometric means
over those rows, best first. Unlike report.md's `vs best peer`, hakozuna is
one of the allocators compared, so every column is on the same scale.
--rows also lists hakozuna's two ratios row by row."""
import json
import math
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    with open(args[0]) as f:
        data = json.load(f)
    allocs = [a["name"] for a in data["allocators"] if a["name"] != "hakozuna-nocheck"]
    rows = []
    for b in data["benchmarks"]:
        higher = b["metric"]["higher_better"]
        for r in b["rows"]:
            res = {a: r["results"].get(a, {}) for a in allocs}
            if not all(v.get("median") and v.get("rss_kb_median") for v in res.values()):
                continue
            med = {a: v["median"] for a, v in res.items()}
            rss = {a: v["rss_kb_median"] for a, v in res.items()}
            best, low = (max if higher else min)(med.values()), min(rss.values())
            time = {a: (best / med[a] if higher else med[a] / best) for a in allocs}
            rows.append((f"{b['name']} {r['label']}", time, {a: rss[a] / low for a in allocs}))
    if not rows:
        sys.exit("no row in which every allocator finished")

    def geo(i, a):
        return math.exp(sum(math.log(r[i][a]) for r in rows) / len(rows))

    print(f"{len(rows)} rows in which all {len(allocs)} allocators finished; "
          "geometric mean of median / best median (metric) and of peak RSS / lowest (RSS); 1.00 = the best")
    print()
    print("| allocator | metric | peak RSS |")
    print("|---|---|---|")
    for a in sorted(allocs, key=lambda a: geo(1, a)):
        print(f"| {a} | {geo(1, a):.3f} | {geo(2, a):.3f} |")
    if "--rows" in sys.argv and "hakozuna" in allocs:
        print()
        print("| row | hakozuna metric / best | hakozuna RSS / lowest |")
        print("|---|---|---|")
        for name, time, rss in rows:
            print(f"| {name} | {time['hakozuna']:.2f} | {rss['hakozuna']:.2f} |")


if __name__ == "__main__":
    main()
