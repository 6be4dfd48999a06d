#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots train_gin.py results: test (and training) accuracy against epochs, one line per run.

    python3 benchmarks/plot_gin.py benchmarks/results/gin/*.json --majority 0.447 \\
        --out benchmarks/results/gin/<date>-<commit>-cpu-2core.png

Each --results JSON of python/examples/train_gin.py is one line labelled by its rank count;
a run with ``--layers 0`` (a linear model of the summed node features) is drawn as a baseline,
and a horizontal line marks the majority class of the test split (``--majority``).
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="train_gin.py --results JSON files")
    p.add_argument("--out", required=True, help="output PNG")
    p.add_argument("--majority", type=float, help="test accuracy of the majority class")
    a = p.parse_args(argv)
    runs = []
    for path in a.results:
        try:
            with open(path) as f:
                r = json.load(f)
            ep = [int(e["epoch"]) for e in r["epochs"]]
            test = [float(e["test_acc"]) for e in r["epochs"]]
            train = [float(e["train_acc"]) for e in r["epochs"]]
            layers = int(r.get("args", {}).get("layers", -1))
            runs.append((int(r["ranks"]), r["dataset"], ep, test, train, layers))
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"plot_gin.py: {path}: not a train_gin.py results file ({e})",
                  file=sys.stderr)
            return 1
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (ranks, name, ep, test, train, layers) in enumerate(
            sorted(runs, key=lambda r: (-r[5], r[0]))):
        c = f"C{i}"
        what = f"{ranks} rank{'s' if ranks > 1 else ''}"
        if layers == 0:  # no GIN layer: a linear model of the summed input features
            ax.plot(ep, test, color=c, lw=1, alpha=0.8,
                    label=f"{what}, 0 layers (bag of atoms): test")
            continue
        ax.plot(ep, test, color=c, label=f"{what}: test")
        ax.plot(ep, train, color=c, ls=":", alpha=0.7, label=f"{what}: train")
    if a.majority is not None:
        ax.axhline(a.majority, color="grey", ls="--", lw=1, label="majority class (test)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("accuracy")
    ax.set_title(f"GIN on {runs[0][1]}: accuracy against epochs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
