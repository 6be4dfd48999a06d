#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plot `tessera bench dist-gather --json` results: remote DistTensor read bandwidth against row
size, one panel per transport and rank count, next to the bounds measured in the same run.

    python benchmarks/plot_dist_gather.py benchmarks/results/dist-gather-*/DATE-*.json \\
        --out benchmarks/results/dist-gather-tcp-2ranks/DATE-COMMIT-MACHINE.png

Each panel draws, for one reader: the one-sided get path and the request path (one request per
owner), against `ucx_perftest ucp_get` on the same UCX_TLS and the local gather of the same
batch (both measured in the same run). The crossing of the get and request lines is where
`TESSERA_DIST_GET=auto` switches paths (docs/dist.md).
"""
import argparse
import collections
import json
import sys


def load(paths):
    panels = []
    for p in paths:
        with open(p) as f:
            j = json.load(f)
        if j.get("benchmark") != "dist-gather":
            print(f"{p}: not a dist-gather result, skipped", file=sys.stderr)
            continue
        by_path = collections.defaultdict(list)
        for r in j["results"]:
            by_path[r["path"]].append(r)
        panels.append({"title": f"UCX_TLS={j.get('ucx_tls')}, {j['world_size']} ranks",
                       "commit": j.get("commit", "?"), "by_path": by_path})
    return panels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", help="dist-gather JSON files")
    ap.add_argument("--out", default="dist_gather.png", help="PNG to write")
    a = ap.parse_args()
    panels = load(a.json)
    if not panels:
        sys.exit("plot_dist_gather: no dist-gather results among the inputs")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_dist_gather: matplotlib is not installed (pip install matplotlib)")

    cols = min(2, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax, pnl in zip(axes.flat, panels):
        sizes = None
        for path, style in (("get", "o-"), ("request", "s-")):
            rs = sorted(pnl["by_path"].get(path, []), key=lambda r: r["row_bytes"])
            if not rs:
                continue
            sizes = [r["row_bytes"] for r in rs]
            ax.plot(sizes, [r["one_reader"]["gb_per_s"] for r in rs], style,
                    label=f"{path} path, one reader")
        ref = sorted(pnl["by_path"].get("get") or next(iter(pnl["by_path"].values())),
                     key=lambda r: r["row_bytes"])
        ax.plot([r["row_bytes"] for r in ref], [r["perftest_ucp_get_gb_per_s"] for r in ref],
                "k--", label="ucx_perftest ucp_get (same run)")
        ax.plot([r["row_bytes"] for r in ref], [r["local_gather_gb_per_s"] for r in ref],
                ":", color="gray", label="local gather (same run)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        if sizes:
            ax.set_xticks(sizes)
            ax.set_xticklabels([str(s) for s in sizes])
        ax.set_xlabel("row bytes")
        ax.set_ylabel("GB/s")
        ax.set_title(f"{pnl['title']} ({pnl['commit']})", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("Remote DistTensor reads, batch of 10,000 rows (tessera bench dist-gather)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
