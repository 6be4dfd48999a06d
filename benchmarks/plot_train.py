#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarizes train_sage.py results across ranks: test metric against the number of ranks P.

    python3 benchmarks/plot_train.py benchmarks/results/train-cpu-{cora,tolokers}*/*.json \
        --out benchmarks/results/train-cpu-summary/DATE-COMMIT-MACHINE

Reads the --results JSONs of python/examples/train_sage.py (any mix of datasets, ranks and
seeds), groups them by (dataset, ranks), and writes <out>.json (per group: the runs' test
metrics at best validation, mean and standard deviation over every split of every run) and
<out>.png (mean +- std against P, one panel per dataset).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="train_sage.py --results JSON files")
    p.add_argument("--out", required=True, help="output prefix (.json and .png are added)")
    a = p.parse_args(argv)
    groups = defaultdict(list)
    for path in a.results:
        try:
            with open(path) as f:
                r = json.load(f)
            name = os.path.basename(os.path.normpath(r["dataset"]))
            ranks = int(r.get("ranks", 1))
            tests = [float(s["test_at_best"]) for s in r["splits"].values()]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"plot_train.py: {path}: not a train_sage.py results file ({e})",
                  file=sys.stderr)
            return 1
        groups[(name, r["metric"], ranks)].append(
            {"file": os.path.join(os.path.basename(os.path.dirname(os.path.abspath(path))),
                                  os.path.basename(path)),
             "seed": r["args"].get("seed"), "tests": tests,
             "batching": r.get("batching"), "batch_size": r["args"].get("batch_size")})
    summary = []
    for (name, metric, ranks), runs in sorted(groups.items()):
        allt = np.array([t for run in runs for t in run["tests"]])
        summary.append({"dataset": name, "metric": metric, "ranks": ranks, "runs": runs,
                        "n": int(allt.size), "mean": float(allt.mean()),
                        "std": float(allt.std())})
        print(f"{name:10s} {metric:6s} P={ranks}: {allt.mean():6.2f} +- {allt.std():.2f} "
              f"over {allt.size} run(s)/split(s)")
    tmp = f"{a.out}.json.tmp"
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=1)
    os.replace(tmp, f"{a.out}.json")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_train.py: matplotlib is not installed; no plot", file=sys.stderr)
        return 0
    names = sorted({s["dataset"] for s in summary})
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        rows = [s for s in summary if s["dataset"] == name]
        x = [s["ranks"] for s in rows]
        ax.errorbar(x, [s["mean"] for s in rows], yerr=[s["std"] for s in rows], marker="o",
                    capsize=4)
        ax.set_xticks(x)
        ax.set_xlabel("ranks (partitions) P")
        ax.set_ylabel(f"test {rows[0]['metric']} (mean +- std)")
        ax.set_title(f"{name}: GraphSAGE, {rows[0]['n']} runs/splits per P")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(f"{a.out}.png", dpi=100)
    print(f"plot: {a.out}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
