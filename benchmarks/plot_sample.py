#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plot `tessera bench sample --json` results: seeds/s against threads and against fanouts.

    python benchmarks/plot_sample.py benchmarks/results/sample-cpu-*/*.json --out sample.png

Each JSON is one run (one graph, node order, fanouts, thread count). The left panel draws
seeds/s against threads, one line per graph, node order (stored / degree), mode (replace /
weighted) and fanout list; the right panel draws seeds/s against fanout list, one bar per graph,
node order and thread count (uniform sampling without replacement). Where the runs come from
several commits, the commit is part of each line and bar too, and its label names it. A result
of an older harness (without the fields benchmarks/results_table.py requires of a current one)
is skipped with a note. DGL peer results (benchmarks/dgl_sample_peer.py --json) are drawn as
dashed lines / hatched bars when given.

    python benchmarks/plot_sample.py --ratios RUN.json ... --out ratios.png [--target 8]

draws instead the ratio to the reference per core of each run (one point per file, in the order
given), with the range of its single rounds as an error bar and the target as a line: on a
shared machine the run-to-run spread is the figure to read before any single ratio.
"""
import argparse
import collections
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_table import CURRENT_FIELDS, field  # noqa: E402  (beside this script)

#: What a current `tessera bench sample` CPU result records (results_table.py's definition).
CURRENT = CURRENT_FIELDS["sample-cpu-"][0]


def read_json(path):
    """The JSON in `path`; exits with one line naming the file when it is missing or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"plot_sample: cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"plot_sample: {path} is not JSON ({e.msg} at line {e.lineno})")


def load(paths):
    runs = []
    for p in paths:
        j = read_json(p)
        if not isinstance(j, dict) or "params" not in j:
            print(f"{p}: not a sample benchmark result, skipped", file=sys.stderr)
            continue
        if "tessera" in j:
            who, r = "tessera", j["tessera"]
            missing = [f for f in CURRENT if field(j, f) is None]
            if missing and j.get("device", "cpu") == "cpu":
                print(f"{p}: made by an older harness (no {', '.join(missing)}), skipped",
                      file=sys.stderr)
                continue
        elif "dgl" in j:
            who, r = "dgl", j["dgl"]
        else:
            print(f"{p}: not a sample benchmark result, skipped", file=sys.stderr)
            continue
        prm, g = j["params"], j.get("graph") or {}
        runs.append({
            "who": who,
            "graph": g.get("spec") or g.get("path"),
            "order": g.get("node_order") or "stored",
            "commit": j.get("commit") or "unknown",
            "fanouts": ",".join(str(x) for x in prm["fanouts"]),
            "threads": prm["threads"],
            "mode": ("replace" if prm.get("replace") else "no-replace")
                    + (", weighted" if prm.get("weighted") else ""),
            "seeds_per_s": r["seeds_per_s"],
            "edges_per_s": r["edges_per_s"],
            "path": p,
        })
    return runs


def series(runs, key):
    """{key tuple: [run]} grouped by `key` (names of run fields), plus the commit when the runs
    come from several commits; a label per key naming each field that tells the groups apart
    (the graph always)."""
    mixed = len({r["commit"] for r in runs}) > 1
    key = tuple(key) + (("commit",) if mixed else ())
    groups = collections.defaultdict(list)
    for r in runs:
        groups[tuple(r[k] for k in key)].append(r)
    return key, dict(sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))))


def label(key, values):
    out = []
    for k, v in zip(key, values):
        out.append({"fanouts": f"[{v}]", "threads": f"{v} thread(s)", "order": f"{v} order",
                    "commit": f"@{v}"}.get(k, str(v)))
    return " ".join(out)


def line_series(runs):
    """{label: [(threads, seeds/s)]}: one line per who, graph, node order, mode and fanouts
    (and commit, when mixed)."""
    key, groups = series(runs, ("who", "graph", "order", "mode", "fanouts"))
    out = {}
    for values, rs in groups.items():
        pts = collections.defaultdict(list)
        for r in rs:
            pts[r["threads"]].append(r)
        for th, same in pts.items():
            if len(same) > 1:
                print(f"{label(key, values)}, {th} thread(s): {len(same)} results "
                      f"({', '.join(x['path'] for x in same)}); drawn: the first", file=sys.stderr)
        out[label(key, values)] = sorted((th, same[0]["seeds_per_s"]) for th, same in pts.items())
    return out


def bar_series(runs):
    """(fanout lists, {label: [seeds/s or 0 per fanout list]}): one bar per who, graph, node
    order and thread count (and commit, when mixed), uniform without replacement only (else
    every mode, each its own bar)."""
    runs = [r for r in runs if r["mode"] == "no-replace"] or runs
    fanouts = sorted({r["fanouts"] for r in runs})
    modes = ("mode",) if len({r["mode"] for r in runs}) > 1 else ()
    key, groups = series(runs, ("who", "graph", "order", "threads") + modes)
    out = {}
    for values, rs in groups.items():
        by_fan = {}
        for r in rs:
            by_fan.setdefault(r["fanouts"], r)
        out[label(key, values)] = [by_fan[f]["seeds_per_s"] if f in by_fan else 0
                                   for f in fanouts]
    return fanouts, out


def load_ratios(paths):
    """(label, ratio per core, lowest single round, highest single round, rounds) per result."""
    out = []
    for p in paths:
        j = read_json(p)
        ref = (j.get("reference") or {}) if isinstance(j, dict) else {}
        if "ratio_per_core" not in j or not ref.get("round_ratios"):
            print(f"{p}: no ratio to the reference (not a tessera bench sample result), skipped",
                  file=sys.stderr)
            continue
        rounds = ref["round_ratios"]
        label = p.rsplit("/", 1)[-1].removesuffix(".json").removeprefix("sample_")
        # The median of the paired rounds (the bench's ratio_per_core now; earlier runs recorded
        # the ratio of each side's fastest round there).
        out.append((label, statistics.median(rounds), min(rounds), max(rounds), len(rounds)))
    return out


def plot_ratios(paths, out_path, target, plt):
    runs = load_ratios(paths)
    if not runs:
        sys.exit("no results with a ratio to the reference to plot")
    # Labels without the prefix every file shares (the graph and fanouts, named in the title).
    common = os.path.commonprefix([r[0] for r in runs]) if len(runs) > 1 else ""
    common = common[: common.rfind("_") + 1] if "_" in common else ""
    runs = [(r[0][len(common):] or r[0],) + r[1:] for r in runs]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(runs) + 2), 4.5))
    xs = range(len(runs))
    ys = [r[1] for r in runs]
    lo = [r[1] - r[2] for r in runs]
    hi = [r[3] - r[1] for r in runs]
    ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3, label="fastest round each side (bar: single rounds)")
    if target:
        ax.axhline(target, color="red", linestyle="--", linewidth=1, label=f"target {target:g}x")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r[0]}\n({r[4]} rounds)" for r in runs], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("ratio to the reference per core")
    ax.set_title("tessera bench sample: ratio to the single-threaded reference, run by run"
                 + (f"\n{common.rstrip('_')}" if common else ""))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    print(f"wrote {out_path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+")
    ap.add_argument("--out", default="sample.png")
    ap.add_argument("--ratios", action="store_true",
                    help="plot each run's ratio to the reference (with its single rounds) instead")
    ap.add_argument("--target", type=float, default=8.0,
                    help="with --ratios: the target ratio drawn as a line (0: none)")
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if a.ratios:
        plot_ratios(a.json, a.out, a.target, plt)
        return
    runs = load(a.json)
    if not runs:
        sys.exit("no sample results to plot")
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))

    for name, pts in line_series(runs).items():
        left.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                  linestyle="--" if name.startswith("dgl") else "-", label=name)
    left.set_xlabel("threads")
    left.set_ylabel("seeds / s")
    left.set_title("seeds/s against threads")
    left.grid(True, alpha=0.3)
    left.legend(fontsize=7)

    # Right panel: uniform sampling without replacement only, so bars compare like with like.
    fanouts, bars = bar_series(runs)
    width = 0.8 / max(len(bars), 1)
    for gi, (name, ys) in enumerate(bars.items()):
        right.bar([i + gi * width for i in range(len(fanouts))], ys, width,
                  hatch="//" if name.startswith("dgl") else None, label=name)
    right.set_xticks([i + width * (len(bars) - 1) / 2 for i in range(len(fanouts))])
    right.set_xticklabels([f"[{f}]" for f in fanouts])
    right.set_xlabel("fanouts (input layer first)")
    right.set_ylabel("seeds / s")
    modes = sorted({r["mode"] for r in runs if r["mode"] == "no-replace"} or
                   {r["mode"] for r in runs})
    right.set_title(f"seeds/s against fanouts ({', '.join(modes)})")
    right.grid(True, axis="y", alpha=0.3)
    right.legend(fontsize=7)

    graphs = sorted({r["graph"] for r in runs})
    fig.suptitle("tessera bench sample: " + ", ".join(graphs))
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
