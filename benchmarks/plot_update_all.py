#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plot `tessera bench update-all --json` results: the rate of one distributed update_all next to
the local SpMM's rate on the same rows measured in the same run, one pair of bars per result.

    python benchmarks/plot_update_all.py benchmarks/results/update-all/*.json \\
        --out benchmarks/results/update-all/<date>-<commit>-<machine>.png

Rates are million edges per second over the whole graph (edges x features multiply-adds each);
the label over each pair is the ratio update_all / local SpMM.
"""
import argparse
import json
import sys


def load(paths):
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                j = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"plot_update_all: cannot read {p}: {e}")
        if not isinstance(j, dict) or j.get("benchmark") != "update-all":
            print(f"{p}: not an update-all result, skipped", file=sys.stderr)
            continue
        try:
            rows.append({
                "label": f"{j.get('graph') or 'graph'}\n{j['world_size']} rank(s), {j['device']}"
                         f"\nF={j['features']}",
                "update_all": j["update_all_edges_per_second"] / 1e6,
                "local": j["local_spmm_edges_per_second"] / 1e6,
                "local_name": j.get("local_spmm", "local SpMM"),
                "ratio": j["ratio_update_all_vs_local_spmm"],
            })
        except KeyError as e:
            raise SystemExit(f"plot_update_all: {p}: missing field {e}")
    if not rows:
        raise SystemExit("plot_update_all: no update-all results among the inputs")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    rows = load(a.results)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5.5, 2.2 + 2.4 * len(rows)), 4.5))
    xs = range(len(rows))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [r["update_all"] for r in rows], w, label="update_all")
    ax.bar([x + w / 2 for x in xs], [r["local"] for r in rows], w,
           label="local SpMM, same rows, same run")
    for x, r in zip(xs, rows):
        ax.annotate(f"{r['ratio']:.2f} of the local rate", (x, max(r["update_all"], r["local"])),
                    ha="center", va="bottom", xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["label"] for r in rows])
    ax.set_ylabel("million edges / s")
    ax.set_title("Distributed update_all (copy_src, sum)\nvs the local SpMM on the same rows")
    ax.set_ylim(0, 1.45 * max(max(r["update_all"], r["local"]) for r in rows))
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
