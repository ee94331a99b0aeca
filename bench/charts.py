#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Charts for a bench/run.py results.json: charts.py RESULTS.json OUT_DIR.

Writes PNGs into OUT_DIR and prints, as its last line, a JSON object mapping
each benchmark name (and "summary" / "instructions") to its PNG file names,
which run.py links from report.md. Needs matplotlib (Debian:
python3-matplotlib); run.py runs it under an interpreter that has it."""

import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FIXED_COLORS = {"hakozuna": "#d62728", "glibc": "#7f7f7f", "mimalloc": "#1f77b4",
                "tcmalloc": "#2ca02c", "jemalloc": "#ff7f0e", "baseline": "#bcbd22"}
OTHER_COLORS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#393b79", "#637939"]


def colors(names):
    out, k = {}, 0
    for n in names:
        if n in FIXED_COLORS:
            out[n] = FIXED_COLORS[n]
        else:
            out[n] = OTHER_COLORS[k % len(OTHER_COLORS)]
            k += 1
    return out


def grouped_bars(ax, labels, series, col, ylabel):
    """series: {allocator: [value or None per label]}."""
    n = max(1, len(series))
    width = 0.8 / n
    for i, (name, vals) in enumerate(series.items()):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, [v if v is not None else 0 for v in vals], width, label=name, color=col[name])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=35 if len(labels) > 3 else 0,
                       ha="right" if len(labels) > 3 else "center", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def figure(n_groups):
    return plt.subplots(figsize=(max(7.5, 2.0 + 0.9 * n_groups), 4.2))


def save(fig, out_dir, name, made):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    made.append(name)


def relative_chart(b, allocs, col, out_dir, made):
    labels = [r["label"] for r in b["rows"]]
    series = {a: [r["results"].get(a, {}).get("ratio") for r in b["rows"]] for a in allocs}
    if not any(v for vals in series.values() for v in vals if v):
        return
    fig, ax = figure(len(labels))
    grouped_bars(ax, labels, series, col, "relative to the best peer (>1: better)")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_title(f"{b['title']}: {b['metric']['label']}, normalised to the best peer")
    save(fig, out_dir, f"{b['name']}-relative.png", made)


def rss_chart(b, allocs, col, out_dir, made):
    labels = [r["label"] for r in b["rows"]]
    series = {a: [(r["results"].get(a, {}).get("rss_kb_median") or 0) / 1024 for r in b["rows"]]
              for a in allocs}
    if not any(v for vals in series.values() for v in vals):
        return
    fig, ax = figure(len(labels))
    grouped_bars(ax, labels, series, col, "peak RSS (MiB)")
    ax.set_title(f"{b['title']}: peak RSS (lower is better)")
    save(fig, out_dir, f"{b['name']}-rss.png", made)


def scaling_chart(b, allocs, col, out_dir, made):
    groups = {}
    for r in b["rows"]:
        p = r.get("params", {})
        if "threads" not in p:
            return
        key = tuple(sorted((k, str(v)) for k, v in p.items() if k != "threads"))
        groups.setdefault(key, []).append(r)
    groups = {k: v for k, v in groups.items() if len({r["params"]["threads"] for r in v}) >= 2}
    if not groups:
        return
    scale = b["metric"]["scale"]
    n = len(groups)
    ncol = min(3, n)
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.6 * ncol, 3.4 * nrow), squeeze=False)
    for ax, (key, rows) in zip(axes.flat, groups.items()):
        rows = sorted(rows, key=lambda r: r["params"]["threads"])
        xs = [r["params"]["threads"] for r in rows]
        for a in allocs:
            ys = [r["results"].get(a, {}).get("median") for r in rows]
            pts = [(x, y * scale) for x, y in zip(xs, ys) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=a, color=col[a])
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.set_title(", ".join(f"{k}={v}" for k, v in key) or b["name"], fontsize=9)
        ax.set_xlabel("threads")
        ax.set_ylim(bottom=0)
        ax.set_ylabel(b["metric"]["label"])
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{b['title']}: thread scaling")
    save(fig, out_dir, f"{b['name']}-scaling.png", made)


def mem_return_chart(b, allocs, col, out_dir, made):
    phases = [("rss_peak_mb", "peak"), ("rss_after_free_mb", "after free"),
              ("rss_idle1_mb", "idle 1"), ("rss_idle2_mb", "idle 2"), ("rss_trim_mb", "after trim")]
    row = b["rows"][0]
    series = {}
    for a in allocs:
        r = row["results"].get(a, {})
        ex = dict(r.get("extras") or {})
        ex["rss_idle2_mb"] = r.get("median")
        series[a] = [ex.get(k) for k, _ in phases]
    fig, ax = figure(len(phases))
    grouped_bars(ax, [p for _, p in phases], series, col, "RSS (MiB)")
    ax.set_title(f"memory return, {row['label']}: RSS by phase")
    save(fig, out_dir, "mem_return-phases.png", made)


def summary_chart(data, allocs, col, out_dir, made):
    """Geometric mean over every row of each allocator's ratio to the best peer."""
    means = {}
    for a in allocs:
        logs = [math.log(r["results"][a]["ratio"]) for b in data["benchmarks"] for r in b["rows"]
                if r["results"].get(a, {}).get("ratio")]
        if logs:
            means[a] = math.exp(sum(logs) / len(logs))
    if not means:
        return
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    names = list(means)
    ax.bar(names, [means[n] for n in names], color=[col[n] for n in names])
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_ylabel("geometric mean vs best peer (>1: better)")
    ax.set_title("all benchmark rows: median relative to the best peer")
    ax.grid(axis="y", alpha=0.3)
    save(fig, out_dir, "summary.png", made)


def instructions_chart(data, out_dir, made):
    rows = data["rows"]
    names = [n for n in rows[0]["results"] if n != "baseline"]
    col = colors(names)
    series = {n: [r["results"][n].get("per_pair") for r in rows] for n in names}
    fig, ax = figure(len(rows))
    grouped_bars(ax, [r["label"] for r in rows], series, col,
                 "instructions per malloc+free pair")
    ax.set_title("callgrind: instructions per malloc+free pair above the baseline (lower is better)")
    save(fig, out_dir, "instructions.png", made)


def main():
    results, out_dir = sys.argv[1], sys.argv[2]
    with open(results) as f:
        data = json.load(f)
    made_all = {}
    if data["config"].get("instructions"):
        made = []
        instructions_chart(data, out_dir, made)
        made_all["instructions"] = made
    else:
        # the checks-off build is in the report's tables, not in the charts
        allocs = [a["name"] for a in data["allocators"] if a["name"] != "hakozuna-nocheck"]
        col = colors(allocs)
        for b in data["benchmarks"]:
            made = []
            if b["name"] == "mem_return":
                mem_return_chart(b, allocs, col, out_dir, made)
            else:
                relative_chart(b, allocs, col, out_dir, made)
                scaling_chart(b, allocs, col, out_dir, made)
            rss_chart(b, allocs, col, out_dir, made)
            made_all[b["name"]] = made
        made = []
        summary_chart(data, allocs, col, out_dir, made)
        made_all["summary"] = made
    print(json.dumps(made_all))


if __name__ == "__main__":
    main()
