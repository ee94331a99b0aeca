#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Draw a flame graph (PNG or SVG) from collapsed stacks ("a;b;c 123" lines),
such as the .folded files hakozuna's heap profiler writes beside its pprof
profile (docs/profiling.md).

    tools/flamegraph.py PROFILE.alloc.folded out.png [--title TEXT] [--min-frac F]

Roots are at the bottom, callees stacked above, each box as wide as the bytes
of the stacks through it; frames narrower than --min-frac of the total
(default 0.002) are left out. Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import sys
import zlib


def parse(path):
    root = {"n": 0, "kids": {}}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            stack, _, value = line.rpartition(" ")
            try:
                v = float(value)
            except ValueError:
                continue
            if not stack or v <= 0:
                continue
            node = root
            node["n"] += v
            for frame in stack.split(";"):
                node = node["kids"].setdefault(frame, {"n": 0, "kids": {}})
                node["n"] += v
    return root


def colour(name):
    h = zlib.crc32(name.encode()) & 0xffff
    return (0.85 + 0.15 * (h & 0xff) / 255, 0.35 + 0.45 * (h >> 8) / 255, 0.15)


def layout(root, min_frac):
    """(x, depth, width, name) boxes, x and width in units of the total."""
    boxes, total = [], root["n"] or 1
    def walk(node, x, depth):
        for name, kid in sorted(node["kids"].items()):
            w = kid["n"] / total
            if w >= min_frac:
                boxes.append((x, depth, w, name))
                walk(kid, x, depth + 1)
            x += w
    walk(root, 0.0, 0)
    return boxes


def human(b):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{b:.0f} B"
        b /= 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folded")
    ap.add_argument("out", help="output image (.png or .svg)")
    ap.add_argument("--title", default=None)
    ap.add_argument("--min-frac", type=float, default=0.002)
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("flamegraph.py needs matplotlib (Debian package python3-matplotlib)")
    root = parse(args.folded)
    if root["n"] <= 0:
        sys.exit(f"{args.folded}: no stacks with a positive value")
    boxes = layout(root, args.min_frac)
    depth = max(d for _, d, _, _ in boxes) + 1
    fig_h = 1.2 + 0.24 * depth
    fig, ax = plt.subplots(figsize=(16, fig_h), dpi=100)
    width_px = 16 * 100
    for x, d, w, name in boxes:
        ax.add_patch(plt.Rectangle((x, d), w, 0.92, facecolor=colour(name), edgecolor="white", linewidth=0.4))
        chars = int(w * width_px / 6.2)
        if chars >= 4:
            label = name if len(name) <= chars else name[: chars - 2] + ".."
            ax.text(x + 0.002, d + 0.46, label, va="center", ha="left", fontsize=7, family="monospace")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, depth)
    ax.set_yticks([])
    ax.set_xticks([i / 10 for i in range(11)])
    ax.set_xticklabels([f"{i * 10}%" for i in range(11)], fontsize=7)
    title = args.title or args.folded
    ax.set_title(f"{title}  (total {human(root['n'])}; frames under {args.min_frac:.1%} left out)", fontsize=9)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}: {len(boxes)} frames, depth {depth}")


if __name__ == "__main__":
    main()
