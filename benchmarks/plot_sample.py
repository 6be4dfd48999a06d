#!/usr/bin/env python3
"""Plot `tessera bench sample --json` results: seeds/s against threads and against fanouts.

    python benchmarks/plot_sample.py benchmarks/results/sample_*.json --out sample.png

Each JSON is one run (one graph, fanouts, thread count). Runs are grouped by graph and mode
(replace / weighted); the left panel draws seeds/s against threads, one line per fanout list; the
right panel draws seeds/s against fanout list, one bar group per thread count. DGL peer results
(benchmarks/dgl_sample_peer.py --json) are drawn as dashed lines / hatched bars when given.
"""
import argparse
import collections
import json
import sys


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            j = json.load(f)
        if "tessera" in j:
            who, r = "tessera", j["tessera"]
        elif "dgl" in j:
            who, r = "dgl", j["dgl"]
        else:
            print(f"{p}: not a sample benchmark result, skipped", file=sys.stderr)
            continue
        prm = j["params"]
        runs.append({
            "who": who,
            "graph": j["graph"].get("spec") or j["graph"].get("path"),
            "fanouts": ",".join(str(x) for x in prm["fanouts"]),
            "threads": prm["threads"],
            "mode": ("replace" if prm.get("replace") else "no-replace")
                    + (", weighted" if prm.get("weighted") else ""),
            "seeds_per_s": r["seeds_per_s"],
            "edges_per_s": r["edges_per_s"],
        })
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+")
    ap.add_argument("--out", default="sample.png")
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = load(a.json)
    if not runs:
        sys.exit("no sample results to plot")
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))

    lines = collections.defaultdict(list)
    for r in runs:
        lines[(r["who"], r["graph"], r["mode"], r["fanouts"])].append((r["threads"], r["seeds_per_s"]))
    for (who, graph, mode, fan), pts in sorted(lines.items()):
        pts.sort()
        left.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                  linestyle="--" if who == "dgl" else "-", label=f"{who} [{fan}] {mode}")
    left.set_xlabel("threads")
    left.set_ylabel("seeds / s")
    left.set_title("seeds/s against threads")
    left.grid(True, alpha=0.3)
    left.legend(fontsize=7)

    # Right panel: uniform sampling without replacement only, so bars compare like with like.
    runs = [r for r in runs if r["mode"] == "no-replace"] or runs
    fanouts = sorted({r["fanouts"] for r in runs})
    groups = sorted({(r["who"], r["threads"]) for r in runs})
    width = 0.8 / max(len(groups), 1)
    for gi, (who, th) in enumerate(groups):
        ys = []
        for fan in fanouts:
            v = [r["seeds_per_s"] for r in runs if r["fanouts"] == fan and r["who"] == who and r["threads"] == th]
            ys.append(max(v) if v else 0)
        right.bar([i + gi * width for i in range(len(fanouts))], ys, width,
                  hatch="//" if who == "dgl" else None, label=f"{who}, {th} thread(s)")
    right.set_xticks([i + width * (len(groups) - 1) / 2 for i in range(len(fanouts))])
    right.set_xticklabels([f"[{f}]" for f in fanouts])
    right.set_xlabel("fanouts (input layer first)")
    right.set_ylabel("seeds / s")
    right.set_title("seeds/s against fanouts (uniform, no replacement)")
    right.grid(True, axis="y", alpha=0.3)
    right.legend(fontsize=7)

    graphs = sorted({r["graph"] for r in runs})
    fig.suptitle("tessera bench sample: " + ", ".join(graphs))
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
