#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Validation metric of train_deepgcn.py runs at several rank counts, against epochs and against
training wall time (evaluation excluded), averaged over the splits of each run; writes the plot
and a summary JSON (per rank count: the best mean validation metric, the test metric at each
split's best epoch, and the epochs and seconds the run took to reach the single-rank run's best
mean validation metric).

    python benchmarks/plot_deepgcn.py RUN_1.json RUN_2.json RUN_4.json --out PREFIX
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

try:
    from tessera.utils import atomic_write_json, pyplot
except ImportError:  # running from a source tree without `pip install .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from tessera.utils import atomic_write_json, pyplot


def curves(run: dict):
    """(epochs, mean val, mean cumulative training seconds) over the splits, at the epochs
    every split evaluated."""
    hs = [s["history"] for s in run["splits"].values()]
    n = min(len(h) for h in hs)
    ep = np.arange(n)
    val = np.array([[h[i]["val"] for i in range(n)] for h in hs], dtype=np.float64)
    sec = np.array([[h[i]["train_seconds"] for i in range(n)] for h in hs], dtype=np.float64)
    ok = ~np.isnan(val).any(0)
    return ep[ok] + 1, val[:, ok].mean(0), sec[:, ok].mean(0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="results JSON of train_deepgcn.py")
    p.add_argument("--out", required=True, help="output prefix (PREFIX.png, PREFIX.json)")
    a = p.parse_args(argv)
    runs = []
    for path in a.runs:
        try:
            with open(path) as f:
                r = json.load(f)
            r["splits"]
        except (OSError, ValueError, KeyError) as e:
            raise SystemExit(f"plot_deepgcn.py: {path}: not a train_deepgcn.py result ({e})")
        runs.append((path, r))
    runs.sort(key=lambda pr: pr[1]["ranks"])
    if runs[0][1]["ranks"] != 1:
        raise SystemExit("plot_deepgcn.py: needs a single-rank run (the reference)")
    metric = runs[0][1]["metric"]
    _, ref_val, _ = curves(runs[0][1])
    target = float(ref_val.max())
    summary = {"metric": metric, "target_val": target, "runs": []}
    for path, r in runs:
        ep, val, sec = curves(r)
        hit = np.nonzero(val >= target)[0]
        tests = [s["test_at_best"] for s in r["splits"].values()]
        summary["runs"].append({
            "file": os.path.basename(path), "ranks": r["ranks"], "mode": r["mode"],
            "splits": sorted(int(k) for k in r["splits"]),
            "best_mean_val": float(val.max()), "best_mean_val_epoch": int(ep[val.argmax()]),
            "test_at_best_mean": float(np.mean(tests)), "test_at_best_std": float(np.std(tests)),
            "epochs_to_target": int(ep[hit[0]]) if len(hit) else None,
            "seconds_to_target": float(sec[hit[0]]) if len(hit) else None,
            "seconds_per_epoch": float(sec[-1] / ep[-1]),
            "lr": next(iter(r["splits"].values()))["lr"]})
    atomic_write_json(summary, a.out + ".json")
    for s in summary["runs"]:
        print(f"{s['ranks']} rank(s): best mean val {s['best_mean_val']:.2f} at epoch "
              f"{s['best_mean_val_epoch']}, test {s['test_at_best_mean']:.2f} +- "
              f"{s['test_at_best_std']:.2f}; reaches {target:.2f} after "
              f"{s['epochs_to_target']} epochs / {s['seconds_to_target']} s; "
              f"{s['seconds_per_epoch']:.1f} s per epoch")
    plt = pyplot("plot_deepgcn")
    if plt is None:
        return 0
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for _, r in runs:
        ep, val, sec = curves(r)
        lab = f"{r['ranks']} rank(s)"
        a1.plot(ep, val, marker=".", label=lab)
        a2.plot(sec, val, marker=".", label=lab)
    for ax in (a1, a2):
        ax.axhline(target, color="0.6", ls="--", lw=0.8)
        ax.set_ylabel(f"validation {metric} (mean over splits)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    a1.set_xlabel("epoch (each rank: a full epoch of its own clustering)")
    a2.set_xlabel("training wall time, s (evaluation excluded)")
    n_splits = len(runs[0][1]["splits"])
    fig.suptitle(f"DeepGCN ResGCN+ on {os.path.basename(runs[0][1]['dataset'].rstrip('/'))}, "
                 f"parallel epochs; {n_splits} split(s); dashed: 1-rank best", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out + ".png", dpi=100)
    plt.close(fig)
    print(f"[plot_deepgcn] {a.out}.png, {a.out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
