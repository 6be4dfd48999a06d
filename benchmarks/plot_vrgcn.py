#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots VR-GCN results (python/examples/train_vrgcn.py --results) side by side: one panel per
dataset, test metric against sampled edges per epoch, control variates against neighbor sampling
and full neighbors (runs of one dataset, metric and rank count from several files are merged).

    python benchmarks/plot_vrgcn.py OUT.png RESULTS.json [RESULTS.json ...]
"""
import json
import os
import sys

STYLE = {"cv": ("o", "-", "VR-GCN (control variates)"), "ns": ("s", "--", "neighbor sampling"),
         "full": ("*", "none", "full neighbors")}


def main(argv) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, paths = argv[1], argv[2:]
    panels = {}
    for p in paths:
        try:
            with open(p) as f:
                r = json.load(f)
            key = (r["dataset"], r.get("metric", "accuracy"), r["ranks"])
            runs = r["runs"]
        except (OSError, ValueError, KeyError) as e:
            print(f"plot_vrgcn.py: {p}: not a train_vrgcn.py results file ({e})", file=sys.stderr)
            return 1
        panels.setdefault(key, {"seeds": set(), "epochs": r["epochs"], "runs": []})
        panels[key]["seeds"].add(r.get("seeds", 1))
        panels[key]["runs"] += runs
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, ((ds, metric, ranks), pnl) in zip(axes[0], sorted(panels.items())):
        full = [r["test"] for r in pnl["runs"] if r["estimator"] == "full"]
        if full:
            ax.axhspan(full[0] - 1, full[0] + 1, color="grey", alpha=0.15,
                       label="full neighbors +- 1 point")
        for est, (marker, ls, name) in STYLE.items():
            pts = sorted((r["sampled_edges_per_epoch"], r["test"], r.get("test_std", 0.0),
                          r["fanout"]) for r in pnl["runs"] if r["estimator"] == est)
            if not pts:
                continue
            xs, ys, es, fs = zip(*pts)
            ax.errorbar(xs, ys, yerr=es, marker=marker, linestyle=ls, capsize=3, label=name,
                        ms=10 if est == "full" else 6)
            for x, y, f in zip(xs, ys, fs):
                if f != -1:
                    ax.annotate(f"D={f}", (x, y), textcoords="offset points", xytext=(4, -11),
                                fontsize=8)
        seeds = "/".join(str(s) for s in sorted(pnl["seeds"]))
        ax.set_title(f"{ds}, {ranks} rank(s), {pnl['epochs']} epochs, {seeds} seed(s)",
                     fontsize=10)
        ax.set_xscale("log")
        ax.set_xlabel("sampled edges per epoch (log)")
        ax.set_ylabel(f"test {metric} (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("2-layer GCN: VR-GCN control variates against neighbor sampling")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"[plot_vrgcn] {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
