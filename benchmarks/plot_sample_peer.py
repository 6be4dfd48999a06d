#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plot a `benchmarks/dgl_sample_peer.py` result: each peer's sampled edges per second by graph
and thread count (bars: the median round, whiskers: the slowest and fastest rounds), and the ratio
of Tessera's Python call to each other peer (the median of the per-round ratios, whiskers: their
range).

    python benchmarks/plot_sample_peer.py RESULT.json --out RESULT.png
"""
import argparse
import json
import sys

COLORS = {"tessera": "tab:blue", "tessera-cli": "tab:cyan", "dgl": "tab:orange",
          "dgl-unfused": "tab:red", "graphbolt": "tab:green"}


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"plot_sample_peer: cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"plot_sample_peer: {path} is not JSON ({e})")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    j = read_json(a.result)
    cases = j.get("cases") if isinstance(j, dict) else None
    if not cases:
        sys.exit(f"plot_sample_peer: {a.result} holds no cases (not a dgl_sample_peer.py result)")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{c['graph']['spec'].rstrip('/').split('/')[-1]}\n{c['threads']} thr"
              + ("\n(busy machine)" if c.get("busy") else "") for c in cases]
    peers = [n for n in COLORS if any(n in c["peers"] for c in cases)]
    fig, (ax, rx) = plt.subplots(2, 1, figsize=(max(8, 1.3 * len(cases) + 3), 8))
    width = 0.8 / max(len(peers), 1)
    for i, name in enumerate(peers):
        xs, ys, lo, hi = [], [], [], []
        for k, c in enumerate(cases):
            pr = c["peers"].get(name)
            if not pr:
                continue
            rates = [r["edges"] / r["seconds"] / 1e6 for r in pr["rounds"]]
            med = pr["edges_per_s_median"] / 1e6
            xs.append(k + (i - (len(peers) - 1) / 2) * width)
            ys.append(med)
            lo.append(med - min(rates))
            hi.append(max(rates) - med)
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=COLORS[name], label=name)
    ax.set_xticks(range(len(cases)), labels, fontsize=8)
    ax.set_ylabel("sampled edges/s (M)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    prm = j.get("params", {})
    ax.set_title(f"CPU neighbor sampling, fanouts {prm.get('fanouts')}, batch "
                 f"{prm.get('batch_size')}; DGL {j.get('versions', {}).get('dgl')}, "
                 f"{j.get('commit')} on {j.get('machine', {}).get('name')}",
                 fontsize=9)
    others = [n for n in ("dgl", "dgl-unfused", "graphbolt", "tessera-cli") if n in peers]
    width = 0.8 / max(len(others), 1)
    for i, other in enumerate(others):
        xs, ys, lo, hi = [], [], [], []
        for k, c in enumerate(cases):
            r = c.get("ratios", {}).get(f"tessera/{other}")
            if not r:
                continue
            xs.append(k + (i - (len(others) - 1) / 2) * width)
            ys.append(r["median"])
            lo.append(r["median"] - r["min"])
            hi.append(r["max"] - r["median"])
        rx.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=COLORS[other],
               label=f"tessera / {other}")
    rx.axhline(1.0, color="gray", linewidth=0.8)
    rx.set_xticks(range(len(cases)), labels, fontsize=8)
    rx.set_ylabel("ratio (median of rounds)")
    rx.set_yscale("log")
    rx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
